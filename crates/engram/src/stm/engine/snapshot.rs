//! The snapshot a thread's read-only transactions reuse (issue 14):
//! a value of one pool's clock this thread sampled or stamped, kept in its
//! pool entry (`pool_state::Local`) and taken as the next read-only
//! attempt's `rv` instead of loading the clock again.
//!
//! Why: every update commit writes the clock's line (its `fetch_add`), so
//! at two threads each read-only attempt's load of the clock after the
//! other thread's commit is a transfer of that line, on the path of every
//! lookup. A reused snapshot costs nothing to read; a read-only attempt
//! that meets a variable newer than it runs again at once with a fresh
//! sample (and the next [`FRESH_AFTER_STALE`] read-only transactions
//! sample afresh, so a thread that keeps reading a variable others keep
//! writing does not waste an attempt every time).
//!
//! What it keeps true: the reused value is always a clock value some
//! commit's timestamp had already reached at a time before the attempt
//! that uses it begins (a sample of the clock, or this thread's own commit
//! stamp, which the `fetch_add` made the clock's value). That is all
//! `rtx.rs`'s argument needs of `rv`: a writer whose version is at most
//! `rv` took its timestamp, after locking everything it writes, before the
//! attempt began. It does not need `rv` to be recent: an attempt with an
//! old `rv` refuses every variable written since (its version is newer),
//! so each value it returns is the variable's current value when read,
//! and the attempt is linearisable at its first read (Avni and Shavit's
//! thread-local clocks make the same argument). It is kept per thread and
//! per pool, so it is only ever compared with versions of that pool's
//! clock; a pool that closes takes its entry with it.
//!
//! Update transactions do not use it: their unrecorded reads commit only
//! if nobody took a timestamp since `rv` (TL2's `wv == rv + 1`), which an
//! old `rv` would rarely pass.
//!
//! No crash behaviour: volatile, per thread.

use super::domain::Domain;
use std::cell::Cell;

/// Read-only transactions that sample the clock afresh after a reused
/// snapshot proved older than a variable an attempt read.
pub(super) const FRESH_AFTER_STALE: u32 = 16;

/// One thread's reusable snapshot of one pool's clock.
#[derive(Default)]
pub(crate) struct Snapshot {
    /// The clock value to reuse; 0: none yet.
    value: Cell<u64>,
    /// Read-only transactions left that must sample afresh.
    fresh: Cell<u32>,
}

impl Snapshot {
    /// The `rv` for a read-only transaction's first attempt, and whether
    /// it was reused (not loaded from the clock now).
    #[inline(always)]
    pub(super) fn take(&self, d: &Domain) -> (u64, bool) {
        let (v, fresh) = (self.value.get(), self.fresh.get());
        if v != 0 && fresh == 0 {
            return (v, true);
        }
        self.fresh.set(fresh.saturating_sub(1));
        (self.sample(d), false)
    }

    /// A fresh sample of the clock, kept for reuse.
    #[inline(always)]
    pub(super) fn sample(&self, d: &Domain) -> u64 {
        let v = if crate::failpoint::planted("stm.ro_snapshot_ahead") {
            // Planted bug: a snapshot the clock has not reached (as if a
            // value were reused that no commit had stamped yet): readers
            // then accept a writer's versions before it holds all its locks.
            d.now() + 1_000_000
        } else {
            d.now()
        };
        self.value.set(v);
        v
    }

    /// A reused snapshot was older than a variable an attempt read: the
    /// next read-only transactions sample afresh.
    #[cold]
    pub(super) fn stale(&self) {
        self.fresh.set(FRESH_AFTER_STALE);
    }

    /// This thread's commit took timestamp `wv` in the pool: the clock has
    /// reached it, so it may be reused (a read-only transaction after this
    /// thread's own update then sees that update without a stale attempt).
    #[inline]
    pub(super) fn stamped(&self, wv: u64) {
        if wv > self.value.get() {
            self.value.set(wv);
        }
    }
}
