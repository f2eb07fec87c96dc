//! The STM engine: transactions ([`STx`]), the commit pipeline, the run loop
//! ([`atomically`], `Pool::atomically`) with retry and contention management.
//!
//! Commit, as a numbered pipeline (one fence for an update commit, none for
//! a read-only one):
//!
//! 1. copy the pending values into the pool (`Persist`), outside any lock;
//! 2. lock the write set (CAS on each lock word; a held lock aborts);
//! 3. take the commit timestamp `wv` from the global clock;
//! 4. validate the read set (skipped when nobody committed since we began);
//! 5. write the redo record, flush it and the copies;
//! 6. ONE fence: the record and the copies are durable — and so are the
//!    in-place updates of this thread's previous commit, whose log half is
//!    reused next;
//! 7. store the new values in place, each followed by its word (new version,
//!    unlocked), flush them without a fence; wake retrying transactions.
//!
//! A crash before 6 loses the commit whole; after 6 recovery replays it.
//! Reads are validated as they happen (TL2, with LSA-style extension of the
//! snapshot when a newer version is met), so user code never sees an
//! inconsistent state.

use super::persist::{CopyCx, Made, Persist};
use super::redo::{self, StmMeta, HALF, META_ROOT};
use super::vars::{TVarInner, VarCell};
use super::wait::{self, Bloom};
use super::word;
use crate::alloc::cache::CacheCell;
use crate::error::{Error, Result};
use crate::format::{ObjHeader, OBJ_ARRAY, OBJ_HEADER, OBJ_TAG, OBJ_TAG_MASK};
use crate::hash::FastMap;
use crate::pool::PoolInner;
use crate::ptr::{PArray, PPtr};
use crate::{Persistent, Pool};
use parking_lot::{Mutex, RwLock};
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::mem::size_of;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

/// The global version clock (shared by volatile and persistent variables;
/// raised past every pool's reservation when the pool is first used).
static CLOCK: AtomicU64 = AtomicU64::new(1);
/// Held shared by every commit; a transaction that keeps losing holds it
/// exclusively for a whole attempt, so it cannot lose again.
static SERIAL: RwLock<()> = parking_lot::const_rwlock(());
/// Conflicts in a row after which a transaction runs serially.
const SERIAL_AFTER: u32 = 8;
/// Versions reserved (persisted) at a time.
const RESERVE: u64 = 1 << 20;
/// Largest persistent value in a cell, bytes.
const MAX_VALUE: usize = 40;

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

/// Per-pool STM state (volatile).
pub(crate) struct StmPool {
    meta_off: u64,
    epoch: u16,
    /// Versions below this are covered by the persisted reservation.
    reserved: Mutex<u64>,
    reserved_fast: AtomicU64,
    logs: Mutex<Vec<Arc<Mutex<ThreadLog>>>>,
}

/// One thread's redo log in one pool.
pub(crate) struct ThreadLog {
    /// Pool offset of the log bytes (two halves).
    log_off: u64,
    commits: u64,
    /// Cells stored in place since this thread's last fence: (offset, bytes).
    unfenced: Vec<(u64, u64)>,
    buf: Vec<u8>,
}

thread_local! {
    static MY_LOGS: RefCell<Vec<(u64, Arc<Mutex<ThreadLog>>)>> = const { RefCell::new(Vec::new()) };
    static IN_TX: Cell<bool> = const { Cell::new(false) };
    static STATS: Cell<StmStats> = const { Cell::new(StmStats { conflicts: 0, retries: 0, serial: 0 }) };
}

/// Counts kept by the calling thread's transaction loop since the thread
/// started, for benchmarks (take deltas, as with `engram::pmem::counters`).
/// Thread-local, so counting adds no shared write to a commit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StmStats {
    /// Attempts abandoned on a conflict (a failed read validation or lock)
    /// and run again.
    pub conflicts: u64,
    /// Attempts that called [`STx::retry`] and waited for a change.
    pub retries: u64,
    /// Attempts run serially, after `SERIAL_AFTER` conflicts in a row.
    pub serial: u64,
}

/// The calling thread's [`StmStats`].
pub fn stats() -> StmStats {
    STATS.with(Cell::get)
}

fn count_stat(f: impl FnOnce(&mut StmStats)) {
    STATS.with(|c| {
        let mut s = c.get();
        f(&mut s);
        c.set(s);
    });
}

/// What a pool-bound transaction needs.
struct PoolCtx<'p> {
    inner: &'p PoolInner,
    stm: Arc<StmPool>,
    log: Arc<Mutex<ThreadLog>>,
    cache: Arc<CacheCell>,
}

struct Read {
    word: usize,
    version: u64,
    epoch: u16,
    /// Keeps a volatile TVar (and so its lock word) alive while it is in the read set.
    _keep: Option<Arc<dyn Any + Send + Sync>>,
}

trait Pending {
    fn materialize(&self, cx: &mut CopyCx<'_>) -> Result<Bytes>;
}

struct PendingVal<T>(T);

impl<T: Persist> Pending for PendingVal<T> {
    fn materialize(&self, cx: &mut CopyCx<'_>) -> Result<Bytes> {
        Ok(Bytes::of(&self.0.persist(cx)?))
    }
}

/// A value's bytes (at most MAX_VALUE).
#[derive(Clone, Copy)]
struct Bytes {
    buf: [u8; MAX_VALUE],
    len: usize,
}

impl Bytes {
    fn of<P: Persistent>(p: &P) -> Self {
        let mut b = Bytes { buf: [0; MAX_VALUE], len: size_of::<P>() };
        // SAFETY: len <= MAX_VALUE (checked by callers via `check_value`);
        // P is plain data, its bytes may be copied.
        unsafe { std::ptr::copy_nonoverlapping(p as *const P as *const u8, b.buf.as_mut_ptr(), b.len) };
        b
    }

    fn get<P: Persistent>(&self) -> P {
        // SAFETY: the buffer holds size_of::<P>() bytes of a P (same type, by
        // the cell it came from); every bit pattern is a valid P.
        unsafe { std::ptr::read_unaligned(self.buf.as_ptr() as *const P) }
    }

    fn words(&self) -> usize {
        self.len.div_ceil(8)
    }
}

enum Kind {
    /// A persistent cell at pool offset `off`.
    P { off: u64, value: Option<Bytes>, pending: Option<Box<dyn Pending>> },
    /// A volatile TVar.
    V { cell: Arc<dyn VCell>, value: Box<dyn Any + Send + Sync> },
}

struct Write {
    word: usize,
    kind: Kind,
    /// The word as it was before commit locked it.
    old: u64,
}

/// Or-else frames: where the write set stood, and entries replaced since.
struct Frame {
    len: usize,
    replaced: Vec<(usize, Write)>,
}

#[derive(Default)]
struct State {
    rv: u64,
    reads: Vec<Read>,
    writes: Vec<Write>,
    index: FastMap<usize, usize>,
    /// Objects allocated by this attempt: flushed at commit, freed on abort.
    made: Vec<Made>,
    frames: Vec<Frame>,
}

/// A running STM transaction. Obtained in [`crate::Pool::atomically`] or
/// [`atomically`]; the closure may run several times (on conflicts), so it
/// must have no effects outside the transaction.
pub struct STx<'p> {
    ctx: Option<PoolCtx<'p>>,
    st: RefCell<State>,
}

/// A volatile cell of any type.
pub(crate) trait VCell: Send + Sync {
    fn word(&self) -> &AtomicU64;
    fn install(&self, v: &(dyn Any + Send + Sync));
}

impl<T: Send + Sync + 'static> VCell for TVarInner<T> {
    fn word(&self) -> &AtomicU64 {
        &self.word
    }
    fn install(&self, v: &(dyn Any + Send + Sync)) {
        if let Some(v) = v.downcast_ref::<Arc<T>>() {
            *self.value.write() = v.clone();
        }
    }
}

fn word_at(addr: usize) -> &'static AtomicU64 {
    // SAFETY: callers pass the address of a lock word that outlives the
    // transaction: a cell in a pool the transaction borrows (validated to be
    // inside the mapping and 8-aligned), or a TVar kept alive by an Arc held
    // in the read or write set.
    unsafe { &*(addr as *const AtomicU64) }
}

impl<'p> STx<'p> {
    fn begin(ctx: Option<PoolCtx<'p>>) -> Self {
        let st = State { rv: CLOCK.load(Ordering::Acquire), ..State::default() };
        STx { ctx, st: RefCell::new(st) }
    }

    fn epoch(&self) -> u16 {
        self.ctx.as_ref().map_or(0, |c| c.stm.epoch)
    }

    fn ctx(&self) -> StmResult<&PoolCtx<'p>> {
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

    /// Reads `var`.
    pub fn read<V: super::Var>(&self, var: &V) -> StmResult<V::Out> {
        var.read_in(self)
    }

    /// Writes `v` into `var` (visible to this transaction now, to others
    /// when it commits; ordinary values are copied into the pool then).
    pub fn write<V: super::Var>(&self, var: &V, v: V::In) -> StmResult<()> {
        var.write_in(self, v)
    }

    /// Reads, changes and writes back a plain persistent variable.
    pub fn modify<T: Persist<P = T> + Persistent>(&self, var: &super::PTVar<T>, f: impl FnOnce(T) -> T) -> StmResult<()> {
        let v = self.read(var)?;
        self.write(var, f(v))
    }

    fn find(&self, st: &State, word: usize) -> Option<usize> {
        if st.writes.len() <= 16 {
            st.writes.iter().position(|w| w.word == word)
        } else {
            st.index.get(&word).copied()
        }
    }

    // ----- persistent cells ------------------------------------------------

    fn check_cell<P: Persistent>(&self, addr: u64, max: usize) -> StmResult<()> {
        let ctx = self.ctx()?;
        if size_of::<P>() > max || std::mem::align_of::<P>() > 8 {
            return Err(StmError::Failed(Error::invalid(format!(
                "{} ({} bytes) does not fit a transactional variable (at most {max} bytes, 8-aligned; box it)",
                P::type_name(),
                size_of::<P>()
            ))));
        }
        let space = &ctx.inner.space;
        let need = 8 + size_of::<P>().div_ceil(8) as u64 * 8;
        if addr % 8 != 0 || addr < space.base() + crate::format::HEAP_OFF || !space.contains(addr, need) {
            return Err(StmError::Failed(Error::BadPointer { addr }));
        }
        Ok(())
    }

    pub(crate) fn read_cell<P: Persistent>(&self, addr: u64, max: usize) -> StmResult<P> {
        self.check_cell::<P>(addr, max)?;
        if let Some(b) = self.own_write(addr as usize)? {
            return Ok(b.get());
        }
        let epoch = self.epoch();
        let n = size_of::<P>().div_ceil(8);
        let mut words = [0u64; MAX_VALUE / 8];
        self.read_versioned(addr as usize, epoch, None, || {
            for (i, w) in words.iter_mut().enumerate().take(n) {
                *w = word_at(addr as usize + 8 + 8 * i).load(Ordering::Relaxed);
            }
        })?;
        // SAFETY: `words` holds at least size_of::<P>() bytes of a consistent
        // snapshot of the cell's value; every bit pattern is a valid P.
        Ok(unsafe { std::ptr::read_unaligned(words.as_ptr() as *const P) })
    }

    /// This transaction's own pending value for the cell, materialised.
    fn own_write(&self, word: usize) -> StmResult<Option<Bytes>> {
        let mut st = self.st.borrow_mut();
        let Some(i) = self.find(&st, word) else { return Ok(None) };
        let st = &mut *st;
        match &mut st.writes[i].kind {
            Kind::P { value: Some(b), .. } => Ok(Some(*b)),
            Kind::P { value, pending, .. } => {
                let ctx = self.ctx()?;
                let mut cx = CopyCx::new(ctx.inner, &ctx.cache);
                let p = pending.as_ref().ok_or_else(|| Error::corrupt("write without value"))?;
                let r = p.materialize(&mut cx);
                st.made.append(&mut cx.made);
                let b = r?;
                *value = Some(b);
                Ok(Some(b))
            }
            Kind::V { .. } => Err(StmError::Failed(Error::invalid("a volatile TVar was read as a persistent cell"))),
        }
    }

    /// The seqlock read of one variable: `load` copies the value while the
    /// word is stable and not newer than the snapshot.
    fn read_versioned(
        &self,
        word: usize,
        epoch: u16,
        keep: Option<Arc<dyn Any + Send + Sync>>,
        mut load: impl FnMut(),
    ) -> StmResult<()> {
        let w = word_at(word);
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
            if word::version(w1) > self.st.borrow().rv {
                self.extend()?;
                continue;
            }
            load();
            fence(Ordering::Acquire);
            if w.load(Ordering::Relaxed) == w1 {
                self.st.borrow_mut().reads.push(Read { word, version: word::version(w1), epoch, _keep: keep });
                return Ok(());
            }
        }
    }

    /// Moves the snapshot forward if everything read is still current.
    fn extend(&self) -> StmResult<()> {
        let now = CLOCK.load(Ordering::Acquire);
        if !self.reads_valid(false) {
            return Err(StmError::Conflict);
        }
        self.st.borrow_mut().rv = now;
        Ok(())
    }

    /// Whether every read is still current. `locked_own`: this transaction
    /// holds its write locks (commit), so a locked word of its write set is
    /// its own; before commit, any locked word is someone else's.
    fn reads_valid(&self, locked_own: bool) -> bool {
        let st = self.st.borrow();
        st.reads.iter().all(|r| {
            let w = word_at(r.word).load(Ordering::Acquire);
            let mine = locked_own && self.find(&st, r.word).is_some();
            word::version(w) == r.version && (!word::is_locked(w, r.epoch) || mine)
        })
    }

    pub(crate) fn write_cell<T: Persist>(&self, addr: u64, max: usize, v: T) -> StmResult<()> {
        self.check_cell::<T::P>(addr, max)?;
        let ctx = self.ctx()?;
        let space = &ctx.inner.space;
        let inside = crate::alloc::locate_containing(space, addr)
            .is_some_and(|(p, loc)| addr >= p && addr + 8 + size_of::<T::P>() as u64 <= p + loc.capacity());
        if !inside {
            return Err(StmError::Failed(Error::BadPointer { addr }));
        }
        let kind = match v.plain() {
            Some(p) => Kind::P { off: addr - space.base(), value: Some(Bytes::of(&p)), pending: None },
            None => Kind::P { off: addr - space.base(), value: None, pending: Some(Box::new(PendingVal(v))) },
        };
        self.put(addr as usize, kind);
        Ok(())
    }

    fn put(&self, word: usize, kind: Kind) {
        let mut st = self.st.borrow_mut();
        let w = Write { word, kind, old: 0 };
        match self.find(&st, word) {
            Some(i) => {
                let old = std::mem::replace(&mut st.writes[i], w);
                if let Some(f) = st.frames.last_mut() {
                    if i < f.len {
                        f.replaced.push((i, old));
                    }
                }
            }
            None => {
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
        let ctx = self.ctx()?;
        if size_of::<T::P>() > MAX_VALUE || std::mem::align_of::<T::P>() > 8 {
            self.check_cell::<T::P>(0, MAX_VALUE)?;
        }
        let mut cx = CopyCx::new(ctx.inner, &ctx.cache);
        let r = (|| {
            let p = match init.plain() {
                Some(p) => p,
                None => init.persist(&mut cx)?,
            };
            let id = ctx.inner.types.id_of::<VarCell<T::P>>(&ctx.inner.space)?;
            // 16- or 48-byte payloads land in classes 32/64: the cell never
            // straddles a cache line (see vars.rs).
            let payload = if 8 + size_of::<T::P>() <= 16 { 16 } else { 48 };
            let space = &ctx.inner.space;
            let (addr, loc) = ctx.inner.heap.alloc(space, &ctx.cache, payload, id, 0, 1)?;
            cx.made.push(Made { loc, off: addr - OBJ_HEADER - space.base(), len: payload + OBJ_HEADER, mutable: true });
            // SAFETY: a fresh slot of `payload` >= size_of::<VarCell<P>>() bytes.
            unsafe {
                std::ptr::write_bytes(addr as *mut u8, 0, payload as usize);
                std::ptr::write(addr as *mut VarCell<T::P>, VarCell { word: 0, value: p });
            }
            Ok(addr)
        })();
        self.st.borrow_mut().made.append(&mut cx.made);
        r.map_err(StmError::Failed)
    }

    /// Allocates a pool object holding `v` (a node with embedded
    /// [`super::PTField`]s, say). It is private to this transaction until it
    /// commits: flushed before the commit fence, freed if the attempt
    /// aborts, garbage for the GC if nothing links it.
    pub fn alloc<T: Persistent>(&self, v: T) -> StmResult<PPtr<T>> {
        let ctx = self.ctx()?;
        let mut cx = CopyCx::new(ctx.inner, &ctx.cache);
        let r = cx.alloc(v);
        cx.mark_mutable();
        self.st.borrow_mut().made.append(&mut cx.made);
        r.map_err(StmError::Failed)
    }

    // ----- volatile TVars --------------------------------------------------

    pub(crate) fn read_tvar<T: Clone + Send + Sync + 'static>(&self, v: &Arc<TVarInner<T>>) -> StmResult<T> {
        let word = &v.word as *const AtomicU64 as usize;
        {
            let st = self.st.borrow();
            if let Some(i) = self.find(&st, word) {
                if let Kind::V { value, .. } = &st.writes[i].kind {
                    if let Some(a) = value.downcast_ref::<Arc<T>>() {
                        return Ok((**a).clone());
                    }
                }
            }
        }
        let mut out = None;
        let keep: Arc<dyn Any + Send + Sync> = v.clone();
        self.read_versioned(word, 0, Some(keep), || out = Some(v.value.read().clone()))?;
        Ok(out.map(|a| (*a).clone()).ok_or_else(|| Error::corrupt("TVar read produced nothing"))?)
    }

    pub(crate) fn write_tvar<T: Clone + Send + Sync + 'static>(&self, v: &Arc<TVarInner<T>>, x: T) -> StmResult<()> {
        let word = &v.word as *const AtomicU64 as usize;
        let cell: Arc<dyn VCell> = v.clone();
        self.put(word, Kind::V { cell, value: Box::new(Arc::new(x)) });
        Ok(())
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

    // ----- commit -------------------------------------------------------------

    fn commit(&self, serial: bool) -> StmResult<()> {
        if self.st.borrow().writes.is_empty() {
            // Read-only: every read was validated against rv. Objects it
            // allocated (PTVar::new, alloc) are made durable, for whoever
            // links them next (a region setting a root, say).
            return self.persist_made().map_err(StmError::Failed);
        }
        // 1. copies of pending values, before taking any lock.
        self.materialize_all()?;
        let _shared = (!serial).then(|| SERIAL.read());
        // 2. lock the write set.
        self.lock_writes()?;
        // 3. the commit timestamp.
        let wv = CLOCK.fetch_add(1, Ordering::AcqRel) + 1;
        // 4. validate the reads unless nobody committed since we began.
        if wv != self.st.borrow().rv + 1 && !self.reads_valid(true) {
            self.unlock_writes();
            return Err(StmError::Conflict);
        }
        // 5-6. the durable part: record, copies, one fence.
        if let Err(e) = self.persist_record(wv) {
            self.unlock_writes();
            return Err(StmError::Failed(e));
        }
        // 7. in place, then wake waiters.
        self.apply(wv);
        Ok(())
    }

    /// Flushes and fences the objects this attempt allocated, if any.
    fn persist_made(&self) -> Result<()> {
        let st = self.st.borrow();
        let Some(ctx) = self.ctx.as_ref().filter(|_| !st.made.is_empty()) else { return Ok(()) };
        let space = &ctx.inner.space;
        for m in &st.made {
            space.flush(m.off, m.len);
        }
        space.persist.fence("objects allocated by a transaction that wrote no variable")
    }

    fn materialize_all(&self) -> StmResult<()> {
        let mut st = self.st.borrow_mut();
        let Some(ctx) = self.ctx.as_ref() else { return Ok(()) };
        let mut cx = CopyCx::new(ctx.inner, &ctx.cache);
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

    fn lock_writes(&self) -> StmResult<()> {
        let epoch = self.epoch();
        let mut st = self.st.borrow_mut();
        for i in 0..st.writes.len() {
            let e = if matches!(st.writes[i].kind, Kind::P { .. }) { epoch } else { 0 };
            let w = word_at(st.writes[i].word);
            let cur = w.load(Ordering::Acquire);
            let ok = !word::is_locked(cur, e)
                && w.compare_exchange(cur, word::locked(cur, e), Ordering::AcqRel, Ordering::Acquire).is_ok();
            if !ok {
                for prev in &st.writes[..i] {
                    word_at(prev.word).store(prev.old, Ordering::Release);
                }
                return Err(StmError::Conflict);
            }
            st.writes[i].old = cur;
        }
        Ok(())
    }

    fn unlock_writes(&self) {
        for w in &self.st.borrow().writes {
            word_at(w.word).store(w.old, Ordering::Release);
        }
    }

    /// Steps 5 and 6: the redo record and copies, durable after one fence.
    fn persist_record(&self, wv: u64) -> Result<()> {
        let st = self.st.borrow();
        let Some(ctx) = self.ctx.as_ref() else { return Ok(()) };
        let entries: Vec<(u64, &[u8])> = st
            .writes
            .iter()
            .filter_map(|w| match &w.kind {
                Kind::P { off, value: Some(b), .. } => Some((*off, &b.buf[..b.words() * 8])),
                _ => None,
            })
            .collect();
        if entries.is_empty() {
            return Ok(());
        }
        if redo::record_len(&entries) > HALF {
            return Err(Error::invalid(format!("a transaction may write at most about {} variables", HALF / 32)));
        }
        reserve_clock(ctx, wv)?;
        let space = &ctx.inner.space;
        // New transactional objects (cells, nodes) change in later commits,
        // so recovery cannot check them against the record: they are made
        // durable before the record exists (a second fence, only for
        // transactions that create them).
        if st.made.iter().any(|m| m.mutable) {
            for m in st.made.iter().filter(|m| m.mutable) {
                space.flush(m.off, m.len);
            }
            space.persist.fence("new transactional objects before the record that links them")?;
        }
        // Copies are immutable: the record carries their checksums, and
        // recovery replays it only if every copy reached the media whole.
        // (The allocator metadata that makes each copy an object is checked
        // too: it was flushed, not fenced, when the copy was allocated.)
        let checks: Vec<(u64, u64, u32)> = st
            .made
            .iter()
            .filter(|m| !m.mutable)
            .flat_map(|m| [(m.off, m.len), m.loc.meta_range()])
            .map(|(off, len)| redo::object_crc(space, off, len).map(|c| (off, len, c)))
            .collect::<Result<_>>()?;
        if redo::record_len(&entries) + checks.len() as u64 * (redo::ENT_HDR + 8) > HALF {
            return Err(Error::invalid(format!("a transaction may write at most about {} variables", HALF / 32)));
        }
        let mut log = ctx.log.lock();
        let log = &mut *log;
        let half_off = log.log_off + (log.commits % 2) * HALF;
        redo::encode(&mut log.buf, wv, &entries, &checks);
        space.write_bytes(half_off, &log.buf)?;
        space.flush(half_off, log.buf.len() as u64);
        for m in st.made.iter().filter(|m| !m.mutable) {
            space.flush(m.off, m.len);
        }
        // 6. the one fence: record, copies, and the previous commit's in-place
        //    values are durable; the other half may be reused next time.
        space.persist.fence("STM redo record and copies before the new values are visible")?;
        log.unfenced.clear();
        log.commits += 1;
        crate::failpoint::hit("stm.after_fence");
        Ok(())
    }

    fn apply(&self, wv: u64) {
        let st = self.st.borrow();
        let space = self.ctx.as_ref().map(|c| &c.inner.space);
        let new_word = word::unlocked(wv);
        let mut bloom = Bloom::default();
        let mut lines = Vec::new();
        for w in &st.writes {
            bloom.add(w.word);
            match &w.kind {
                Kind::P { off, value: Some(b), .. } => {
                    let mut words = [0u64; MAX_VALUE / 8];
                    // SAFETY: b.buf holds words()*8 <= MAX_VALUE initialised bytes.
                    unsafe { std::ptr::copy_nonoverlapping(b.buf.as_ptr(), words.as_mut_ptr() as *mut u8, b.words() * 8) };
                    for (i, x) in words.iter().enumerate().take(b.words()) {
                        word_at(w.word + 8 + 8 * i).store(*x, Ordering::Relaxed);
                    }
                    // The value before its version (same line, so they
                    // persist in this order; a tracer is told the order).
                    space.inspect(|s| s.traced(w.word as u64 + 8, b.words() as u64 * 8));
                    word_at(w.word).store(new_word, Ordering::Release);
                    space.inspect(|s| s.traced(w.word as u64, 8));
                    lines.push((*off, 8 + b.words() as u64 * 8));
                }
                Kind::V { cell, value } => {
                    cell.install(value.as_ref());
                    cell.word().store(new_word, Ordering::Release);
                }
                Kind::P { .. } => word_at(w.word).store(w.old, Ordering::Release),
            }
        }
        if let Some(ctx) = self.ctx.as_ref() {
            let space = &ctx.inner.space;
            for &(off, len) in &lines {
                space.flush(off, len);
            }
            ctx.log.lock().unfenced.extend(lines);
        }
        wait::wake(&bloom);
        crate::failpoint::hit("stm.after_apply");
    }

    /// Frees what this attempt allocated (it was never linked).
    fn discard(&self) {
        let mut st = self.st.borrow_mut();
        if let Some(ctx) = self.ctx.as_ref() {
            for m in st.made.drain(..) {
                let _ = ctx.inner.heap.free(&ctx.inner.space, &ctx.cache, m.loc);
            }
        }
    }

    fn read_bloom(&self) -> (Bloom, Vec<(usize, u64, u16)>) {
        let st = self.st.borrow();
        let mut b = Bloom::default();
        for r in &st.reads {
            b.add(r.word);
        }
        (b, st.reads.iter().map(|r| (r.word, r.version, r.epoch)).collect())
    }
}

fn rebuild_index(st: &mut State) {
    st.index.clear();
    if st.writes.len() > 16 {
        for (i, w) in st.writes.iter().enumerate() {
            st.index.insert(w.word, i);
        }
    }
}

/// Persists a new clock reservation before `wv` can reach the pool.
fn reserve_clock(ctx: &PoolCtx<'_>, wv: u64) -> Result<()> {
    if wv < ctx.stm.reserved_fast.load(Ordering::Acquire) {
        return Ok(());
    }
    let mut r = ctx.stm.reserved.lock();
    if wv >= *r {
        let new = wv + RESERVE;
        if !crate::failpoint::planted("stm.reservation_not_persisted") {
            ctx.inner.space.write_persist(ctx.stm.meta_off, &new, "STM clock reservation before versions above it are used")?;
        }
        *r = new;
        ctx.stm.reserved_fast.store(new, Ordering::Release);
    }
    Ok(())
}

/// Runs `f` as a transaction over volatile [`super::TVar`]s only.
pub fn atomically<R>(f: impl FnMut(&STx<'_>) -> StmResult<R>) -> Result<R> {
    run(|| Ok(None), f)
}

fn run<'p, R>(mut ctx: impl FnMut() -> Result<Option<PoolCtx<'p>>>, mut f: impl FnMut(&STx<'p>) -> StmResult<R>) -> Result<R> {
    if IN_TX.with(Cell::get) {
        return Err(Error::invalid("atomically called inside a transaction (compose with or_else instead)"));
    }
    IN_TX.with(|t| t.set(true));
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_TX.with(|t| t.set(false));
        }
    }
    let _reset = Reset;
    let mut conflicts = 0u32;
    loop {
        let serial = conflicts >= SERIAL_AFTER;
        if serial {
            count_stat(|s| s.serial += 1);
        }
        let _excl = serial.then(|| SERIAL.write());
        let c = ctx()?;
        let _gate = c.as_ref().map(|c| c.inner.gate.read_recursive());
        let tx = STx::begin(c);
        let r = f(&tx).and_then(|v| tx.commit(serial).map(|_| v));
        match r {
            Ok(v) => return Ok(v),
            Err(StmError::Failed(e)) => {
                tx.discard();
                return Err(e);
            }
            Err(StmError::Conflict) => {
                tx.discard();
                count_stat(|s| s.conflicts += 1);
                conflicts += 1;
                backoff(conflicts);
            }
            Err(StmError::Retry) => {
                tx.discard();
                count_stat(|s| s.retries += 1);
                let (bloom, reads) = tx.read_bloom();
                drop(tx);
                drop(_gate);
                drop(_excl);
                wait::sleep(bloom, || {
                    reads.iter().any(|&(w, v, e)| {
                        let x = word_at(w).load(Ordering::Acquire);
                        word::version(x) != v || word::is_locked(x, e)
                    })
                });
                conflicts = 0;
            }
        }
    }
}

fn backoff(conflicts: u32) {
    if conflicts < 4 {
        for _ in 0..(1 << conflicts) * 16 {
            std::hint::spin_loop();
        }
    } else {
        std::thread::yield_now();
    }
}

impl Pool {
    /// Runs `f` as an STM transaction over this pool's [`super::PTVar`]s
    /// (and any volatile [`super::TVar`]s). Committed writes are durable
    /// when this returns; `f` may run more than once.
    ///
    /// ```
    /// use engram::{Pool, CreateOptions, Durability};
    /// use engram::stm::PTVar;
    /// # let path = std::env::temp_dir().join(format!("engram-stm-doc-{}.pool", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let pool = Pool::create(&path, CreateOptions::new("bank").durability(Durability::Process))?;
    /// let a: PTVar<u64> = pool.root("a", || 100)?;
    /// let b: PTVar<u64> = pool.root("b", || 0)?;
    /// pool.atomically(|tx| {
    ///     let x = tx.read(&a)?;
    ///     tx.write(&a, x - 30)?;
    ///     let y = tx.read(&b)?;
    ///     tx.write(&b, y + 30)
    /// })?;
    /// assert_eq!(pool.atomically(|tx| Ok(tx.read(&a)? + tx.read(&b)?))?, 100);
    /// # pool.close()?; std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), engram::Error>(())
    /// ```
    pub fn atomically<R>(&self, f: impl FnMut(&STx<'_>) -> StmResult<R>) -> Result<R> {
        let inner = self.inner();
        let stm = stm_pool(self)?;
        let log = thread_log(self, &stm)?;
        let cache = inner.heap.cache();
        run(|| Ok(Some(PoolCtx { inner, stm: stm.clone(), log: log.clone(), cache: cache.clone() })), f)
    }

    /// The persistent variable named `name`, created holding `init()` if it
    /// does not exist (PSTM's `getRoot`).
    pub fn root<T: Persist>(&self, name: &str, init: impl FnOnce() -> T) -> Result<super::PTVar<T>> {
        if let Some(c) = self.txn(|tx| tx.root::<VarCell<T::P>>(name))? {
            return Ok(super::PTVar::from_cell(c));
        }
        let mut init = Some(init);
        let v = self.atomically(|tx| {
            let x = init.take().map(|f| f()).ok_or(StmError::Failed(Error::invalid("root initialiser ran twice")))?;
            super::PTVar::new(tx, x)
        })?;
        self.txn(|tx| match tx.root::<VarCell<T::P>>(name)? {
            Some(c) => Ok(super::PTVar::from_cell(c)), // another thread won
            None => tx.set_root(name, v.cell()).map(|_| v),
        })
    }
}

/// The pool's STM state, created (with its metadata root) on first use.
fn stm_pool(pool: &Pool) -> Result<Arc<StmPool>> {
    let inner = pool.inner();
    if let Some(s) = inner.stm.lock().as_ref() {
        return Ok(s.clone());
    }
    let meta = pool.txn(|tx| match tx.root::<StmMeta>(META_ROOT)? {
        Some(m) => Ok(m),
        None => {
            let logs = tx.alloc_array::<PArray<u8>>(16)?;
            let m = tx.alloc(StmMeta { clock_reserved: 0, epoch: 1, logs })?;
            tx.set_root(META_ROOT, m).map(|_| m)
        }
    })?;
    let m: StmMeta = pool.txn(|tx| tx.read(meta))?;
    let mut slot = inner.stm.lock();
    if let Some(s) = slot.as_ref() {
        return Ok(s.clone());
    }
    CLOCK.fetch_max(m.clock_reserved + 1, Ordering::AcqRel);
    let s = Arc::new(StmPool {
        meta_off: meta.addr() - inner.space.base(),
        epoch: (m.epoch & 0x7FFF) as u16,
        reserved: Mutex::new(m.clock_reserved),
        reserved_fast: AtomicU64::new(m.clock_reserved),
        logs: Mutex::new(Vec::new()),
    });
    *slot = Some(s.clone());
    Ok(s)
}

/// This thread's redo log in the pool, allocated and linked on first use.
fn thread_log(pool: &Pool, stm: &Arc<StmPool>) -> Result<Arc<Mutex<ThreadLog>>> {
    let id = pool.inner().heap.id;
    if let Some(l) = MY_LOGS.with(|m| m.borrow().iter().find(|(h, _)| *h == id).map(|(_, l)| l.clone())) {
        return Ok(l);
    }
    // Adopt the log of a thread that has exited, if any.
    let adopted = stm.logs.lock().iter().find(|l| Arc::strong_count(l) == 1).cloned();
    let log = match adopted {
        Some(l) => l,
        None => {
            let meta = PPtr::<StmMeta>::from_addr(pool.inner().space.base() + stm.meta_off);
            let log = pool.txn(|tx| {
                let mut m = tx.read(meta)?;
                let n = tx.len(m.logs)?;
                let mut free = None;
                for i in 0..n {
                    if tx.get(m.logs, i)?.is_null() {
                        free = Some(i);
                        break;
                    }
                }
                let i = match free {
                    Some(i) => i,
                    None => {
                        let bigger = tx.alloc_array::<PArray<u8>>(n * 2)?;
                        for k in 0..n {
                            tx.set(bigger, k, tx.get(m.logs, k)?)?;
                        }
                        tx.free_array(m.logs)?;
                        m.logs = bigger;
                        tx.write(meta, m)?;
                        n
                    }
                };
                let bytes = tx.alloc_array::<u8>(2 * HALF)?;
                tx.set(m.logs, i, bytes)?;
                Ok::<_, Error>(bytes)
            })?;
            let l = Arc::new(Mutex::new(ThreadLog {
                log_off: log.addr() - pool.inner().space.base(),
                commits: 0,
                unfenced: Vec::new(),
                buf: Vec::new(),
            }));
            stm.logs.lock().push(l.clone());
            l
        }
    };
    MY_LOGS.with(|m| {
        let mut m = m.borrow_mut();
        m.retain(|(_, l)| Arc::strong_count(l) > 1);
        m.push((id, log.clone()));
    });
    Ok(log)
}

/// Online GC and the clean close: makes every thread's in-place values
/// durable and clears all redo records (no STM transaction may run; the
/// caller holds the GC gate exclusively).
pub(crate) fn quiesce(inner: &PoolInner) -> Result<()> {
    let Some(stm) = inner.stm.lock().clone() else { return Ok(()) };
    let space = &inner.space;
    let logs = stm.logs.lock();
    for l in logs.iter() {
        for &(off, len) in &l.lock().unfenced {
            space.flush(off, len);
        }
    }
    space.persist.fence("in-place STM values of idle threads before their records are cleared")?;
    for l in logs.iter() {
        let mut l = l.lock();
        l.unfenced.clear();
        for h in 0..2 {
            space.write(l.log_off + h * HALF, &0u32)?;
            space.flush(l.log_off + h * HALF, 4);
        }
    }
    space.persist.fence("STM records cleared")
}
