//! Array views: [`Tx::array`] checks an array once and then reads and
//! writes its elements with only a bounds check and, for a write, an
//! "already logged?" test against a cached page of the region's logged-word
//! bitmap.
//!
//! `Tx::get`/`Tx::set` look the array up (a compare against the region's
//! last validated array), then reach the bitmap through the region's state
//! (`RefCell`, the boxed sets, the page table, the page): about 7 ns per
//! already-logged `set` in sps. A view does the header check at creation
//! and keeps the address of the bitmap page its last write found, so a
//! write to an element the region already logged costs one compare, one
//! load and one test before the store.
//!
//! Invariants:
//! - A view exists only inside its region (it borrows the `Tx`), the array
//!   cannot be freed before the region ends, and its header (element count)
//!   never changes while allocated: the bounds checked at creation hold for
//!   the view's life.
//! - The cached page pointer comes from [`LoggedWords::page_ptr`] and is
//!   valid until the set is cleared at the region's end (`Tx`'s `Drop`),
//!   which cannot happen while the view borrows the `Tx`. It is read only
//!   with raw loads. A bit it finds set means the word is logged (or fresh)
//!   in this region, exactly what `Tx::log_range` would answer; anything
//!   else (bit clear, another page, an element spanning two bitmap words)
//!   goes through `Tx::log_range`, so the view never skips a log the
//!   generic path would write.
//!
//! [`ArrayView::swap`] logs both elements with one `Tx::log_ranges`-style
//! call, so a swap that logs pays one entry fence, not two.
//!
//! Crash behaviour: the same as `Tx::set` (the old bytes are logged before
//! the store; the view adds no state of its own to the pool). A swap's two
//! undo entries are made durable by one fence, named "undo entries of an
//! array swap before either element changes", before either element is
//! stored: a crash before it leaves both unchanged, after it both
//! restorable (the crash explorer's `swap` workload).
//!
//! [`LoggedWords::page_ptr`]: super::logged::LoggedWords::page_ptr

use super::logged::PageCache;
use super::Tx;
use crate::error::{Error, Result};
use crate::ptr::PArray;
use crate::types::Persistent;
use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::size_of;

/// A checked view of one array for the rest of a region: [`Tx::array`].
pub struct ArrayView<'t, 'p, T: Persistent> {
    tx: &'t Tx<'p>,
    /// The array (its payload address: element 0).
    array: PArray<T>,
    /// Element count, validated against the array's slot at creation.
    len: u64,
    /// Pool offset of element 0.
    off: u64,
    /// In checked mode, whether `T` has pointer fields to validate on `set`.
    check_values: bool,
    /// The logged-word bitmap page the last write found.
    page: Cell<PageCache>,
    _t: PhantomData<fn() -> T>,
}

impl<'p> Tx<'p> {
    /// A view of array `a` for the rest of the region: its header and slot
    /// are checked once here, so [`ArrayView::get`] and [`ArrayView::set`]
    /// cost a bounds check (and, for an element the region already logged,
    /// a bit test) each. Same errors as [`Tx::len`].
    pub fn array<T: Persistent>(&self, a: PArray<T>) -> Result<ArrayView<'_, 'p, T>> {
        // A view reads and writes in place: the region leaves the redo path.
        self.leave_redo()?;
        let len = self.len(a)?;
        let check_values = self.pool.check_pointers && crate::types::has_pointers::<T>();
        let off = a.addr() - self.pool.space.base();
        Ok(ArrayView { tx: self, array: a, len, off, check_values, page: Cell::new(PageCache::EMPTY), _t: PhantomData })
    }
}

impl<T: Persistent> ArrayView<'_, '_, T> {
    /// Number of elements.
    #[inline]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the array has no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The array viewed.
    #[inline]
    pub fn array(&self) -> PArray<T> {
        self.array
    }

    #[inline]
    fn bounds(&self, i: u64) -> Result<u64> {
        if i >= self.len {
            return Err(Error::OutOfBounds { index: i, count: 1, len: self.len });
        }
        // i < len and len * size fits the slot (checked by `Tx::len`).
        Ok(self.array.addr() + i * size_of::<T>() as u64)
    }

    /// Element `i`.
    #[inline]
    pub fn get(&self, i: u64) -> Result<T> {
        let addr = self.bounds(i)?;
        // SAFETY: in bounds of the array, whose slot lies in the mapped heap
        // and is aligned for T (checked by `Tx::len`); every bit pattern is
        // a valid T (Persistent's contract).
        Ok(unsafe { std::ptr::read(addr as *const T) })
    }

    /// Sets element `i` (logging its old bytes the first time in the region).
    #[inline]
    pub fn set(&self, i: u64, value: T) -> Result<()> {
        let addr = self.bounds(i)?;
        if self.check_values {
            self.tx.check_values(self.array.addr(), i, std::slice::from_ref(&value))?;
        }
        let off = self.off + i * size_of::<T>() as u64;
        if size_of::<T>() != 0 && !self.page.get().covered(off, size_of::<T>() as u64) {
            self.log(addr, off)?;
        }
        // SAFETY: in bounds (checked); the old bytes are logged (or the
        // array is new in this region).
        unsafe { std::ptr::write(addr as *mut T, value) };
        crate::failpoint::Failpoint::TxAfterWrite.hit();
        Ok(())
    }

    /// Swaps elements `i` and `j`, as `slice::swap` does: logs whichever of
    /// the two the region has not logged yet with ONE fence for both
    /// entries (two `set`s fence once per entry), then stores both. `i ==
    /// j` changes nothing and logs nothing. An index out of bounds is
    /// [`Error::OutOfBounds`] and leaves both elements as they were.
    ///
    /// The values stored are the array's own, so checked mode validates
    /// nothing here (their pointer fields were valid where they were; the
    /// commit checks every logged object's pointer fields anyway).
    ///
    /// ```
    /// # use engram::{CreateOptions, Durability, Pool};
    /// # let path = std::env::temp_dir().join(format!("engram-doc-swap-{}", std::process::id()));
    /// # let pool = Pool::create(&path, CreateOptions::new("doc").durability(Durability::Process)).unwrap();
    /// let a = pool.txn(|tx| {
    ///     let a = tx.alloc_array::<u64>(4)?;
    ///     tx.write_slice(a, 0, &[10, 11, 12, 13])?;
    ///     tx.set_root_array("a", a)?;
    ///     Ok::<_, engram::Error>(a)
    /// })?;
    /// pool.txn(|tx| {
    ///     let v = tx.array(a)?;
    ///     v.swap(0, 3)?; // logs elements 0 and 3 under one fence
    ///     v.swap(3, 1)?; // logs element 1 only
    ///     assert_eq!((v.get(0)?, v.get(1)?, v.get(3)?), (13, 10, 11));
    ///     Ok::<_, engram::Error>(())
    /// })?;
    /// # pool.close()?;
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<_, engram::Error>(())
    /// ```
    #[inline]
    pub fn swap(&self, i: u64, j: u64) -> Result<()> {
        let (ai, aj) = (self.bounds(i)?, self.bounds(j)?);
        if i == j {
            return Ok(());
        }
        let size = size_of::<T>() as u64;
        let (oi, oj) = (self.off + i * size, self.off + j * size);
        // Loaded first, as two `get`s would: the loads need not wait for
        // the bit tests (logging does not change the elements).
        // SAFETY: both in bounds of the array (checked), aligned for T
        // (checked by `Tx::len`); every bit pattern is a valid T.
        let (vi, vj) = unsafe { (std::ptr::read(ai as *const T), std::ptr::read(aj as *const T)) };
        let page = self.page.get();
        if size != 0 && !(page.covered(oi, size) && page.covered(oj, size)) {
            self.log_pair(ai, oi, aj, oj)?;
        }
        // SAFETY: both in bounds (checked) and distinct (i != j); both old
        // values are logged (or the array is new in this region).
        unsafe {
            std::ptr::write(ai as *mut T, vj);
            std::ptr::write(aj as *mut T, vi);
        }
        crate::failpoint::Failpoint::TxAfterWrite.hit();
        Ok(())
    }

    /// The slow half of `set`: logs through the region, then caches the
    /// bitmap page the element's bits are in.
    #[cold]
    fn log(&self, addr: u64, off: u64) -> Result<()> {
        self.tx.log_range(addr, size_of::<T>() as u64)?;
        self.cache_page(off);
        Ok(())
    }

    /// The slow half of `swap`: step 1 of the undo protocol for both
    /// elements (at `ai` and `aj`, pool offsets `oi` and `oj`) at once.
    /// Each element not yet covered gets its undo entry, written and
    /// flushed; then one fence makes the entries durable before either
    /// element changes (a crash before it finds the entries torn or whole
    /// and both elements unchanged). The fence is issued whenever an entry
    /// was written, also if the second failed: the first is covered from
    /// now on, so nothing else would fence it before it changes. Then
    /// caches the bitmap page of element `j` (pool offset `oj`).
    #[cold]
    fn log_pair(&self, ai: u64, oi: u64, aj: u64, oj: u64) -> Result<()> {
        // An element the cached page shows logged is passed with length 0
        // (skipped); the other is asked of the whole set.
        let (page, size) = (self.page.get(), size_of::<T>() as u64);
        let len = |off: u64| if page.covered(off, size) { 0 } else { size };
        let (logged, result) = self.tx.log_ranges_unfenced([(ai, len(oi)), (aj, len(oj))]);
        if logged {
            self.tx.pool.space.persist.fence(crate::fences::SWAP_ENTRIES)?;
        }
        result?;
        self.cache_page(oj);
        Ok(())
    }

    /// Caches the bitmap page that holds pool offset `off`'s bit.
    fn cache_page(&self, off: u64) {
        if let Some(c) = PageCache::of(&self.tx.st.borrow().sets.words, off) {
            self.page.set(c);
        }
    }
}
