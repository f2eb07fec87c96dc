//! The commit protocol (steps 1-7 in `mod.rs`): materialise copies, lock
//! the write set, take the timestamp, validate, write the redo record and
//! copies, ONE fence, then store in place and wake waiters. Steps 2-7 run
//! inside the coarse lock's span (`coarse.rs`: exclusive for a `Coarse`
//! commit, shared for the others, nothing when it is not armed).
//!
//! Crash behaviour: a crash before the fence in `persist_record` loses the
//! commit whole (the record is incomplete or its checksums fail); after it,
//! recovery replays the record (`redo.rs`).

use super::coarse::Commit;
use super::domain::{Domain, VOLATILE};
use super::pool_state::{PoolCtx, ThreadLog, RESERVE};
use super::tx::{Bytes, Kind, STx, Write};
use super::{word_at, StmError, StmResult, MAX_VALUE};
use crate::error::{Error, Result};
use crate::format::OBJ_ARRAY;
use crate::htm::Htm;
use crate::pool::space::Space;
use crate::stm::persist::CopyCx;
use crate::stm::redo::{self, HALF};
use crate::stm::runtime;
use crate::stm::wait;
use crate::stm::word;
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;

// `apply` reads a value's words straight from its buffer.
const _: () = assert!(MAX_VALUE % 8 == 0);

impl STx<'_> {
    // ----- commit -------------------------------------------------------------

    pub(super) fn commit(&self, serial: bool) -> StmResult<()> {
        if self.in_hw() {
            return self.commit_level1();
        }
        // What the steps below need of the write set, in one pass (`Shape`).
        let mut shape = self.shape();
        if shape.n == 0 {
            // Read-only: every read was validated against rv. Objects it
            // allocated (PTVar::new, alloc) are made durable, for whoever
            // links them next (a region setting a root, say).
            return self.persist_made().map_err(StmError::Failed);
        }
        // A small write set of plain pool values: the lean path (lean.rs).
        if self.lean(&shape) {
            return self.commit_lean(serial, shape);
        }
        // 1. copies of pending values, before taking any lock (the shape
        //    again after: the copies are the record's values now).
        if shape.pending {
            self.materialize_all()?;
            shape = self.shape();
        }
        let (wrote_p, wrote_v) = (shape.volatile < shape.n, shape.volatile > 0);
        let pool = self.ctx.as_ref().map(|c| c.domain());
        // The serial locks of the domains written, pool first (domain.rs).
        let shared_p = pool.filter(|_| wrote_p && !serial).and_then(Domain::commit_guard);
        let shared_v = (wrote_v && !serial).then(|| VOLATILE.commit_guard());
        // Lock words go through the emulated HTM when it is armed (runtime.rs).
        let via = runtime::route();
        // The coarse lock (coarse.rs): exclusive for a Coarse commit, shared
        // for the others, until the last in-place store. (Nothing to take,
        // without a call, once the process is known to have no Coarse
        // commits: `take` would return `None` then.)
        let mut coarse = if runtime::coarse_possible() { Commit::take(via) } else { Commit::None };
        // 2. lock the write set (FineHtm: and validate the reads, in one
        //    hardware transaction; `validated` then. Coarse: plain stores).
        let validated = if coarse.exclusive() {
            self.lock_writes_as(via, true)?;
            false
        } else {
            self.lock_writes_rt(via, &mut coarse)?
        };
        // 3. the commit timestamps: one per domain written.
        let wv = Stamps { p: pool.filter(|_| wrote_p).map_or(0, Domain::stamp), v: if wrote_v { VOLATILE.stamp() } else { 0 } };
        if let Err(e) = wv.within_limit(self.ctx.as_ref()) {
            self.unlock_writes(via);
            return Err(StmError::Failed(e));
        }
        if let Some(c) = self.ctx.as_ref().filter(|_| wv.p != 0) {
            c.local.snap.stamped(wv.p);
        }
        // 4. validate the reads unless nobody committed since we began, in
        //    any domain read (domain.rs). That skip is sound only if every
        //    commit takes its timestamp before validating (TL2); a hardware
        //    commit (FineHtm, Hybrid level 1) locks and validates atomically
        //    and takes its timestamp after, so while one may run
        //    (`htm_armed`) a commit that saw no newer timestamp can still
        //    have missed its locks: always validate.
        let skip = !runtime::htm_armed() && self.quiet_since_snapshot(pool, wv);
        // Reads without read-set entries (tx.rs) hold only under the skip.
        if self.unrecorded() && !skip {
            self.unlock_writes(via);
            return Err(StmError::Conflict);
        }
        // (A coarse commit compares values where it recorded them: values.rs.)
        let valid = || if coarse.exclusive() { self.reads_valid_by_value() } else { self.reads_valid(true) };
        if !validated && !skip && !valid() {
            self.unlock_writes(via);
            return Err(StmError::Conflict);
        }
        // 5-6. the durable part: record, copies, one fence. (The log's lock,
        // taken for the record, is kept for step 7.)
        let log = match self.persist_record(wv.p, shape) {
            Ok(log) => log,
            Err(e) => {
                self.unlock_writes(via);
                return Err(StmError::Failed(e));
            }
        };
        // The boxes this commit replaces (boxed.rs), read under its locks.
        let boxes = shape.boxes.then(|| self.old_boxes());
        // 7. in place, then wake waiters.
        self.apply(wv, via, log);
        if let Some(old) = boxes {
            self.settle_boxes(&old);
        }
        if coarse.exclusive() {
            runtime::count(|s| s.coarse_commits += 1);
        }
        // An unarmed `Commit::None` holds nothing to release: no call of
        // its drop glue (out of line: its guards' drops) for it.
        if let Commit::None = coarse {
            std::mem::forget(coarse);
        } else {
            drop(coarse);
        }
        drop((shared_p, shared_v));
        // After the last locked instruction: the in-place write-backs.
        if let Some(c) = self.ctx.as_ref().filter(|_| wrote_p) {
            write_back_in_place(&c.inner.space, &self.st.borrow().writes);
        }
        Ok(())
    }

    /// The write set's [`Shape`], in one pass over it.
    fn shape(&self) -> Shape {
        let st = self.st.borrow();
        let mut s = Shape { n: st.writes.len(), boxes: !st.new_boxes.is_empty(), ..Shape::default() };
        for w in &st.writes {
            match &w.kind {
                Kind::P { value: Some(b), boxed, .. } => {
                    s.values += redo::entry_len(b.words() as u64 * 8);
                    s.n_values += 1;
                    s.boxes |= *boxed;
                }
                Kind::P { pending, boxed, .. } => {
                    s.pending |= pending.is_some();
                    s.boxes |= *boxed;
                }
                _ => s.volatile += 1,
            }
        }
        s
    }

    /// Step 4's skip test (domain.rs): in the pool's domain (any pool
    /// transaction counts as having read it) and, if a volatile variable
    /// was read, the volatile one, nobody took a timestamp since the
    /// snapshot: ours is `rv + 1`, or, in a domain we only read, the clock
    /// still reads `rv`.
    pub(super) fn quiet_since_snapshot(&self, pool: Option<&Domain>, wv: Stamps) -> bool {
        let quiet = |d: &Domain, wv: u64, rv: u64| if wv != 0 { wv == rv + 1 } else { d.quiet_since(rv) };
        let p = pool.is_none_or(|d| quiet(d, wv.p, self.rv.get()));
        p && (!self.read_v.get() || quiet(&VOLATILE, wv.v, self.rv_v.get()))
    }

    /// Flushes and fences the objects this attempt allocated, if any.
    fn persist_made(&self) -> Result<()> {
        let st = self.st.borrow();
        let Some(ctx) = self.ctx.as_ref().filter(|_| !st.made.is_empty()) else { return Ok(()) };
        let space = &ctx.inner.space;
        for m in &st.made {
            space.flush(m.off, m.len);
        }
        space.persist.fence(crate::fences::STM_MADE)
    }

    fn materialize_all(&self) -> StmResult<()> {
        let mut st = self.st.borrow_mut();
        let Some(ctx) = self.ctx.as_ref() else { return Ok(()) };
        let mut cx = CopyCx::new(ctx.inner, ctx.cache());
        let mut err = None;
        for w in st.writes.iter_mut() {
            if let Kind::P { value: value @ None, pending: Some(p), .. } = &mut w.kind {
                match p.materialize(&mut cx) {
                    Ok(b) => *value = Some(b),
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
            }
        }
        st.made.append(&mut cx.made);
        err.map_or(Ok(()), |e| Err(StmError::Failed(e)))
    }

    pub(super) fn lock_writes(&self, via: Option<&Htm>) -> StmResult<()> {
        self.lock_writes_as(via, false)
    }

    /// Step 2 in software: each write-set word locked by a CAS, or — `plain`,
    /// a coarse commit, under which nobody else can lock a word
    /// (`coarse.rs`) — by a plain store. A word locked already is a
    /// conflict (the words locked so far are restored).
    ///
    /// A coarse commit loads each word with `runtime::word_load`: with the
    /// emulated backend, a level-1 commit that validated before the coarse
    /// word was set may still be publishing its locks (an emulated `xend`
    /// is not atomic to plain loads); a plain load could read the word
    /// unlocked just before that lock lands, and the plain store would
    /// then overwrite it — two owners of one word, a lost update.
    /// `nt_load` waits the publication out and sees the lock. (A CAS needs
    /// no such load: `nt_cas` fails on a stale `cur`.)
    pub(super) fn lock_writes_as(&self, via: Option<&Htm>, plain: bool) -> StmResult<()> {
        lock_set(&mut self.st.borrow_mut().writes, self.epoch(), via, plain)
    }

    pub(super) fn unlock_writes(&self, via: Option<&Htm>) {
        for w in &self.st.borrow().writes {
            // SAFETY: a write-set word: a checked pool cell or a TVar held by the write.
            runtime::word_store(via, unsafe { word_at(w.word) }, w.old);
        }
    }

    /// Steps 5 and 6: the redo record and copies, durable after one fence.
    /// Returns the thread's log, still locked, for step 7 ([`STx::apply`]:
    /// one lock of it per commit), if it took it (a record was written).
    pub(super) fn persist_record(&self, wv: u64, shape: Shape) -> Result<Option<MutexGuard<'_, ThreadLog>>> {
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        let Some(ctx) = self.ctx.as_ref() else { return Ok(None) };
        let entries = || {
            st.writes.iter().filter_map(|w| match &w.kind {
                Kind::P { off, value: Some(b), .. } => Some((*off, &b.buf[..b.words() * 8])),
                _ => None,
            })
        };
        // The value entries' bytes and count (none: nothing to record).
        let (values, n_values) = (shape.values, shape.n_values);
        if values == 0 {
            return Ok(None);
        }
        reserve_clock(ctx, wv)?;
        let space = &ctx.inner.space;
        // New transactional objects (cells, nodes) change in later commits,
        // so recovery cannot check them against the record: the record
        // carries their initial bytes, written back whole at recovery
        // (young.rs says why that is sound).
        let inits = || st.made.iter().filter(|m| m.mutable).map(|m| (m.off, m.len));
        let young = !st.made.is_empty() && inits().next().is_some() && !crate::failpoint::planted("stm.young_not_carried");
        let (init_len, n_inits) =
            if young { inits().fold((0u64, 0u64), |(l, n), (_, len)| (l + redo::entry_len(len), n + 1)) } else { (0, 0) };
        // Copies are immutable: the record carries their checksums, and
        // recovery replays it only if every copy reached the media whole.
        // (The allocator metadata that makes each copy, or new object, an
        // object is checked too: it was flushed, not fenced, when the object
        // was allocated.)
        st.checks.clear();
        let checked = |m: &crate::stm::persist::Made| {
            if m.mutable {
                [None, Some(m.loc.meta_range())]
            } else {
                [Some((m.off, m.len)), Some(m.loc.meta_range())]
            }
        };
        for (off, len) in st.made.iter().flat_map(checked).flatten() {
            st.checks.push((off, len, redo::object_crc(space, off, len)?));
        }
        let needed = redo::record_len(values, init_len, st.checks.len());
        if needed > u32::MAX as u64 {
            return Err(Error::TxTooLarge { needed, limit: u32::MAX as u64 });
        }
        // (Each entry is at least 16 bytes of the record: the count fits.)
        let n = (n_values + n_inits + st.checks.len() as u64) as u32;
        // Another thread's records with new objects may have to go first
        // (young.rs; only if the half's record wrote into their objects:
        // the log's lock is dropped while helping).
        let mut guard = ctx.log().lock();
        if super::young::must_help(&guard) {
            drop(guard);
            super::young::help_before_reuse(ctx)?;
            guard = ctx.log().lock();
        }
        let log = &mut *guard;
        let h = (log.commits % 2) as usize;
        let half_off = log.log_off + h as u64 * HALF;
        // The half's last record (commit N-2) is durable in place since the
        // thread's last fence: its overflow array, if any, can go.
        if let Some(loc) = log.overflow[h].take() {
            ctx.inner.heap.free(space, ctx.cache(), loc)?;
        }
        // (The new objects' bytes are read in place, not collected first.)
        let init_bytes = inits().filter(|_| young).map(|(off, len)| Ok((off, redo::object_bytes(space, off, len)?)));
        // New objects of earlier regions that the record's values may
        // link, durable before the record is written (`fresh.rs`).
        space.persist.settle_fresh(crate::fences::FRESH_BEFORE_RECORD)?;
        let len = if needed <= HALF {
            // The record straight into the half (no buffer, no second copy).
            let at = half_at(space, half_off, needed)?;
            // SAFETY: `needed` bytes at `at` lie inside the live mapping
            // (`half_at` checked them); the half belongs to this thread's
            // log, whose lock `log` holds: nothing else reads or writes
            // them while the slice lives (helpers and the young-object
            // test read or clear a half under that lock too).
            let out = unsafe { std::slice::from_raw_parts_mut(at, needed as usize) };
            redo::encode_into(out, wv, n, init_bytes, entries(), &st.checks)?;
            space.traced(space.base() + half_off, needed);
            needed
        } else {
            log.buf.clear();
            log.buf.resize(needed as usize, 0);
            redo::encode_into(&mut log.buf, wv, n, init_bytes, entries(), &st.checks)?;
            overflow(ctx, log, h, wv)?;
            space.write_bytes(half_off, &log.buf)?;
            log.buf.len() as u64
        };
        space.flush(half_off, len);
        for m in &st.made {
            space.flush(m.off, m.len);
        }
        // The previous commit's in-place values: this thread issued their
        // write-backs at the end of that commit ([`write_back_in_place`],
        // after its last locked instruction, so they drained during this
        // transaction's body), and the fence below completes them. Listed
        // values this thread did not issue (an adopted log's) are written
        // back here, after this commit's last locked instruction (its log
        // lock, above). (On x86 a locked instruction waits for earlier
        // CLWBs like a fence; and each line written back before a fence
        // adds to its wait: round 26.)
        if !log.written_back && !crate::failpoint::planted("stm.in_place_not_flushed") {
            flush_unfenced(space, log);
        }
        // 6. the one fence: record, copies, new objects, and the previous
        //    commit's in-place values are durable; the other half may be
        //    reused next time.
        space.persist.fence(crate::fences::STM_RECORD)?;
        log.fenced();
        // This half's previous record is overwritten on the media now.
        ctx.stm().young.unregister(log, h);
        log.half_wv[h] = wv;
        log.touched[h] = ctx.stm().young.touches_older(log, wv, entries().map(|(off, _)| off));
        log.young_pending = young.then(|| (h, super::young::span_of(inits())));
        log.commits += 1;
        crate::failpoint::Failpoint::StmAfterFence.hit();
        Ok(Some(guard))
    }

    /// Step 7: the values in place, then waiters woken. `log`: the
    /// thread's log if the caller holds its lock already (the record's,
    /// [`STx::persist_record`]); else it is locked here.
    pub(super) fn apply(&self, wv: Stamps, via: Option<&Htm>, log: Option<MutexGuard<'_, ThreadLog>>) {
        let st = self.st.borrow();
        let space = self.ctx.as_ref().map(|c| &c.inner.space);
        let (new_word, new_word_v) = (word::unlocked(wv.p), word::unlocked(wv.v));
        let mut log = log.or_else(|| self.ctx.as_ref().map(|c| c.log().lock()));
        if let (Some(c), Some(l)) = (self.ctx.as_ref(), log.as_mut()) {
            register_young(c, l, wv.p);
        }
        for w in &st.writes {
            match &w.kind {
                Kind::P { off, value: Some(b), .. } => put_in_place(w.word, *off, b, new_word, via, space, log.as_deref_mut()),
                Kind::V { cell, value } => {
                    cell.install(value.as_ref(), self.pin());
                    runtime::word_store(via, cell.word(), new_word_v);
                    crate::failpoint::apply_gap();
                }
                Kind::W { bits } => {
                    // The value word, then the lock word unlocked with the
                    // new version (a `TWord`, `tword.rs`).
                    // SAFETY: a `TWord`'s lock word, its value word at +8;
                    // alive while this attempt is pinned (`write_word`).
                    unsafe { word_at(w.word + 8) }.store(*bits, Ordering::Release);
                    // SAFETY: as above.
                    runtime::word_store(via, unsafe { word_at(w.word) }, new_word_v);
                    crate::failpoint::apply_gap();
                }
                // SAFETY: the cell's lock word (checked by write_cell).
                Kind::P { .. } => runtime::word_store(via, unsafe { word_at(w.word) }, w.old),
            }
        }
        drop(log);
        // A write without a value restored its old word: nothing to wake.
        // Each domain's waiters are woken by writes of that domain.
        if let Some(d) = self.ctx.as_ref().filter(|_| wv.p != 0).map(|c| c.domain()) {
            wait::wake(&d.waiters, st.writes.iter().filter(|w| matches!(w.kind, Kind::P { value: Some(_), .. })).map(|w| w.word));
        }
        if wv.v != 0 {
            wait::wake(&VOLATILE.waiters, st.writes.iter().filter(|w| w.kind.is_volatile()).map(|w| w.word));
        }
        crate::failpoint::Failpoint::StmAfterApply.hit();
    }
}

/// Step 2 for write set `writes`: each word locked by a CAS, or `plain`
/// by a store (see [`STx::lock_writes_as`]), its word as it was kept in
/// `old`; a word locked already is a conflict, and the words locked so far
/// are restored. `epoch`: the pool's (a pool cell's lock word carries it).
#[inline(always)]
pub(super) fn lock_set(writes: &mut [Write], epoch: u16, via: Option<&Htm>, plain: bool) -> StmResult<()> {
    for i in 0..writes.len() {
        let e = if matches!(writes[i].kind, Kind::P { .. }) { epoch } else { 0 };
        // SAFETY: a write-set word: a pool cell checked by write_cell, a
        // TVar whose Arc the write holds (`Kind::V::cell`), or a `TWord`
        // alive while the attempt is pinned (`Kind::W`).
        let w = unsafe { word_at(writes[i].word) };
        let cur = if plain { runtime::word_load(via, w) } else { w.load(Ordering::Acquire) };
        let ok = !word::is_locked(cur, e)
            && if plain {
                runtime::word_store(via, w, word::locked(cur, e));
                true
            } else {
                runtime::word_cas(via, w, cur, word::locked(cur, e))
            };
        if !ok {
            for prev in &writes[..i] {
                // SAFETY: a write-set word (as above).
                runtime::word_store(via, unsafe { word_at(prev.word) }, prev.old);
            }
            return Err(StmError::Conflict);
        }
        writes[i].old = cur;
    }
    Ok(())
}

/// Step 7's first part, under the log's lock: a record with new objects
/// (`persist_record` left it pending) is registered before they can be
/// reached (their links are stored in place after this).
#[inline(always)]
pub(super) fn register_young(ctx: &PoolCtx<'_>, log: &mut ThreadLog, wv: u64) {
    if let Some((h, (lo, hi))) = log.young_pending.take() {
        let (lo, hi) = if crate::failpoint::planted("stm.young_span_lost") { (0, 0) } else { (lo, hi) };
        ctx.stm().young.register(log, h, super::young::YoungRec { wv, lo, hi });
    }
}

/// Writes back the cells `log.unfenced` lists (the thread's last commit's
/// in-place values), for the fence that follows: the commit record's own
/// (`persist_record`), or a helper's, quiesce's or an adopting thread's
/// for an idle log. The list is cleared by whoever fences it.
#[inline(always)]
pub(super) fn flush_unfenced(space: &Space, log: &ThreadLog) {
    for &(off, len) in &log.unfenced {
        space.flush(off, len);
    }
}

/// Step 7 for one pool write (lock word at `word`, pool offset `off`,
/// value `b`): the value words in place, then the lock word unlocked at
/// `new_word`; with a log (a record was written) the cell is listed in
/// its `unfenced`, not flushed: the thread's next fence makes it durable
/// before that record can be overwritten. The caller issues the
/// write-back itself once the commit's last locked instruction is behind
/// it ([`write_back_in_place`]), and marks the list so (`written_back`,
/// if the list held only this commit's cells); a helper, quiesce or a
/// thread adopting the log writes the list back again before its own
/// fence ([`flush_unfenced`]). No write-back is in flight when step 7
/// releases the log's lock.
#[inline(always)]
pub(super) fn put_in_place(
    word: usize,
    off: u64,
    b: &Bytes,
    new_word: u64,
    via: Option<&Htm>,
    space: Option<&Space>,
    log: Option<&mut ThreadLog>,
) {
    // Each value word straight from the buffer (no zeroed copy of it
    // first: b.buf is MAX_VALUE bytes, a multiple of 8).
    for (i, x) in b.buf.chunks_exact(8).take(b.words()).enumerate() {
        let x = u64::from_ne_bytes(x.try_into().unwrap_or([0; 8]));
        // SAFETY: value words of a pool cell write_cell checked to hold
        // 8 + 8 * words() bytes in the mapping.
        unsafe { word_at(word + 8 + 8 * i) }.store(x, Ordering::Relaxed);
    }
    // The value before its version (same line, so they persist in this
    // order; a tracer is told the order).
    space.inspect(|s| s.traced(word as u64 + 8, b.words() as u64 * 8));
    // SAFETY: the cell's lock word (checked by write_cell).
    runtime::word_store(via, unsafe { word_at(word) }, new_word);
    space.inspect(|s| s.traced(word as u64, 8));
    if let Some(log) = log {
        // (A list left by another thread, not issued by this one, stays
        // unmarked: the next commit writes it all back.)
        log.written_back = log.written_back || log.unfenced.is_empty();
        log.unfenced.push((off, in_place_len(b)));
    }
}

/// The bytes of a pool cell that step 7 stores for value `b`: its lock
/// word and value words.
#[inline(always)]
fn in_place_len(b: &Bytes) -> u64 {
    8 + b.words() as u64 * 8
}

/// The end of an update commit, after its last locked instruction (the
/// log's unlock, the waiters' check, the serial and coarse locks'
/// releases): starts writing back the values step 7 stored in place
/// ([`put_in_place`] listed them). Nothing waits for these write-backs
/// here; they drain while the thread runs its next transaction's body,
/// and that commit's fence completes them without writing them back
/// again (`written_back`). On x86 a locked instruction or fence waits for
/// every earlier CLWB of its thread, so issued before the log's unlock
/// they would stall it, and issued right before the next fence they add
/// to its wait (docs/stm.md rounds 21 and 26).
#[inline(always)]
pub(super) fn write_back_in_place(space: &Space, writes: &[Write]) {
    if crate::failpoint::planted("stm.in_place_not_flushed") {
        return;
    }
    for w in writes {
        if let Kind::P { off, value: Some(b), .. } = &w.kind {
            space.flush(*off, in_place_len(b));
        }
    }
}

/// What a commit needs to know of its write set, taken in one pass
/// ([`STx::shape`]) instead of one per step: its size, how many writes are
/// volatile, whether a pool write still awaits its copy (`materialize_all`),
/// whether the commit creates or replaces boxes (`boxed.rs`: a boxed write,
/// or boxes made by the attempt), and the redo record's value entries
/// (bytes and count: every pool write with a value, in write-set order, as
/// `persist_record` encodes them). Taken again after the copies are made.
#[derive(Clone, Copy, Default)]
pub(super) struct Shape {
    pub(super) n: usize,
    pub(super) volatile: usize,
    pub(super) pending: bool,
    pub(super) boxes: bool,
    values: u64,
    pub(super) n_values: u64,
}

/// A commit's timestamps: in its pool's domain and in the volatile one
/// (0: the commit writes nothing there).
#[derive(Clone, Copy)]
pub(super) struct Stamps {
    pub(super) p: u64,
    pub(super) v: u64,
}

impl Stamps {
    /// Whether both timestamps fit a lock word's version (at most
    /// `word::MAX_VERSION`); else the error naming the clock that ran out
    /// (`ctx`: the commit's pool, if any). Checked before anything carries
    /// them (redo record, in-place words): past the limit a version would
    /// wrap to a small number and read as older than every snapshot
    /// (docs/stm.md, "Limits"). A clock once past it stays past it, so
    /// every later commit of that domain is refused too.
    #[inline]
    pub(super) fn within_limit(self, ctx: Option<&PoolCtx<'_>>) -> Result<()> {
        if self.p.max(self.v) <= word::MAX_VERSION {
            return Ok(());
        }
        Err(clock_exhausted(ctx.filter(|_| self.p > word::MAX_VERSION)))
    }
}

/// [`Stamps::within_limit`]'s error: for the pool of `ctx`, else for the
/// volatile domain.
#[cold]
#[inline(never)]
fn clock_exhausted(ctx: Option<&PoolCtx<'_>>) -> Error {
    let (domain, remedy) = match ctx {
        Some(c) => (
            c.inner.space.path.display().to_string(),
            "the pool's data is intact and readable; copy it into a new pool to keep writing (docs/stm.md, \"Limits\")",
        ),
        None => ("volatile variables".to_string(), "the volatile domain's clock starts again when the process restarts"),
    };
    Error::StmClockExhausted { domain, limit: word::MAX_VERSION, remedy }
}

/// The address of the log half at pool offset `half_off`, checked to
/// hold `len` bytes of a record inside the mapping (the caller writes the
/// record there in place, under the half's log lock).
#[inline]
fn half_at(space: &crate::pool::space::Space, half_off: u64, len: u64) -> Result<*mut u8> {
    if len > HALF || !space.contains(space.base() + half_off, len) {
        return Err(Error::corrupt(format!("STM log half {half_off:#x}+{len} is outside the pool")));
    }
    Ok((space.base() + half_off) as *mut u8)
}

/// Moves the record in `log.buf`, too large for a log half, to a byte
/// array of its own (flushed; the commit's fence makes it durable), and
/// leaves in `log.buf` the stand-in record that points to it. The array is
/// garbage once the record is cleared or replaced: freed when half `h` is
/// reused, by the GC after a quiesce or a crash.
fn overflow(ctx: &PoolCtx<'_>, log: &mut ThreadLog, h: usize, wv: u64) -> Result<()> {
    let (inner, space) = (ctx.inner, &ctx.inner.space);
    let len = log.buf.len() as u64;
    let id = inner.types.id_of::<u8>(space)?;
    let (addr, loc) = inner.heap.alloc(space, ctx.cache(), len, id, OBJ_ARRAY, len)?;
    let off = addr - space.base();
    log.overflow[h] = Some(loc);
    space.write_bytes(off, &log.buf)?;
    if !crate::failpoint::planted("stm.overflow_not_flushed") {
        space.flush(off, len);
    }
    let crc = crate::crc::crc32c(&log.buf);
    redo::encode_overflow(&mut log.buf, wv, off, len as u32, crc);
    Ok(())
}

/// Persists a new clock reservation before `wv` can reach the pool.
#[inline]
fn reserve_clock(ctx: &PoolCtx<'_>, wv: u64) -> Result<()> {
    if wv < ctx.stm().reserved_fast.load(Ordering::Acquire) {
        return Ok(());
    }
    reserve_clock_slow(ctx, wv)
}

/// [`reserve_clock`] across the reservation: one extra fence per
/// `RESERVE` versions.
#[cold]
#[inline(never)]
fn reserve_clock_slow(ctx: &PoolCtx<'_>, wv: u64) -> Result<()> {
    let mut r = ctx.stm().reserved.lock();
    if wv >= *r {
        // (Never above the last usable version: a reopened pool's clock
        // starts above the reservation. `within_limit` refused any `wv`
        // past it, so `new > wv`.)
        let new = (wv + RESERVE).min(word::MAX_VERSION + 1);
        if !crate::failpoint::planted("stm.reservation_not_persisted") {
            ctx.inner.space.write_persist(ctx.stm().meta_off, &new, crate::fences::STM_CLOCK)?;
        }
        *r = new;
        ctx.stm().reserved_fast.store(new, Ordering::Release);
        super::domain::HIGH.fetch_max(new, Ordering::AcqRel);
    }
    Ok(())
}
