//! The coarse-grain commit lock of the `Coarse` runtime (`stm::runtime`),
//! Yates & Scott's level 3 as a runtime of its own.
//!
//! A `Coarse` update commit takes [`Commit::Exclusive`]: the global lock
//! held exclusively, and its word ([`WORD`]) set, for the whole commit (the
//! write set's words locked with plain stores, the timestamp, the read set
//! validated, the redo record and its ONE fence, the in-place stores).
//! Every other update commit (Fine, FineHtm, a Hybrid commit at levels
//! 2-3) holds the lock shared over the same span ([`Commit::Shared`]), and
//! a level-1 hardware transaction reads [`WORD`] (at begin with early
//! subscription, at commit with lazy), so a coarse committer is never
//! beside another committer that could lock a word.
//!
//! Invariants: while a coarse committer holds the lock, no word gets
//! locked by anyone else (software and hardware commits hold the lock
//! shared; a level-1 transaction that read [`WORD`] free is aborted by the
//! store that sets it); a word it finds locked belongs to a level-1
//! transaction past its `xend` that is still installing, so it is a
//! conflict, never overwritten. Hence plain stores suffice to lock, if
//! the word is loaded with `runtime::word_load`: an emulated level-1
//! commit publishes its locks after validating (not atomic to a plain
//! load), so a plain load could read a word just before its lock lands and
//! the store would overwrite that lock (a lost update; docs/hybrid.md).
//! A `Hybrid` commit whose hardware attempts failed escalates to this
//! commit ([`Commit::escalate`]: level 3). The
//! read set is validated by value where a value was recorded (`Coarse`
//! transactions: the `TVar`'s `Arc` by pointer, a plain pool value by its
//! bytes; `values.rs`), else by its words. Both only when the lock is armed
//! (`runtime::coarse_armed`): otherwise no `Coarse` thread can exist and
//! other commits skip the lock.
//!
//! Crash behaviour: the lock and its word are volatile; lock bits of pool
//! words read as unlocked after a crash (a new epoch); the durable steps
//! are the commit's, unchanged.

use crate::htm::{Htm, HwTx};
use crate::stm::runtime::{self, Runtime};
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// The global commit lock.
static LOCK: RwLock<()> = parking_lot::const_rwlock(());
/// 1 while a coarse committer holds [`LOCK`]: the word level-1 hardware
/// transactions subscribe to (a hardware transaction cannot take `LOCK`).
pub(super) static WORD: AtomicU64 = AtomicU64::new(0);

/// What an update commit holds of the coarse lock.
pub(super) enum Commit {
    /// Not armed: nothing.
    None,
    /// Any commit but a coarse one.
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    /// A coarse commit: [`WORD`] is set until drop.
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'static, ()>, Option<&'static Htm>),
}

impl Commit {
    /// Takes the lock as the calling thread's runtime needs it.
    pub(super) fn take(via: Option<&'static Htm>) -> Commit {
        if !runtime::coarse_armed() {
            return Commit::None;
        }
        if runtime::current() != Runtime::Coarse {
            return Commit::Shared(LOCK.read());
        }
        let g = LOCK.write();
        runtime::word_store(via, &WORD, 1);
        // The set word before the first write-set word is loaded (a level-1
        // transaction's `xend` is either before this, and its locks are
        // seen, or after it, and it aborted).
        fence(Ordering::SeqCst);
        Commit::Exclusive(g, via)
    }

    /// Hybrid's level 3 (Yates & Scott): a `Hybrid` commit whose hardware
    /// commit attempts all failed, holding the lock shared and nothing
    /// else locked yet, takes the lock exclusively instead and becomes a
    /// coarse commit. Returns whether it did (not for other runtimes, nor
    /// when the lock is not armed).
    pub(super) fn escalate(&mut self, via: Option<&'static Htm>) -> bool {
        if !matches!(self, Commit::Shared(_)) || runtime::current() != Runtime::Hybrid {
            return false;
        }
        // Drops the shared guard first: the write lock waits for readers.
        *self = Commit::None;
        let g = LOCK.write();
        runtime::word_store(via, &WORD, 1);
        // As in `take`: the word set before any write-set word is loaded.
        fence(Ordering::SeqCst);
        *self = Commit::Exclusive(g, via);
        true
    }

    /// Whether this is a coarse commit (it locks its words by plain
    /// stores, `STx::lock_writes_as`).
    pub(super) fn exclusive(&self) -> bool {
        matches!(self, Commit::Exclusive(..))
    }
}

impl Drop for Commit {
    fn drop(&mut self) {
        if let Commit::Exclusive(_, via) = self {
            runtime::word_store(*via, &WORD, 0);
        }
    }
}

/// Level 1's subscription to the coarse lock: `Err` when a coarse
/// committer holds it (the caller aborts with `LOCKED`). Reads nothing when
/// the lock is not armed.
pub(super) fn subscribe(t: &mut HwTx<'static>) -> Result<bool, crate::htm::Abort> {
    if !runtime::coarse_armed() {
        return Ok(true);
    }
    Ok(t.load(&WORD)? == 0)
}
