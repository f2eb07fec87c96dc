//! The global wake-up list for `retry` (Yates & Scott): blocked transactions
//! sit in chunks of (filter, waiter) slots; a committing writer scans the
//! filters with its write set and wakes the waiters it meets.
//!
//! Protocol, and why no wake-up is lost:
//! 1. a retrying transaction [`WakeList::register`]s its read set (a
//!    [`Watch`]) — a SeqCst increment of the waiter count, then the slot;
//! 2. it re-validates its reads (values); if one changed it runs again;
//! 3. else it [`WakeList::sleep`]s until its `woken` flag is set.
//!
//! A committer makes its writes visible, then (SeqCst fence) reads the
//! waiter count and, if non-zero, [`WakeList::collect`]s the waiters whose
//! watch meets its write set, and only then, outside the list's lock,
//! [`WakeList::wake`]s them (the buffered wake-ups). By the SeqCst order
//! either the waiter's validation in 2 sees the write, or the committer's
//! scan sees the slot of 1. A waiter woken by a commit that changed nothing
//! it read (a Bloom false positive, or an equal value written back) counts a
//! false wake-up ([`WakeList::note_false`]) and sleeps again, still
//! registered.
//!
//! The scan runs after the commit, not inside its hardware transaction: a
//! scan inside would put the list in the transaction's read set, so every
//! registering waiter would abort every hardware committer.
//!
//! Chunks are never removed (slots are reused), so tickets stay valid.
//! No crash behaviour: volatile.

use super::bloom::Watch;
use parking_lot::Mutex;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Slots per chunk.
pub const CHUNK: usize = 16;

/// A blocked transaction.
#[derive(Debug)]
pub struct Waiter {
    watch: Watch,
    woken: AtomicBool,
    thread: Thread,
}

#[derive(Default)]
struct Chunk {
    filters: [u64; CHUNK],
    slots: [Option<Arc<Waiter>>; CHUNK],
}

/// A free slot (chunk, slot), a new chunk if every slot is taken.
fn free_slot(chunks: &mut Vec<Chunk>) -> (usize, usize) {
    let free = chunks.iter().enumerate().find_map(|(c, ch)| ch.slots.iter().position(Option::is_none).map(|s| (c, s)));
    free.unwrap_or_else(|| {
        chunks.push(Chunk::default());
        (chunks.len() - 1, 0)
    })
}

/// A registration; give it back with [`WakeList::unregister`].
#[derive(Debug)]
pub struct Ticket {
    chunk: usize,
    slot: usize,
    waiter: Arc<Waiter>,
}

/// Counters of a wake-up list (monotonic; take deltas).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WakeStats {
    /// Registrations (a transaction blocking on `retry`).
    pub registered: u64,
    /// Scans by committers that found waiters present.
    pub scans: u64,
    /// Wake-ups delivered.
    pub woken: u64,
    /// Wake-ups after which nothing the waiter read had changed.
    pub false_wakeups: u64,
    /// Waits ended by a safety-net timeout that found a read variable
    /// changed without a wake-up: a lost wake-up, if not 0 (users with a
    /// timeout only; see [`WakeList::note_rescued`]).
    pub rescued: u64,
}

impl WakeStats {
    /// What happened since `earlier` (counters are monotonic).
    pub fn since(&self, earlier: &WakeStats) -> WakeStats {
        WakeStats {
            registered: self.registered - earlier.registered,
            scans: self.scans - earlier.scans,
            woken: self.woken - earlier.woken,
            false_wakeups: self.false_wakeups - earlier.false_wakeups,
            rescued: self.rescued - earlier.rescued,
        }
    }
}

/// The chunked global wake-up list.
pub struct WakeList {
    chunks: Mutex<Vec<Chunk>>,
    waiting: AtomicUsize,
    registered: AtomicU64,
    scans: AtomicU64,
    woken: AtomicU64,
    false_wakeups: AtomicU64,
    rescued: AtomicU64,
}

impl Default for WakeList {
    fn default() -> Self {
        WakeList::new()
    }
}

impl WakeList {
    /// An empty list (`const`: a list can be a `static`).
    pub const fn new() -> WakeList {
        WakeList {
            chunks: Mutex::new(Vec::new()),
            waiting: AtomicUsize::new(0),
            registered: AtomicU64::new(0),
            scans: AtomicU64::new(0),
            woken: AtomicU64::new(0),
            false_wakeups: AtomicU64::new(0),
            rescued: AtomicU64::new(0),
        }
    }

    /// Step 1: registers the calling thread as waiting on `watch`.
    pub fn register(&self, watch: Watch) -> Ticket {
        let filter = watch.bloom.0;
        let waiter = Arc::new(Waiter { watch, woken: AtomicBool::new(false), thread: std::thread::current() });
        self.waiting.fetch_add(1, SeqCst);
        self.registered.fetch_add(1, Relaxed);
        let mut chunks = self.chunks.lock();
        let (chunk, slot) = free_slot(&mut chunks);
        chunks[chunk].filters[slot] = filter;
        chunks[chunk].slots[slot] = Some(waiter.clone());
        Ticket { chunk, slot, waiter }
    }

    /// Registers the waiter of `t` (a ticket of another list) here too,
    /// watching the same read set: a commit scanning either list can wake
    /// it, and [`WakeList::sleep`] on either ticket returns. Give the new
    /// ticket back to this list.
    pub fn register_again(&self, t: &Ticket) -> Ticket {
        let waiter = t.waiter.clone();
        self.waiting.fetch_add(1, SeqCst);
        self.registered.fetch_add(1, Relaxed);
        let mut chunks = self.chunks.lock();
        let (chunk, slot) = free_slot(&mut chunks);
        chunks[chunk].filters[slot] = waiter.watch.bloom.0;
        chunks[chunk].slots[slot] = Some(waiter.clone());
        Ticket { chunk, slot, waiter }
    }

    /// Removes a registration.
    pub fn unregister(&self, t: Ticket) {
        let mut chunks = self.chunks.lock();
        chunks[t.chunk].slots[t.slot] = None;
        chunks[t.chunk].filters[t.slot] = 0;
        drop(chunks);
        self.waiting.fetch_sub(1, SeqCst);
    }

    /// Step 3: sleeps until a committer wakes this ticket (returns at once if
    /// one already did since the last `sleep`).
    pub fn sleep(&self, t: &Ticket) {
        while !t.waiter.woken.swap(false, SeqCst) {
            std::thread::park();
        }
    }

    /// [`WakeList::sleep`] with a deadline: `true` when woken, `false` when
    /// `timeout` passed first.
    pub fn sleep_for(&self, t: &Ticket, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if t.waiter.woken.swap(false, SeqCst) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::park_timeout(deadline - now);
        }
    }

    /// A committer, after its writes are visible (SeqCst fence): whether
    /// anyone waits. `false` means no scan is needed: a waiter registering
    /// later re-validates and sees the writes.
    pub fn anyone_waiting(&self) -> bool {
        fence(SeqCst);
        self.waiting.load(SeqCst) != 0
    }

    /// A committer, after its writes are visible: appends to `out` the
    /// waiters whose watch meets `writes`. Cheap when nobody waits.
    pub fn collect(&self, writes: &Watch, out: &mut Vec<Arc<Waiter>>) {
        fence(SeqCst);
        if self.waiting.load(SeqCst) == 0 {
            return;
        }
        self.scans.fetch_add(1, Relaxed);
        let chunks = self.chunks.lock();
        for ch in chunks.iter() {
            for (f, s) in ch.filters.iter().zip(&ch.slots) {
                if f & writes.bloom.0 == 0 {
                    continue;
                }
                if let Some(w) = s.as_ref().filter(|w| w.watch.meets(writes)) {
                    out.push(w.clone());
                }
            }
        }
    }

    /// Delivers buffered wake-ups (after the commit, outside any lock).
    pub fn wake(&self, out: &mut Vec<Arc<Waiter>>) {
        for w in out.drain(..) {
            w.woken.store(true, SeqCst);
            w.thread.unpark();
            self.woken.fetch_add(1, Relaxed);
        }
    }

    /// Counts a wake-up that found nothing changed.
    pub fn note_false(&self) {
        self.false_wakeups.fetch_add(1, Relaxed);
    }

    /// Counts a wait that timed out and found a change nobody woke it for.
    pub fn note_rescued(&self) {
        self.rescued.fetch_add(1, Relaxed);
    }

    /// Threads registered now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(SeqCst)
    }

    /// The counters.
    pub fn stats(&self) -> WakeStats {
        WakeStats {
            registered: self.registered.load(Relaxed),
            scans: self.scans.load(Relaxed),
            woken: self.woken.load(Relaxed),
            false_wakeups: self.false_wakeups.load(Relaxed),
            rescued: self.rescued.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::htm::bloom::WatchMode;

    #[test]
    fn chunks_fill_reuse_and_wake_only_meeting_waiters() {
        let l = WakeList::new();
        let words = [0u64; 64];
        let addr = |i: usize| &words[i] as *const u64 as usize;
        let tickets: Vec<Ticket> = (0..40).map(|i| l.register(Watch::new(WatchMode::Precise, [addr(i)]))).collect();
        assert_eq!(l.chunks.lock().len(), 3);
        let mut out = Vec::new();
        l.collect(&Watch::new(WatchMode::Precise, [addr(5), addr(33)]), &mut out);
        assert_eq!(out.len(), 2);
        l.wake(&mut out);
        l.sleep(&tickets[5]); // already woken: returns at once
        l.sleep(&tickets[33]);
        assert_eq!(l.stats().woken, 2);
        for t in tickets {
            l.unregister(t);
        }
        assert_eq!(l.waiting(), 0);
        let t = l.register(Watch::new(WatchMode::Bloom, [addr(1)]));
        assert_eq!((t.chunk, t.slot, l.chunks.lock().len()), (0, 0, 3));
        l.collect(&Watch::new(WatchMode::Bloom, [addr(1)]), &mut out);
        assert_eq!(out.len(), 1);
        l.wake(&mut out);
        l.unregister(t);
    }
}
