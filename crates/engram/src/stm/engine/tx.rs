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

use super::domain::VOLATILE;
use super::pool_state::PoolCtx;
use super::{word_at, StmError, StmResult, MAX_VALUE};
use crate::error::{Error, Result};
use crate::format::{ObjHeader, OBJ_ARRAY, OBJ_HEADER, OBJ_TAG, OBJ_TAG_MASK};
use crate::hash::FastMap;
use crate::ptr::{PArray, PPtr};
use crate::stm::persist::{CopyCx, Made, Persist};
use crate::stm::tvar::TVarInner;
use crate::stm::vars::VarCell;
use crate::stm::word;
use crate::Persistent;
use crossbeam_epoch::Guard;
use std::any::Any;
use std::cell::{Cell, OnceCell, RefCell};
use std::mem::{size_of, ManuallyDrop};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

pub(super) struct Read {
    pub(super) word: usize,
    pub(super) version: u64,
    pub(super) epoch: u16,
}

pub(super) trait Pending {
    fn materialize(&self, cx: &mut CopyCx<'_>) -> Result<Bytes>;
}

pub(super) struct PendingVal<T>(T);

impl<T: Persist> Pending for PendingVal<T> {
    fn materialize(&self, cx: &mut CopyCx<'_>) -> Result<Bytes> {
        Ok(Bytes::of(&self.0.persist(cx)?))
    }
}

/// A value's bytes (at most MAX_VALUE).
#[derive(Clone, Copy)]
pub(super) struct Bytes {
    pub(super) buf: [u8; MAX_VALUE],
    pub(super) len: usize,
}

impl Bytes {
    pub(super) fn of<P: Persistent>(p: &P) -> Self {
        let mut b = Bytes { buf: [0; MAX_VALUE], len: size_of::<P>() };
        // SAFETY: len <= MAX_VALUE (checked by callers via `check_value`);
        // P is plain data, its bytes may be copied.
        unsafe { std::ptr::copy_nonoverlapping(p as *const P as *const u8, b.buf.as_mut_ptr(), b.len) };
        b
    }

    pub(super) fn get<P: Persistent>(&self) -> P {
        // SAFETY: the buffer holds size_of::<P>() bytes of a P (same type, by
        // the cell it came from); every bit pattern is a valid P.
        unsafe { std::ptr::read_unaligned(self.buf.as_ptr() as *const P) }
    }

    pub(super) fn words(&self) -> usize {
        self.len.div_ceil(8)
    }
}

pub(super) enum Kind {
    /// A persistent cell at pool offset `off`; `boxed`: its value is the
    /// pointer to a box (`boxed.rs`), and the old box is freed at commit.
    P { off: u64, value: Option<Bytes>, pending: Option<Box<dyn Pending>>, boxed: bool },
    /// A volatile TVar.
    V { cell: Arc<dyn VCell>, value: Box<dyn Any + Send + Sync> },
    /// A volatile `TWord` (`tword.rs`): the value word to install, at
    /// `word + 8`. No count: the attempt is pinned ([`STx::write_word`]).
    W { bits: u64 },
}

impl Kind {
    /// Whether this writes a volatile variable (the volatile domain's).
    #[inline]
    pub(super) fn is_volatile(&self) -> bool {
        !matches!(self, Kind::P { .. })
    }
}

pub(super) struct Write {
    pub(super) word: usize,
    pub(super) kind: Kind,
    /// The word as it was before commit locked it.
    pub(super) old: u64,
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
}

/// The large (or huge) object ([`crate::alloc::locate_containing`]'s
/// answer) that a recent write of this thread was found in, so that the
/// next write into it skips the allocator's lookup: a hash table's
/// updates write bucket heads of the same array every time, and a large
/// object's lookup is the dearest (its head's span entry, then its
/// length). Small objects are not kept: their lookup is a span entry
/// and a division, and an update rarely writes the same node in two
/// transactions.
///
/// What it keeps true: `[lo, hi)` is an answer the lookup gave when the
/// heap with id `heap` (unique per open pool) had free count `frees`
/// (`Heap::frees_seen`, read BEFORE the lookup, so a free racing it voids
/// the entry too). Until the count moves nothing was freed or swept, so
/// the object is still allocated and the lookup would give the same
/// answer for any address in `[lo, hi)`. Every use reads the count and
/// compares both. Volatile only.
#[derive(Default)]
struct Located {
    lo: u64,
    hi: u64,
    heap: u64,
    frees: u64,
}

impl Located {
    /// Whether `[addr, addr + len)` lies inside the object kept, if it is
    /// still current: `frees_seen` reads the heap's free count now.
    #[inline]
    fn holds(&self, addr: u64, len: u64, heap: &crate::alloc::Heap) -> bool {
        addr >= self.lo
            && addr.checked_add(len).is_some_and(|end| end <= self.hi)
            && self.heap == heap.id
            && (self.frees == heap.frees_seen() || crate::failpoint::planted("stm.located_ignore_frees"))
    }
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
            *self = State { located: std::mem::take(&mut self.located), ..State::default() };
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

/// A volatile cell of any type.
pub(crate) trait VCell: Send + Sync {
    fn word(&self) -> &AtomicU64;
    /// Installs the buffered value `v` (an `Arc<T>`); the caller holds the
    /// word locked and is pinned by `g`.
    fn install(&self, v: &(dyn Any + Send + Sync), g: &Guard);
}

impl<T: Clone + Send + Sync + 'static> VCell for TVarInner<T> {
    fn word(&self) -> &AtomicU64 {
        &self.word
    }
    fn install(&self, v: &(dyn Any + Send + Sync), g: &Guard) {
        if let Some(v) = v.downcast_ref::<Arc<T>>() {
            TVarInner::install(self, v, g);
        }
    }
}

impl<'p> STx<'p> {
    /// Starts an attempt; `record`: push read-set entries from the start;
    /// `keeping`: `TVar` reads take a count on their variable (`keep`).
    pub(super) fn begin(ctx: Option<PoolCtx<'p>>, record: bool, keeping: bool) -> Self {
        let st = SPARE.with(Cell::take).unwrap_or_default();
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

    // ----- persistent cells ------------------------------------------------

    #[inline]
    pub(super) fn check_cell<P: Persistent>(&self, addr: u64, max: usize) -> StmResult<()> {
        // (bounds are empty without a pool, so this never passes there)
        if cell_fits::<P>(addr, max, self.bounds) {
            return Ok(());
        }
        self.check_cell_slow::<P>(addr, max)
    }

    #[cold]
    fn check_cell_slow<P: Persistent>(&self, addr: u64, max: usize) -> StmResult<()> {
        check_cell_in::<P>(&self.ctx()?.inner.space, addr, max)
    }
}

/// The inline check of a cell of `P` at `addr` (value of at most `max`
/// bytes, 8-aligned) against heap bounds `[lo, hi)` seen when the
/// transaction began: `STx::check_cell` and the read-only transaction's.
/// False sends the caller to [`check_cell_in`] (the pool may have grown).
#[inline]
pub(super) fn cell_fits<P: Persistent>(addr: u64, max: usize, (lo, hi): (u64, u64)) -> bool {
    let need = 8 + size_of::<P>().div_ceil(8) as u64 * 8;
    size_of::<P>() <= max
        && std::mem::align_of::<P>() <= 8
        && addr % 8 == 0
        && addr >= lo
        && addr.checked_add(need).is_some_and(|end| end <= hi)
}

/// The full check of a cell at `addr` (value `P`, at most `max` bytes)
/// against the pool's current mapping, with the error: `STx::check_cell`
/// and the read-only transaction's (`rtx.rs`) slow path.
#[cold]
pub(super) fn check_cell_in<P: Persistent>(space: &crate::pool::space::Space, addr: u64, max: usize) -> StmResult<()> {
    if size_of::<P>() > max || std::mem::align_of::<P>() > 8 {
        return Err(StmError::Failed(Error::invalid(format!(
            "{} ({} bytes) does not fit a transactional variable (at most {max} bytes, 8-aligned; box it)",
            P::type_name(),
            size_of::<P>()
        ))));
    }
    let need = 8 + size_of::<P>().div_ceil(8) as u64 * 8;
    // Outside the bounds seen at begin: the pool may have grown since.
    if addr % 8 != 0 || addr < space.base() + crate::format::HEAP_OFF || !space.contains(addr, need) {
        return Err(StmError::Failed(STx::foreign_or_bad(space, addr)));
    }
    Ok(())
}

/// The element count of the array of `T` at `addr` from its header, if
/// header and elements lie inside heap bounds `[lo, hi)` seen when the
/// transaction began and the header carries the object tag and the array
/// flag: `STx::array_len`'s and the read-only transaction's inline path.
/// None sends the caller to [`array_len_in`] (the pool may have grown).
#[inline]
pub(super) fn array_len_within<T: Persistent>(addr: u64, (lo, hi): (u64, u64)) -> Option<u64> {
    if addr < lo + OBJ_HEADER || addr > hi {
        return None;
    }
    // SAFETY: [addr - 16, addr) lies inside the heap's bounds seen when the
    // transaction began, which stay mapped while the pool is borrowed; an
    // ObjHeader is plain data, any bit pattern is valid.
    let h: ObjHeader = unsafe { std::ptr::read_unaligned((addr - OBJ_HEADER) as *const ObjHeader) };
    let fits = h.count.checked_mul(size_of::<T>() as u64).and_then(|b| addr.checked_add(b)).is_some_and(|end| end <= hi);
    (h.flags & OBJ_TAG_MASK == OBJ_TAG && h.flags & OBJ_ARRAY != 0 && fits).then_some(h.count)
}

/// The element count of the array of `T` at `addr` against the pool's
/// current mapping, with the error (`BadPointer`).
#[cold]
pub(super) fn array_len_in<T: Persistent>(space: &crate::pool::space::Space, addr: u64) -> Result<u64> {
    let bad = || Error::BadPointer { addr };
    let off = addr.checked_sub(space.base() + OBJ_HEADER).ok_or_else(bad)?;
    let h: ObjHeader = space.read(off).map_err(|_| bad())?;
    let fits = h.count.checked_mul(size_of::<T>() as u64).is_some_and(|b| space.contains(addr, b));
    if h.flags & OBJ_TAG_MASK != OBJ_TAG || h.flags & OBJ_ARRAY == 0 || !fits {
        return Err(bad());
    }
    Ok(h.count)
}

impl<'p> STx<'p> {
    /// The error for a cell outside this pool: `CrossPool` naming both
    /// pools when another open pool holds it (one transaction uses one
    /// pool), else `BadPointer`.
    #[cold]
    pub(super) fn foreign_or_bad(space: &crate::pool::space::Space, addr: u64) -> Error {
        let outside = addr < space.base() || addr >= space.base() + space.map.reserved();
        match super::pool_state::owner_of(addr).filter(|_| outside) {
            Some(other) => Error::CrossPool { pool: space.path.clone(), other },
            None => Error::BadPointer { addr },
        }
    }

    /// Reads the cell at `addr` (value of at most `max` bytes). A value of
    /// at most 8 bytes (a `PTField`, a link, a counter) that this attempt
    /// has not written takes the inlined one-word path: bounds check, the
    /// write filter's bit (`STx::wbits`: clear for a cell not written,
    /// so an update's reads after its first write scan nothing), then
    /// [`STx::stable_word`]'s one pass of the seqlock read. Anything else
    /// (a locked word, a version newer than the snapshot, a word that
    /// moved, a cell outside the bounds seen at begin) takes the full
    /// read, [`STx::read_cell_any`], out of line.
    #[inline]
    pub(crate) fn read_cell<P: Persistent>(&self, addr: u64, max: usize) -> StmResult<P> {
        if size_of::<P>() <= 8 && !self.by_value && self.wbits.get() & wbit(addr as usize) == 0 && cell_fits::<P>(addr, max, self.bounds) {
            if let Some((v, version)) = self.stable_word(addr) {
                self.record_read(addr as usize, version, self.epoch);
                // SAFETY: P is at most 8 bytes (above); `v` holds its bytes
                // as read, and every bit pattern is a valid P.
                return Ok(unsafe { std::ptr::read_unaligned(&v as *const u64 as *const P) });
            }
        }
        self.read_cell_any(addr, max)
    }

    /// One pass of the seqlock read of the one-word cell at `addr`
    /// (checked by the caller to lie inside the bounds seen at begin,
    /// 8-aligned): the lock word, unlocked and not newer than the
    /// snapshot; the value; the lock word again, unchanged. Returns the
    /// value and the version, or None for the full read to decide (spin,
    /// extend the snapshot, or conflict).
    #[inline(always)]
    fn stable_word(&self, addr: u64) -> Option<(u64, u64)> {
        // SAFETY: the caller checked [addr, addr+16) against the heap's
        // bounds seen at begin (mapped while the pool is borrowed for 'p),
        // and addr 8-aligned.
        let w = unsafe { word_at(addr as usize) };
        let w1 = w.load(Ordering::Acquire);
        if word::is_locked(w1, self.epoch) {
            return None;
        }
        if word::version(w1) > self.rv.get() && !crate::failpoint::planted("stm.fast_read_ignores_snapshot") {
            return None;
        }
        // SAFETY: as above, the value word at addr + 8.
        let v = unsafe { word_at(addr as usize + 8) }.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        (w.load(Ordering::Relaxed) == w1).then_some((v, word::version(w1)))
    }

    /// [`STx::read_cell`] for any value size, own writes and `Coarse`.
    #[inline(never)]
    fn read_cell_any<P: Persistent>(&self, addr: u64, max: usize) -> StmResult<P> {
        self.check_cell::<P>(addr, max)?;
        if let Some(b) = self.own_write(addr as usize)? {
            return Ok(b.get());
        }
        let epoch = self.epoch();
        let n = size_of::<P>().div_ceil(8);
        let mut words = [0u64; MAX_VALUE / 8];
        self.read_versioned(addr as usize, epoch, || {
            for (i, w) in words.iter_mut().enumerate().take(n) {
                // SAFETY: check_cell proved [addr, addr+8+8n) is inside the
                // mapping and addr 8-aligned; the pool is borrowed for 'p.
                *w = unsafe { word_at(addr as usize + 8 + 8 * i) }.load(Ordering::Relaxed);
            }
        })?;
        if self.by_value {
            self.saw_bytes::<P>(&words[..n]);
        }
        // SAFETY: `words` holds at least size_of::<P>() bytes of a consistent
        // snapshot of the cell's value; every bit pattern is a valid P.
        Ok(unsafe { std::ptr::read_unaligned(words.as_ptr() as *const P) })
    }

    /// Reads a field that is written only while its object is private to
    /// the transaction that made it (a tree node's key, set when the node
    /// is allocated): the value as of the snapshot, with no read-set entry,
    /// so neither later reads nor commit validate it again. It costs the
    /// seqlock read alone. A field that committed transactions do write
    /// must be read with [`STx::read`]: a change to it after this read is
    /// not noticed (memory stays safe, serialisability of that field does
    /// not).
    ///
    /// A field this attempt has not written takes `STx::stable_word`'s
    /// inline pass; anything else the full read, out of line.
    #[inline]
    pub fn read_immutable<T: Persistent + Persist<P = T>>(&self, field: &crate::stm::FieldRef<T>) -> StmResult<T> {
        let addr = field.addr();
        if size_of::<T>() <= 8 && self.wbits.get() & wbit(addr as usize) == 0 && cell_fits::<T>(addr, 8, self.bounds) {
            if let Some((v, _)) = self.stable_word(addr) {
                // SAFETY: T is at most 8 bytes (above); `v` holds its bytes
                // as read, and every bit pattern is a valid T.
                return Ok(unsafe { std::ptr::read_unaligned(&v as *const u64 as *const T) });
            }
        }
        self.read_immutable_any(addr)
    }

    /// [`STx::read_immutable`]'s full read: bounds, own writes, the
    /// seqlock read with its spin and snapshot extension.
    #[inline(never)]
    fn read_immutable_any<T: Persistent>(&self, addr: u64) -> StmResult<T> {
        self.check_cell::<T>(addr, 8)?;
        if let Some(b) = self.own_write(addr as usize)? {
            return Ok(b.get());
        }
        let mut v = 0u64;
        self.read_stable(addr as usize, self.epoch, || {
            // SAFETY: check_cell proved [addr, addr+16) is inside the
            // mapping and addr 8-aligned; the pool is borrowed for 'p.
            v = unsafe { word_at(addr as usize + 8) }.load(Ordering::Relaxed);
        })?;
        // SAFETY: T is at most 8 bytes (check_cell); `v` holds its bytes
        // as read, and every bit pattern is a valid T.
        Ok(unsafe { std::ptr::read_unaligned(&v as *const u64 as *const T) })
    }

    /// This transaction's own pending value for the cell, materialised.
    #[inline]
    pub(super) fn own_write(&self, word: usize) -> StmResult<Option<Bytes>> {
        if self.wbits.get() & wbit(word) == 0 {
            return Ok(None);
        }
        self.own_write_slow(word)
    }

    fn own_write_slow(&self, word: usize) -> StmResult<Option<Bytes>> {
        let mut st = self.st.borrow_mut();
        let Some(i) = self.find(&st, word) else { return Ok(None) };
        let st = &mut *st;
        match &mut st.writes[i].kind {
            Kind::P { value: Some(b), .. } => Ok(Some(*b)),
            Kind::P { value, pending, .. } => {
                let ctx = self.ctx()?;
                let mut cx = CopyCx::new(ctx.inner, ctx.cache());
                let p = pending.as_ref().ok_or_else(|| Error::corrupt("write without value"))?;
                let r = p.materialize(&mut cx);
                st.made.append(&mut cx.made);
                let b = r?;
                *value = Some(b);
                Ok(Some(b))
            }
            Kind::V { .. } | Kind::W { .. } => Err(StmError::Failed(Error::invalid("a volatile variable was read as a persistent cell"))),
        }
    }

    /// The seqlock read of one variable: `load` copies the value while the
    /// word is stable and not newer than the snapshot.
    #[inline]
    pub(super) fn read_versioned(&self, word: usize, epoch: u16, load: impl FnMut()) -> StmResult<()> {
        let version = self.read_stable(word, epoch, load)?;
        self.record_read(word, version, epoch);
        Ok(())
    }

    /// [`STx::read_versioned`] of a volatile variable (epoch 0, checked
    /// against the volatile domain's snapshot).
    #[inline]
    pub(super) fn read_versioned_v(&self, word: usize, load: impl FnMut()) -> StmResult<()> {
        self.read_v.set(true);
        let version = self.read_stable_in(word, 0, &self.rv_v, load)?;
        self.record_read(word, version, 0);
        Ok(())
    }

    #[inline]
    fn record_read(&self, word: usize, version: u64, epoch: u16) {
        if self.rec.get() {
            self.st.borrow_mut().reads.push(Read { word, version, epoch });
        } else {
            self.unrec.set(true);
        }
    }

    /// The seqlock read without a read-set entry: returns the version read.
    #[inline]
    fn read_stable(&self, word: usize, epoch: u16, load: impl FnMut()) -> StmResult<u64> {
        self.read_stable_in(word, epoch, &self.rv, load)
    }

    /// The seqlock read against snapshot `rv` (the variable's domain's).
    #[inline]
    fn read_stable_in(&self, word: usize, epoch: u16, rv: &Cell<u64>, mut load: impl FnMut()) -> StmResult<u64> {
        // SAFETY: callers pass a checked pool cell's word (check_cell) or a
        // TVar's word kept alive by `keep` and by the caller's Arc.
        let w = unsafe { word_at(word) };
        let mut spins = 0u32;
        loop {
            let w1 = w.load(Ordering::Acquire);
            if word::is_locked(w1, epoch) {
                spins += 1;
                if spins > 256 {
                    return Err(StmError::Conflict);
                }
                std::hint::spin_loop();
                continue;
            }
            if word::version(w1) > rv.get() {
                if self.unrec.get() {
                    // Unrecorded reads cannot be revalidated: run again.
                    return Err(StmError::Conflict);
                }
                self.extend()?;
                continue;
            }
            load();
            fence(Ordering::Acquire);
            if w.load(Ordering::Relaxed) == w1 {
                return Ok(word::version(w1));
            }
        }
    }

    /// Moves both snapshots forward if everything read is still current
    /// (both clocks sampled before the reads are checked).
    pub(super) fn extend(&self) -> StmResult<()> {
        let now_v = VOLATILE.now();
        let now = self.ctx.as_ref().map_or(now_v, |c| c.domain().now());
        if !self.reads_valid(false) {
            return Err(StmError::Conflict);
        }
        self.rv.set(now);
        self.rv_v.set(now_v);
        Ok(())
    }

    /// Whether every read is still current. `locked_own`: this transaction
    /// holds its write locks (commit), so a locked word of its write set is
    /// its own; before commit, any locked word is someone else's.
    pub(super) fn reads_valid(&self, locked_own: bool) -> bool {
        let st = self.st.borrow();
        // Through the emulated HTM when routed (`runtime::word_load`).
        let via = crate::stm::runtime::route();
        st.reads.iter().all(|r| {
            // SAFETY: a read-set word: a checked pool cell, or a TVar whose
            // Arc the read holds (`_keep`).
            let w = crate::stm::runtime::word_load(via, unsafe { word_at(r.word) });
            let mine = locked_own && self.find(&st, r.word).is_some();
            word::version(w) == r.version && (!word::is_locked(w, r.epoch) || mine)
        })
    }

    pub(crate) fn write_cell<T: Persist>(&self, addr: u64, max: usize, v: T) -> StmResult<()> {
        self.check_cell::<T::P>(addr, max)?;
        // The write set is searched once, for the offset and the entry.
        let found = self.find(&self.st.borrow(), addr as usize);
        let off = self.write_offset(addr, size_of::<T::P>() as u64, found)?;
        let kind = match v.plain() {
            Some(p) => Kind::P { off, value: Some(Bytes::of(&p)), pending: None, boxed: false },
            None => Kind::P { off, value: None, pending: Some(Box::new(PendingVal(v))), boxed: false },
        };
        self.put_found(addr as usize, kind, found);
        Ok(())
    }

    /// [`STx::cell_offset`] for a write, without asking the allocator
    /// when this attempt already knows the answer: the cell is in its
    /// write set (checked then, for a value at least as long), or lies in
    /// the object the attempt allocated last (`made`: its slot is known).
    /// `found`: the cell's write-set entry, if any.
    #[inline(always)]
    fn write_offset(&self, addr: u64, len: u64, found: Option<usize>) -> StmResult<u64> {
        let known = {
            let st = self.st.borrow();
            if found.is_none() && st.made.is_empty() {
                None
            } else {
                known_cell(&st, found, addr, len, self.bounds.0.wrapping_sub(crate::format::HEAP_OFF))
            }
        };
        match known {
            Some(off) => Ok(off),
            None => self.cell_offset(addr, len),
        }
    }

    /// The pool offset of the cell at `addr`, checked to lie, with a value
    /// of `len` bytes, inside one allocated object.
    /// A large object a recent write of this thread was found in
    /// answers without the allocator if the heap freed nothing since
    /// (`Located`).
    pub(super) fn cell_offset(&self, addr: u64, len: u64) -> StmResult<u64> {
        let inner = self.ctx()?.inner;
        let space = &inner.space;
        if self.st.borrow().located.holds(addr, 8 + len, &inner.heap) {
            return Ok(addr - space.base());
        }
        // Read before the lookup: a free from now on voids what it finds.
        let frees = inner.heap.frees_seen();
        match crate::alloc::locate_containing(space, addr) {
            Some((p, loc)) if addr >= p && addr + 8 + len <= p + loc.capacity() => {
                if !matches!(loc, crate::alloc::Loc::Small { .. }) {
                    self.st.borrow_mut().located = Located { lo: p, hi: p + loc.capacity(), heap: inner.heap.id, frees };
                }
                Ok(addr - space.base())
            }
            _ => Err(StmError::Failed(Error::BadPointer { addr })),
        }
    }

    pub(super) fn put(&self, word: usize, kind: Kind) {
        let found = self.find(&self.st.borrow(), word);
        self.put_found(word, kind, found);
    }

    /// [`STx::put`] with the word's write-set entry already looked up
    /// (`found`, nothing changed the set since).
    #[inline]
    fn put_found(&self, word: usize, kind: Kind, found: Option<usize>) {
        // An update from here on: record the reads that follow.
        self.rec.set(true);
        let mut st = self.st.borrow_mut();
        let w = Write { word, kind, old: 0 };
        match found {
            Some(i) => {
                let old = std::mem::replace(&mut st.writes[i], w);
                if let Some(f) = st.frames.last_mut() {
                    if i < f.len {
                        f.replaced.push((i, old));
                    }
                }
            }
            None => {
                if !crate::failpoint::planted("stm.write_filter_unset") {
                    self.wbits.set(self.wbits.get() | wbit(word));
                }
                st.writes.push(w);
                let i = st.writes.len() - 1;
                if st.writes.len() > 16 {
                    if st.index.is_empty() {
                        rebuild_index(&mut st);
                    } else {
                        st.index.insert(word, i);
                    }
                }
            }
        }
    }

    /// Allocates a cell object holding `init` (for `PTVar::new`).
    pub(crate) fn new_cell<T: Persist>(&self, init: &T) -> StmResult<u64> {
        self.new_cell_with(|cx| match init.plain() {
            Some(p) => Ok(p),
            None => init.persist(cx),
        })
    }

    /// Allocates a cell object holding the value `make` copies into the
    /// pool (with the commit's copy context).
    pub(super) fn new_cell_with<P: Persistent>(&self, make: impl FnOnce(&mut CopyCx<'_>) -> Result<P>) -> StmResult<u64> {
        let ctx = self.ctx()?;
        if size_of::<P>() > MAX_VALUE || std::mem::align_of::<P>() > 8 {
            self.check_cell::<P>(0, MAX_VALUE)?;
        }
        let mut cx = CopyCx::new(ctx.inner, ctx.cache());
        let r = (|| {
            let p = make(&mut cx)?;
            let id = ctx.local.pool_type_id::<VarCell<P>>(ctx.inner)?;
            // 16- or 48-byte payloads land in classes 32/64: the cell never
            // straddles a cache line (see vars.rs).
            let payload = if 8 + size_of::<P>() <= 16 { 16 } else { 48 };
            let space = &ctx.inner.space;
            let (addr, loc) = ctx.inner.heap.alloc(space, ctx.cache(), payload, id, 0, 1)?;
            cx.made.push(Made { loc, off: addr - OBJ_HEADER - space.base(), len: payload + OBJ_HEADER, mutable: true });
            // SAFETY: a fresh slot of `payload` >= size_of::<VarCell<P>>() bytes.
            unsafe {
                std::ptr::write_bytes(addr as *mut u8, 0, payload as usize);
                std::ptr::write(addr as *mut VarCell<P>, VarCell { word: 0, value: p });
            }
            Ok(addr)
        })();
        self.st.borrow_mut().made.append(&mut cx.made);
        r.map_err(StmError::Failed)
    }

    /// Allocates a pool object holding `v` (a node with embedded
    /// [`crate::stm::PTField`]s, say). It is private to this transaction until it
    /// commits: flushed before the commit fence, freed if the attempt
    /// aborts, garbage for the GC if nothing links it.
    pub fn alloc<T: Persistent>(&self, v: T) -> StmResult<PPtr<T>> {
        // The type id from the thread's cache (`Local::pool_type_id`), the
        // object straight onto the reused `made` list: no lock, no heap
        // allocation besides the object.
        let ctx = self.ctx()?;
        let (inner, space) = (ctx.inner, &ctx.inner.space);
        let id = ctx.local.pool_type_id::<T>(inner)?;
        let payload = size_of::<T>() as u64;
        let (addr, loc) = inner.heap.alloc(space, ctx.cache(), payload, id, 0, 1)?;
        // SAFETY: a fresh slot of at least size_of::<T>() bytes, 16-aligned,
        // inside the mapping, not yet reachable by anyone else.
        unsafe { std::ptr::write(addr as *mut T, v) };
        let made = Made { loc, off: addr - OBJ_HEADER - space.base(), len: payload + OBJ_HEADER, mutable: true };
        self.st.borrow_mut().made.push(made);
        Ok(PPtr::from_addr(addr))
    }

    // ----- volatile TVars --------------------------------------------------

    /// Reads a `TVar` (`tvar.rs`): its buffered write if any, else the
    /// seqlock read of its lock word around its value word, then the value
    /// (inline bits, or cloned from behind the pointer; the attempt is
    /// pinned). No lock, no count taken, no allocation: the read set keeps
    /// the bare word, alive while the attempt is pinned.
    #[inline]
    pub(crate) fn read_tvar<T: Clone + Send + Sync + 'static>(&self, v: &Arc<TVarInner<T>>) -> StmResult<T> {
        if self.by_value {
            return self.read_tvar_arc(v).map(|a| (*a).clone());
        }
        let w = &v.word as *const AtomicU64 as usize;
        if let Some(x) = self.own_volatile::<T>(w) {
            return Ok(x);
        }
        let g = self.pin();
        if self.in_hw() {
            // SAFETY: loaded from `v` inside `value_of`'s closure while `g`
            // (pinned before the hardware transaction began) is pinned.
            return self.read_hw(&v.word, || unsafe { v.value_of(v.bits(), g) });
        }
        let b = self.read_bits(&v.word, || v.bits(), || v.clone() as Arc<dyn Any + Send + Sync>)?;
        // SAFETY: `b` was loaded from `v` while `g` is pinned (above).
        Ok(unsafe { v.value_of(b, g) })
    }

    /// The seqlock read of a volatile variable's lock word `word` around
    /// `load` (its value word), recorded in the read set as a bare word:
    /// the caller pinned the attempt first, and the variable's release is
    /// deferred past it. Only a keeping attempt (on its way to a `retry`'s
    /// unpinned wait) takes a count, `keep`.
    #[inline]
    fn read_bits(&self, word: &AtomicU64, load: impl Fn() -> u64, keep: impl FnOnce() -> Arc<dyn Any + Send + Sync>) -> StmResult<u64> {
        let mut b = 0u64;
        self.read_versioned_v(word as *const AtomicU64 as usize, || b = load())?;
        if self.keeping {
            self.st.borrow_mut().keep.push(keep());
        } else if self.rec.get() {
            self.unkept.set(true);
        }
        Ok(b)
    }

    /// Reads a `TWord` (`tword.rs`): its buffered write if any, else, with
    /// the attempt pinned, the seqlock read of its lock word around its
    /// value word (the bits returned). Under `Coarse` the bits read are
    /// recorded for validation by value, as a plain pool value's are.
    #[inline]
    pub(crate) fn read_word<T: crate::stm::WordValue>(&self, r: &crate::stm::TWordRef<'_, T>) -> StmResult<u64> {
        let c = r.cell();
        let w = &c.word as *const AtomicU64 as usize;
        if let Some(b) = self.own_word(w) {
            return Ok(b);
        }
        self.pin();
        if self.in_hw() {
            return self.read_hw(&c.word, || c.bits());
        }
        let b = self.read_bits(&c.word, || c.bits(), || r.keep())?;
        if self.by_value && self.rec.get() {
            self.saw_bytes::<u64>(&[b]);
        }
        Ok(b)
    }

    /// This attempt's buffered write of the `TWord` whose lock word is `w`.
    #[inline]
    fn own_word(&self, w: usize) -> Option<u64> {
        let st = self.st.borrow();
        if st.writes.is_empty() {
            return None;
        }
        match &st.writes[self.find(&st, w)?].kind {
            Kind::W { bits } => Some(*bits),
            _ => None,
        }
    }

    /// Buffers a write of the value word `bits` to the `TWord` whose lock
    /// word is `word`. The attempt is pinned first: the word's box is
    /// released only after it (`tword.rs`, 3), so the write set keeps the
    /// bare address until commit.
    #[inline]
    pub(crate) fn write_word(&self, word: &AtomicU64, bits: u64) {
        self.pin();
        self.put(word as *const AtomicU64 as usize, Kind::W { bits });
    }

    /// This attempt's buffered write of the volatile word `w`, if any.
    #[inline]
    fn own_volatile<T: Clone + 'static>(&self, w: usize) -> Option<T> {
        let st = self.st.borrow();
        if st.writes.is_empty() {
            return None;
        }
        match &st.writes[self.find(&st, w)?].kind {
            Kind::V { value, .. } => value.downcast_ref::<Arc<T>>().map(|a| (**a).clone()),
            Kind::P { .. } | Kind::W { .. } => None,
        }
    }

    /// Reads a `TField` inside an `Arc`-owned struct: its buffered write if
    /// any, else the seqlock read of `word` around `load`, with `keep` (the
    /// owner, which keeps `word` alive) in the read set so validation may
    /// dereference it. (`TVar`s take [`STx::read_tvar`]: no count.)
    pub(crate) fn read_volatile<T: Clone + Send + Sync + 'static, K: Any + Send + Sync>(
        &self,
        word: &AtomicU64,
        load: impl Fn() -> T,
        keep: impl FnOnce() -> Arc<K>,
    ) -> StmResult<T> {
        let w = word as *const AtomicU64 as usize;
        if let Some(x) = self.own_volatile::<T>(w) {
            return Ok(x);
        }
        if self.in_hw() {
            return self.read_hw(word, load);
        }
        let mut out = None;
        self.read_versioned_v(w, || out = Some(load()))?;
        if self.rec.get() {
            self.st.borrow_mut().keep.push(keep());
        }
        Ok(out.ok_or_else(|| Error::corrupt("volatile read produced nothing"))?)
    }

    pub(crate) fn write_tvar<T: Clone + Send + Sync + 'static>(&self, v: &Arc<TVarInner<T>>, x: T) -> StmResult<()> {
        let cell: Arc<dyn VCell> = v.clone();
        self.write_volatile(cell, x);
        Ok(())
    }

    /// Buffers a write of `x` to the volatile cell `cell` (installed at
    /// commit; `cell` keeps its lock word alive until then).
    pub(crate) fn write_volatile<T: Clone + Send + Sync + 'static>(&self, cell: Arc<dyn VCell>, x: T) {
        let word = cell.word() as *const AtomicU64 as usize;
        self.put(word, Kind::V { cell, value: Box::new(Arc::new(x)) });
    }

    // ----- pool reads for PStr / PSlice ---------------------------------------

    /// The bytes of array `a`, borrowed for the transaction's life.
    pub(crate) fn bytes_of(&self, a: PArray<u8>) -> Result<&[u8]> {
        self.slice_of(a)
    }

    /// The elements of array `a`, borrowed for the transaction's life.
    pub(crate) fn slice_of<T: Persistent>(&self, a: PArray<T>) -> Result<&[T]> {
        let ctx = self.ctx().map_err(|_| Error::invalid("pool data needs Pool::atomically"))?;
        let space = &ctx.inner.space;
        let loc = crate::alloc::locate(space, a.addr()).ok_or(Error::BadPointer { addr: a.addr() })?;
        let h: ObjHeader = space.read(a.addr() - OBJ_HEADER - space.base())?;
        let fits = h.count.checked_mul(size_of::<T>() as u64).is_some_and(|b| b <= loc.capacity());
        if h.flags & OBJ_TAG_MASK != OBJ_TAG || h.flags & OBJ_ARRAY == 0 || !fits || a.addr() % std::mem::align_of::<T>() as u64 != 0 {
            return Err(Error::BadPointer { addr: a.addr() });
        }
        // SAFETY: the array lies in its slot inside the mapping (checked);
        // committed copies are immutable, and the GC cannot free them while
        // a transaction runs (it waits for the gate this transaction holds).
        Ok(unsafe { std::slice::from_raw_parts(a.addr() as *const T, h.count as usize) })
    }

    /// The element count of array `a` from its header alone (no allocator
    /// lookup, unlike [`STx::slice_of`]): for indexing into an array of
    /// `PTField`s whose every read is bounds-checked itself (`check_cell`).
    /// The header must carry the object tag and the array flag, and the
    /// elements must lie inside the mapped pool.
    #[inline]
    pub(crate) fn array_len<T: Persistent>(&self, a: PArray<T>) -> Result<u64> {
        // (bounds are empty without a pool, so this never passes there)
        if let Some(n) = array_len_within::<T>(a.addr(), self.bounds) {
            return Ok(n);
        }
        self.array_len_slow(a)
    }

    /// [`STx::array_len`] against the current mapping (the pool may have
    /// grown since begin), with the error.
    #[cold]
    fn array_len_slow<T: Persistent>(&self, a: PArray<T>) -> Result<u64> {
        let ctx = self.ctx().map_err(|_| Error::invalid("pool data needs Pool::atomically"))?;
        array_len_in::<T>(&ctx.inner.space, a.addr())
    }

    /// Frees what this attempt allocated (it was never linked).
    pub(super) fn discard(&self) {
        let mut st = self.st.borrow_mut();
        if let Some(ctx) = self.ctx.as_ref() {
            for m in st.made.drain(..) {
                let _ = ctx.inner.heap.free(&ctx.inner.space, ctx.cache(), m.loc);
            }
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

/// The pool offset of the cell at `addr` (value of `len` bytes) if `st`
/// shows it lies inside one allocated object: write-set entry `found` is
/// that cell with a value of at least `len` bytes (its offset was checked
/// when it was written), or the object this attempt allocated last
/// (`made`: one comparison pair, not a scan; a write into an earlier one
/// asks the allocator) holds it. `base` is the pool's base address.
#[inline]
fn known_cell(st: &State, found: Option<usize>, addr: u64, len: u64, base: u64) -> Option<u64> {
    if let Some(Kind::P { off, value: Some(b), .. }) = found.map(|i| &st.writes[i].kind) {
        if b.len as u64 >= len {
            return Some(*off);
        }
    }
    let off = addr.checked_sub(base)?;
    if crate::failpoint::planted("stm.known_cell_any") && !st.made.is_empty() {
        return Some(off);
    }
    let inside = |m: &Made| m.mutable && off >= m.off + OBJ_HEADER && off + 8 + len <= m.off + m.len;
    st.made.last().is_some_and(inside).then_some(off)
}

pub(super) fn rebuild_index(st: &mut State) {
    st.index.clear();
    if st.writes.len() > 16 {
        for (i, w) in st.writes.iter().enumerate() {
            st.index.insert(w.word, i);
        }
    }
}
