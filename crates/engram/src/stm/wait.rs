//! Blocking `retry` for the STM (volatile `TVar`s and PSTM alike): a
//! transaction that retries sleeps until a commit writes a variable it read.
//!
//! The wait lists are the hybrid TM's (Yates & Scott): [`WakeList`]s of
//! chunks, each slot a blocked transaction's read set and its thread, one
//! list per clock domain (each pool's, and the volatile variables'; see
//! `engine/domain.rs`). A committer scans only the lists of the domains it
//! wrote, so a commit on one pool never scans, or wakes, another pool's
//! waiters. A waiter that read variables of two domains registers one
//! waiter (one wake-up flag) in both lists. Two ways to watch a read set, chosen per process
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
//! The counters ([`wakeup_stats`], [`waiting`]) are process-wide totals
//! over every list, kept here (a registration or a scan, never a commit
//! that finds nobody waiting, touches them).
//!
//! Safety net: a wait also ends after a timeout ([`set_safety_net`], 1 s by
//! default) if a read word changed; such a *rescue* would be a lost wake-up
//! and is counted ([`WakeStats::rescued`]), so tests can assert it is 0.
//!
//! No crash behaviour: volatile (waiters are threads of this process).

use crate::htm::bloom::Watch;
pub use crate::htm::bloom::WatchMode;
pub use crate::htm::wakeup::WakeStats;
use crate::htm::wakeup::{Ticket, WakeList};
use std::sync::atomic::{fence, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

/// Process-wide totals of every domain's list.
struct Totals {
    registered: AtomicU64,
    scans: AtomicU64,
    woken: AtomicU64,
    false_wakeups: AtomicU64,
    rescued: AtomicU64,
    waiting: AtomicUsize,
}

static TOTALS: Totals = Totals {
    registered: AtomicU64::new(0),
    scans: AtomicU64::new(0),
    woken: AtomicU64::new(0),
    false_wakeups: AtomicU64::new(0),
    rescued: AtomicU64::new(0),
    waiting: AtomicUsize::new(0),
};

fn count(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

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

/// The wait lists' counters since the process started, over every pool
/// and the volatile domain (monotonic: take deltas): registrations, scans,
/// wake-ups delivered, false wake-ups, rescues.
pub fn wakeup_stats() -> WakeStats {
    let t = &TOTALS;
    let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
    WakeStats {
        registered: l(&t.registered),
        scans: l(&t.scans),
        woken: l(&t.woken),
        false_wakeups: l(&t.false_wakeups),
        rescued: l(&t.rescued),
    }
}

/// Transactions blocked in `retry` now (in any domain): each counted from
/// when it is on the lists of every domain it read, so a commit that starts
/// after this counts it will find it.
pub fn waiting() -> usize {
    TOTALS.waiting.load(Ordering::SeqCst)
}

/// A committer, after its new values are visible: wakes every waiter on
/// `list` (the written domain's) whose read set meets the words it wrote.
/// Cheap when nobody waits there.
pub(crate) fn wake(list: &WakeList, writes: impl IntoIterator<Item = usize>) {
    if !list.anyone_waiting() {
        return;
    }
    let mut out = Vec::new();
    list.collect(&Watch::new(wakeup_mode(), writes), &mut out);
    count(&TOTALS.scans, 1);
    count(&TOTALS.woken, out.len() as u64);
    list.wake(&mut out);
}

/// Registers `reads` (word addresses) on `lists` (the lists of the domains
/// read: one waiter, woken by a commit in any of them), then sleeps until
/// woken by a commit that changed one, as `changed()` (called after
/// registering) tells.
pub(crate) fn sleep(lists: &[&WakeList], reads: impl IntoIterator<Item = usize>, changed: impl Fn() -> bool) {
    let Some((first, rest)) = lists.split_first() else { return };
    count(&TOTALS.registered, 1);
    let t = first.register(Watch::new(wakeup_mode(), reads));
    let more: Vec<Ticket> = rest.iter().map(|l| l.register_again(&t)).collect();
    // Counted once on every list: a commit that follows sees this waiter.
    TOTALS.waiting.fetch_add(1, Ordering::SeqCst);
    // Pairs with the committer's fence in `anyone_waiting`.
    fence(Ordering::SeqCst);
    let mut woken = false;
    while !changed() {
        if woken {
            count(&TOTALS.false_wakeups, 1);
        }
        woken = first.sleep_for(&t, Duration::from_millis(SAFETY_MS.load(Ordering::Relaxed)));
        if !woken && changed() {
            count(&TOTALS.rescued, 1);
            break;
        }
    }
    TOTALS.waiting.fetch_sub(1, Ordering::SeqCst);
    for (l, m) in rest.iter().zip(more) {
        l.unregister(m);
    }
    first.unregister(t);
}
