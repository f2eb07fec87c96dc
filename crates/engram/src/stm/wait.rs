//! Blocking `retry`: a transaction that retries sleeps until a commit writes
//! a variable it read.
//!
//! What it keeps true: no wake-up is lost. A retrying thread registers a
//! Bloom filter of the variables it read *before* it re-validates them; a
//! committer wakes every registered waiter whose filter meets its write set
//! after its new values are visible. So either the waiter's validation sees
//! the change, or the committer sees the waiter. False positives only cause
//! an extra re-execution.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A 256-bit Bloom filter of variable addresses.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Bloom([u64; 4]);

impl Bloom {
    pub fn add(&mut self, addr: usize) {
        let h = (addr as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for k in [h >> 56, (h >> 48) & 0xFF] {
            self.0[(k / 64) as usize] |= 1 << (k % 64);
        }
    }

    pub fn meets(&self, o: &Bloom) -> bool {
        self.0.iter().zip(&o.0).any(|(a, b)| a & b != 0)
    }
}

struct Waiter {
    bloom: Bloom,
    woken: Mutex<bool>,
    cv: Condvar,
}

static WAITERS: Mutex<Vec<Arc<Waiter>>> = Mutex::new(Vec::new());
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// Wakes every waiter whose reads may meet `writes`.
pub(crate) fn wake(writes: &Bloom) {
    if COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    for w in WAITERS.lock().iter() {
        if w.bloom.meets(writes) {
            *w.woken.lock() = true;
            w.cv.notify_one();
        }
    }
}

/// Registers `reads`, then sleeps until woken, unless `changed()` (called
/// after registering) already says a read variable changed.
pub(crate) fn sleep(reads: Bloom, changed: impl FnOnce() -> bool) {
    let me = Arc::new(Waiter { bloom: reads, woken: Mutex::new(false), cv: Condvar::new() });
    WAITERS.lock().push(me.clone());
    COUNT.fetch_add(1, Ordering::AcqRel);
    if !changed() {
        let mut woken = me.woken.lock();
        while !*woken {
            // The timeout is a safety net, not a poll: wake-ups come from commits.
            if me.cv.wait_for(&mut woken, Duration::from_secs(1)).timed_out() {
                break;
            }
        }
    }
    WAITERS.lock().retain(|w| !Arc::ptr_eq(w, &me));
    COUNT.fetch_sub(1, Ordering::AcqRel);
}
