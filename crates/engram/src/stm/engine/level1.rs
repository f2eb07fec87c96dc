//! Level 1 of the `Hybrid` runtime (`stm::runtime`): a volatile
//! transaction's whole body runs inside one hardware transaction, and its
//! commit locks the write set inside it too; values are installed after
//! `xend`, as any commit installs them (steps 3 and 7).
//!
//! Subscription (`HtmPolicy::subscription`, `ENGRAM_STM_SUBSCRIPTION`).
//! The fallback "locks" of this runtime are the fine-grain lock words of
//! the variables read, plus the coarse lock's word (`coarse.rs`) when it is
//! armed.
//!
//! - *Early*: the coarse word is read at begin (a coarse committer that
//!   takes the lock later aborts the transaction by that store), and a
//!   `TVar` read aborts with `LOCKED` when the variable's word is locked.
//!   The body never sees an inconsistent state.
//! - *Lazy* (default, the paper's recommendation): a read of a locked word
//!   goes on (it is remembered), and the coarse word is read only at
//!   commit: the transaction commits if neither was held. It can run as a
//!   *zombie*: a committer between two in-place stores is seen half done.
//!   Containment: a `TVar`'s value word is one atomic word (an inline
//!   primitive, or a pointer to an immutable `Arc`), and the attempt is
//!   pinned (crossbeam-epoch) before the hardware transaction starts, so
//!   a replaced value is not freed under it (`tvar.rs`); a `TField`'s value
//!   is cloned under its own lock. No read touches freed or torn memory;
//!   every read validates the
//!   hardware transaction (`HwTx::check`: the emulated backend re-checks
//!   every line read; RTM aborts on the conflicting store itself), so the
//!   committer's next store ends the zombie; every `zombie_reads` reads,
//!   and at commit, the subscription is checked (a word seen locked, or the
//!   coarse word held: `LOCKED`), so a loop that reads is bounded even if
//!   the committer stalls. A zombie never commits. (User code that panics
//!   on a torn state would panic for real on the emulated backend; under
//!   RTM the panic's system call aborts the transaction first.)
//!
//! A `TVar` (or `TField`) read in hardware loads the variable's lock word through the
//! hardware transaction, clones the value, then validates. Writes are
//! buffered in the write set as in software.
//! `retry`, a user error or a capacity abort leave level 1 at once; other
//! aborts retry it up to `HtmPolicy::hw_attempts` times; then the body runs
//! in software with the level-2 hardware commit (`hw_commit.rs`) and the
//! software lock commit as the last level.
//!
//! Invariants: at level 1 no shared word is written except through the
//! hardware transaction, so an abort leaves nothing behind; a committed
//! level-1 transaction holds its write set's locks with every read current,
//! atomically, like a level-2 commit. Crash behaviour: volatile only
//! (`Pool::atomically` never runs level 1), so nothing to recover.

use super::coarse;
use super::commit::Stamps;
use super::domain::VOLATILE;
use super::tx::STx;
use super::{word_at, StmError, StmResult};
use crate::error::Error;
use crate::htm::abort::code;
use crate::htm::{Abort, HwTx};
use crate::stm::runtime::{self, Subscription};
use crate::stm::word;
use std::cell::{Cell, RefCell};
use std::sync::atomic::AtomicU64;

/// A transaction's level-1 state: its hardware transaction while it runs,
/// and the status of an emulated abort met in the body.
#[derive(Default)]
pub(super) struct Level1 {
    hw: RefCell<Option<HwTx<'static>>>,
    on: Cell<bool>,
    failed: Cell<Option<Abort>>,
    /// Lazy subscription, and its re-check period in reads (0: at commit).
    lazy: Cell<Option<u32>>,
    /// Lazy: a read met a locked word (the commit will abort).
    saw_locked: Cell<bool>,
    reads: Cell<u32>,
}

impl STx<'_> {
    /// Whether the body runs in hardware.
    #[inline]
    pub(super) fn in_hw(&self) -> bool {
        self.l1.on.get()
    }

    /// Starts running the body in hardware transaction `t` (early
    /// subscription: reads the coarse word first; `Err` when it is held).
    pub(super) fn hw_enter(&self, mut t: HwTx<'static>) -> Result<(), Abort> {
        let (sub, every) = runtime::subscription();
        if sub == Subscription::Early && !coarse::subscribe(&mut t)? {
            return Err(t.abort(code::LOCKED));
        }
        self.l1.lazy.set((sub == Subscription::Lazy).then_some(every));
        *self.l1.hw.borrow_mut() = Some(t);
        self.l1.on.set(true);
        Ok(())
    }

    /// Lazy subscription's check: aborts with `LOCKED` when a read met a
    /// locked word or a coarse committer holds the lock.
    fn lazy_check(&self, t: &mut HwTx<'static>) -> Result<(), Abort> {
        if self.l1.saw_locked.get() || !coarse::subscribe(t)? {
            return Err(t.abort(code::LOCKED));
        }
        Ok(())
    }

    /// Ends the hardware transaction with `code` (RTM: does not return;
    /// the status reaches the run loop's `begin`), or the status of the
    /// emulated abort the body already met.
    pub(super) fn hw_abort(&self, code: u8) -> Abort {
        self.l1.on.set(false);
        let t = self.l1.hw.borrow_mut().take();
        let a = match t {
            Some(mut t) => t.abort(code),
            None => Abort::explicit(code),
        };
        self.l1.failed.take().unwrap_or(a)
    }

    fn hw_failed(&self, a: Abort) -> StmError {
        self.l1.failed.set(Some(a));
        StmError::Conflict
    }

    /// A volatile variable's read in hardware (a `TVar` or a `TField`; see
    /// the module doc): `load` clones the value.
    pub(super) fn read_hw<T>(&self, word: &AtomicU64, load: impl FnOnce() -> T) -> StmResult<T> {
        // SAFETY: the variable's word, alive for this call (the caller's
        // borrow). The hardware transaction never dereferences a read word
        // after the read: emulated commits store only to written words (kept
        // alive by the write set), RTM tracks addresses. No `keep` entry: its
        // reference count would be a shared write in hardware.
        let w: &'static AtomicU64 = unsafe { word_at(word as *const AtomicU64 as usize) };
        let mut hw = self.l1.hw.borrow_mut();
        let t = hw.as_mut().ok_or_else(|| StmError::Failed(Error::corrupt("level-1 read without a hardware transaction")))?;
        let x = t.load(w).map_err(|a| self.hw_failed(a))?;
        let lazy = self.l1.lazy.get();
        if word::is_locked(x, 0) {
            if lazy.is_none() {
                let a = t.abort(code::LOCKED);
                return Err(self.hw_failed(a));
            }
            self.l1.saw_locked.set(true);
        }
        let out = load();
        t.check().map_err(|a| self.hw_failed(a))?;
        if let Some(every) = lazy.filter(|&e| e > 0) {
            let n = self.l1.reads.get() + 1;
            self.l1.reads.set(n);
            if n % every == 0 {
                self.lazy_check(t).map_err(|a| self.hw_failed(a))?;
            }
        }
        Ok(out)
    }

    /// Level-1 commit: lock the write set inside the hardware transaction,
    /// `xend`, then the timestamp and the in-place stores.
    pub(super) fn commit_level1(&self) -> StmResult<()> {
        self.l1.on.set(false);
        let t = self.l1.hw.borrow_mut().take();
        let mut t = t.ok_or_else(|| self.hw_failed(Abort::explicit(code::DROPPED)))?;
        if self.l1.lazy.get().is_some() {
            self.lazy_check(&mut t).map_err(|a| self.hw_failed(a))?;
        }
        {
            let mut st = self.st.borrow_mut();
            for i in 0..st.writes.len() {
                if !st.writes[i].kind.is_volatile() {
                    let a = t.abort(code::USER);
                    return Err(self.hw_failed(a));
                }
                // SAFETY: a write-set word: a TVar whose Arc the write holds,
                // or a `TWord` alive while the attempt is pinned.
                let w = unsafe { word_at(st.writes[i].word) };
                let cur = t.load(w).map_err(|a| self.hw_failed(a))?;
                if word::is_locked(cur, 0) {
                    let a = t.abort(code::LOCKED);
                    return Err(self.hw_failed(a));
                }
                t.store(w, word::locked(cur, 0)).map_err(|a| self.hw_failed(a))?;
                st.writes[i].old = cur;
            }
        }
        t.commit().map_err(|a| self.hw_failed(a))?;
        runtime::count(|s| s.l1_commits += 1);
        if !self.st.borrow().writes.is_empty() {
            let wv = Stamps { p: 0, v: VOLATILE.stamp() };
            if let Err(e) = wv.within_limit(None) {
                self.unlock_writes(runtime::route());
                return Err(StmError::Failed(e));
            }
            self.apply(wv, runtime::route(), None);
        }
        Ok(())
    }
}
