//! Level 1 of the `Hybrid` runtime (`stm::runtime`): a volatile
//! transaction's whole body runs inside one hardware transaction, and its
//! commit locks the write set inside it too; values are installed after
//! `xend`, as any commit installs them (steps 3 and 7).
//!
//! A `TVar` (or `TField`) read in hardware loads the variable's lock word through the
//! hardware transaction (subscribing to it: a word locked by a software
//! committer aborts with `LOCKED`), clones the value, then validates
//! (`HwTx::check`: the emulated backend re-checks every line read; RTM
//! aborts on a conflict by itself), so the body never sees an inconsistent
//! state (no zombies: the fine-grain locks are subscribed per word, before
//! the value is used). Writes are buffered in the write set as in software.
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

use super::tx::{Kind, STx};
use super::{word_at, StmError, StmResult, CLOCK};
use crate::error::Error;
use crate::htm::abort::code;
use crate::htm::{Abort, HwTx};
use crate::stm::runtime;
use crate::stm::word;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};

/// A transaction's level-1 state: its hardware transaction while it runs,
/// and the status of an emulated abort met in the body.
#[derive(Default)]
pub(super) struct Level1 {
    hw: RefCell<Option<HwTx<'static>>>,
    on: Cell<bool>,
    failed: Cell<Option<Abort>>,
}

impl STx<'_> {
    /// Whether the body runs in hardware.
    #[inline]
    pub(super) fn in_hw(&self) -> bool {
        self.l1.on.get()
    }

    /// Starts running the body in hardware transaction `t`.
    pub(super) fn hw_enter(&self, t: HwTx<'static>) {
        *self.l1.hw.borrow_mut() = Some(t);
        self.l1.on.set(true);
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
        if word::is_locked(x, 0) {
            let a = t.abort(code::LOCKED);
            return Err(self.hw_failed(a));
        }
        let out = load();
        t.check().map_err(|a| self.hw_failed(a))?;
        Ok(out)
    }

    /// Level-1 commit: lock the write set inside the hardware transaction,
    /// `xend`, then the timestamp and the in-place stores.
    pub(super) fn commit_level1(&self) -> StmResult<()> {
        self.l1.on.set(false);
        let t = self.l1.hw.borrow_mut().take();
        let mut t = t.ok_or_else(|| self.hw_failed(Abort::explicit(code::DROPPED)))?;
        {
            let mut st = self.st.borrow_mut();
            for i in 0..st.writes.len() {
                if !matches!(st.writes[i].kind, Kind::V { .. }) {
                    let a = t.abort(code::USER);
                    return Err(self.hw_failed(a));
                }
                // SAFETY: a write-set word: a TVar whose Arc the write holds.
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
            let wv = CLOCK.fetch_add(1, Ordering::AcqRel) + 1;
            self.apply(wv, runtime::route());
        }
        Ok(())
    }
}
