//! The C-RW-WP reader-writer lock of RomulusLog (Calciu et al.'s
//! "cohort reader-writer lock, writer preference", as Romulus uses it):
//! one writer flag, and one reader indicator per thread, each on its own
//! cache line.
//!
//! - A reader announces itself (a seq_cst store of 1 to its indicator),
//!   then checks the writer flag; if a writer holds it, it withdraws (0)
//!   and waits for the flag to drop before trying again.
//! - A writer takes the flag (compare-and-swap, one writer at a time),
//!   then waits until every reader indicator reads 0.
//!
//! Keeps true: a writer holding the lock excludes every reader and every
//! other writer (the store-then-load of each side is seq_cst on both, so at
//! least one of them sees the other: Dekker); the holder's stores
//! happen-before the next holder's loads (release on unlock, acquire on
//! lock). Threads get an indicator slot of their own for their lifetime
//! ([`slot`]); threads beyond [`SLOTS`] share one overflow slot, which
//! counts (fetch_add / fetch_sub) instead of storing a flag.
//!
//! Crash behaviour: volatile; nothing of it is in the file.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Reader indicators with a thread of their own; one more is shared.
pub const SLOTS: usize = 64;

/// One reader indicator, alone on its cache lines (two, for the adjacent
/// line prefetcher).
#[repr(align(128))]
#[derive(Default)]
struct Indicator(AtomicU64);

/// The lock.
pub struct CRwWp {
    writer: Indicator,
    readers: Box<[Indicator]>,
}

/// Slot numbers given back by exited threads.
static FREE_SLOTS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// The next slot number never handed out.
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

/// A thread's slot number, given back when the thread exits.
struct Slot(usize);

impl Slot {
    fn take() -> Self {
        let reused = FREE_SLOTS.lock().unwrap_or_else(|e| e.into_inner()).pop();
        // SeqCst: a writer that reads the high-water before this increment
        // comes before this thread's first announcement in the SeqCst
        // order, so that announcement sees the writer's flag.
        Slot(reused.unwrap_or_else(|| NEXT_SLOT.fetch_add(1, Ordering::SeqCst)).min(SLOTS))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.0 < SLOTS {
            FREE_SLOTS.lock().unwrap_or_else(|e| e.into_inner()).push(self.0);
        }
    }
}

thread_local! {
    static SLOT: Slot = Slot::take();
}

/// The calling thread's slot: its own below [`SLOTS`], else the shared
/// one ([`SLOTS`]).
#[inline]
pub fn slot() -> usize {
    SLOT.with(|s| s.0)
}

/// One past the highest slot any thread has had: the slots a writer (or
/// a combiner) scans, as the paper's thread registry bounds its scans by
/// the threads registered so far.
#[inline]
pub fn slots_in_use() -> usize {
    let n = NEXT_SLOT.load(Ordering::SeqCst);
    if n > SLOTS {
        SLOTS + 1
    } else {
        n
    }
}

/// Spins on `busy` while it holds, yielding the CPU after a while (the
/// benchmark oversubscribes two cores with up to eight threads).
#[inline]
pub fn wait_while(mut busy: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while busy() {
        if spins < 64 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

impl Default for CRwWp {
    fn default() -> Self {
        CRwWp { writer: Indicator::default(), readers: (0..=SLOTS).map(|_| Indicator::default()).collect() }
    }
}

impl CRwWp {
    /// Takes the lock for reading; returns the slot to pass to
    /// [`CRwWp::read_unlock`].
    #[inline]
    pub fn read_lock(&self) -> usize {
        let s = slot();
        let ind = &self.readers[s].0;
        loop {
            // 1. announce (seq_cst), 2. check the writer flag (seq_cst).
            if s < SLOTS {
                ind.store(1, Ordering::SeqCst);
            } else {
                ind.fetch_add(1, Ordering::SeqCst);
            }
            if self.writer.0.load(Ordering::SeqCst) == 0 {
                return s;
            }
            // 3. a writer holds it: withdraw, wait for it, try again.
            self.withdraw(s);
            wait_while(|| self.writer.0.load(Ordering::Acquire) != 0);
        }
    }

    fn withdraw(&self, s: usize) {
        if s < SLOTS {
            self.readers[s].0.store(0, Ordering::Release);
        } else {
            self.readers[s].0.fetch_sub(1, Ordering::Release);
        }
    }

    /// Gives back a read lock taken on slot `s`.
    #[inline]
    pub fn read_unlock(&self, s: usize) {
        self.withdraw(s);
    }

    /// Takes the lock for writing: the flag, then every reader drained.
    pub fn write_lock(&self) {
        while !self.try_write_lock() {
            wait_while(|| self.writer_busy());
        }
    }

    /// Takes the lock for writing if no writer holds it (then waits for
    /// the readers to drain); false if one does.
    pub fn try_write_lock(&self) -> bool {
        if self.writer.0.compare_exchange(0, 1, Ordering::SeqCst, Ordering::Relaxed).is_err() {
            return false;
        }
        for r in &self.readers[..slots_in_use()] {
            wait_while(|| r.0.load(Ordering::SeqCst) != 0);
        }
        true
    }

    /// Whether a writer holds the lock now.
    pub fn writer_busy(&self) -> bool {
        self.writer.0.load(Ordering::Relaxed) != 0
    }

    /// Gives back the write lock.
    pub fn write_unlock(&self) {
        self.writer.0.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// Readers never see a writer's two stores apart; writers never
    /// interleave.
    #[test]
    fn excludes() {
        let lock = CRwWp::default();
        let (a, b) = (AtomicU64::new(0), AtomicU64::new(0));
        let torn = AtomicBool::new(false);
        std::thread::scope(|s| {
            for t in 0..4 {
                let (lock, a, b, torn) = (&lock, &a, &b, &torn);
                s.spawn(move || {
                    for i in 0..2_000u64 {
                        if (i + t) % 3 == 0 {
                            lock.write_lock();
                            let v = a.load(Ordering::Relaxed) + 1;
                            a.store(v, Ordering::Relaxed);
                            std::hint::spin_loop();
                            b.store(v, Ordering::Relaxed);
                            lock.write_unlock();
                        } else {
                            let s = lock.read_lock();
                            if a.load(Ordering::Relaxed) != b.load(Ordering::Relaxed) {
                                torn.store(true, Ordering::Relaxed);
                            }
                            lock.read_unlock(s);
                        }
                    }
                });
            }
        });
        assert!(!torn.load(Ordering::Relaxed));
        let writes: u64 = (0..4u64).map(|t| (0..2_000u64).filter(|i| (i + t) % 3 == 0).count() as u64).sum();
        assert_eq!(a.load(Ordering::Relaxed), writes);
    }
}
