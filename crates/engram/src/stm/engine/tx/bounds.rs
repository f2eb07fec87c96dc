//! Bounds checks of pool cells and arrays: an inline check against the
//! heap's bounds seen when the transaction began, and a cold full check
//! against the pool's current mapping (the pool may have grown), with the
//! error. The read-only transaction (`rtx.rs`) shares the free functions.
//!
//! What it keeps true: a cell that passes is 8-aligned and its lock word
//! and value words lie inside the mapped heap, so the read path's word
//! loads stay inside the mapping; an array that passes has a header with
//! the object tag and the array flag, and its elements inside the heap.

use super::STx;
use crate::error::{Error, Result};
use crate::format::{ObjHeader, OBJ_ARRAY, OBJ_HEADER, OBJ_TAG, OBJ_TAG_MASK};
use crate::ptr::PArray;
use crate::stm::engine::{StmError, StmResult};
use crate::Persistent;
use std::mem::size_of;

impl<'p> STx<'p> {
    #[inline]
    pub(in crate::stm::engine) fn check_cell<P: Persistent>(&self, addr: u64, max: usize) -> StmResult<()> {
        // (bounds are empty without a pool, so this never passes there)
        if cell_fits::<P>(addr, max, self.bounds) {
            return Ok(());
        }
        self.check_cell_slow::<P>(addr, max)
    }

    #[cold]
    fn check_cell_slow<P: Persistent>(&self, addr: u64, max: usize) -> StmResult<()> {
        check_cell_in::<P>(&self.ctx()?.inner.space, addr, max)
    }

    /// The error for a cell outside this pool: `CrossPool` naming both
    /// pools when another open pool holds it (one transaction uses one
    /// pool), else `BadPointer`.
    #[cold]
    pub(in crate::stm::engine) fn foreign_or_bad(space: &crate::pool::space::Space, addr: u64) -> Error {
        let outside = addr < space.base() || addr >= space.base() + space.map.reserved();
        match crate::stm::engine::pool_state::owner_of(addr).filter(|_| outside) {
            Some(other) => Error::CrossPool { pool: space.path.clone(), other },
            None => Error::BadPointer { addr },
        }
    }

    /// The bytes of array `a`, borrowed for the transaction's life.
    pub(crate) fn bytes_of(&self, a: PArray<u8>) -> Result<&[u8]> {
        self.slice_of(a)
    }

    /// The elements of array `a`, borrowed for the transaction's life.
    pub(crate) fn slice_of<T: Persistent>(&self, a: PArray<T>) -> Result<&[T]> {
        let ctx = self.ctx().map_err(|_| Error::invalid("pool data needs Pool::atomically"))?;
        let space = &ctx.inner.space;
        let loc = crate::alloc::locate(space, a.addr()).ok_or(Error::BadPointer { addr: a.addr() })?;
        let h: ObjHeader = space.read(a.addr() - OBJ_HEADER - space.base())?;
        let fits = h.count.checked_mul(size_of::<T>() as u64).is_some_and(|b| b <= loc.capacity());
        if h.flags & OBJ_TAG_MASK != OBJ_TAG || h.flags & OBJ_ARRAY == 0 || !fits || a.addr() % std::mem::align_of::<T>() as u64 != 0 {
            return Err(Error::BadPointer { addr: a.addr() });
        }
        // SAFETY: the array lies in its slot inside the mapping (checked);
        // committed copies are immutable, and the GC cannot free them while
        // a transaction runs (it waits for the gate this transaction holds).
        Ok(unsafe { std::slice::from_raw_parts(a.addr() as *const T, h.count as usize) })
    }

    /// The element count of array `a` from its header alone (no allocator
    /// lookup, unlike [`STx::slice_of`]): for indexing into an array of
    /// `PTField`s whose every read is bounds-checked itself (`check_cell`).
    /// The header must carry the object tag and the array flag, and the
    /// elements must lie inside the mapped pool.
    #[inline]
    pub(crate) fn array_len<T: Persistent>(&self, a: PArray<T>) -> Result<u64> {
        // (bounds are empty without a pool, so this never passes there)
        if let Some(n) = array_len_within::<T>(a.addr(), self.bounds) {
            return Ok(n);
        }
        self.array_len_slow(a)
    }

    /// [`STx::array_len`] against the current mapping (the pool may have
    /// grown since begin), with the error.
    #[cold]
    fn array_len_slow<T: Persistent>(&self, a: PArray<T>) -> Result<u64> {
        let ctx = self.ctx().map_err(|_| Error::invalid("pool data needs Pool::atomically"))?;
        array_len_in::<T>(&ctx.inner.space, a.addr())
    }
}

/// The inline check of a cell of `P` at `addr` (value of at most `max`
/// bytes, 8-aligned) against heap bounds `[lo, hi)` seen when the
/// transaction began: `STx::check_cell` and the read-only transaction's.
/// False sends the caller to [`check_cell_in`] (the pool may have grown).
#[inline]
pub(in crate::stm::engine) fn cell_fits<P: Persistent>(addr: u64, max: usize, (lo, hi): (u64, u64)) -> bool {
    let need = 8 + size_of::<P>().div_ceil(8) as u64 * 8;
    size_of::<P>() <= max
        && std::mem::align_of::<P>() <= 8
        && addr % 8 == 0
        && addr >= lo
        && addr.checked_add(need).is_some_and(|end| end <= hi)
}

/// The full check of a cell at `addr` (value `P`, at most `max` bytes)
/// against the pool's current mapping, with the error: `STx::check_cell`
/// and the read-only transaction's (`rtx.rs`) slow path.
#[cold]
pub(in crate::stm::engine) fn check_cell_in<P: Persistent>(space: &crate::pool::space::Space, addr: u64, max: usize) -> StmResult<()> {
    if size_of::<P>() > max || std::mem::align_of::<P>() > 8 {
        return Err(StmError::Failed(Error::invalid(format!(
            "{} ({} bytes) does not fit a transactional variable (at most {max} bytes, 8-aligned; box it)",
            P::type_name(),
            size_of::<P>()
        ))));
    }
    let need = 8 + size_of::<P>().div_ceil(8) as u64 * 8;
    // Outside the bounds seen at begin: the pool may have grown since.
    if addr % 8 != 0 || addr < space.base() + crate::format::HEAP_OFF || !space.contains(addr, need) {
        return Err(StmError::Failed(STx::foreign_or_bad(space, addr)));
    }
    Ok(())
}

/// The element count of the array of `T` at `addr` from its header, if
/// header and elements lie inside heap bounds `[lo, hi)` seen when the
/// transaction began and the header carries the object tag and the array
/// flag: `STx::array_len`'s and the read-only transaction's inline path.
/// None sends the caller to [`array_len_in`] (the pool may have grown).
#[inline]
pub(in crate::stm::engine) fn array_len_within<T: Persistent>(addr: u64, (lo, hi): (u64, u64)) -> Option<u64> {
    if addr < lo + OBJ_HEADER || addr > hi {
        return None;
    }
    // SAFETY: [addr - 16, addr) lies inside the heap's bounds seen when the
    // transaction began, which stay mapped while the pool is borrowed; an
    // ObjHeader is plain data, any bit pattern is valid.
    let h: ObjHeader = unsafe { std::ptr::read_unaligned((addr - OBJ_HEADER) as *const ObjHeader) };
    let fits = h.count.checked_mul(size_of::<T>() as u64).and_then(|b| addr.checked_add(b)).is_some_and(|end| end <= hi);
    (h.flags & OBJ_TAG_MASK == OBJ_TAG && h.flags & OBJ_ARRAY != 0 && fits).then_some(h.count)
}

/// The element count of the array of `T` at `addr` against the pool's
/// current mapping, with the error (`BadPointer`).
#[cold]
pub(in crate::stm::engine) fn array_len_in<T: Persistent>(space: &crate::pool::space::Space, addr: u64) -> Result<u64> {
    let bad = || Error::BadPointer { addr };
    let off = addr.checked_sub(space.base() + OBJ_HEADER).ok_or_else(bad)?;
    let h: ObjHeader = space.read(off).map_err(|_| bad())?;
    let fits = h.count.checked_mul(size_of::<T>() as u64).is_some_and(|b| space.contains(addr, b));
    if h.flags & OBJ_TAG_MASK != OBJ_TAG || h.flags & OBJ_ARRAY == 0 || !fits {
        return Err(bad());
    }
    Ok(h.count)
}
