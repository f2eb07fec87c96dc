//! Flat combining of update transactions, as RomulusLog does it: a writer
//! publishes its operation in its slot; whoever holds the write lock runs
//! every published operation in one transaction (one MUTATING, one copy,
//! four fences for all of them), then marks each done. A writer returns
//! once its own operation is done, whether it or another thread ran it.
//!
//! Keeps true: an operation runs in exactly one committed transaction, or
//! its error is returned and its stores are rolled back (the others of its
//! batch then run again, in a fresh transaction: operations must be
//! re-runnable, `FnMut`); a request is read by the combiner only between
//! its publication and its completion, while its owner waits (its slot is
//! cleared before it is marked done, so the owner's frame may end right
//! after). A panicking operation aborts the process (`AbortOnPanic`).
//!
//! Crash behaviour: as one RomulusLog transaction (`mod.rs`); the requests
//! are volatile.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use super::lock::{self, SLOTS};
use super::{RomError, Romulus, WTx};

/// A published operation.
pub(super) struct Request {
    call: unsafe fn(*mut (), &mut WTx<'_>) -> Result<(), RomError>,
    env: *mut (),
    /// PENDING, then DONE or FAILED.
    state: AtomicU32,
    /// The error of a FAILED request (written by the combiner before the
    /// state).
    err: UnsafeCell<Option<RomError>>,
}

const PENDING: u32 = 0;
const DONE: u32 = 1;
const FAILED: u32 = 2;

/// Calls the closure at `env`.
///
/// # Safety
/// `env` must point to a live `F`, used by no one else during the call.
unsafe fn trampoline<F: FnMut(&mut WTx<'_>) -> Result<(), RomError>>(env: *mut (), tx: &mut WTx<'_>) -> Result<(), RomError> {
    // SAFETY: the caller's contract.
    unsafe { (*env.cast::<F>())(tx) }
}

impl Request {
    /// A request to run `f` (which must outlive the request's publication).
    pub(super) fn new<F: FnMut(&mut WTx<'_>) -> Result<(), RomError>>(f: &mut F) -> Self {
        Request { call: trampoline::<F>, env: (f as *mut F).cast(), state: AtomicU32::new(PENDING), err: UnsafeCell::new(None) }
    }
}

/// One slot per thread slot of the lock (the last one shared).
#[repr(align(128))]
#[derive(Default)]
struct Slot(AtomicPtr<Request>);

/// The published requests, and the combiner's scratch list.
pub(super) struct Combiner {
    slots: Box<[Slot]>,
    /// Slot numbers of the batch being run; only the write-lock holder
    /// touches it.
    batch: UnsafeCell<Vec<usize>>,
}

impl Default for Combiner {
    fn default() -> Self {
        Combiner { slots: (0..=SLOTS).map(|_| Slot::default()).collect(), batch: UnsafeCell::new(Vec::with_capacity(SLOTS + 1)) }
    }
}

/// Aborts the process if an operation panics inside a batch: its
/// transaction is half-done in `main` (state MUTATING) and other threads
/// wait for their requests, so nothing may continue; the file recovers to
/// the last commit at the next open.
struct AbortOnPanic;

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("a RomulusLog operation panicked inside a transaction: aborting");
            std::process::abort();
        }
    }
}

impl Combiner {
    /// Clears slot `s` and marks its request done (`err`: failed).
    fn finish(&self, s: usize, err: Option<RomError>) {
        let r = self.slots[s].0.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if r.is_null() {
            return;
        }
        // SAFETY: a published request stays alive until it is marked done
        // (its owner waits), and only the lock holder finishes it.
        let r = unsafe { &*r };
        let state = match err {
            None => DONE,
            Some(e) => {
                // SAFETY: the owner reads `err` only after seeing FAILED.
                unsafe { *r.err.get() = Some(e) };
                FAILED
            }
        };
        r.state.store(state, Ordering::Release);
    }
}

impl Romulus {
    /// Publishes `req` and returns once it is done: run by this thread as
    /// the combiner, or by another.
    pub(super) fn combine(&self, req: &Request) -> Result<(), RomError> {
        let s = lock::slot();
        let me = req as *const Request as *mut Request;
        // The shared overflow slot takes one request at a time.
        while self.fc.slots[s].0.compare_exchange(std::ptr::null_mut(), me, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            lock::wait_while(|| !self.fc.slots[s].0.load(Ordering::Relaxed).is_null());
        }
        loop {
            if req.state.load(Ordering::Acquire) != PENDING {
                break;
            }
            if self.lock.try_write_lock() {
                let _g = super::WriteGuard(self);
                self.run_batch();
                continue;
            }
            lock::wait_while(|| self.lock.writer_busy() && req.state.load(Ordering::Acquire) == PENDING);
        }
        match req.state.load(Ordering::Acquire) {
            // SAFETY: FAILED is stored after `err`, with release.
            FAILED => Err(unsafe { (*req.err.get()).take() }.unwrap_or_else(|| RomError::Broken("combined operation failed".into()))),
            _ => Ok(()),
        }
    }

    /// Runs every published request in one transaction (the write lock is
    /// held); a failing one is rolled back, finished with its error, and
    /// the rest run again. If the transaction itself fails (a fence), every
    /// request of the batch is finished with that error.
    fn run_batch(&self) {
        // SAFETY: the write lock is held: no other thread touches `batch`.
        let batch = unsafe { &mut *self.fc.batch.get() };
        batch.clear();
        batch.extend((0..lock::slots_in_use()).filter(|&s| !self.fc.slots[s].0.load(Ordering::Acquire).is_null()));
        let _panics = AbortOnPanic;
        let outcome = self.run_requests(batch);
        for &s in batch.iter() {
            let err = outcome.as_ref().err().map(|e| RomError::Broken(format!("combined RomulusLog transaction: {e}")));
            self.fc.finish(s, err);
        }
        batch.clear();
    }

    /// Runs the requests of `batch` in one transaction and commits it,
    /// dropping from `batch` each one that failed (finished with its error).
    fn run_requests(&self, batch: &mut Vec<usize>) -> Result<(), RomError> {
        'again: loop {
            // SAFETY: the write lock is held: `log` is the holder's.
            let log = unsafe { &mut *self.log.get() };
            log.clear();
            let mut tx = WTx { rom: self, log, begun: false };
            for (k, &s) in batch.iter().enumerate() {
                // SAFETY: a published request is alive until finished, and
                // its closure is used by no one else while its owner waits.
                let r = unsafe { &*self.fc.slots[s].0.load(Ordering::Acquire) };
                // SAFETY: as above (`env` is the owner's closure).
                if let Err(e) = unsafe { (r.call)(r.env, &mut tx) } {
                    if tx.begun {
                        tx.roll_back()?;
                    }
                    self.fc.finish(s, Some(e));
                    batch.remove(k);
                    continue 'again;
                }
            }
            return if tx.begun { tx.commit() } else { Ok(()) };
        }
    }
}
