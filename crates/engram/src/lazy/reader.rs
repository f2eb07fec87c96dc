//! [`Cx`]: the context registered functions and loads run in, and [`Load`]:
//! reading a committed copy back into an ordinary Rust value.
//!
//! A `Cx` holds the pool's GC gate shared for its whole life, so the objects
//! it hands out (`&[T]` borrowed from the pool) stay allocated; the gate is
//! re-entrant, so a `Cx` may be made inside a transaction or another `Cx`.
//! Everything it reads is immutable once published (results, arguments,
//! copies), so no transaction is needed. Every pointer is validated against
//! the allocator's persistent span table before it is dereferenced: a bad
//! pointer is [`Error::BadPointer`], never undefined behaviour.
//!
//! On a crash: reads only.

use crate::error::{Error, Result};
use crate::format::{ObjHeader, OBJ_ARRAY, OBJ_HEADER, OBJ_TAG, OBJ_TAG_MASK};
use crate::pool::PoolInner;
use crate::ptr::{PArray, PPtr};
use crate::stm::{POption, PPair, PSlice, PStr, Persist};
use crate::{Persistent, Pool};
use std::mem::size_of;

/// Where registered functions run: reads of immutable pool data, and
/// forcing of other thunks (see [`crate::lazy::PLazy::force_with`]).
pub struct Cx<'p> {
    pub(crate) inner: &'p PoolInner,
    pub(crate) pool: Option<&'p Pool>,
    _gate: crate::pool::gate::GateRead<'p>,
}

/// A value that can be read back from its persistent representation.
pub trait Load: Persist + Sized {
    /// Rebuilds the value from its copy `p` in the pool.
    fn load(p: &Self::P, cx: &Cx<'_>) -> Result<Self>;
}

impl<'p> Cx<'p> {
    /// A context over `pool` (holds its GC gate shared until dropped).
    pub fn new(pool: &'p Pool) -> Self {
        let inner = pool.inner();
        Cx { inner, pool: Some(pool), _gate: inner.gate.read_recursive() }
    }

    pub(crate) fn of_inner(inner: &'p PoolInner) -> Self {
        Cx { inner, pool: None, _gate: inner.gate.read_recursive() }
    }

    /// The pool, when the context was made from one (not inside
    /// [`crate::lazy::PLazy::force_in`]).
    pub fn pool(&self) -> Option<&'p Pool> {
        self.pool
    }

    /// The header of the object whose payload is at `addr`, and its payload capacity.
    fn object(&self, addr: u64) -> Result<(ObjHeader, u64)> {
        let space = &self.inner.space;
        let loc = crate::alloc::locate(space, addr).ok_or(Error::BadPointer { addr })?;
        let h: ObjHeader = space.read(addr - OBJ_HEADER - space.base())?;
        if h.flags & OBJ_TAG_MASK != OBJ_TAG {
            return Err(Error::BadPointer { addr });
        }
        Ok((h, loc.capacity()))
    }

    /// Checks that `addr` is the payload of a live object that can hold a `T`.
    pub(crate) fn check<T: Persistent>(&self, addr: u64) -> Result<()> {
        let (_, cap) = self.object(addr)?;
        if cap < size_of::<T>() as u64 || addr % std::mem::align_of::<T>() as u64 != 0 {
            return Err(Error::BadPointer { addr });
        }
        Ok(())
    }

    /// Reads the `T` that `p` points to.
    pub fn read<T: Persistent>(&self, p: PPtr<T>) -> Result<T> {
        self.check::<T>(p.addr())?;
        // SAFETY: `p` is the payload of a live object (span table and header
        // checked) at least size_of::<T>() bytes long and aligned; the gate
        // we hold keeps the GC from freeing it; T is plain data.
        Ok(unsafe { std::ptr::read(p.addr() as *const T) })
    }

    /// The elements of the array `a`, borrowed for the context's life.
    pub fn slice<T: Persistent>(&self, a: PArray<T>) -> Result<&[T]> {
        let (h, cap) = self.object(a.addr())?;
        let fits = h.count.checked_mul(size_of::<T>() as u64).is_some_and(|b| b <= cap);
        if h.flags & OBJ_ARRAY == 0 || !fits || a.addr() % std::mem::align_of::<T>() as u64 != 0 {
            return Err(Error::BadPointer { addr: a.addr() });
        }
        // SAFETY: the array lies inside its live slot (checked); published
        // copies are immutable and the gate keeps the GC away while `self` lives.
        Ok(unsafe { std::slice::from_raw_parts(a.addr() as *const T, h.count as usize) })
    }

    /// Loads the value whose copy `p` points to.
    pub fn load<T: Load>(&self, p: PPtr<T::P>) -> Result<T> {
        let v = self.read(p)?;
        T::load(&v, self)
    }
}

macro_rules! plain_load {
    ($($t:ty),*) => {$(
        impl Load for $t {
            fn load(p: &$t, _: &Cx<'_>) -> Result<$t> { Ok(*p) }
        }
    )*};
}
plain_load!(u8, u16, u32, u64, u128, i8, i16, i32, i64, i128, f32, f64);

impl<T: Persistent> Load for PPtr<T> {
    fn load(p: &Self, _: &Cx<'_>) -> Result<Self> {
        Ok(*p)
    }
}

impl Load for bool {
    fn load(p: &u8, _: &Cx<'_>) -> Result<bool> {
        Ok(*p != 0)
    }
}

impl Load for String {
    fn load(p: &PStr, cx: &Cx<'_>) -> Result<String> {
        let b = cx.slice(p.array())?;
        String::from_utf8(b.to_vec()).map_err(|_| Error::corrupt(format!("string at {:#x} is not UTF-8", p.array().addr())))
    }
}

impl<T: Load> Load for Vec<T> {
    fn load(p: &PSlice<T::P>, cx: &Cx<'_>) -> Result<Vec<T>> {
        cx.slice(p.array())?.iter().map(|x| T::load(x, cx)).collect()
    }
}

impl<T: Load> Load for Box<T> {
    fn load(p: &PPtr<T::P>, cx: &Cx<'_>) -> Result<Box<T>> {
        cx.load(*p).map(Box::new)
    }
}

impl<T: Load> Load for Option<T> {
    fn load(p: &POption<T::P>, cx: &Cx<'_>) -> Result<Option<T>> {
        p.get().map(|v| T::load(&v, cx)).transpose()
    }
}

impl<A: Load, B: Load> Load for (A, B) {
    fn load(p: &PPair<A::P, B::P>, cx: &Cx<'_>) -> Result<(A, B)> {
        Ok((A::load(&p.a, cx)?, B::load(&p.b, cx)?))
    }
}
