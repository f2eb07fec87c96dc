//! Pending redo retires: log slots whose last region committed by a redo
//! record and stored its new bytes in place without writing them back
//! (`log/redo.rs`, the redo path of issue 13).
//!
//! A redo region is committed by its record's fence; its new bytes are
//! stored in place after that fence and NOT written back then. Until they
//! are durable the record must stay valid (a crash replays it), and once
//! anything else changes those bytes the record must be dead (a replay
//! would write them back over the later change). So the record is retired
//! in two ordered steps that no one fence can do:
//!
//! 1. the in-place lines are written back and fenced (data durable);
//! 2. only then the slot's generation word moves past the record's
//!    generation (stored after that fence: a line may be evicted at any
//!    time, so storing it earlier could make it durable before the data),
//!    and is written back and fenced before anything else may change those
//!    bytes.
//!
//! Two ways to do it:
//! - the *chain* (the slot's next redo region, `Persister::fence_redo`):
//!   its commit fence is step 1 for the previous record; the word moves
//!   after it and its write-back rides on the next fence (a pending bump,
//!   `bumps.rs`). Recovery reads both the word's generation `w` and `w + 1`
//!   and replays their records in that order (`log/redo.rs`), so the
//!   previous record may stay valid until then: the slot's own later
//!   changes are in the later record. One fence per region.
//!   *Subsumed*: where the next region's ranges cover every byte of the
//!   previous one's ([`PendingRetires::covered_by`]), step 1 is left out.
//!   Once the next record's fence completes, that record reproduces every
//!   byte the previous region stored in place, so the previous record may
//!   die (the word move, as above) with those bytes not durable: a crash
//!   then replays the next record (the word is `g` or `g + 1`, and both
//!   replays include it). The next record itself dies only after its own
//!   ranges (a superset) are written back, by the chain or a full settle,
//!   or after a later record covers them in turn; a settler of the
//!   previous retire that runs meanwhile still writes its ranges back
//!   before it moves the word, as below.
//! - a *full settle* (`Persister::fence`, every other fence of any thread):
//!   steps 1 and 2 with their own fence, then the caller's. A region that
//!   changes a redo region's bytes after it is ordered after its commit by
//!   the program's synchronisation, so its first fence sees the retire
//!   listed here and settles it before any of its own stores.
//!
//! Invariants:
//! - `gen[s]` is 0 or `TAG | g`: slot `s`'s last region committed by the
//!   redo record of generation `g`, the slot's word holds `g` in memory, and
//!   `ranges[s]` lists the record's in-place ranges. Only the slot's owner
//!   publishes (after its previous retire is cleared); anyone clears, by
//!   compare-and-swap of the pair, after step 2 (or the chain) is done.
//! - A settler moves the word by compare-and-swap from `g` to `g + 1` only,
//!   so a late settler never moves it back over an owner's newer store;
//!   the owner's chain stores `g + 1` plainly ([`PendingRetires::move_own`]:
//!   the word then holds `g` or `g + 1`, since only the owner lists).
//! - `mask` bit `s` is set from slot `s`'s first publish on, never cleared.
//!
//! Crash behaviour: none of this is persistent; recovery finds the records
//! (`log/redo.rs`).

use crate::format::{log_gen_word, LOG_GEN_MASK, LOG_OFF, LOG_SLOTS};
use std::sync::atomic::{AtomicU64, Ordering};

/// Marks a listed retire (generations are 48-bit).
const TAG: u64 = 1 << 63;

/// In-place ranges one retire lists at most (a region with more redo
/// entries goes over to undo logging, `tx/redo.rs`).
pub(crate) const MAX_RANGES: usize = 16;

/// One slot's retire.
#[derive(Debug, Default)]
struct SlotRetire {
    gen: AtomicU64,
    n: AtomicU64,
    /// (absolute address, length) pairs, `n` of them.
    ranges: [AtomicU64; 2 * MAX_RANGES],
}

/// The pool's pending redo retires (one set per open pool, shared by the
/// clones of its persister).
#[derive(Debug)]
pub(crate) struct PendingRetires {
    /// Address of log slot 0's generation word (0 until the pool is mapped).
    slot0: AtomicU64,
    mask: AtomicU64,
    slots: [SlotRetire; LOG_SLOTS as usize],
}

impl Default for PendingRetires {
    fn default() -> Self {
        PendingRetires { slot0: AtomicU64::new(0), mask: AtomicU64::new(0), slots: std::array::from_fn(|_| SlotRetire::default()) }
    }
}

/// The retires one fence found listed: per slot, the pair it saw.
pub(crate) struct Seen {
    gens: [u64; LOG_SLOTS as usize],
    mask: u64,
}

impl Seen {
    /// The (slot, generation) pairs seen.
    pub fn pairs(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let mut mask = self.mask;
        std::iter::from_fn(move || {
            (mask != 0).then(|| {
                let s = mask.trailing_zeros();
                mask &= mask - 1;
                (s, self.gens[s as usize] & !TAG)
            })
        })
    }
}

impl PendingRetires {
    /// Tells the set where the log slots are mapped (the reservation never moves).
    pub fn attach(&self, base: u64) {
        self.slot0.store(base + LOG_OFF, Ordering::Relaxed);
    }

    /// Address of slot `s`'s generation word.
    fn word(&self, s: u32) -> u64 {
        self.slot0.load(Ordering::Relaxed) + crate::log::slot_off(s) - LOG_OFF
    }

    /// Lists slot `slot`'s retire: its word holds `gen`, the record's bytes
    /// are stored in place at `ranges` (absolute address, length), not yet
    /// written back. The caller owns the slot.
    pub fn publish(&self, slot: u32, gen: u64, ranges: impl Iterator<Item = (u64, u64)>) {
        let Some(e) = self.slots.get(slot as usize) else { return };
        let mut n = 0;
        for (addr, len) in ranges.take(MAX_RANGES) {
            e.ranges[2 * n].store(addr, Ordering::Relaxed);
            e.ranges[2 * n + 1].store(len, Ordering::Relaxed);
            n += 1;
        }
        e.n.store(n as u64, Ordering::Relaxed);
        e.gen.store(TAG | (gen & LOG_GEN_MASK), Ordering::Release);
        let bit = 1u64 << slot;
        if self.mask.load(Ordering::Relaxed) & bit == 0 {
            self.mask.fetch_or(bit, Ordering::SeqCst);
        }
    }

    /// Whether any slot ever listed a retire (one load; `listed` then
    /// tells which are listed now).
    #[inline]
    pub fn ever(&self) -> bool {
        self.mask.load(Ordering::Relaxed) != 0
    }

    /// Slot `slot`'s listed generation, if any.
    #[inline]
    pub fn of(&self, slot: u32) -> Option<u64> {
        let g = self.slots.get(slot as usize)?.gen.load(Ordering::Acquire);
        (g != 0).then_some(g & !TAG)
    }

    /// The retires listed now, except slot `except`'s; None if there are none.
    #[inline]
    pub fn listed(&self, except: Option<u32>) -> Option<Seen> {
        let mut mask = self.mask.load(Ordering::Acquire);
        if let Some(s) = except {
            mask &= !(1u64 << s);
        }
        if mask == 0 {
            return None;
        }
        self.listed_slow(mask)
    }

    fn listed_slow(&self, mut mask: u64) -> Option<Seen> {
        let mut seen = Seen { gens: [0; LOG_SLOTS as usize], mask: 0 };
        while mask != 0 {
            let s = mask.trailing_zeros();
            mask &= mask - 1;
            let g = self.slots[s as usize].gen.load(Ordering::Acquire);
            if g != 0 {
                seen.gens[s as usize] = g;
                seen.mask |= 1 << s;
            }
        }
        (seen.mask != 0).then_some(seen)
    }

    /// Calls `flush` on each in-place range of slot `slot`'s retire.
    pub fn flush_ranges(&self, slot: u32, flush: impl Fn(u64, u64)) {
        let Some(e) = self.slots.get(slot as usize) else { return };
        let n = (e.n.load(Ordering::Relaxed) as usize).min(MAX_RANGES);
        for k in 0..n {
            flush(e.ranges[2 * k].load(Ordering::Relaxed), e.ranges[2 * k + 1].load(Ordering::Relaxed));
        }
    }

    /// Whether every byte of slot `slot`'s listed retire lies in the union
    /// of `next` (absolute address, length): the slot's next redo region,
    /// whose record then reproduces every byte the listed one stored in
    /// place, so the chain need not write those bytes back (the subsumed
    /// retire, `Persister::fence_redo`). At most `MAX_RANGES` ranges on
    /// each side; a range is covered by walking its start forward through
    /// the ranges of `next` that contain it. The caller owns the slot.
    pub fn covered_by(&self, slot: u32, next: impl Iterator<Item = (u64, u64)> + Clone) -> bool {
        if crate::failpoint::planted("retires.uncovered_as_covered") {
            return true;
        }
        let Some(e) = self.slots.get(slot as usize) else { return false };
        let n = (e.n.load(Ordering::Relaxed) as usize).min(MAX_RANGES);
        (0..n).all(|k| {
            let (addr, len) = (e.ranges[2 * k].load(Ordering::Relaxed), e.ranges[2 * k + 1].load(Ordering::Relaxed));
            range_covered(addr, addr + len, next.clone())
        })
    }

    /// Step 2's store: moves slot `slot`'s word from `gen` to `gen + 1` if
    /// it still holds `gen` (compare-and-swap: never backwards). Returns
    /// the word's address, to write back. Call only after a fence that made
    /// the retire's in-place bytes durable.
    pub fn bump(&self, slot: u32, gen: u64) -> u64 {
        let addr = self.word(slot);
        // SAFETY: `addr` is slot `slot`'s generation word, 8-aligned, in the
        // pool's metadata, mapped while the pool is open (`attach` ran when
        // the space was built); the engine writes it only with 8-byte
        // stores, so an atomic view of it is sound.
        let word = unsafe { &*(addr as *const AtomicU64) };
        let (old, new) = (log_gen_word(gen), log_gen_word((gen + 1) & LOG_GEN_MASK));
        let _ = word.compare_exchange(old, new, Ordering::SeqCst, Ordering::SeqCst);
        addr
    }

    /// The chain's store (`Persister::fence_redo`): moves slot `slot`'s
    /// word to `gen + 1` by a plain atomic store, not a compare-and-swap: a
    /// locked instruction on the line the commit fence has just written
    /// back waits for that line (~60 ns per region here), a store does not.
    /// Sound for the owner only, after its own retire of `gen` is cleared:
    /// only the owner lists the slot's retires, so the word holds `gen` or
    /// (a settler was first) `gen + 1`, and a settler's compare-and-swap
    /// `gen -> gen + 1` lands on the same value.
    pub fn move_own(&self, slot: u32, gen: u64) {
        let addr = self.word(slot);
        // SAFETY: as in `bump`.
        let word = unsafe { &*(addr as *const AtomicU64) };
        word.store(log_gen_word((gen + 1) & LOG_GEN_MASK), Ordering::Release);
    }

    /// Unlists slot `slot`'s retire of generation `gen` (a newer one stays).
    pub fn clear(&self, slot: u32, gen: u64) {
        if let Some(e) = self.slots.get(slot as usize) {
            let _ = e.gen.compare_exchange(TAG | gen, 0, Ordering::SeqCst, Ordering::SeqCst);
        }
    }
}

/// Whether `[start, end)` lies in the union of `ranges` (address, length):
/// the start moves to the furthest end of a range that contains it, until
/// it passes `end` (covered) or no range contains it (not covered).
fn range_covered(mut start: u64, end: u64, ranges: impl Iterator<Item = (u64, u64)> + Clone) -> bool {
    while start < end {
        let reach = ranges.clone().filter(|&(a, l)| a <= start && start < a + l).map(|(a, l)| a + l).max();
        match reach {
            Some(r) => start = r,
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::log_gen_decode;

    #[test]
    fn a_retire_is_listed_until_cleared_and_a_newer_one_stays() {
        let r = PendingRetires::default();
        assert!(r.listed(None).is_none());
        r.publish(3, 10, [(0x1000, 280)].into_iter());
        assert_eq!(r.of(3), Some(10));
        assert!(r.listed(Some(3)).is_none(), "the owner's own retire is left out");
        let seen = r.listed(None).unwrap();
        assert_eq!(seen.pairs().collect::<Vec<_>>(), vec![(3, 10)]);
        let got = std::cell::RefCell::new(Vec::new());
        r.flush_ranges(3, |a, l| got.borrow_mut().push((a, l)));
        assert_eq!(*got.borrow(), vec![(0x1000, 280)]);
        r.clear(3, 9);
        assert_eq!(r.of(3), Some(10), "a stale pair clears nothing");
        r.clear(3, 10);
        assert!(r.of(3).is_none() && r.listed(None).is_none());
    }

    /// The subsumed retire's test is byte-exact: the listed ranges must lie
    /// in the union of the next region's, which may cover one range with
    /// several (adjacent or overlapping, in any order); a byte left out at
    /// either end or between two ranges (even one on the same cache line)
    /// is not covered, and neither is anything when the next region is empty.
    #[test]
    fn a_retire_is_covered_only_byte_for_byte() {
        let r = PendingRetires::default();
        r.publish(1, 5, [(0x1000, 280), (0x2008, 8)].into_iter());
        let covers = |next: &[(u64, u64)]| r.covered_by(1, next.iter().copied());
        assert!(covers(&[(0x1000, 280), (0x2008, 8)]), "the same ranges");
        assert!(covers(&[(0x2000, 64), (0xff8, 400)]), "larger ones, in another order");
        assert!(covers(&[(0x2008, 8), (0x1080, 152), (0x1000, 144), (0x1040, 8)]), "one range by three overlapping");
        assert!(!covers(&[(0x1000, 279), (0x2008, 8)]), "the last byte left out");
        assert!(!covers(&[(0x1001, 279), (0x2008, 8)]), "the first byte left out");
        assert!(!covers(&[(0x1000, 100), (0x1065, 200), (0x2008, 8)]), "a gap of one byte between two ranges");
        assert!(!covers(&[(0x1000, 280), (0x2000, 8)]), "the neighbouring word, on the same line");
        assert!(!covers(&[]), "nothing");
        r.publish(2, 5, std::iter::empty());
        assert!(r.covered_by(2, std::iter::empty()), "an empty retire is covered by anything");
        assert!(!r.covered_by(LOG_SLOTS, [(0x1000, 280)].into_iter()), "a slot out of range is never covered");
    }

    #[test]
    fn a_bump_moves_the_word_forward_only() {
        // Lay the fake words out as the slots are: one every LOG_SLOT_SIZE bytes.
        let mut area = vec![0u64; (LOG_SLOTS * crate::format::LOG_SLOT_SIZE / 8) as usize];
        let base = area.as_mut_ptr() as u64;
        let r = PendingRetires::default();
        r.attach(base - LOG_OFF);
        let w = |s: u32| (base + crate::log::slot_off(s) - LOG_OFF) as *mut u64;
        // SAFETY: inside `area`, 8-aligned.
        unsafe { *w(2) = log_gen_word(7) };
        r.bump(2, 7);
        // SAFETY: as above.
        assert_eq!(log_gen_decode(unsafe { *w(2) }), Some(8));
        // a late settler of generation 7 leaves a newer word alone
        // SAFETY: as above.
        unsafe { *w(2) = log_gen_word(9) };
        r.bump(2, 7);
        // SAFETY: as above.
        assert_eq!(log_gen_decode(unsafe { *w(2) }), Some(9));
        // the owner's move lands on gen + 1 whether or not a settler's
        // compare-and-swap was first, and a settler after it changes nothing
        for settler_first in [false, true] {
            // SAFETY: as above.
            unsafe { *w(5) = log_gen_word(20) };
            if settler_first {
                r.bump(5, 20);
            }
            r.move_own(5, 20);
            r.bump(5, 20);
            // SAFETY: as above.
            assert_eq!(log_gen_decode(unsafe { *w(5) }), Some(21), "settler first: {settler_first}");
        }
    }
}
