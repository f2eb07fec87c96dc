//! Blocking `retry` for the STM (volatile `TVar`s and PSTM alike): a
//! transaction that retries sleeps until a commit writes a variable it read.
//!
//! The wait list is the hybrid TM's (Yates & Scott): one global
//! [`WakeList`] of chunks, each slot a blocked transaction's read set and
//! its thread. Two ways to watch a read set, chosen per process
//! ([`set_wakeup_mode`], else `ENGRAM_STM_WAKEUP=bloom|precise`, else
//! Bloom):
//! - [`WatchMode::Bloom`] (the paper's): a 64-bit Bloom filter of the words
//!   read. A committer meets it with the filter of its write set; a false
//!   positive wakes a waiter whose reads did not change.
//! - [`WatchMode::Precise`]: the filter to scan, then the exact sorted
//!   addresses on both sides, so a waiter is woken only by a commit that
//!   wrote a word it read: no Bloom false positives. The one false wake-up
//!   left is a *late* one, in either mode: a waiter that read a commit's new
//!   values and registered between that commit's stores and its scan is
//!   woken by it although nothing changed since it read (rare; harmless).
//!
//! What it keeps true: no wake-up is lost. A retrying thread registers its
//! read set (SeqCst), then re-validates the words it read; a committer makes
//! its new values visible, then (SeqCst fence) looks for waiters, collects
//! those whose watch meets its write set under the list's lock and wakes
//! them after releasing it (buffered wake-ups). So either the waiter's
//! validation sees the change, or the committer sees the waiter. A woken
//! waiter re-validates: if nothing it read changed (a Bloom false positive)
//! it counts a false wake-up and sleeps again, still registered, without
//! re-running the transaction.
//!
//! Safety net: a wait also ends after a timeout ([`set_safety_net`], 1 s by
//! default) if a read word changed; such a *rescue* would be a lost wake-up
//! and is counted ([`WakeStats::rescued`]), so tests can assert it is 0.
//!
//! No crash behaviour: volatile (waiters are threads of this process).

use crate::htm::bloom::Watch;
pub use crate::htm::bloom::WatchMode;
use crate::htm::wakeup::WakeList;
pub use crate::htm::wakeup::WakeStats;
use std::sync::atomic::{fence, AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

static LIST: WakeList = WakeList::new();

const UNSET: u8 = u8::MAX;
static MODE: AtomicU8 = AtomicU8::new(UNSET);
static SAFETY_MS: AtomicU64 = AtomicU64::new(1000);

fn code(m: WatchMode) -> u8 {
    match m {
        WatchMode::Bloom => 0,
        WatchMode::Precise => 1,
    }
}

/// Sets how blocked transactions watch their read sets, for the whole
/// process (waiters already blocked keep their watch; mixing is safe).
pub fn set_wakeup_mode(mode: WatchMode) {
    MODE.store(code(mode), Ordering::SeqCst);
}

/// The process's wake-up mode: [`set_wakeup_mode`], else
/// `ENGRAM_STM_WAKEUP` (`bloom` or `precise`), else Bloom.
pub fn wakeup_mode() -> WatchMode {
    match MODE.load(Ordering::Relaxed) {
        0 => WatchMode::Bloom,
        1 => WatchMode::Precise,
        _ => {
            let m = std::env::var("ENGRAM_STM_WAKEUP").ok().and_then(|s| WatchMode::parse(&s)).unwrap_or(WatchMode::Bloom);
            // Only the first caller decides; a setter that raced us wins.
            let _ = MODE.compare_exchange(UNSET, code(m), Ordering::SeqCst, Ordering::SeqCst);
            m
        }
    }
}

/// Sets the safety-net timeout of a wait (see the module doc); at least
/// 1 ms. Tests set it long, so that only a lost wake-up can trigger it.
pub fn set_safety_net(timeout: Duration) {
    SAFETY_MS.store((timeout.as_millis() as u64).max(1), Ordering::SeqCst);
}

/// The wait list's counters since the process started (monotonic: take
/// deltas): registrations, scans, wake-ups delivered, false wake-ups,
/// rescues.
pub fn wakeup_stats() -> WakeStats {
    LIST.stats()
}

/// Transactions blocked in `retry` now.
pub fn waiting() -> usize {
    LIST.waiting()
}

/// A committer, after its new values are visible: wakes every waiter whose
/// read set meets the words it wrote. Cheap when nobody waits.
pub(crate) fn wake(writes: impl IntoIterator<Item = usize>) {
    if !LIST.anyone_waiting() {
        return;
    }
    let mut out = Vec::new();
    LIST.collect(&Watch::new(wakeup_mode(), writes), &mut out);
    LIST.wake(&mut out);
}

/// Registers `reads` (word addresses), then sleeps until woken by a commit
/// that changed one, as `changed()` (called after registering) tells.
pub(crate) fn sleep(reads: impl IntoIterator<Item = usize>, changed: impl Fn() -> bool) {
    let t = LIST.register(Watch::new(wakeup_mode(), reads));
    // Pairs with the committer's fence in `anyone_waiting`.
    fence(Ordering::SeqCst);
    let mut woken = false;
    while !changed() {
        if woken {
            LIST.note_false();
        }
        woken = LIST.sleep_for(&t, Duration::from_millis(SAFETY_MS.load(Ordering::Relaxed)));
        if !woken && changed() {
            LIST.note_rescued();
            break;
        }
    }
    LIST.unregister(t);
}
