//! The pool's free undo-log slots: one bit per slot in an atomic word.
//!
//! Every region takes a slot at begin and gives it back when it ends. A
//! mutex-guarded list made that two lock round trips and a condvar notify
//! per region; here taking is one compare-and-swap and giving back one
//! `fetch_or`. Only when every slot is taken does a region block (mutex +
//! condvar, counted in `waiters` so that a release wakes it).
//!
//! Invariants: a bit is set iff its slot is free; a slot is owned by at most
//! one running region. The set is volatile (rebuilt full on open), so it
//! plays no part in crash recovery.
//!
//! Generation cache: beside each slot the set keeps the slot's log
//! generation as the last region that owned it left it on the media, so the
//! next region need not read and check the slot's generation word at begin.
//! A region takes the cached value with its slot ([`SlotSet::take_gen`],
//! which leaves "unknown" behind) and stores the generation it leaves only
//! when it knows it ([`SlotSet::put_gen`], after a successful commit); a
//! rollback, an error or a simulated crash leaves "unknown", and the next
//! region reads the word from the pool. Only the slot's owner touches its
//! entry, and ownership passes through `free` (AcqRel / SeqCst), so relaxed
//! accesses suffice. Nothing else writes a slot's generation while the pool
//! is open (recovery runs before the set exists).
//!
//! No lost wake-up: a waiter increments `waiters` and then re-reads `free`
//! under the mutex, both `SeqCst`; a releaser sets its bit and then reads
//! `waiters`, both `SeqCst`. Either the waiter sees the bit, or the releaser
//! sees the waiter and notifies under the mutex, which the waiter holds
//! until it is parked in `wait`.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const _: () = assert!(crate::format::LOG_SLOTS <= 64 && crate::format::LOG_SLOTS > 0);

/// A cached generation meaning "read the slot's word": generations are
/// 48-bit (`format::LOG_GEN_MASK`), so no real one is all ones.
const GEN_UNKNOWN: u64 = u64::MAX;

/// Free log slots.
pub(crate) struct SlotSet {
    free: AtomicU64,
    /// Per slot: its generation on the media, or `GEN_UNKNOWN`.
    gens: Box<[AtomicU64]>,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl SlotSet {
    /// A set with slots `0..n` free (`n` at most 64).
    pub fn new(n: u32) -> Self {
        let n = n.min(64);
        let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let gens = (0..n).map(|_| AtomicU64::new(GEN_UNKNOWN)).collect();
        SlotSet { free: AtomicU64::new(all), gens, waiters: AtomicUsize::new(0), lock: Mutex::new(()), cv: Condvar::new() }
    }

    /// Takes a free slot, waiting for one if all are taken.
    #[inline]
    pub fn take(&self) -> u32 {
        loop {
            if let Some(i) = self.try_take() {
                return i;
            }
            self.wait();
        }
    }

    /// Takes the lowest free slot, or None if none is free.
    #[inline]
    fn try_take(&self) -> Option<u32> {
        let mut cur = self.free.load(Ordering::Acquire);
        while cur != 0 {
            let bit = cur.trailing_zeros();
            match self.free.compare_exchange_weak(cur, cur & !(1u64 << bit), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(bit),
                Err(now) => cur = now,
            }
        }
        None
    }

    /// Blocks until a slot may be free (see the module docs).
    #[cold]
    fn wait(&self) {
        let mut g = self.lock.lock();
        self.waiters.fetch_add(1, Ordering::SeqCst);
        if self.free.load(Ordering::SeqCst) == 0 {
            self.cv.wait(&mut g);
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// The cached generation of slot `i`, which the caller owns; leaves
    /// "unknown" behind until [`SlotSet::put_gen`].
    #[inline]
    pub fn take_gen(&self, i: u32) -> Option<u64> {
        let e = self.gens.get(i as usize)?;
        let g = e.load(Ordering::Relaxed);
        if g == GEN_UNKNOWN {
            return None;
        }
        e.store(GEN_UNKNOWN, Ordering::Relaxed);
        Some(g)
    }

    /// Records `gen` as slot `i`'s generation on the media (the caller owns
    /// the slot and its last write of the word is durable).
    #[inline]
    pub fn put_gen(&self, i: u32, gen: u64) {
        if let Some(e) = self.gens.get(i as usize) {
            e.store(gen & crate::format::LOG_GEN_MASK, Ordering::Relaxed);
        }
    }

    /// Gives slot `i` back.
    #[inline]
    pub fn put(&self, i: u32) {
        self.free.fetch_or(1u64 << (i & 63), Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock();
            self.cv.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn every_slot_is_handed_out_once_then_returned() {
        let s = SlotSet::new(64);
        let mut got: Vec<u32> = (0..64).map(|_| s.take()).collect();
        got.sort_unstable();
        assert_eq!(got, (0..64).collect::<Vec<_>>());
        assert_eq!(s.try_take(), None);
        s.put(17);
        assert_eq!(s.take(), 17);
    }

    #[test]
    fn a_cached_generation_is_taken_once() {
        let s = SlotSet::new(4);
        assert_eq!(s.take_gen(2), None);
        s.put_gen(2, 41);
        assert_eq!(s.take_gen(2), Some(41));
        assert_eq!(s.take_gen(2), None, "taking leaves unknown until the next put");
        assert_eq!(s.take_gen(9), None, "a slot out of range has none");
    }

    #[test]
    fn a_blocked_taker_is_woken_by_a_release() {
        let s = Arc::new(SlotSet::new(2));
        let (a, b) = (s.take(), s.take());
        let s2 = Arc::clone(&s);
        let t = std::thread::spawn(move || s2.take());
        s.put(b);
        assert_eq!(t.join().unwrap(), b);
        s.put(a);
        // many threads contending for one slot: every one gets it in turn
        let s = Arc::new(SlotSet::new(1));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let i = s.take();
                        s.put(i);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(s.take(), 0);
    }
}
