//! Explicit failure-atomic regions: [`Region`], for front ends that cannot
//! pass a closure (the C ABI, and through it Go, Java and C++).
//!
//! [`Pool::begin`] starts a region and returns it as a value that lives
//! across calls; [`Region::commit`] and [`Region::abort`] end it. It is the
//! same region as [`Pool::txn`]'s (same [`Tx`], same undo log, same commit
//! pipeline, see `tx/mod.rs`): this file only owns it. What it keeps true:
//!
//! - a region that is dropped without `commit` rolls back (so an error path
//!   or a panic in the caller undoes it, as with `txn`);
//! - a region whose `Tx` was doomed (a failed lock, a failed nested `txn`)
//!   rolls back on `commit` and reports [`Error::Aborted`];
//! - while the region runs, `Pool::txn` on the same thread joins it (nesting
//!   flattened) and `collect`/`check` on that thread fail with `Busy` instead
//!   of deadlocking; a second `begin` on the same thread fails with `Busy`
//!   (front ends flatten their own nesting, as the C ABI does);
//! - the region holds a handle to the pool, so the pool cannot be closed
//!   under it (`close` fails with `Busy`).
//!
//! A region is tied to the thread that began it (it is not `Send`).
//! Crash behaviour is that of `txn`: until commit's generation bump the
//! region is undone by recovery; after it, it is durable.

use super::{Pool, ACTIVE};
use crate::error::{Error, Result};
use crate::tx::Tx;
use std::mem::ManuallyDrop;

/// A running failure-atomic region that is not bound to a closure.
///
/// You must end it with [`Region::commit`] or [`Region::abort`]; dropping it
/// aborts it. Use [`Region::tx`] for everything a region can do (allocate,
/// log a range, lock, set roots).
pub struct Region {
    /// Boxed so its address, registered in `ACTIVE`, stays put. Borrows
    /// `pool`'s inner state: declared first and dropped explicitly before it.
    tx: ManuallyDrop<Box<Tx<'static>>>,
    /// The logged-word bitmap page [`Region::log_range`] last found (kept
    /// here, not in the `Tx`, which `Pool::txn` moves: a bigger `Tx` made
    /// every closure region slower). Valid while the Tx is: the region
    /// ends by value (`commit`, `abort`, `Drop`).
    page: std::cell::Cell<crate::tx::PageCache>,
    ended: bool,
    pool: Pool,
}

impl Pool {
    /// Starts a failure-atomic region held by the returned [`Region`].
    /// Fails with [`Error::Busy`] if the pool is closed or this thread is
    /// already inside a region of this pool.
    pub fn begin(&self) -> Result<Region> {
        if self.in_region() {
            return Err(Error::Busy { what: "a region of this pool is already running on this thread" });
        }
        if self.inner.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::Busy { what: "pool is closed" });
        }
        let pool = self.clone();
        // SAFETY: the Tx borrows `*pool.inner`, which lives in an Arc that
        // the Region keeps (field `pool`) until after the Tx is dropped
        // (`Region::finish` and `Drop` drop the Tx first), so the borrow
        // never outlives what it points to; the Arc's target never moves.
        let inner: &'static super::PoolInner = unsafe { &*std::sync::Arc::as_ptr(&pool.inner) };
        let tx = Box::new(Tx::begin(inner)?);
        inner.space.persist.region_begin();
        let id = inner.heap.id;
        ACTIVE.with(|a| a.borrow_mut().push((id, &*tx as *const Tx<'_> as *const ())));
        Ok(Region { tx: ManuallyDrop::new(tx), page: std::cell::Cell::new(crate::tx::PageCache::EMPTY), ended: false, pool })
    }
}

impl Region {
    /// The region's transaction: allocate, log, lock, set roots through it.
    pub fn tx(&self) -> &Tx<'_> {
        &self.tx
    }

    /// [`Tx::log_range`], with an O(1) answer for a range the region has
    /// already logged: one compare and one bit test against the bitmap page
    /// the last call found (as [`Tx::array`]'s views do). For front ends
    /// that log before every store through raw pointers (the C ABI).
    #[inline]
    pub fn log_range(&self, addr: u64, len: u64) -> Result<()> {
        self.tx.log_range_cached(&self.page, addr, len)
    }

    /// Whether `[addr, addr+len)` is already logged in this region (or
    /// lies in an object it allocated and has marked), answered from the
    /// cached bitmap page only: "no" when in doubt. Never panics and
    /// changes nothing, so a C entry point may ask it before paying for
    /// its panic guard (`engram_region_log`).
    #[inline]
    pub fn is_logged(&self, addr: u64, len: u64) -> bool {
        self.page.get().covered(addr.wrapping_sub(self.pool.inner.space.base()), len)
    }

    /// The pool this region runs on.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Makes everything the region did durable. A doomed region (failed
    /// lock, failed nested region) is rolled back instead and the result is
    /// [`Error::Aborted`].
    pub fn commit(mut self) -> Result<()> {
        let tx = self.take();
        let persist = &self.pool.inner.space.persist;
        if tx.is_doomed() {
            let r = self.pool.crash_guard(|| tx.rollback());
            drop(tx);
            persist.region_end(false)?;
            r?;
            return Err(Error::Aborted);
        }
        let r = self.pool.crash_guard(|| tx.commit());
        // Drop the Tx (and its locks), then wait, in wal mode, until durable.
        drop(tx);
        persist.region_end(r.is_ok())?;
        r
    }

    /// Undoes everything the region did.
    pub fn abort(mut self) -> Result<()> {
        let tx = self.take();
        let r = self.pool.crash_guard(|| tx.rollback());
        drop(tx);
        self.pool.inner.space.persist.region_end(false)?;
        r
    }

    /// Unregisters the region and hands out its Tx (once). Every caller
    /// drops the Tx (its locks, slot and gate) before the region ends for
    /// the persister, as `Tx::commit(self)` and `rollback(self)` did.
    fn take(&mut self) -> Box<Tx<'static>> {
        self.ended = true;
        let id = self.pool.inner.heap.id;
        super::unregister_active(id);
        // SAFETY: `ended` is now set, so neither `take` nor `Drop` touches
        // the ManuallyDrop again; the Tx is dropped by the caller while
        // `self.pool` is still alive.
        unsafe { ManuallyDrop::take(&mut self.tx) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if !self.ended {
            let tx = self.take();
            let _ = tx.rollback();
            drop(tx);
            let _ = self.pool.inner.space.persist.region_end(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{CreateOptions, Durability, Error, Pool};

    fn pool(name: &str) -> (Pool, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!("engram-region-{name}-{}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        (Pool::create(&path, CreateOptions::new("region").durability(Durability::Process)).unwrap(), path)
    }

    #[test]
    fn commit_abort_and_drop() {
        let (pool, path) = pool("cad");
        let r = pool.begin().unwrap();
        let p = r.tx().alloc(7u64).unwrap();
        r.tx().set_root("n", p).unwrap();
        r.commit().unwrap();
        for end in 0..2 {
            let r = pool.begin().unwrap();
            r.tx().write(p, 99).unwrap();
            assert!(matches!(pool.begin(), Err(Error::Busy { .. })));
            assert!(matches!(pool.collect(), Err(Error::Busy { .. })));
            // a txn inside joins the region
            pool.txn(|tx| tx.write(p, 100)).unwrap();
            if end == 0 {
                r.abort().unwrap()
            } else {
                drop(r)
            }
            assert_eq!(pool.txn(|tx| tx.read(p)).unwrap(), 7);
        }
        let r = pool.begin().unwrap();
        assert!(pool.txn(|_| Err::<(), _>(Error::LockTimeout)).is_err());
        assert!(matches!(r.commit(), Err(Error::Aborted)));
        pool.close().unwrap();
        std::fs::remove_file(path).unwrap();
    }

    /// `Region::log_range` answers re-logs from its cached bitmap page but
    /// never skips a first log: words logged in any order (repeats, words
    /// next to logged ones, a second array far away, so another page of
    /// the bitmap) are all restored by an abort and kept by a commit.
    #[test]
    fn cached_log_range_never_skips_a_first_log() {
        let (pool, path) = pool("cached-log");
        let n = 600u64;
        let (a, b) = pool
            .txn(|tx| {
                let a = tx.alloc_array::<u64>(n)?;
                tx.alloc_array::<u8>(3 << 20)?; // puts b on another bitmap page
                let b = tx.alloc_array::<u64>(n)?;
                Ok::<_, Error>((a, b))
            })
            .unwrap();
        let sum = |arr| pool.txn(|tx| (0..n).map(|i| tx.get(arr, i)).sum::<crate::Result<u64>>()).unwrap();
        let order: Vec<u64> = (0..3 * n).map(|i| (i * 7919) % n).collect();
        for commit in [false, true] {
            let r = pool.begin().unwrap();
            for (k, &i) in order.iter().enumerate() {
                let arr = if k % 3 == 0 { b } else { a };
                let addr = arr.addr() + i * 8;
                r.log_range(addr, 8).unwrap();
                // SAFETY: inside the array (i < n), logged just above.
                unsafe { *(addr as *mut u64) = 1000 + k as u64 };
            }
            if commit {
                r.commit().unwrap();
            } else {
                r.abort().unwrap();
            }
            let (sa, sb) = (sum(a), sum(b));
            if commit {
                assert!(sa > 0 && sb > 0, "a commit keeps the stores");
            } else {
                assert_eq!((sa, sb), (0, 0), "an abort restores every word");
            }
        }
        pool.close().unwrap();
        std::fs::remove_file(path).unwrap();
    }
}
