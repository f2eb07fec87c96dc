//! Pointers into a pool.
//!
//! [`PPtr<T>`] is a plain absolute address (8 bytes, as in go-pmem and PSTM),
//! so a structure in the pool links to another with an ordinary word. It
//! points at an object's payload; the object header sits 16 bytes before it.
//! [`PArray<T>`] points at an array object whose length is in its header.
//!
//! Both are `Copy` and carry no lifetime: dereferencing goes through a
//! [`crate::Tx`] (or a pinned [`crate::Pool`] read), which checks the address
//! is inside the pool, so a stale or corrupt pointer is an error, never a
//! wild access.

use crate::types::Persistent;
use std::fmt;
use std::marker::PhantomData;

/// A typed pointer to an object in a pool. Null is address 0.
#[repr(transparent)]
pub struct PPtr<T> {
    addr: u64,
    _t: PhantomData<fn() -> T>,
}

/// A typed pointer to an array object in a pool.
#[repr(transparent)]
pub struct PArray<T> {
    addr: u64,
    _t: PhantomData<fn() -> T>,
}

macro_rules! pointer_common {
    ($name:ident, $label:literal) => {
        impl<T> $name<T> {
            /// The null pointer.
            pub const fn null() -> Self {
                $name { addr: 0, _t: PhantomData }
            }
            /// Whether this is null.
            pub const fn is_null(self) -> bool {
                self.addr == 0
            }
            /// The absolute address.
            pub const fn addr(self) -> u64 {
                self.addr
            }
            /// A pointer from an absolute address (validated when used).
            pub const fn from_addr(addr: u64) -> Self {
                $name { addr, _t: PhantomData }
            }
        }
        impl<T> Clone for $name<T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $name<T> {}
        impl<T> PartialEq for $name<T> {
            fn eq(&self, o: &Self) -> bool {
                self.addr == o.addr
            }
        }
        impl<T> Eq for $name<T> {}
        impl<T> std::hash::Hash for $name<T> {
            fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
                self.addr.hash(h)
            }
        }
        impl<T> Default for $name<T> {
            fn default() -> Self {
                Self::null()
            }
        }
        impl<T> fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($label, "({:#x})"), self.addr)
            }
        }
        // SAFETY: a pointer is a u64 (every bit pattern valid) at offset 0,
        // which is exactly the one pointer offset reported.
        unsafe impl<T: Persistent> Persistent for $name<T> {
            fn type_name() -> String {
                format!(concat!($label, "<{}>"), T::type_name())
            }
            fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
                out.push(at);
            }
        }
    };
}

pointer_common!(PPtr, "PPtr");
pointer_common!(PArray, "PArray");

const _: () = assert!(std::mem::size_of::<PPtr<u64>>() == 8);
