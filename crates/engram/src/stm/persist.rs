//! Copy-on-commit: ordinary Rust values written into persistent variables.
//!
//! A type implements [`Persist`] when it has a persistent representation
//! ([`Persist::P`], plain pool data) and can copy itself, and everything it
//! reaches, into the pool. The STM calls `persist` when a transaction that
//! wrote the value commits (or when the transaction reads its own write), so
//! aborted attempts copy nothing. Sharing is preserved: an `Rc`/`Arc` reached
//! twice is copied once, and a cycle through `Rc<RefCell<_>>` becomes a cycle
//! in the pool. A value already in the pool (a `PPtr`, `PStr`, ...) is not
//! copied again. Copies are immutable once committed, so reads can hand out
//! references into the pool for the life of the transaction.

use crate::alloc::cache::CacheCell;
use crate::alloc::Loc;
use crate::error::{Error, Result};
use crate::format::{OBJ_ARRAY, OBJ_HEADER};
use crate::hash::FastMap;
use crate::pool::PoolInner;
use crate::ptr::{PArray, PPtr};
use crate::Persistent;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// A value the STM can copy into a pool at commit.
pub trait Persist: 'static {
    /// Its representation in the pool.
    type P: Persistent;
    /// Copies `self` (and what it reaches) into the pool.
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Self::P>;
    /// The representation without copying, for plain values (no allocation).
    fn plain(&self) -> Option<Self::P> {
        None
    }
}

/// Allocation context of one commit's copies.
pub struct CopyCx<'a> {
    pub(crate) pool: &'a PoolInner,
    pub(crate) cache: &'a CacheCell,
    /// Volatile address of an `Rc`/`Arc` payload -> pool address of its copy.
    memo: FastMap<usize, u64>,
    /// Objects allocated, for flushing or freeing.
    pub(crate) made: Vec<Made>,
}

/// An object a transaction allocated.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Made {
    /// Where it lives (to free it if the attempt aborts).
    pub loc: Loc,
    /// Pool offset of its header.
    pub off: u64,
    /// Bytes, header included.
    pub len: u64,
    /// It holds transactional variables (later commits change it); copies
    /// of values are immutable.
    pub mutable: bool,
}

impl<'a> CopyCx<'a> {
    pub(crate) fn new(pool: &'a PoolInner, cache: &'a CacheCell) -> Self {
        CopyCx { pool, cache, memo: FastMap::default(), made: Vec::new() }
    }

    fn raw(&mut self, payload: u64, type_id: u32, flags: u32, count: u64) -> Result<u64> {
        let space = &self.pool.space;
        let (addr, loc) = self.pool.heap.alloc(space, self.cache, payload, type_id, flags, count)?;
        self.made.push(Made { loc, off: addr - OBJ_HEADER - space.base(), len: payload + OBJ_HEADER, mutable: false });
        Ok(addr)
    }

    /// Allocates one `T` holding `v`.
    pub fn alloc<T: Persistent>(&mut self, v: T) -> Result<PPtr<T>> {
        let id = self.pool.types.id_of::<T>(&self.pool.space)?;
        let addr = self.raw(std::mem::size_of::<T>() as u64, id, 0, 1)?;
        // SAFETY: a fresh slot of at least size_of::<T>() bytes, 16-aligned,
        // inside the mapping, not yet reachable by anyone else.
        unsafe { std::ptr::write(addr as *mut T, v) };
        Ok(PPtr::from_addr(addr))
    }

    /// Allocates an array holding `items`.
    pub fn alloc_slice<T: Persistent>(&mut self, items: &[T]) -> Result<PArray<T>> {
        let id = self.pool.types.id_of::<T>(&self.pool.space)?;
        let bytes = std::mem::size_of_val(items) as u64;
        let addr = self.raw(bytes, id, OBJ_ARRAY, items.len() as u64)?;
        // SAFETY: a fresh slot of at least `bytes` bytes inside the mapping.
        unsafe { std::ptr::copy_nonoverlapping(items.as_ptr(), addr as *mut T, items.len()) };
        Ok(PArray::from_addr(addr))
    }

    /// Copies a shared value once: `key` is its volatile address.
    fn shared<T: Persist>(&mut self, key: usize, v: &T) -> Result<PPtr<T::P>> {
        if let Some(&a) = self.memo.get(&key) {
            return Ok(PPtr::from_addr(a));
        }
        // Allocate first and remember it, so a cycle back to `v` finds it.
        let id = self.pool.types.id_of::<T::P>(&self.pool.space)?;
        let addr = self.raw(std::mem::size_of::<T::P>() as u64, id, 0, 1)?;
        // SAFETY: fresh slot of size_of::<T::P>() bytes; zero is a valid P.
        unsafe { std::ptr::write_bytes(addr as *mut u8, 0, std::mem::size_of::<T::P>()) };
        self.memo.insert(key, addr);
        let p = v.persist(self)?;
        // SAFETY: as above; the slot is still ours alone.
        unsafe { std::ptr::write(addr as *mut T::P, p) };
        Ok(PPtr::from_addr(addr))
    }
}

/// `impl Persist` for `Copy` pool data stored as itself (`P = Self`, the
/// value copied as is, no pool reference followed): `plain_persist!(u8,
/// u16)`, or with generics `plain_persist!([T: Persistent] PPtr<T>)`.
macro_rules! plain_persist {
    ($([$($g:tt)*] $t:ty),* $(,)?) => {$(
        impl<$($g)*> $crate::stm::Persist for $t {
            type P = $t;
            fn persist(&self, _: &mut $crate::stm::CopyCx<'_>) -> $crate::Result<$t> {
                Ok(*self)
            }
            fn plain(&self) -> Option<$t> {
                Some(*self)
            }
        }
    )*};
    ($($t:ty),* $(,)?) => {
        $crate::stm::persist::plain_persist!($([] $t),*);
    };
}
pub(crate) use plain_persist;

plain_persist!(u8, u16, u32, u64, u128, i8, i16, i32, i64, i128, f32, f64);
plain_persist!([T: Persistent] PPtr<T>, [T: Persistent] PArray<T>);

impl Persist for bool {
    type P = u8;
    fn persist(&self, _: &mut CopyCx<'_>) -> Result<u8> {
        Ok(*self as u8)
    }
    fn plain(&self) -> Option<u8> {
        Some(*self as u8)
    }
}

/// An immutable UTF-8 string in the pool (the copy of a `String`/`&str`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PStr(PArray<u8>);

// SAFETY: a PStr is a PArray<u8>: one pointer at offset 0.
unsafe impl Persistent for PStr {
    fn type_name() -> String {
        "engram::PStr".into()
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        out.push(at);
    }
}

impl PStr {
    /// The string's bytes, borrowed from the pool for the transaction's life.
    pub fn as_str<'t>(&self, tx: &'t super::STx<'_>) -> Result<&'t str> {
        let b = tx.bytes_of(self.0)?;
        std::str::from_utf8(b).map_err(|_| Error::corrupt(format!("string at {:#x} is not UTF-8", self.0.addr())))
    }

    /// The array behind it.
    pub fn array(&self) -> PArray<u8> {
        self.0
    }
}

impl Persist for String {
    type P = PStr;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<PStr> {
        self.as_str().persist(cx)
    }
}

impl Persist for &'static str {
    type P = PStr;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<PStr> {
        Ok(PStr(cx.alloc_slice(self.as_bytes())?))
    }
}

impl Persist for str {
    type P = PStr;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<PStr> {
        Ok(PStr(cx.alloc_slice(self.as_bytes())?))
    }
}

impl Persist for PStr {
    type P = PStr;
    fn persist(&self, _: &mut CopyCx<'_>) -> Result<PStr> {
        Ok(*self)
    }
    fn plain(&self) -> Option<PStr> {
        Some(*self)
    }
}

/// An immutable array in the pool (the copy of a `Vec<T>`).
#[repr(transparent)]
pub struct PSlice<T>(PArray<T>);

impl<T> Clone for PSlice<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for PSlice<T> {}
impl<T> std::fmt::Debug for PSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PSlice({:#x})", self.0.addr())
    }
}

// SAFETY: a PSlice is a PArray<T>: one pointer at offset 0.
unsafe impl<T: Persistent> Persistent for PSlice<T> {
    fn type_name() -> String {
        format!("engram::PSlice<{}>", T::type_name())
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        out.push(at);
    }
}

impl<T: Persistent> PSlice<T> {
    /// The elements, borrowed from the pool for the transaction's life.
    pub fn as_slice<'t>(&self, tx: &'t super::STx<'_>) -> Result<&'t [T]> {
        tx.slice_of(self.0)
    }

    /// The array behind it.
    pub fn array(&self) -> PArray<T> {
        self.0
    }
}

impl<T: Persist> Persist for Vec<T> {
    type P = PSlice<T::P>;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Self::P> {
        let items = self.iter().map(|x| x.persist(cx)).collect::<Result<Vec<_>>>()?;
        Ok(PSlice(cx.alloc_slice(&items)?))
    }
}

impl<T: Persist, const N: usize> Persist for [T; N] {
    type P = [T::P; N];
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Self::P> {
        let items = self.iter().map(|x| x.persist(cx)).collect::<Result<Vec<_>>>()?;
        items.try_into().map_err(|_| Error::corrupt("an array changed length while it was persisted"))
    }
    fn plain(&self) -> Option<Self::P> {
        self.iter().map(Persist::plain).collect::<Option<Vec<_>>>()?.try_into().ok()
    }
}

impl<T: Persist> Persist for Box<T> {
    type P = PPtr<T::P>;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Self::P> {
        let p = (**self).persist(cx)?;
        cx.alloc(p)
    }
}

impl<T: Persist> Persist for Rc<T> {
    type P = PPtr<T::P>;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Self::P> {
        cx.shared(Rc::as_ptr(self) as *const u8 as usize, &**self)
    }
}

impl<T: Persist> Persist for Arc<T> {
    type P = PPtr<T::P>;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Self::P> {
        cx.shared(Arc::as_ptr(self) as *const u8 as usize, &**self)
    }
}

impl<T: Persist> Persist for std::rc::Weak<T> {
    type P = PPtr<T::P>;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Self::P> {
        match self.upgrade() {
            Some(rc) => rc.persist(cx),
            None => Ok(PPtr::null()),
        }
    }
}

impl<T: Persist> Persist for RefCell<T> {
    type P = T::P;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Self::P> {
        let b = self.try_borrow().map_err(|_| Error::invalid("a RefCell was mutably borrowed while it was persisted"))?;
        b.persist(cx)
    }
}

/// An optional value in the pool (the copy of an `Option<T>`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct POption<T> {
    some: u64,
    value: T,
}

// SAFETY: a u64 tag and a Persistent value; pointers are the value's.
unsafe impl<T: Persistent> Persistent for POption<T> {
    fn type_name() -> String {
        format!("engram::POption<{}>", T::type_name())
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        T::pointer_offsets(out, at + std::mem::offset_of!(POption<T>, value) as u32);
    }
}

impl<T: Persistent> POption<T> {
    /// The value, if any.
    pub fn get(&self) -> Option<T> {
        (self.some != 0).then_some(self.value)
    }
}

/// The all-zero value of a persistent type (null pointers, zero numbers).
fn zero<P: Persistent>() -> P {
    // SAFETY: every bit pattern of a Persistent type is a valid value
    // (the trait's contract), all zeros included.
    unsafe { std::mem::zeroed() }
}

impl<T: Persist> Persist for Option<T> {
    type P = POption<T::P>;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Self::P> {
        Ok(match self {
            Some(v) => POption { some: 1, value: v.persist(cx)? },
            None => POption { some: 0, value: zero() },
        })
    }
    fn plain(&self) -> Option<Self::P> {
        match self {
            Some(v) => v.plain().map(|value| POption { some: 1, value }),
            None => Some(POption { some: 0, value: zero() }),
        }
    }
}

/// A pair in the pool (the copy of a tuple `(A, B)`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PPair<A, B> {
    /// First element.
    pub a: A,
    /// Second element.
    pub b: B,
}

// SAFETY: two Persistent fields; pointers are theirs, shifted by their offsets.
unsafe impl<A: Persistent, B: Persistent> Persistent for PPair<A, B> {
    fn type_name() -> String {
        format!("engram::PPair<{},{}>", A::type_name(), B::type_name())
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        A::pointer_offsets(out, at + std::mem::offset_of!(PPair<A, B>, a) as u32);
        B::pointer_offsets(out, at + std::mem::offset_of!(PPair<A, B>, b) as u32);
    }
}

impl<A: Persist, B: Persist> Persist for (A, B) {
    type P = PPair<A::P, B::P>;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Self::P> {
        Ok(PPair { a: self.0.persist(cx)?, b: self.1.persist(cx)? })
    }
    fn plain(&self) -> Option<Self::P> {
        Some(PPair { a: self.0.plain()?, b: self.1.plain()? })
    }
}
