//! Persistent collections: [`PBox`], [`PVec`], [`PBytes`], [`PString`] and
//! [`PHashMap`], changed inside failure-atomic regions like any other pool
//! object.
//!
//! Every collection is a *handle*: a `Copy`, [`Persistent`] word that points
//! at a small header object in the pool (the header owns the buffer, the
//! buckets or the nodes). A handle can therefore sit in another persistent
//! struct, in an array, in another collection, or in a named root, and the
//! GC reaches everything the collection holds through it.
//!
//! What they keep true:
//! - every method takes the [`Tx`] it works in; all changes go through the
//!   region's undo log, so a region that returns `Err`, panics, or is cut
//!   short by a crash leaves each collection exactly as it was before the
//!   region, including its buffers after a resize (the old buffer is freed
//!   only when the region commits);
//! - every method, readers included, first takes the region's lock on the
//!   collection's header ([`Tx::lock_ptr`]), held until the region ends
//!   (two-phase locking), so concurrent regions see each collection change
//!   all at once;
//! - no slot a collection no longer uses keeps a pool pointer, so the GC
//!   never reaches an element that was popped, truncated or removed.
//!
//! Freeing is explicit (`free`) or left to the GC ([`crate::Pool::collect`]):
//! a collection that is no longer reachable from a root is garbage, header,
//! buffers and nodes alike. `free` releases what the collection owns, not what
//! its elements point to.

mod bytes;
mod map;
mod pbox;
mod raw;
mod string;
mod vec;

pub use bytes::PBytes;
pub use map::PHashMap;
pub use pbox::PBox;
pub use string::PString;
pub use vec::PVec;

#[cfg(doc)]
use crate::{Persistent, Tx};

/// The boilerplate every handle shares: `Clone`, `Copy`, equality and
/// hashing by address, `Debug`, and [`Persistent`](crate::Persistent) as one
/// pool pointer at offset 0.
macro_rules! handle_impls {
    ($name:ident [$($g:ident),*] $label:literal) => {
        impl<$($g: $crate::Persistent),*> Clone for $name<$($g),*> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<$($g: $crate::Persistent),*> Copy for $name<$($g),*> {}
        impl<$($g: $crate::Persistent),*> PartialEq for $name<$($g),*> {
            fn eq(&self, o: &Self) -> bool {
                self.0 == o.0
            }
        }
        impl<$($g: $crate::Persistent),*> Eq for $name<$($g),*> {}
        impl<$($g: $crate::Persistent),*> std::hash::Hash for $name<$($g),*> {
            fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
                self.0.hash(h)
            }
        }
        impl<$($g: $crate::Persistent),*> std::fmt::Debug for $name<$($g),*> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!($label, "({:#x})"), self.0.addr())
            }
        }
        // SAFETY: the handle is `#[repr(transparent)]` over one pool pointer
        // (a u64: every bit pattern is valid, no volatile pointer); that
        // pointer sits at offset 0, the one offset reported.
        unsafe impl<$($g: $crate::Persistent),*> $crate::Persistent for $name<$($g),*> {
            fn type_name() -> String {
                let params: Vec<String> = vec![$(<$g as $crate::Persistent>::type_name()),*];
                if params.is_empty() {
                    $label.to_string()
                } else {
                    format!("{}<{}>", $label, params.join(","))
                }
            }
            fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
                out.push(at);
            }
        }
    };
}
pub(crate) use handle_impls;
