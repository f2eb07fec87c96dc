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
//! No lost wake-up: a waiter increments `waiters` and then re-reads `free`
//! under the mutex, both `SeqCst`; a releaser sets its bit and then reads
//! `waiters`, both `SeqCst`. Either the waiter sees the bit, or the releaser
//! sees the waiter and notifies under the mutex, which the waiter holds
//! until it is parked in `wait`.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const _: () = assert!(crate::format::LOG_SLOTS <= 64 && crate::format::LOG_SLOTS > 0);

/// Free log slots.
pub(crate) struct SlotSet {
    free: AtomicU64,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl SlotSet {
    /// A set with slots `0..n` free (`n` at most 64).
    pub fn new(n: u32) -> Self {
        let n = n.min(64);
        let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        SlotSet { free: AtomicU64::new(all), waiters: AtomicUsize::new(0), lock: Mutex::new(()), cv: Condvar::new() }
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
