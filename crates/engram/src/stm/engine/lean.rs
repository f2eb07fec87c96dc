//! The lean commit: the commit of a small write set of pool cells only —
//! at most [`LEAN_MAX`] writes, each with its value's bytes (no volatile
//! variable, no copy still to make, no box) — in a process where no
//! hardware or coarse commit can run. It takes `commit.rs`'s steps 2-7 in
//! their order, with the same helpers for each (`lock_set`,
//! `quiet_since_snapshot`, `reads_valid`, `persist_record`,
//! `register_young`, `put_in_place`, `write_back_in_place`): the same
//! record bytes, the same one fence, the same in-place stores and
//! write-backs. What it leaves out is what the general
//! path spends on the other cases: the volatile domain's guard and stamp,
//! routing lock words through the emulated HTM, the coarse lock, the write
//! set's other kinds and the boxes.
//!
//! What it keeps true: it runs only where the general path would take the
//! steps it takes ([`STx::lean`]): `runtime::htm_armed` false (so `route`
//! is `None` and a read-set skip is sound), `runtime::coarse_possible`
//! false (so `Commit::take` would give `Commit::None`), and a write set of
//! `Kind::P` writes that all have a value (so `persist_record` writes a
//! record and returns the log, and step 7 has one kind to store). The
//! general path (more writes, volatile variables, copies, boxes, HTM or
//! coarse runtimes) is unchanged.

use super::commit::{lock_set, put_in_place, register_young, write_back_in_place, Shape, Stamps};
use super::tx::{Kind, STx};
use super::{StmError, StmResult};
use crate::stm::{runtime, wait, word};

/// The most writes a lean commit takes (a hash table's update writes one
/// word; a red-black tree's, a few).
pub(super) const LEAN_MAX: usize = 4;

impl STx<'_> {
    /// Whether this commit (of a write set of shape `shape`) may take the
    /// lean path (module doc).
    #[inline]
    pub(super) fn lean(&self, shape: &Shape) -> bool {
        shape.n <= LEAN_MAX
            && shape.n_values == shape.n as u64
            && shape.volatile == 0
            && !shape.boxes
            && self.ctx.is_some()
            && !runtime::htm_armed()
            && !runtime::coarse_possible()
    }

    /// Steps 2-7 of a lean commit (`commit.rs` numbers them).
    pub(super) fn commit_lean(&self, serial: bool, shape: Shape) -> StmResult<()> {
        let Some(ctx) = self.ctx.as_ref() else { return Err(StmError::Conflict) };
        let d = ctx.domain();
        // The pool's serial lock, shared, while a serial transaction exists.
        let shared = if serial { None } else { d.commit_guard() };
        // 2. lock the write set.
        lock_set(&mut self.st.borrow_mut().writes, self.epoch(), None, false)?;
        // 3. the commit timestamp.
        let wv = Stamps { p: d.stamp(), v: 0 };
        if let Err(e) = wv.within_limit(Some(ctx)) {
            self.unlock_writes(None);
            return Err(StmError::Failed(e));
        }
        ctx.local.snap.stamped(wv.p);
        // 4. validate the reads unless nobody committed since we began
        //    (unrecorded reads hold only then).
        let skip = crate::failpoint::planted("stm.lean_skips_validation") || self.quiet_since_snapshot(Some(d), wv);
        if !skip && (self.unrecorded() || !self.reads_valid(true)) {
            self.unlock_writes(None);
            return Err(StmError::Conflict);
        }
        // 5-6. the record and one fence; the log's lock kept for step 7.
        // (Every write has a value, so there is a record: `None` cannot
        // come back, and is refused like an error if it does.)
        let mut log = match self.persist_record(wv.p, shape) {
            Ok(Some(log)) => log,
            r => {
                self.unlock_writes(None);
                let e = r.err().unwrap_or_else(|| crate::error::Error::invalid("a lean commit wrote no record"));
                return Err(StmError::Failed(e));
            }
        };
        // 7. in place, then wake waiters.
        register_young(ctx, &mut log, wv.p);
        let st = self.st.borrow();
        let (space, new_word) = (&ctx.inner.space, word::unlocked(wv.p));
        let listed = !crate::failpoint::planted("stm.lean_in_place_unlisted");
        for w in &st.writes {
            if let Kind::P { off, value: Some(b), .. } = &w.kind {
                put_in_place(w.word, *off, b, new_word, None, Some(space), listed.then_some(&mut *log));
            }
        }
        drop(log);
        wait::wake(&d.waiters, st.writes.iter().map(|w| w.word));
        crate::failpoint::Failpoint::StmAfterApply.hit();
        drop(shared);
        // After the last locked instruction: the in-place write-backs
        // (unlisted values, with the planted bug, are not written back).
        if listed {
            write_back_in_place(space, &st.writes);
        }
        Ok(())
    }
}
