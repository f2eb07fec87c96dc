//! Step 2 of the commit under the thread's runtime (`stm::runtime`): the
//! fine-grain software lock of the write set, or — `FineHtm` — one hardware
//! transaction that locks the write set and validates the read set
//! together (the CAS loop and step 4 elided), retried by the policy, with
//! the software lock as the fallback (for `Hybrid`, level 3: the coarse
//! lock, `coarse.rs`).
//!
//! Invariants: the hardware transaction touches only lock words (loads, and
//! stores of the locked form), so no flush, fence or allocation runs inside
//! it (RTM would abort on a flush) and the durable part of the commit is
//! unchanged. When it commits, every write-set word is locked by this
//! transaction and every read is current, atomically: the commit's
//! serialisation point, as after TL2's lock-then-validate; the timestamp is
//! taken after it, so a reader whose snapshot is at or beyond it sees the
//! locks.
//!
//! Crash behaviour: only lock bits change here; they are volatile in
//! meaning (a stale lock of an older epoch reads as unlocked).

use super::coarse::Commit;
use super::tx::{Kind, STx};
use super::{word_at, StmError, StmResult};
use crate::htm::abort::code;
use crate::htm::{Abort, Htm};
use crate::stm::runtime;
use crate::stm::word;

impl STx<'_> {
    /// Locks the write set; returns whether the reads were validated with
    /// it (only a hardware commit does that). When the hardware attempts
    /// fail, a `Hybrid` commit falls back to the coarse lock (level 3,
    /// `coarse` becomes exclusive), any other to the fine-grain locks.
    pub(super) fn lock_writes_rt(&self, via: Option<&'static Htm>, coarse: &mut Commit) -> StmResult<bool> {
        if !runtime::current().uses_htm() || !runtime::htm_armed() {
            self.lock_writes(via)?;
            return Ok(false);
        }
        let htm = runtime::backend();
        for attempt in 0..runtime::commit_attempts() {
            let a = match self.hw_lock_validate(htm) {
                Ok(()) => {
                    runtime::count(|s| s.hw_commits += 1);
                    return Ok(true);
                }
                Err(a) => a,
            };
            runtime::count_abort(a);
            match a.code() {
                Some(code::VALIDATE) => {
                    runtime::count(|s| s.validate_aborts += 1);
                    return Err(StmError::Conflict);
                }
                Some(code::LOCKED) => runtime::count(|s| s.locked_aborts += 1),
                _ if a.capacity() && !a.may_retry() => break,
                _ => {}
            }
            for _ in 0..(16u32 << attempt.min(6)) {
                std::hint::spin_loop();
            }
        }
        runtime::count(|s| s.sw_fallbacks += 1);
        let plain = coarse.escalate(via);
        self.lock_writes_as(via, plain)?;
        Ok(false)
    }

    /// One hardware attempt: lock every write-set word (a word locked by
    /// another commit aborts with `LOCKED`), then check every read's word
    /// (changed, or locked by another: `VALIDATE`), then commit.
    fn hw_lock_validate(&self, htm: &Htm) -> Result<(), Abort> {
        let epoch = self.epoch();
        let mut st = self.st.borrow_mut();
        let st = &mut **st;
        let mut t = htm.begin()?;
        for i in 0..st.writes.len() {
            let e = if matches!(st.writes[i].kind, Kind::P { .. }) { epoch } else { 0 };
            // SAFETY: a write-set word: a pool cell checked by write_cell,
            // or a TVar whose Arc the write holds (`Kind::V::cell`).
            let w = unsafe { word_at(st.writes[i].word) };
            let cur = t.load(w)?;
            if word::is_locked(cur, e) {
                return Err(t.abort(code::LOCKED));
            }
            t.store(w, word::locked(cur, e))?;
            st.writes[i].old = cur;
        }
        for r in &st.reads {
            // SAFETY: a read-set word: a checked pool cell, or a TVar whose
            // Arc the transaction keeps (`State::keep`).
            let x = t.load(unsafe { word_at(r.word) })?;
            let mine = self.find(st, r.word).is_some();
            if word::version(x) != r.version || (word::is_locked(x, r.epoch) && !mine) {
                return Err(t.abort(code::VALIDATE));
            }
        }
        t.commit()
    }
}
