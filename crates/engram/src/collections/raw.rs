//! The growable buffer behind [`super::PVec`], [`super::PBytes`] and
//! [`super::PString`].
//!
//! A buffer is a header object `{ len, buf }` ([`Header`]) whose `buf` is a
//! pool array of capacity `tx.len(buf)` (null while the capacity is 0).
//!
//! What it keeps true:
//! - elements `0..len` are the contents; slots `len..capacity` hold no pool
//!   pointer (fresh arrays are zeroed, and popping or truncating elements
//!   that have pointer fields nulls those fields), so the GC, which scans the
//!   whole array, never reaches a stale object;
//! - growth allocates a new array of twice the capacity, copies `len`
//!   elements into it and queues the old array with [`Tx::free_array`]: the
//!   free happens only if the region commits. A rollback (or a crash before
//!   commit) restores the header, so the header points at the old, intact
//!   array again and the new one is freed (or is garbage after the crash).

use crate::{Error, PArray, PPtr, Persistent, Result, Tx};
use std::mem::size_of;

/// Smallest capacity a buffer grows to.
const MIN_CAP: u64 = 4;

/// A buffer header: the number of elements in use and the array holding them.
pub(crate) trait Header<T: Persistent>: Persistent {
    /// `(len, buf)`.
    fn parts(&self) -> (u64, PArray<T>);
    /// A header from its parts.
    fn from_parts(len: u64, buf: PArray<T>) -> Self;
}

// ----- element access ----------------------------------------------------------

/// Copies elements `start..start + n` of `a` out of the pool.
pub(crate) fn read_elems<T: Persistent>(tx: &Tx<'_>, a: PArray<T>, start: u64, n: u64) -> Result<Vec<T>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    // Bounds first: `n` may come from a damaged header, and must not size
    // an allocation before the engine has checked it.
    let cap = tx.len(a)?;
    if !matches!(start.checked_add(n), Some(end) if end <= cap) {
        return Err(Error::corrupt(format!("elements {start}+{n} out of bounds for an array of {cap}")));
    }
    // `T` has no default value: fill the buffer with a copy of the first
    // element, then read the rest over it.
    let mut out = vec![tx.get(a, start)?; n as usize];
    tx.read_slice(a, start, &mut out)?;
    Ok(out)
}

/// Nulls the pool pointers of elements `from..to` of `a` (logged), so the
/// GC does not reach through slots no longer in use.
pub(crate) fn clear_pointers<T: Persistent>(tx: &Tx<'_>, a: PArray<T>, from: u64, to: u64) -> Result<()> {
    if !crate::types::has_pointers::<T>() || from >= to {
        return Ok(());
    }
    let cap = tx.len(a)?;
    if to > cap {
        return Err(Error::corrupt(format!("length {to} beyond the capacity {cap}")));
    }
    let mut offsets = Vec::new();
    T::pointer_offsets(&mut offsets, 0);
    let size = size_of::<T>() as u64;
    for i in from..to {
        for &off in &offsets {
            // Pointer fields are 8-byte aligned words; write each as a u64.
            tx.write(PPtr::<u64>::from_addr(a.addr() + i * size + off as u64), 0)?;
        }
    }
    Ok(())
}

/// Capacity of `buf` (0 when null).
pub(crate) fn capacity<T: Persistent>(tx: &Tx<'_>, buf: PArray<T>) -> Result<u64> {
    if buf.is_null() {
        Ok(0)
    } else {
        tx.len(buf)
    }
}

// ----- the buffer -------------------------------------------------------------

/// Allocates an empty buffer with room for `cap` elements.
pub(crate) fn alloc<H: Header<T>, T: Persistent>(tx: &Tx<'_>, cap: u64) -> Result<PPtr<H>> {
    let buf = if cap == 0 { PArray::null() } else { tx.alloc_array::<T>(cap)? };
    tx.alloc(H::from_parts(0, buf))
}

/// Locks the buffer for the rest of the region and reads its header.
pub(crate) fn open<H: Header<T>, T: Persistent>(tx: &Tx<'_>, p: PPtr<H>) -> Result<(u64, PArray<T>)> {
    tx.lock_ptr(p)?;
    Ok(tx.read(p)?.parts())
}

fn store<H: Header<T>, T: Persistent>(tx: &Tx<'_>, p: PPtr<H>, len: u64, buf: PArray<T>) -> Result<()> {
    tx.write(p, H::from_parts(len, buf))
}

/// Returns an array with room for `need` elements holding the first `len`
/// of `buf`: `buf` itself if it is big enough, else a new array of at least
/// twice its capacity, with `buf` queued for freeing at commit.
fn reserve<T: Persistent>(tx: &Tx<'_>, len: u64, buf: PArray<T>, need: u64) -> Result<PArray<T>> {
    let cap = capacity(tx, buf)?;
    if need <= cap {
        return Ok(buf);
    }
    let new_cap = need.max(cap.saturating_mul(2)).max(MIN_CAP);
    let grown = tx.alloc_array::<T>(new_cap)?;
    // The new array is fresh: these writes are not logged, and a rollback
    // frees it.
    tx.write_slice(grown, 0, &read_elems(tx, buf, 0, len)?)?;
    if !buf.is_null() {
        tx.free_array(buf)?;
    }
    Ok(grown)
}

/// Number of elements.
pub(crate) fn len<H: Header<T>, T: Persistent>(tx: &Tx<'_>, p: PPtr<H>) -> Result<u64> {
    Ok(open(tx, p)?.0)
}

/// Appends `src`, growing the buffer if needed.
pub(crate) fn extend<H: Header<T>, T: Persistent>(tx: &Tx<'_>, p: PPtr<H>, src: &[T]) -> Result<()> {
    let (len, buf) = open(tx, p)?;
    if src.is_empty() {
        return Ok(());
    }
    let new_len = len.checked_add(src.len() as u64).ok_or_else(|| Error::invalid("length overflows"))?;
    let buf = reserve(tx, len, buf, new_len)?;
    tx.write_slice(buf, len, src)?;
    store(tx, p, new_len, buf)
}

/// Removes and returns the last element.
pub(crate) fn pop<H: Header<T>, T: Persistent>(tx: &Tx<'_>, p: PPtr<H>) -> Result<Option<T>> {
    let (len, buf) = open(tx, p)?;
    if len == 0 {
        return Ok(None);
    }
    let v = tx.get(buf, len - 1)?;
    clear_pointers(tx, buf, len - 1, len)?;
    store(tx, p, len - 1, buf)?;
    Ok(Some(v))
}

fn bounds(i: u64, len: u64) -> Result<()> {
    if i < len {
        Ok(())
    } else {
        Err(Error::OutOfBounds { index: i, count: 1, len })
    }
}

/// Element `i`, or `None` past the end.
pub(crate) fn get<H: Header<T>, T: Persistent>(tx: &Tx<'_>, p: PPtr<H>, i: u64) -> Result<Option<T>> {
    let (len, buf) = open(tx, p)?;
    if i >= len {
        return Ok(None);
    }
    tx.get(buf, i).map(Some)
}

/// Replaces element `i`, returning the old value.
pub(crate) fn set<H: Header<T>, T: Persistent>(tx: &Tx<'_>, p: PPtr<H>, i: u64, v: T) -> Result<T> {
    let (len, buf) = open(tx, p)?;
    bounds(i, len)?;
    let old = tx.get(buf, i)?;
    tx.set(buf, i, v)?;
    Ok(old)
}

/// All elements.
pub(crate) fn to_vec<H: Header<T>, T: Persistent>(tx: &Tx<'_>, p: PPtr<H>) -> Result<Vec<T>> {
    let (len, buf) = open(tx, p)?;
    read_elems(tx, buf, 0, len)
}

/// Shortens the buffer to `n` elements (no-op if it is not longer); keeps
/// the capacity.
pub(crate) fn truncate<H: Header<T>, T: Persistent>(tx: &Tx<'_>, p: PPtr<H>, n: u64) -> Result<()> {
    let (len, buf) = open(tx, p)?;
    if n >= len {
        return Ok(());
    }
    clear_pointers(tx, buf, n, len)?;
    store(tx, p, n, buf)
}

/// Replaces the contents with `src`.
pub(crate) fn replace<H: Header<T>, T: Persistent>(tx: &Tx<'_>, p: PPtr<H>, src: &[T]) -> Result<()> {
    truncate(tx, p, 0)?;
    extend(tx, p, src)
}

/// Frees the array and the header when the region commits.
pub(crate) fn free<H: Header<T>, T: Persistent>(tx: &Tx<'_>, p: PPtr<H>) -> Result<()> {
    let (_, buf) = open(tx, p)?;
    if !buf.is_null() {
        tx.free_array(buf)?;
    }
    tx.free(p)
}
