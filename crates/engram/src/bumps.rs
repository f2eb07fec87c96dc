//! Pending generation bumps: log slots whose commit bump is written but not
//! yet written back and fenced (the 2-fence commit, `log.rs` steps 3' and 4').
//!
//! A region committed by a commit record (`log.rs`) is durable once its one
//! commit fence returns; its generation bump only retires the log, and may
//! wait. Its write-back and fence are deferred to the *next fence of any
//! thread* on the same pool: [`crate::pmem::Persister::fence`] calls
//! [`PendingBumps::flush`] (which writes the pending words back on the
//! fencing thread, a flush named "pending generation bump") before it fences
//! and [`PendingBumps::retire`] after. A fence that a fault switch drops
//! retires nothing. The committing thread does not write the word back
//! itself: the next fence does, once. (Until session region13r it did, and
//! the next fence wrote the line back a second time; worse, the locked
//! instructions right after the commit then waited for that write-back:
//! ~175 ns per region on an Intel Xeon, `fence_floor` "2-fence+lock" against
//! "2-fence-late+lock".)
//!
//! Invariants:
//! - `gens[s]` is 0 or `TAG | gen`: slot `s`'s word holds `gen` (or a later
//!   value) in memory and may not be durable. Only the owner of slot `s`
//!   (one running region) adds; any fencing thread retires.
//! - Retiring is by `(slot, gen)` pair (compare-and-swap): a fence retires
//!   only the bumps whose word it flushed itself, on its own thread, after
//!   the bump was written. If the owner bumps again in between, the newer
//!   pair stays listed (the race of fix 2 in docs/bench/fast-paths.md).
//! - `mask` bit `s` is set from slot `s`'s first `add` on and never cleared
//!   while the pool is open (a bit whose pair is retired costs a fence one
//!   load): `add` stores the pair, then sets the bit if it is not set yet.
//!   So the mask is written a few times per pool, not twice per region (an
//!   earlier version cleared the bit when the holder took the slot again:
//!   two locked instructions per region, and a race in another version that
//!   cleared it in `retire`, which `concurrent_bumps_are_never_retired_unflushed`
//!   caught under load).
//! - The thread that fences flushes the words itself: a fence orders only
//!   its own thread's write-backs (the Px86 model the crash explorer checks
//!   against).
//! - A pair is published with a release store after the word's store (x86:
//!   stores become visible in order), so a fence that reads the pair writes
//!   back a line that holds that bump or a later one.
//!
//! Crash behaviour: none of this is persistent. A crash with a bump still
//! pending finds the slot's old generation with the region's entries and a
//! matching commit record: recovery counts the region committed and only
//! bumps the word (`log::undo_slot`).

use std::sync::atomic::{AtomicU64, Ordering};

/// Marks a listed pair (generations are 48-bit, so the tag never collides).
const TAG: u64 = 1 << 63;
/// Pairs one fence retires at most; more stay listed for the next fence
/// (flushed again, which is harmless).
const BATCH: usize = 8;

/// The pool's pending bumps (one set per open pool, shared by the clones of
/// its persister).
#[derive(Debug)]
pub(crate) struct PendingBumps {
    /// Address of log slot 0's generation word (0 until the pool is mapped).
    slot0: AtomicU64,
    mask: AtomicU64,
    gens: [AtomicU64; crate::format::LOG_SLOTS as usize],
}

/// The pairs one fence flushed, to retire once it has fenced.
pub(crate) struct Flushed {
    pairs: [(u32, u64); BATCH],
    n: usize,
}

impl Default for PendingBumps {
    fn default() -> Self {
        PendingBumps { slot0: AtomicU64::new(0), mask: AtomicU64::new(0), gens: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

impl PendingBumps {
    /// Tells the set where the log slots are mapped (the reservation never moves).
    pub fn attach(&self, base: u64) {
        self.slot0.store(base + crate::format::LOG_OFF, Ordering::Relaxed);
    }

    /// Records that slot `slot`'s word holds `gen`, neither written back nor
    /// fenced. The caller owns the slot. In the steady state this is two
    /// plain stores and a load (no locked instruction).
    #[inline]
    pub fn add(&self, slot: u32, gen: u64) {
        let Some(e) = self.gens.get(slot as usize) else { return };
        e.store(TAG | (gen & crate::format::LOG_GEN_MASK), Ordering::Release);
        let bit = 1u64 << slot;
        if self.mask.load(Ordering::Relaxed) & bit == 0 {
            self.mask.fetch_or(bit, Ordering::SeqCst);
        }
    }

    /// Whether any slot ever had a bump listed (one load; what a fence
    /// checks first: false until the pool's first record commit).
    #[inline]
    pub fn any(&self) -> bool {
        self.mask.load(Ordering::Acquire) != 0
    }

    /// Whether a bump is really pending (the bits set whose pair is listed):
    /// what a caller that would fence only for pending bumps asks, and what
    /// every fence asks before [`PendingBumps::flush`] (a load per set bit;
    /// the bits stay set, so on most fences, every STM commit's among them,
    /// this is all: no list is built, copied or retired).
    #[inline]
    pub fn pending(&self) -> bool {
        let mut mask = self.mask.load(Ordering::SeqCst);
        while mask != 0 {
            let s = mask.trailing_zeros();
            mask &= mask - 1;
            if self.gens[s as usize].load(Ordering::Acquire) != 0 {
                return true;
            }
        }
        false
    }

    /// Whether slot `slot`'s own bump is pending.
    #[cfg(test)]
    pub fn is_pending(&self, slot: u32) -> bool {
        self.gens.get(slot as usize).is_some_and(|e| e.load(Ordering::SeqCst) != 0)
    }

    /// Writes back the generation words of the pending slots with `flush`
    /// (the fencing thread's own flush), before that thread fences. None:
    /// nothing was pending.
    #[inline]
    pub fn flush(&self, flush: impl Fn(u64)) -> Option<Flushed> {
        if !self.any() {
            return None;
        }
        self.flush_slow(flush)
    }

    fn flush_slow(&self, flush: impl Fn(u64)) -> Option<Flushed> {
        let slot0 = self.slot0.load(Ordering::Relaxed);
        let mut f = Flushed { pairs: [(0, 0); BATCH], n: 0 };
        let mut mask = self.mask.load(Ordering::Acquire);
        while mask != 0 && slot0 != 0 {
            let s = mask.trailing_zeros();
            mask &= mask - 1;
            // Read the pair first: the word then holds that bump or a later one.
            let g = self.gens[s as usize].load(Ordering::Acquire);
            if g == 0 {
                continue;
            }
            flush(slot0 + crate::log::slot_off(s) - crate::format::LOG_OFF);
            if f.n < BATCH {
                f.pairs[f.n] = (s, g);
                f.n += 1;
            }
        }
        Some(f)
    }

    /// After the fence that followed [`PendingBumps::flush`]: those bumps are
    /// durable. A pair re-added since (a newer bump of the slot) stays.
    pub fn retire(&self, f: Option<Flushed>) {
        let Some(f) = f else { return };
        for &(s, g) in &f.pairs[..f.n] {
            let e = &self.gens[s as usize];
            // The bit stays (it is never cleared while the pool is open).
            let _ = e.compare_exchange(g, 0, Ordering::SeqCst, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn word(s: u32) -> u64 {
        0x10_0000 + crate::log::slot_off(s) - crate::format::LOG_OFF
    }

    #[test]
    fn a_fence_retires_what_it_flushed_and_keeps_a_newer_bump() {
        let b = PendingBumps::default();
        b.attach(0x10_0000 - crate::format::LOG_OFF);
        assert!(b.flush(|_| panic!("nothing pending")).is_none());
        b.add(3, 10);
        b.add(5, 20);
        let seen = std::cell::RefCell::new(Vec::new());
        let f = b.flush(|a| seen.borrow_mut().push(a));
        assert_eq!(*seen.borrow(), vec![word(3), word(5)]);
        // slot 3 commits again between the flush and the fence's retire
        b.add(3, 11);
        b.retire(f);
        assert!(b.is_pending(3), "the newer bump (gen 11) was not flushed by that fence");
        assert!(!b.is_pending(5));
        assert!(b.any());
        let f = b.flush(|_| {});
        b.retire(f);
        assert!(!b.pending() && !b.is_pending(3));
        // The bits stay set; `pending` (what every fence asks first) still
        // finds nothing to write back.
        assert!(b.any());
    }

    /// Case 2 of the design review, many threads: owners bump their slots
    /// while two other threads flush and retire as fast as they can. The
    /// model records, per slot, the highest generation some flush covered.
    /// Before each bump an owner fences as its next region's first append
    /// does; its previous bump must then have been flushed (by that fence
    /// or another thread's). Retiring by slot alone (no generation) fails
    /// this in about one run in three; the first test fails it always.
    #[test]
    fn concurrent_bumps_are_never_retired_unflushed() {
        const SLOTS: u32 = 4;
        let b = Arc::new(PendingBumps::default());
        b.attach(0x10_0000 - crate::format::LOG_OFF);
        // the "media": highest generation whose word some flush covered
        let written: Arc<Vec<AtomicU64>> = Arc::new((0..SLOTS).map(|_| AtomicU64::new(0)).collect());
        let flushed: Arc<Vec<AtomicU64>> = Arc::new((0..SLOTS).map(|_| AtomicU64::new(0)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let fencers: Vec<_> = (0..2)
            .map(|_| {
                let (b, written, flushed, stop) = (b.clone(), written.clone(), flushed.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let f = b.flush(|a| {
                            let s = (0..SLOTS).find(|&s| word(s) == a).unwrap() as usize;
                            flushed[s].fetch_max(written[s].load(Ordering::SeqCst), Ordering::SeqCst);
                        });
                        if let Some(f) = &f {
                            for &(s, g) in &f.pairs[..f.n] {
                                assert!(flushed[s as usize].load(Ordering::SeqCst) >= g & !TAG, "pair flushed below its gen");
                            }
                        }
                        b.retire(f);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let owners: Vec<_> = (0..SLOTS)
            .map(|s| {
                let (b, written, flushed) = (b.clone(), written.clone(), flushed.clone());
                std::thread::spawn(move || {
                    for gen in 1..=20_000u64 {
                        // the owner's next region: its first append's fence
                        // flushes the pending bumps, its own among them,
                        // before the region's data changes
                        let f = b.flush(|a| {
                            let s = (0..SLOTS).find(|&s| word(s) == a).unwrap() as usize;
                            flushed[s].fetch_max(written[s].load(Ordering::SeqCst), Ordering::SeqCst);
                        });
                        b.retire(f);
                        assert!(flushed[s as usize].load(Ordering::SeqCst) >= gen - 1, "slot {s}: gen {} never flushed", gen - 1);
                        written[s as usize].store(gen, Ordering::SeqCst);
                        b.add(s, gen);
                    }
                })
            })
            .collect();
        for o in owners {
            o.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        let fences: u64 = fencers.into_iter().map(|f| f.join().unwrap()).sum();
        assert!(fences > 0);
        let f = b.flush(|a| {
            let s = (0..SLOTS).find(|&s| word(s) == a).unwrap() as usize;
            flushed[s].fetch_max(written[s].load(Ordering::SeqCst), Ordering::SeqCst);
        });
        b.retire(f);
        assert!(!b.pending());
        for s in 0..SLOTS as usize {
            assert_eq!(flushed[s].load(Ordering::SeqCst), 20_000);
        }
    }
}
