//! The STM engine: transactions ([`STx`]), the commit pipeline, the run loop
//! ([`atomically`], `Pool::atomically`) with retry and contention management.
//!
//! Split by job:
//!
//! - `tx.rs`: a transaction's read and write sets, reads (validated as they
//!   happen, `tx/read.rs`), buffered writes and allocation inside a
//!   transaction (`tx/write.rs`), volatile variables (`tx/volatile.rs`),
//!   bounds checks (`tx/bounds.rs`);
//! - `commit.rs`: the commit protocol below (locks, timestamp, validation,
//!   redo record, the one fence, in-place stores);
//! - `lean.rs`: the same steps for a small write set of plain pool values
//!   (at most four), when no hardware or coarse commit can run;
//! - `coarse.rs`: the global commit lock of the `Coarse` runtime;
//! - `hw_commit.rs`, `level1.rs`: the hardware levels (`stm::runtime`);
//! - `rtx.rs`: read-only transactions (`Pool::atomically_read`, and
//!   `atomically_read` over volatile variables only): TL2's
//!   read-only protocol alone, no sets, no commit;
//! - `snapshot.rs`: the clock value a thread's read-only transactions
//!   reuse as their snapshot (refreshed when it proves too old);
//! - `run.rs`: the run loop (`atomically`), retry waits, back-off and
//!   serial mode, per-thread statistics;
//! - `pool_state.rs`: per-pool STM state (clock reservation, the threads'
//!   redo logs) and the quiesce hook used by GC and close;
//! - `domain.rs`: the clock, serial lock and `retry` wait list, one set
//!   per pool and one for volatile variables, and the rules for a
//!   transaction that touches both.
//!
//! Commit, as a numbered pipeline (one fence for an update commit, none for
//! a read-only one):
//!
//! 1. copy the pending values into the pool (`Persist`), outside any lock;
//! 2. lock the write set (CAS on each lock word; a held lock aborts);
//! 3. take the commit timestamp `wv` from the clock of each domain written
//!    (the pool's; the volatile one if a `TVar` is written);
//! 4. validate the read set (skipped when nobody committed since we began);
//! 5. write the redo record, flush it and the copies;
//! 6. ONE fence: the record and the copies are durable — and so are the
//!    in-place updates of this thread's previous commit, whose log half is
//!    reused next;
//! 7. store the new values in place, each followed by its word (new version,
//!    unlocked); wake retrying transactions; then, after the commit's last
//!    locked instruction, start their write-backs (the next fence of the
//!    thread completes them).
//!
//! A crash before 6 loses the commit whole; after 6 recovery replays it.
//! Reads are validated as they happen (TL2, with LSA-style extension of the
//! snapshot when a newer version is met), so user code never sees an
//! inconsistent state.

mod boxed;
mod coarse;
mod commit;
mod domain;
mod hw_commit;
mod lean;
mod level1;
mod pool_state;
mod rtx;
mod run;
mod snapshot;
mod tx;
mod values;
mod young;

pub use domain::{clock_start, set_clock_start, ClockStart};
pub use pool_state::clock_for_tests;
pub(crate) use pool_state::quiesce;
pub use rtx::{atomically_read, RTx, ReadOnlyVar, ReadTx, LEAN_ATTEMPTS};
pub(crate) use run::in_atomically;
pub use run::{atomically, stats, StmStats};
pub use tx::STx;
pub(crate) use tx::VCell;
pub use values::{value_checks, ValueChecks};
pub use young::young_helps;

use crate::error::Error;
use std::sync::atomic::AtomicU64;

/// Largest persistent value in a cell, bytes.
const MAX_VALUE: usize = crate::stm::PTVAR_MAX_VALUE;

/// Why a transaction body stopped.
#[derive(Debug)]
pub enum StmError {
    /// [`STx::retry`]: wait until something read changes, then run again.
    Retry,
    /// A conflict with another transaction: run again (handled by the loop).
    Conflict,
    /// An engine error: the transaction is abandoned and the error returned.
    Failed(Error),
}

impl From<Error> for StmError {
    fn from(e: Error) -> Self {
        StmError::Failed(e)
    }
}

impl std::fmt::Display for StmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StmError::Retry => write!(f, "retry"),
            StmError::Conflict => write!(f, "conflict"),
            StmError::Failed(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StmError {}

/// Result of transactional operations.
pub type StmResult<T> = std::result::Result<T, StmError>;

/// The 8-byte word at `addr`, as an atomic.
///
/// # Safety
/// `addr` must be 8-aligned and the word must stay allocated (and only ever
/// accessed atomically) for `'a`: a lock word or value word of a cell in a
/// pool the transaction borrows (checked by `check_cell` to be inside the
/// mapping and 8-aligned; the GC cannot free it while a transaction holds
/// the gate), or a TVar's word kept alive by an `Arc` in the read or write
/// set.
pub(super) unsafe fn word_at<'a>(addr: usize) -> &'a AtomicU64 {
    // SAFETY: the caller's contract above.
    unsafe { &*(addr as *const AtomicU64) }
}
