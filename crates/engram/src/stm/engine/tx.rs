//! A transaction's state and its reads and writes: the read set (validated
//! as each read happens, TL2 with LSA-style snapshot extension), the
//! buffered write set (with or-else frames), and objects allocated by the
//! attempt. Nothing here writes shared memory; commit (`commit.rs`) does.
//!
//! The read path, in order: bounds check of the cell (against the heap's
//! bounds cached at begin), the write set only if it is non-empty, then
//! the seqlock read (lock word, value, fence, lock word again) and one
//! 24-byte read-set entry pushed onto a reused buffer. The sets live in a
//! [`State`] each thread keeps between transactions (`SPARE`), cleared
//! but not freed, so a transaction allocates nothing once the thread's
//! buffers have grown to its size. [`STx::read_immutable`] skips the
//! read-set entry for fields written only before their object was shared.
//!
//! Unrecorded reads (TL2's read-only mode): an attempt normally starts with
//! `rec` off, and until its first write its reads push no read-set entry
//! (`unrec` says some read went unrecorded). Each such read is still
//! checked against the snapshot `rv`, so a read-only attempt that commits
//! saw the state at `rv`. What it gives up: the snapshot cannot be
//! extended (a version newer than `rv` is a conflict), and an update commit
//! cannot validate the unrecorded reads, so it commits only if nobody took
//! a timestamp since `rv` (TL2's `wv == rv + 1`; else a conflict); a retry
//! has no read set to wait on. In each of those cases the run loop runs the
//! body again with `rec` on from the start (`run.rs`), which is the full
//! protocol. Attempts that may run beside a hardware commit, or validate
//! by value (`Coarse`), always record.
//!
//! The parts, each in its own file with what it keeps true:
//! `tx/read.rs` (the read path of pool cells, validation, snapshot
//! extension), `tx/write.rs` (the write set, its filter and index,
//! allocations, where a written cell lies), `tx/volatile.rs` (`TVar`,
//! `TWord` and `TField` reads and writes), `tx/bounds.rs` (bounds checks
//! of cells and arrays, shared with `rtx.rs`).

mod bounds;
mod read;
mod volatile;
mod write;

pub(super) use bounds::{array_len_in, array_len_within, cell_fits, check_cell_in};
pub(crate) use volatile::VCell;
pub(super) use write::{rebuild_index, Bytes, Kind, Pending, Write};

use super::domain::VOLATILE;
use super::pool_state::PoolCtx;
use super::{StmError, StmResult};
use crate::error::Error;
use crate::hash::FastMap;
use crate::stm::persist::{Made, Persist};
use crate::Persistent;
use crossbeam_epoch::Guard;
use std::any::Any;
use std::cell::{Cell, OnceCell, RefCell};
use std::mem::ManuallyDrop;
use std::sync::Arc;
use write::Located;

pub(super) struct Read {
    pub(super) word: usize,
    pub(super) version: u64,
    pub(super) epoch: u16,
}

/// Or-else frames: where the write set stood, and entries replaced since.
pub(super) struct Frame {
    len: usize,
    replaced: Vec<(usize, Write)>,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) reads: Vec<Read>,
    /// Keeps the owners of the `TField`s read (and so their lock words)
    /// alive; `TVar`s only when `keeping` (see `STx::read_tvar`).
    pub(super) keep: Vec<Arc<dyn Any + Send + Sync>>,
    pub(super) writes: Vec<Write>,
    pub(super) index: FastMap<usize, usize>,
    /// Objects allocated by this attempt: flushed at commit, freed on abort.
    pub(super) made: Vec<Made>,
    pub(super) frames: Vec<Frame>,
    /// Commit's scratch list of copy checksums (offset, length, CRC32C).
    pub(super) checks: Vec<(u64, u64, u32)>,
    /// `Coarse`: the values read, for value-based validation (`values.rs`).
    pub(super) seen: Vec<super::values::Seen>,
    /// Boxes of boxed variables this attempt created (`boxed.rs`): pool
    /// offsets, recorded with their creating commit when it commits.
    pub(super) new_boxes: Vec<u64>,
    /// Objects the allocator located for this thread's writes, kept
    /// across its transactions (not cleared with the sets).
    located: Located,
    /// Small spans this thread's writes and allocations found (`tx/spans.rs`,
    /// the region's cache), kept across its transactions (not cleared with
    /// the sets) and renewed by each attempt's begin: emptied unless the
    /// heap is the same and freed nothing since. A write into a node of a
    /// span seen before skips the span tables ([`STx::cell_offset`]).
    /// Sound because an attempt holds the GC gate from before its begin
    /// (no sweep runs, so no small span changes class while it runs) and
    /// a sweep moves the free count the cache is keyed by.
    spans: Option<crate::tx::spans::SpanCache>,
}

/// Sets above this many entries are freed rather than kept for the
/// thread's next transaction.
const KEEP_MAX: usize = 1 << 16;

/// The bit of lock word `word` in [`STx::wbits`]: cells are at least 16
/// bytes apart (a `PTField` is a lock word and a value word), so the
/// address's bits above 16 pick it.
#[inline]
fn wbit(word: usize) -> u64 {
    1 << ((word >> 4) & 63)
}

impl State {
    /// Empties the sets, keeping their buffers (unless one grew huge).
    fn clear(&mut self) {
        if self.reads.capacity() > KEEP_MAX || self.writes.capacity() > KEEP_MAX || self.index.capacity() > KEEP_MAX {
            *self = State { located: std::mem::take(&mut self.located), spans: self.spans.take(), ..State::default() };
            return;
        }
        self.reads.clear();
        self.keep.clear();
        self.writes.clear();
        if !self.index.is_empty() {
            // (clearing a map with capacity rewrites all its control bytes)
            self.index.clear();
        }
        self.made.clear();
        self.frames.clear();
        self.seen.clear();
        self.new_boxes.clear();
    }
}

thread_local! {
    /// The sets of this thread's last transaction, emptied, for its next.
    static SPARE: Cell<Option<Box<State>>> = const { Cell::new(None) };
}

/// A running STM transaction. Obtained in [`crate::Pool::atomically`] or
/// [`atomically`](crate::stm::atomically); the closure may run several times (on conflicts), so it
/// must have no effects outside the transaction.
pub struct STx<'p> {
    pub(super) ctx: Option<PoolCtx<'p>>,
    /// Taken out (not replaced) when the transaction drops: see `Drop`.
    pub(super) st: ManuallyDrop<RefCell<Box<State>>>,
    /// The snapshot of the pool's clock (of the volatile clock without a
    /// pool): every read of a pool variable is of a version at or below it.
    pub(super) rv: Cell<u64>,
    /// The snapshot of the volatile domain's clock (`domain.rs`), for
    /// volatile variables; sampled with `rv`, before the first read.
    pub(super) rv_v: Cell<u64>,
    /// Some volatile variable was read (its domain must be validated).
    pub(super) read_v: Cell<bool>,
    /// The pool's epoch (lock words of its cells carry it); 0 without a pool.
    epoch: u16,
    /// The heap's bounds when the transaction began: `[lo, hi)`.
    bounds: (u64, u64),
    /// Level 1 of the Hybrid runtime (`level1.rs`).
    pub(super) l1: super::level1::Level1,
    /// A `Coarse` transaction: reads record their values (`values.rs`).
    pub(super) by_value: bool,
    /// Reads push read-set entries (see the module doc): on from the start
    /// when the run loop asks, else from the first write on.
    rec: Cell<bool>,
    /// Some read of this attempt pushed no read-set entry.
    unrec: Cell<bool>,
    /// A filter of the words in the write set (bit [`wbit`] of each is
    /// set; a clear bit means "not written", so most lookups of a read in
    /// an update end here without a scan). Kept a superset: set by `put`,
    /// never cleared in the attempt. Outside `st`: the read path tests it
    /// without borrowing the sets.
    wbits: Cell<u64>,
    /// `TVar` reads push their variable into `keep` (a retry's wait,
    /// unpinned, needs the counts: `run.rs` asks for it).
    keeping: bool,
    /// Some recorded `TVar` read of this attempt kept no count.
    unkept: Cell<bool>,
    /// The attempt's epoch pin (crossbeam-epoch), taken at its first
    /// volatile read or install ([`STx::pin`]): the `TVar` values and lock
    /// words it reaches stay allocated until the attempt drops it.
    guard: OnceCell<Guard>,
}

impl Drop for STx<'_> {
    fn drop(&mut self) {
        // (Moved out rather than `mem::take`n: a default `Box<State>` would
        // be one allocation and one free per transaction.)
        // SAFETY: `st` is not used after this; `drop` runs once.
        let mut st = unsafe { ManuallyDrop::take(&mut self.st) }.into_inner();
        st.clear();
        SPARE.with(|s| s.set(Some(st)));
    }
}

impl<'p> STx<'p> {
    /// Starts an attempt; `record`: push read-set entries from the start;
    /// `keeping`: `TVar` reads take a count on their variable (`keep`).
    pub(super) fn begin(ctx: Option<PoolCtx<'p>>, record: bool, keeping: bool) -> Self {
        let mut st = SPARE.with(Cell::take).unwrap_or_default();
        if let Some(c) = &ctx {
            let (base, heap) = (c.inner.space.base(), &c.inner.heap);
            match &mut st.spans {
                Some(s) => s.renew(base, heap.id, heap.frees_seen()),
                None => st.spans = Some(crate::tx::spans::SpanCache::new(base, heap.id, heap.frees_seen())),
            }
        }
        let epoch = ctx.as_ref().map_or(0, |c| c.stm().epoch);
        let bounds = ctx.as_ref().map_or((0, 0), |c| {
            let space = &c.inner.space;
            (space.base() + crate::format::HEAP_OFF, space.base() + space.size())
        });
        let by_value = crate::stm::runtime::coarse_possible() && crate::stm::runtime::current() == crate::stm::runtime::Runtime::Coarse;
        let rec = record || by_value || crate::stm::runtime::htm_maybe_armed();
        // Both snapshots before any read (domain.rs).
        let rv_v = VOLATILE.now();
        let rv = ctx.as_ref().map_or(rv_v, |c| c.domain().now());
        STx {
            ctx,
            st: ManuallyDrop::new(RefCell::new(st)),
            rv: Cell::new(rv),
            rv_v: Cell::new(rv_v),
            read_v: Cell::new(false),
            epoch,
            bounds,
            l1: Default::default(),
            by_value,
            rec: Cell::new(rec),
            unrec: Cell::new(false),
            wbits: Cell::new(0),
            keeping,
            unkept: Cell::new(false),
            guard: OnceCell::new(),
        }
    }

    /// The attempt's epoch pin, taken on first use (one per attempt, not
    /// per read; an attempt that touches no `TVar` never takes one).
    #[inline]
    pub(crate) fn pin(&self) -> &Guard {
        self.guard.get_or_init(crossbeam_epoch::pin)
    }

    /// Whether a recorded `TVar` read of this attempt took no count on its
    /// variable: a retry must run it again keeping them before it waits.
    pub(super) fn unkept(&self) -> bool {
        self.unkept.get()
    }

    /// Whether some read of this attempt pushed no read-set entry (see the
    /// module doc): it cannot be validated, extended or waited on.
    pub(super) fn unrecorded(&self) -> bool {
        self.unrec.get()
    }

    pub(super) fn epoch(&self) -> u16 {
        self.epoch
    }

    /// Whether `word` lies in this transaction's pool (else it is a
    /// volatile variable's word).
    pub(super) fn in_pool(&self, word: usize) -> bool {
        let (lo, hi) = self.bounds;
        (word as u64) >= lo && (word as u64) < hi
    }

    /// Whether this attempt read or wrote a volatile variable.
    pub(super) fn touched_volatile(&self) -> bool {
        self.read_v.get() || self.st.borrow().writes.iter().any(|w| w.kind.is_volatile())
    }

    /// The pool this transaction runs on (hook for `crate::lazy`).
    pub(crate) fn pool_inner(&self) -> Option<&'p crate::pool::PoolInner> {
        self.ctx.as_ref().map(|c| c.inner)
    }

    pub(super) fn ctx(&self) -> StmResult<&PoolCtx<'p>> {
        self.ctx.as_ref().ok_or_else(|| StmError::Failed(Error::invalid("persistent variables need Pool::atomically")))
    }

    /// Blocks until a variable read so far changes, then runs the
    /// transaction again.
    pub fn retry<R>(&self) -> StmResult<R> {
        Err(StmError::Retry)
    }

    /// Runs `a`; if it retries, drops its writes (keeping its reads, so a
    /// later retry also waits on them) and runs `b`.
    pub fn or_else<R>(&self, a: impl FnOnce(&Self) -> StmResult<R>, b: impl FnOnce(&Self) -> StmResult<R>) -> StmResult<R> {
        let len = self.st.borrow().writes.len();
        self.st.borrow_mut().frames.push(Frame { len, replaced: Vec::new() });
        let r = a(self);
        let mut st = self.st.borrow_mut();
        let frame = st.frames.pop().unwrap_or(Frame { len, replaced: Vec::new() });
        match r {
            Err(StmError::Retry) => {
                st.writes.truncate(frame.len);
                for (i, w) in frame.replaced.into_iter().rev() {
                    if i < st.writes.len() {
                        st.writes[i] = w;
                    }
                }
                rebuild_index(&mut st);
                drop(st);
                b(self)
            }
            r => {
                if let Some(parent) = st.frames.last_mut() {
                    parent.replaced.extend(frame.replaced);
                }
                r
            }
        }
    }

    /// Reads `var` (a [`crate::stm::ImmutableRef`]: without a read-set
    /// entry, see [`STx::read_immutable`]).
    pub fn read<V: crate::stm::ReadVar>(&self, var: &V) -> StmResult<V::Out> {
        var.read_var(self)
    }

    /// Writes `v` into `var` (visible to this transaction now, to others
    /// when it commits; ordinary values are copied into the pool then).
    pub fn write<V: crate::stm::Var>(&self, var: &V, v: V::In) -> StmResult<()> {
        var.write_in(self, v)
    }

    /// Reads, changes and writes back a plain persistent variable.
    pub fn modify<T: Persist<P = T> + Persistent>(&self, var: &crate::stm::PTVar<T>, f: impl FnOnce(T) -> T) -> StmResult<()> {
        let v = self.read(var)?;
        self.write(var, f(v))
    }

    #[inline]
    pub(super) fn find(&self, st: &State, word: usize) -> Option<usize> {
        if self.wbits.get() & wbit(word) == 0 {
            return None;
        }
        if st.writes.len() <= 16 {
            st.writes.iter().position(|w| w.word == word)
        } else {
            st.index.get(&word).copied()
        }
    }

    /// What a retry waits on: the words read, each with the version and
    /// epoch seen, and the volatile TVars read (kept alive so their words
    /// stay valid while the thread waits).
    #[allow(clippy::type_complexity)]
    pub(super) fn retry_set(&self) -> (Vec<(usize, u64, u16)>, Vec<Arc<dyn Any + Send + Sync>>) {
        let st = self.st.borrow();
        (st.reads.iter().map(|r| (r.word, r.version, r.epoch)).collect(), st.keep.clone())
    }
}
