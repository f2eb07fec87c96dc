//! A wake-up word: threads sleep until it changes, one call wakes them all.
//!
//! The write-ahead log's group commit (`wal.rs`) parks its followers on
//! these, one word per group (and a gathering leader on its own word, with
//! a short timeout): the leader that made a group durable bumps
//! the word and wakes every thread sleeping on it with one `FUTEX_WAKE`, and
//! nobody else is woken (a condition variable would requeue them onto the
//! state mutex and wake them one at a time, a context switch each, while
//! the device sits idle).
//!
//! Invariant the callers keep: a thread reads the word ([`Word::load`])
//! while it holds the lock under which it decides to wait, and the event it
//! waits for is published under that lock before the word is bumped; so a
//! bump that comes after the decision changes the word first, and
//! [`Word::wait`] then returns at once (no lost wake-up). A wait also ends
//! after [`MAX_SLEEP`] or spuriously, so callers re-check their condition
//! in a loop.
//!
//! Crash behaviour: none (volatile).

use std::sync::atomic::{AtomicU32, Ordering};

/// Longest single sleep: a missed wake-up (which the protocol rules out)
/// would cost this much, never a hang.
const MAX_SLEEP: std::time::Duration = std::time::Duration::from_millis(200);

/// A futex word (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Word {
    value: AtomicU32,
    /// Threads in [`Word::wait`]: with none, a bump makes no system call
    /// (a lone committer leads every flush and never sleeps here).
    sleepers: AtomicU32,
}

impl Word {
    /// The word's value, to pass to [`Word::wait`].
    pub(crate) fn load(&self) -> u32 {
        self.value.load(Ordering::Acquire)
    }

    /// Sleeps while the word still holds `seen` (at most [`MAX_SLEEP`]).
    pub(crate) fn wait(&self, seen: u32) {
        self.wait_for(seen, MAX_SLEEP);
    }

    /// Sleeps while the word still holds `seen`, at most `max` (capped at
    /// [`MAX_SLEEP`]).
    pub(crate) fn wait_for(&self, seen: u32, max: std::time::Duration) {
        let ts = libc::timespec { tv_sec: 0, tv_nsec: max.min(MAX_SLEEP).as_nanos() as libc::c_long };
        // SeqCst pairs with `bump_and_wake`: either the bump sees this
        // sleeper, or this thread sees the bump (here or in the kernel's
        // compare) and does not sleep.
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        if self.value.load(Ordering::SeqCst) != seen {
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        // SAFETY: FUTEX_WAIT reads the aligned u32 of this live atomic (the
        // kernel compares it with `seen` atomically) and sleeps; it writes
        // nothing, and `ts` outlives the call. It returns when woken, when
        // the value differs (EAGAIN), on a signal or on the timeout: the
        // caller re-checks its condition in every case.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.value.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                seen,
                &ts as *const libc::timespec,
            )
        };
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Changes the word and wakes every thread sleeping on it.
    pub(crate) fn bump_and_wake(&self) {
        self.value.fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) == 0 {
            return;
        }
        // SAFETY: FUTEX_WAKE only looks up sleepers on this live word's
        // address; it reads and writes no memory.
        unsafe { libc::syscall(libc::SYS_futex, self.value.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX) };
    }
}
