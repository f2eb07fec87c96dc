//! Failure-atomic regions (go-pmem `txn`, PMDK transactions): [`Tx`].
//!
//! A region runs on one thread with its own undo-log slot. Before a range of
//! the pool changes for the first time in the region, its old bytes go to the
//! log (see `log.rs` for the crash cases). Commit is a numbered pipeline:
//!
//! 1. flush every range the region wrote and every object it allocated;
//! 2. fence: the new data is durable;
//! 3. bump the log generation and fence: the region is committed (the new
//!    generation is then cached with the slot, so the slot's next region
//!    does not read the word; `tx/slots.rs`);
//! 4. apply deferred frees, release locks, the log slot and the GC gate.
//!
//! A region that logged and neither allocated nor freed (its writes are
//! exactly its logged ranges: n-body, sps, most updates) commits with its
//! entry fence(s) plus ONE fence instead: steps 1-3 fuse into one fence
//! that makes the data and a checksummed commit record durable together,
//! and the generation bump rides on the next fence of any thread (`log.rs`,
//! steps 3' and 4'; pmem, trace and process modes). A region that frees
//! fences any such pending bump before it hands its objects back.
//!
//! A region that logged nothing (it only allocated, filled new objects and
//! freed: a binary-trees build) issues no flush and no fence either: nothing
//! durable reaches its new objects, so it lists their lines for the next
//! fence of any thread (step 1', `fresh.rs`), which every region that could
//! link them issues before its commit point. (Pmem and trace modes; msync
//! and wal flush at commit.)
//!
//! A region that wrote nothing issues no flush and no fence. Rollback (an
//! `Err`, a panic, or a failed nested region) replays the log newest first,
//! persists the restored bytes, bumps the generation and frees what the
//! region allocated. Nested regions are flattened into the outermost one.
//! Locks taken with [`Tx::lock`] are held until the region ends (two-phase
//! locking); a lock that cannot be had within the pool's lock timeout rolls
//! the region back with [`Error::LockTimeout`] instead of deadlocking.
//!
//! In checked mode (`OpenOptions::check_pointers`, on by default in debug
//! builds) the pointer fields of every value stored through `alloc`,
//! `write`, `set` and `write_slice` are validated before the store, and at
//! commit those of every object the region allocated or logged (front ends
//! store through raw pointers); a bad one is [`Error::BadPointerField`] and
//! the region rolls back (see `pointers.rs`).

mod freed;
mod kept;
mod locks;
mod logged;
mod raw;
mod redo;
mod roots;
mod slots;
pub(crate) mod spans;
mod view;

pub(crate) use locks::LockTable;
pub(crate) use logged::PageCache;
pub(crate) use slots::SlotSet;

use crate::alloc::cache::CacheCell;
use crate::alloc::{Loc, Placed};
use crate::error::{Error, Result};
use crate::format::*;
use crate::log::{ChunkAlloc, LogWriter};
use crate::pool::PoolInner;
use crate::ptr::{PArray, PPtr};
use crate::types::{Persistent, TYPE_LOG_CHUNK};
use std::cell::RefCell;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::sync::Arc;

pub use raw::RootEntryInfo;
pub(crate) use roots::used_entries as used_root_entries;
pub use roots::RootInfo;
pub(crate) use roots::ROOTS_LOCK;
pub use view::ArrayView;

/// A running failure-atomic region. Obtained from [`crate::Pool::txn`].
///
/// Everything written through a `Tx` becomes durable together when the
/// region's closure returns `Ok`, or is undone together when it returns `Err`
/// or panics — also after a crash. A `Tx` is tied to its thread.
pub struct Tx<'p> {
    pub(crate) pool: &'p PoolInner,
    /// Identity of this region in the lock table (0 until its first lock:
    /// most regions take none, and skip the shared counter).
    id: std::cell::Cell<u64>,
    /// The last array whose header was validated: (address, (element
    /// size, alignment), count).
    last_array: std::cell::Cell<(u64, (u64, u64), u64)>,
    /// The payload range `[start, end)` of the last object the tables (a
    /// read) or a first log found, if its header carries the tag, or of
    /// the last array `Tx::len` validated (tagged too: `tx/kept.rs`): a
    /// live object (objects are freed only when a region ends, so a range
    /// checked once stays a live object for the rest of the region).
    /// (0, 0): none. Never an untagged slot, so a first log may trust it.
    last_object: std::cell::Cell<(u64, u64)>,
    /// Small spans seen by this thread's regions since the last free or
    /// sweep, for the pointer checks (`spans.rs`).
    spans: spans::SpanCache,
    /// Where the region stands on the redo path (`tx/redo.rs`): a plain
    /// cell, so reads, allocations and frees off the path test one byte
    /// and borrow nothing.
    redo: std::cell::Cell<redo::RedoState>,
    st: RefCell<TxState>,
    _gate: crate::pool::gate::GateRead<'p>,
    _not_send: PhantomData<*const ()>,
}

struct TxState {
    slot: u32,
    /// This thread's allocation cache, looked up at the region's first
    /// allocation (a region that allocates nothing skips the lookup).
    cache: Option<Arc<CacheCell>>,
    log: LogWriter,
    /// Boxed so that a region moves a pointer, not the sets, in and out of
    /// the thread's spare; taken back by `Drop` (hence `ManuallyDrop`).
    sets: std::mem::ManuallyDrop<Box<RegionSets>>,
    doomed: bool,
    /// The commit writes back and fences the region's new objects even if
    /// it logged nothing ([`Tx::new_objects_durable_at_commit`]).
    eager_new: bool,
}

/// The region's bookkeeping, reused (emptied) by the thread's next region so
/// the fast path does not allocate once the sets have grown.
#[derive(Default)]
struct RegionSets {
    /// Ranges (pool offset, len) logged in this region, in log order.
    logged: Vec<(u64, u32)>,
    /// The words of `logged`, and of the region's new objects up to
    /// `marked`: what the region may change without logging, for an O(1)
    /// "already logged?" check.
    words: logged::LoggedWords,
    /// How many of the region's new objects (small, large) are marked in
    /// `words`. Marked lazily, in `ready_to_log`: an allocation marks
    /// nothing; a range that is not covered first marks the objects
    /// allocated since, then asks again (O(1) per object in all).
    marked: (usize, usize),
    /// Ranges (pool offset, len) to flush at commit.
    dirty: Vec<(u64, u64)>,
    /// The small objects allocated in this region: the slots its magazine
    /// handed out (one index increment per allocation, no per-object
    /// entry). Free slots come from the thread's cache a batch at a time;
    /// unused ones go back when the region ends (`Drop`).
    mag: crate::alloc::cache::Magazine,
    /// Large and huge objects allocated in this region (rare): payload pool
    /// offset, bytes to mark in `words`, and where the object lives.
    large: Vec<(u64, u64, Loc)>,
    /// The objects the region frees when it commits, one word each: the
    /// payload pool offset, with `class + 1` in the top byte for a small
    /// object ([`pack_free`]); 0 there for a large or huge one, whose
    /// place is in `frees_large`.
    frees: Vec<u64>,
    /// Large and huge objects in `frees` (rare).
    frees_large: Vec<Loc>,
    /// At commit: the header addresses of the small objects in `frees`,
    /// newest first, and where each run of one class starts in it
    /// ([`clear_tags`]); scratch, kept for the thread's next region.
    freed_hdrs: Vec<u64>,
    freed_runs: Vec<(usize, usize)>,
    /// The payload of each object in `frees`, to refuse a double free: one
    /// bit per 16 bytes (no hashing per free), emptied in O(1) at the
    /// region's end (`freed.rs`).
    freed: freed::FreedSet,
    /// Keys this region holds in the pool's lock table.
    locks: Vec<u64>,
    /// Kept for the thread's next regions (not emptied by `recycle`;
    /// `tx/kept.rs` says when they hold): the last array validated, and
    /// the type ids looked up.
    array: kept::KeptArray,
    types: kept::KeptTypes,
    /// The redo entries of a region on the redo path, in log order
    /// (`tx/redo.rs`); empty off it.
    redo: Vec<redo::Pending>,
    /// Bytes of new data in `redo`.
    redo_bytes: u64,
}

impl RegionSets {
    /// Empties the sets; keeps their memory unless it grew very large.
    /// Clearing costs what the region marked, not what the sets hold, so
    /// one big region does not tax every small one after it.
    /// The magazine's unused slots must be back in the cache.
    fn recycle(&mut self, base: u64) {
        // Nothing logged or marked (a read-only or empty region): the
        // sets are already empty (only `log_new_range` and `mark_fresh`
        // mark `words`, only a pushed free marks `freed`).
        if !self.logged.is_empty() || self.marked != (0, 0) {
            self.clear_words(base);
        }
        if !self.frees.is_empty() {
            self.freed.clear();
        }
        self.marked = (0, 0);
        self.logged.clear();
        self.mag.reset();
        self.large.clear();
        self.dirty.clear();
        self.frees.clear();
        self.frees_large.clear();
        self.freed_hdrs.clear();
        self.freed_runs.clear();
        self.locks.clear();
        self.redo.clear();
        self.redo_bytes = 0;
    }

    /// Unmarks in `words` what the region logged and the new objects it marked.
    fn clear_words(&mut self, base: u64) {
        let logged = self.logged.iter().map(|&(off, len)| (off, len as u64));
        if self.marked == (0, 0) {
            // Only logged ranges (n-body, sps, most updates): one plain
            // iterator instead of a chain of three.
            self.words.clear(logged);
            return;
        }
        let (small, large) = self.marked;
        let marked = self.mag.handed_out().take(small).map(|(c, hdr)| fresh_small(base, c, hdr));
        let marked_large = self.large[..large].iter().map(|&(off, len, _)| (off, len));
        self.words.clear(logged.chain(marked.map(|(off, len, _)| (off, len))).chain(marked_large));
    }
}

/// A small object the region allocated (header at absolute `hdr`, class
/// `c`): (payload pool offset, its capacity, slot size). Its whole payload
/// capacity is what `mark_fresh` marks.
#[inline]
fn fresh_small(base: u64, c: usize, hdr: u64) -> (u64, u64, u64) {
    let slot = crate::alloc::classes::slot_size(c);
    (hdr - base + OBJ_HEADER, slot - OBJ_HEADER, slot)
}

impl RegionSets {
    /// Whether some object the region allocated is not yet marked in `words`.
    #[inline]
    fn unmarked_fresh(&self) -> bool {
        self.marked != (self.mag.handed_out_count(), self.large.len())
    }

    /// Marks the objects allocated since the last call as "logged" in
    /// `words`: the lazy half of the allocation fast path. A small object's
    /// whole capacity is marked (its payload size is not recorded), so its
    /// whole slot joins the commit flush, as stores anywhere in it may now
    /// skip the log.
    #[cold]
    fn mark_fresh(&mut self, base: u64) {
        let (small, large) = self.marked;
        for (c, hdr) in self.mag.handed_out_from(small) {
            let (off, cap, slot) = fresh_small(base, c, hdr);
            self.words.mark(off, cap);
            mark_dirty(&mut self.dirty, off - OBJ_HEADER, slot);
        }
        for &(off, len, _) in &self.large[large..] {
            self.words.mark(off, len);
        }
        self.marked = (self.mag.handed_out_count(), self.large.len());
    }

    /// Whether the region frees the object whose payload is at pool
    /// address `p` (exactly: only a freed payload's start is marked).
    #[inline]
    fn is_freed(&self, base: u64, p: u64) -> bool {
        self.freed.contains(p.wrapping_sub(base))
    }
}

/// Payload offsets fit in the low 56 bits (a pool is at most
/// `HEAP_OFF + MAX_ARENAS * ARENA_SIZE`, about 2^38 bytes).
const FREE_OFF_MASK: u64 = (1 << 56) - 1;
const _: () = assert!(HEAP_OFF + MAX_ARENAS * ARENA_SIZE < FREE_OFF_MASK);

/// One entry of `RegionSets::frees`: payload pool offset `off` of a small
/// object of class `class`, or (None) of a large or huge one.
#[inline]
fn pack_free(off: u64, class: Option<usize>) -> u64 {
    match class {
        Some(c) => off | (c as u64 + 1) << 56,
        None => off,
    }
}

/// Where [`clear_tags`] lists the freed small slots: header addresses,
/// and (class, start in `hdrs`) of each run of one class.
struct FreedSlots<'a> {
    hdrs: &'a mut Vec<u64>,
    runs: &'a mut Vec<(usize, usize)>,
}

/// Clears the tag of every object in `frees` (`RegionSets::frees` of a
/// committed region) and lists the small ones' slots in `out`, in one pass
/// newest first. Newest first because the objects the region freed last
/// are the ones most likely still in cache: oldest first, a region that
/// freed a structure larger than L2 missed on every line (each line
/// brought back evicted the next one needed, freed just after it); and the
/// slots go into their bin in the same order, so the bin's top (what the
/// next allocations take) is the lines touched last.
#[inline]
fn clear_tags(space: &crate::pool::space::Space, frees: &[u64], out: FreedSlots<'_>) {
    let base = space.base();
    // Asked once: a store through a raw pointer could, for all the
    // compiler knows, change the tracer field, so `write_known` reloads it.
    let traced = space.persist.tracer().is_some();
    out.hdrs.reserve(frees.len());
    for &f in frees.iter().rev() {
        let hdr = base + (f & FREE_OFF_MASK) - OBJ_HEADER;
        let flags = hdr + OBJ_FLAGS_OFF;
        if traced {
            // SAFETY: `free_addr` located an object's payload at this
            // offset (its header lies in the heap, inside the mapping), and
            // the pool does not shrink while open.
            unsafe { space.write_known(flags, 0u32) };
        } else {
            // SAFETY: as above; without a tracer, `write_known` is this
            // plain store.
            unsafe { std::ptr::write(flags as *mut u32, 0) };
        }
        let Some(c) = ((f >> 56) as usize).checked_sub(1) else { continue };
        if out.runs.last().is_none_or(|&(k, _)| k != c) {
            out.runs.push((c, out.hdrs.len()));
        }
        out.hdrs.push(hdr);
    }
}

thread_local! {
    static SPARE_SETS: std::cell::Cell<Option<Box<RegionSets>>> = const { std::cell::Cell::new(None) };
}

/// Records `[off, off+len)` for the commit flush, merged with the previous
/// range when they touch the same or adjacent cache lines, on either side
/// (objects from one span are usually allocated in address order, up or
/// down), so no line is flushed twice. A merged range may take in the rest
/// of a line it already touches: flushing a clean line is harmless.
#[inline]
fn mark_dirty(dirty: &mut Vec<(u64, u64)>, off: u64, len: u64) {
    if let Some(last) = dirty.last_mut() {
        let (start, end) = (last.0, last.0 + last.1);
        if off <= end.next_multiple_of(64) && off + len >= start / 64 * 64 {
            let (s, e) = (start.min(off), end.max(off + len));
            *last = (s, e - s);
            return;
        }
    }
    dirty.push((off, len));
}

static NEXT_TX_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl<'p> Tx<'p> {
    /// A new region of `pool`: [`Tx::take_slot`], then [`Tx::new`] (for
    /// callers that box the `Tx`; `Pool::txn` makes the two calls itself,
    /// so that the `Tx` is built in its frame rather than moved there out
    /// of a `Result`, a `memcpy` of the whole `Tx` per region).
    #[inline]
    pub(crate) fn begin(pool: &'p PoolInner) -> Result<Self> {
        let gate = pool.gate.read();
        let (slot, gen) = Self::take_slot(pool)?;
        Ok(Self::new(pool, gate, slot, gen))
    }

    /// The fallible half of a region's begin: a free log slot of `pool`
    /// and its generation (the slot set's cached one, or the slot's word
    /// read and checked: `Corrupt` if it fails, and the slot goes back).
    /// The caller holds the GC gate.
    #[inline]
    pub(crate) fn take_slot(pool: &PoolInner) -> Result<(u32, u64)> {
        match pool.take_slot() {
            (slot, Some(gen)) => Ok((slot, gen)),
            (slot, None) => Self::read_slot_gen(pool, slot),
        }
    }

    /// [`Tx::take_slot`] when the slot's generation is not cached.
    #[cold]
    fn read_slot_gen(pool: &PoolInner, slot: u32) -> Result<(u32, u64)> {
        match crate::log::slot_gen(&pool.space, slot) {
            Ok(gen) => Ok((slot, gen)),
            Err(e) => {
                pool.put_slot(slot);
                Err(e)
            }
        }
    }

    /// The region holding `gate` and log slot `slot` at generation `gen`
    /// (from [`Tx::take_slot`]). Infallible and inlined, so the `Tx` is
    /// built where the caller keeps it.
    #[inline(always)]
    pub(crate) fn new(pool: &'p PoolInner, gate: crate::pool::gate::GateRead<'p>, slot: u32, gen: u64) -> Self {
        Tx {
            pool,
            id: std::cell::Cell::new(0),
            last_array: std::cell::Cell::new((0, (0, 0), 0)),
            last_object: std::cell::Cell::new((0, 0)),
            spans: spans::SpanCache::new(pool.space.base(), pool.heap.id, pool.heap.frees_seen()),
            redo: std::cell::Cell::new(redo::RedoState::first(pool)),
            st: RefCell::new(TxState {
                slot,
                cache: None,
                log: LogWriter::resume(slot, gen),
                sets: std::mem::ManuallyDrop::new(SPARE_SETS.with(|s| s.take()).unwrap_or_default()),
                doomed: false,
                eager_new: false,
            }),
            _gate: gate,
            _not_send: PhantomData,
        }
    }

    /// Marks the region to roll back when it ends (its commit then fails
    /// with [`Error::Aborted`]).
    pub fn doom(&self) {
        self.st.borrow_mut().doomed = true;
    }

    /// Makes this region's commit write back and fence its new objects even
    /// when it logged nothing. A region that logs nothing otherwise leaves
    /// them to the next fence of any thread (`fresh.rs`): sound for code
    /// that links a new object only by a logged store (every safe Rust
    /// path), not for a front end that links it with a plain store after
    /// the commit. The C ABI's regions (`engram_region_begin`) always ask
    /// for it, so a commit there still makes everything the region wrote
    /// durable before it returns.
    pub fn new_objects_durable_at_commit(&self) {
        self.st.borrow_mut().eager_new = true;
    }

    /// Whether the region will roll back when it ends.
    pub fn is_doomed(&self) -> bool {
        self.st.borrow().doomed
    }

    // ----- allocation -------------------------------------------------------

    /// The pool's type id of `T` (kept for the thread's later regions on
    /// this open pool: `tx/kept.rs`).
    pub(crate) fn type_id<T: Persistent>(&self) -> Result<u32> {
        let key = std::any::TypeId::of::<T>();
        let heap = self.pool.heap.id;
        if let Some(id) = self.st.borrow().sets.types.get(heap, key) {
            return Ok(id);
        }
        let id = self.pool.types.id_of::<T>(&self.pool.space)?;
        self.st.borrow_mut().sets.types.put(heap, key, id);
        Ok(id)
    }

    /// In checked mode, validates the pointer fields of `vals`, to be stored
    /// as elements `first..` of the object at `object` (0: not yet allocated).
    /// (Inlined: outside checked mode it is one test; the check is a call.)
    #[inline]
    fn check_values<T: Persistent>(&self, object: u64, first: u64, vals: &[T]) -> Result<()> {
        if !self.pool.check_pointers || !crate::types::has_pointers::<T>() {
            return Ok(());
        }
        self.check_values_now(object, first, vals)
    }

    #[inline(never)]
    fn check_values_now<T: Persistent>(&self, object: u64, first: u64, vals: &[T]) -> Result<()> {
        let mut ptrs = Vec::new();
        T::pointer_offsets(&mut ptrs, 0);
        let st = self.st.borrow();
        let freed = |v: u64| st.sets.is_freed(self.pool.space.base(), v);
        let c = crate::pointers::FieldCheck { space: &self.pool.space, types: &self.pool.types, freed: &freed };
        c.values(&T::type_name, object, first, vals, &ptrs)
    }

    /// In checked mode, validates the object a root is about to name.
    pub(crate) fn check_root_target(&self, name: &str, addr: u64) -> Result<()> {
        if !self.pool.check_pointers {
            return Ok(());
        }
        let st = self.st.borrow();
        let freed = |v: u64| st.sets.is_freed(self.pool.space.base(), v);
        let c = crate::pointers::FieldCheck { space: &self.pool.space, types: &self.pool.types, freed: &freed };
        c.value(&|| format!("root {name:?}"), 0, 0, addr)
    }

    /// Checked mode, at commit: the pointer fields of every object this
    /// region allocated or logged (what raw-pointer stores may have changed),
    /// except objects it frees.
    #[inline]
    pub(crate) fn check_pointers_at_commit(&self) -> Result<()> {
        if !self.pool.check_pointers {
            return Ok(());
        }
        self.check_pointers_now()
    }

    /// [`Tx::check_pointers_at_commit`] in checked mode.
    fn check_pointers_now(&self) -> Result<()> {
        let space = &self.pool.space;
        let st = self.st.borrow();
        let freed = |v: u64| st.sets.is_freed(self.pool.space.base(), v);
        let c = crate::pointers::FieldCheck { space, types: &self.pool.types, freed: &freed };
        let small = st.sets.mag.handed_out().map(|(_, hdr)| hdr - space.base() + OBJ_HEADER);
        for off in small.chain(st.sets.large.iter().map(|&(off, _, _)| off)) {
            let p = space.base() + off;
            if !st.sets.is_freed(space.base(), p) {
                c.object(p, 0, u64::MAX)?;
            }
        }
        for &(off, len) in &st.sets.logged {
            let addr = space.base().wrapping_add(off);
            if let Some((p, _)) = crate::alloc::locate_containing(space, addr) {
                if !st.sets.is_freed(space.base(), p) && addr >= p {
                    c.object(p, addr - p, len as u64)?;
                }
            }
        }
        Ok(())
    }

    /// Allocates a `T` holding `value`. Freed again if the region rolls back;
    /// garbage after a crash unless linked from a root by a committed region.
    ///
    /// Inlined into the caller: the small-object fast path is a few dozen
    /// instructions, the rest (`alloc_general`) is a call.
    #[inline]
    pub fn alloc<T: Persistent>(&self, value: T) -> Result<PPtr<T>> {
        self.check_values(0, 0, std::slice::from_ref(&value))?;
        let addr = match self.alloc_small_fast::<T>() {
            Some(addr) => addr,
            None => self.alloc_general::<T>()?,
        };
        // SAFETY: alloc_raw returned a fresh slot of at least size_of::<T>()
        // bytes, 16-aligned, inside the mapping, owned by this region alone.
        unsafe { std::ptr::write(addr as *mut T, value) };
        Ok(PPtr::from_addr(addr))
    }

    /// [`Tx::alloc`] when its fast path says no: the type id looked up
    /// (and cached), a refill of the magazine, or a large object.
    #[inline(never)]
    fn alloc_general<T: Persistent>(&self) -> Result<u64> {
        let id = self.type_id::<T>()?;
        self.alloc_raw(size_of::<T>() as u64, id, 0, 1)
    }

    /// The small-object fast path of [`Tx::alloc`]: one borrow of the
    /// region's state, the type id from the region's cache, the next slot
    /// of the magazine's current batch, the header stored in place. It
    /// records exactly what `alloc_raw` records for a small object (the
    /// magazine's handed-out count, the span for the pointer checks, the
    /// slot for the commit flush, the GC card), so commit, rollback and
    /// recovery see no difference. None (take `alloc_raw`): `T` is not
    /// small, its type id is not cached yet, or the batch is empty or of
    /// another class.
    #[inline]
    fn alloc_small_fast<T: Persistent>(&self) -> Option<u64> {
        let bytes = size_of::<T>() as u64 + OBJ_HEADER;
        let c = crate::alloc::classes::class_for(bytes)?;
        let space = &self.pool.space;
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        let key = std::any::TypeId::of::<T>();
        let type_id = st.sets.types.get(self.pool.heap.id, key)?;
        if !self.redo_leave_quietly() {
            return None;
        }
        let hdr = st.sets.mag.pop(c)?;
        // SAFETY: a magazine hands out free slots of class `c` (at least
        // `bytes` long) of spans inside the mapping, each to this region
        // alone (`alloc::cache::Magazine`).
        unsafe { space.write_known(hdr, ObjHeader { type_id, flags: OBJ_TAG, count: 1 }) };
        let off = hdr - space.base();
        self.spans.learn_small((off - HEAP_OFF) / SPAN_SIZE, c);
        self.note_changed(&mut st.sets.dirty, off, bytes);
        Some(hdr + OBJ_HEADER)
    }

    /// Pool range `[off, off+len)` is changed by this region (a logged
    /// range, or a fresh object's slot): it joins the commit flush
    /// (`dirty`, the region's `sets.dirty`) and, while a deferred recovery
    /// GC runs with cards on, its card table (`pool/deferred.rs`).
    #[inline]
    fn note_changed(&self, dirty: &mut Vec<(u64, u64)>, off: u64, len: u64) {
        mark_dirty(dirty, off, len);
        self.pool.deferred.card(off, len);
    }

    /// Allocates an array of `len` zeroed `T`s.
    pub fn alloc_array<T: Persistent>(&self, len: u64) -> Result<PArray<T>> {
        let id = self.type_id::<T>()?;
        let bytes = len.checked_mul(size_of::<T>() as u64).ok_or_else(|| Error::invalid("array size overflows"))?;
        let addr = self.alloc_raw(bytes, id, OBJ_ARRAY, len)?;
        // SAFETY: a fresh slot of at least `bytes` bytes inside the mapping.
        unsafe { std::ptr::write_bytes(addr as *mut u8, 0, bytes as usize) };
        Ok(PArray::from_addr(addr))
    }

    /// Allocates `payload` bytes with an explicit type id and header; the
    /// contents are left as they were (the caller initialises them). Inlined
    /// into `alloc`: the magazine pop and the header write are the fast path.
    #[inline]
    pub(crate) fn alloc_raw(&self, payload: u64, type_id: u32, flags: u32, count: u64) -> Result<u64> {
        self.leave_redo()?;
        let space = &self.pool.space;
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        let cache = st.cache.get_or_insert_with(|| self.pool.heap.cache());
        let (addr, placed) = self.pool.heap.alloc_batched(space, cache, &mut st.sets.mag, payload, ObjHeader { type_id, flags, count })?;
        let off = addr - space.base();
        // No undo is needed for the new object (a rollback frees it): its
        // words count as logged, marked lazily (`mark_fresh`). The magazine
        // recorded a small one; a large one is recorded here.
        match placed {
            Placed::Small { span, class } => self.spans.learn_small(span, class),
            Placed::Other(loc) => st.sets.large.push((off, payload.next_multiple_of(8).min(loc.capacity()), loc)),
        }
        self.note_changed(&mut st.sets.dirty, off - OBJ_HEADER, payload + OBJ_HEADER);
        Ok(addr)
    }

    /// Frees the object `p` points to when the region commits.
    pub fn free<T>(&self, p: PPtr<T>) -> Result<()> {
        self.free_addr(p.addr())
    }

    /// Frees the array `a` points to when the region commits.
    pub fn free_array<T>(&self, a: PArray<T>) -> Result<()> {
        self.free_addr(a.addr())
    }

    /// Records the object at `addr` to free at commit (inlined into
    /// `free`: for a small object of a cached span, the span cache's class
    /// (no `Loc` built), one header word, one bitmap operation and one
    /// push; anything else asks the tables, out of line).
    #[inline]
    pub(crate) fn free_addr(&self, addr: u64) -> Result<()> {
        match self.spans.payload_class(addr) {
            Some(class) => self.record_free(addr, Some(class)),
            None => self.free_by_tables(addr),
        }
    }

    /// [`Tx::free_addr`] for an object the span cache does not answer for:
    /// located by the span and arena tables (a small object of a span the
    /// region has not seen, a large or huge one, or no object at all).
    #[inline(never)]
    fn free_by_tables(&self, addr: u64) -> Result<()> {
        // (Not `ok_or`: that builds and drops an `Error` on every call.)
        let Some(loc) = crate::alloc::locate(&self.pool.space, addr) else { return Err(Error::BadPointer { addr }) };
        self.spans.learn(loc);
        if let Loc::Small { class, .. } = loc {
            return self.record_free(addr, Some(class));
        }
        self.record_free(addr, None)?;
        self.st.borrow_mut().sets.frees_large.push(loc);
        Ok(())
    }

    /// The common half of [`Tx::free_addr`] for an object located at
    /// payload `addr` (`class`: a small one's; None: large or huge): refuses
    /// an object without its tag (freed by an earlier region) or already
    /// freed by this one, else lists it in `frees`.
    #[inline]
    fn record_free(&self, addr: u64, class: Option<usize>) -> Result<()> {
        // SAFETY: the span cache or the tables found an object's payload at
        // `addr`: its header lies in the heap, inside the mapping.
        let flags = unsafe { std::ptr::read((addr - OBJ_HEADER + OBJ_FLAGS_OFF) as *const u32) };
        if flags & OBJ_TAG_MASK != OBJ_TAG && !crate::failpoint::planted("tx.free_skips_tag") {
            return Err(Error::BadPointer { addr });
        }
        // A free leaves the redo path (`tx/redo.rs`).
        self.leave_redo()?;
        let mut st = self.st.borrow_mut();
        let off = addr - self.pool.space.base();
        // A payload start: 16-aligned, as `is_freed` asks.
        if st.sets.freed.test_and_mark(off) {
            return Err(Error::DoubleFree { addr });
        }
        st.sets.frees.push(pack_free(off, class));
        Ok(())
    }

    // ----- reads and writes -------------------------------------------------

    #[inline]
    fn check(&self, addr: u64, len: u64, align: usize) -> Result<()> {
        let space = &self.pool.space;
        if addr < space.base() + HEAP_OFF || addr % align as u64 != 0 || !space.contains(addr, len) {
            return Err(Error::BadPointer { addr });
        }
        Ok(())
    }

    /// `alloc::locate`, answered by the region's span cache when it can.
    #[inline]
    fn locate(&self, addr: u64) -> Option<Loc> {
        self.spans.at(addr).or_else(|| {
            let loc = crate::alloc::locate(&self.pool.space, addr)?;
            self.spans.learn(loc);
            Some(loc)
        })
    }

    /// `alloc::locate_containing`, answered by the region's span cache when it can.
    #[inline]
    fn locate_containing(&self, addr: u64) -> Option<(u64, Loc)> {
        self.spans.containing(addr).or_else(|| {
            let (p, loc) = crate::alloc::locate_containing(&self.pool.space, addr)?;
            self.spans.learn(loc);
            Some((p, loc))
        })
    }

    /// Checks that `[addr, addr+len)` lies inside one allocated object's
    /// slot (as writes must): never its header, never a neighbour's
    /// ([`Tx::in_object`]), and that `addr` is aligned to `align`.
    #[inline]
    fn check_in_object(&self, addr: u64, len: u64, align: usize) -> Result<()> {
        if addr % align as u64 != 0 || !self.in_object(addr, len) {
            return Err(Error::BadPointer { addr });
        }
        Ok(())
    }

    /// Whether `[addr, addr+len)` lies inside the payload of one allocated
    /// object: the bounds check of every read (a first log of a range adds
    /// the tag: [`Tx::in_live_object`]).
    ///
    /// O(1) and inlined for the two common answers: an object of a span in
    /// the region's span cache (`SpanCache::holds`: a tag compare and a
    /// multiply on the cache's own line; a cached span's slots lie inside
    /// the mapping and above `HEAP_OFF`, so `check`'s bounds hold for any
    /// range inside one), or the object the tables found last (a large
    /// one: sps's array, a front end's big value); anything else asks the
    /// tables (`in_object_slow`, itself O(1): `alloc::locate_containing`).
    #[inline]
    fn in_object(&self, addr: u64, len: u64) -> bool {
        self.spans.holds(addr, len) || self.in_last_object(addr, len) || self.in_object_slow(addr, len)
    }

    /// Whether `[addr, addr+len)` lies inside `last_object` (a live object).
    #[inline]
    fn in_last_object(&self, addr: u64, len: u64) -> bool {
        let (start, end) = self.last_object.get();
        if start != 0 && addr >= start && addr.checked_add(len).is_some_and(|e| e <= end) {
            return true;
        }
        crate::failpoint::planted("tx.last_object_ignores_len") && start != 0 && addr >= start && addr < end
    }

    /// Whether `[addr, addr+len)` lies inside the payload of one allocated
    /// object that is live: [`Tx::in_object`], and the object's header
    /// carries the tag. A slot an earlier region freed has its tag cleared
    /// by that region's commit (`clear_tags`), and a slot never handed out
    /// has none, so a write through a dangling pointer into a freed slot
    /// is refused. The check of every first log of a range (`loggable`:
    /// undo and redo). Neither the span tables nor the span cache know
    /// which slots of a span are allocated (the slot bitmaps are the
    /// allocator's), hence the header load, once per object: the object
    /// found becomes `last_object`, so the next first log of another range
    /// of it (sps's array, a front end's fields) is a compare. A small
    /// object's header is 16 bytes before its payload, mostly on the line
    /// the undo entry's copy of the old bytes reads next.
    ///
    /// Not refused: a slot the collector swept (the sweep rewrites the
    /// bitmaps, not the headers, so it keeps its tag until reused; only a
    /// pointer held outside any region across a collection can dangle
    /// there), and an object this region frees (freed at its commit).
    #[inline]
    fn in_live_object(&self, addr: u64, len: u64) -> bool {
        self.in_last_object(addr, len) || self.in_live_object_new(addr, len)
    }

    /// [`Tx::in_live_object`] for a range outside `last_object`: the span
    /// cache or the tables find the slot's payload, then its tag is read.
    #[inline(never)]
    fn in_live_object_new(&self, addr: u64, len: u64) -> bool {
        let payload = match self.spans.payload_holding(addr, len) {
            Some(p) => p,
            None => match self.object_by_tables(addr, len) {
                Some(p) => p,
                None => return false,
            },
        };
        if !self.tagged(payload.0) && !crate::failpoint::planted("tx.log_skips_tag") {
            return false;
        }
        self.last_object.set(payload);
        true
    }

    /// The payload `[start, end)` of the object whose payload holds
    /// `[addr, addr+len)`, by the span and arena tables (and the cache).
    fn object_by_tables(&self, addr: u64, len: u64) -> Option<(u64, u64)> {
        self.check(addr, len, 1).ok()?;
        let (p, loc) = self.locate_containing(addr)?;
        (addr >= p && addr + len <= p + loc.capacity()).then(|| (p, p + loc.capacity()))
    }

    /// Whether the header of the object whose payload starts at `p` (found
    /// by the span cache or the tables) carries the tag: a live object.
    #[inline]
    fn tagged(&self, p: u64) -> bool {
        // SAFETY: the span cache or the tables found a slot whose payload
        // starts at `p`: its header lies in the heap, inside the mapping
        // (which never shrinks while the pool is open).
        let flags = unsafe { std::ptr::read((p - OBJ_HEADER + OBJ_FLAGS_OFF) as *const u32) };
        flags & OBJ_TAG_MASK == OBJ_TAG
    }

    /// [`Tx::in_object`] by the span and arena tables; the object found
    /// becomes the last one if it is live (objects are freed only when a
    /// region ends, so it stays one for the rest of this region). A read
    /// of an untagged slot is answered (as before) but not remembered:
    /// `last_object` must not let a first log skip the tag.
    #[inline(never)]
    fn in_object_slow(&self, addr: u64, len: u64) -> bool {
        let Some(payload) = self.object_by_tables(addr, len) else { return false };
        if self.tagged(payload.0) {
            self.last_object.set(payload);
        }
        true
    }

    /// Reads the object `p` points to. The read must lie inside the object
    /// `p` points into, or it is [`Error::BadPointer`].
    ///
    /// Always inlined: a read of an object the span cache knows is a tag
    /// compare, a load and the redo path's one-byte test; out of line
    /// (LLVM's choice once that test was added) it cost ~20 instructions
    /// more per read (callgrind, binary-trees).
    #[inline(always)]
    pub fn read<T: Persistent>(&self, p: PPtr<T>) -> Result<T> {
        self.check_in_object(p.addr(), size_of::<T>() as u64, align_of::<T>())?;
        // SAFETY: the range is inside one object of the mapped heap
        // (checked); every bit pattern is a valid T (Persistent's contract).
        let v = unsafe { std::ptr::read(p.addr() as *const T) };
        Ok(self.overlaid(p.addr(), v))
    }

    /// The region's own pending redo writes copied over `vals`, read in
    /// place from `addr` (`tx/redo.rs`; nothing off the redo path).
    #[inline]
    fn overlay_values<T: Persistent>(&self, addr: u64, vals: &mut [T]) {
        // SAFETY: `vals` is plain data (every bit pattern a valid T), seen
        // as its bytes for the copy.
        let bytes = unsafe { std::slice::from_raw_parts_mut(vals.as_mut_ptr() as *mut u8, std::mem::size_of_val(vals)) };
        self.overlay(addr, bytes);
    }

    /// Overwrites the object `p` points to with `value`.
    pub fn write<T: Persistent>(&self, p: PPtr<T>, value: T) -> Result<()> {
        self.check(p.addr(), size_of::<T>() as u64, align_of::<T>())?;
        self.check_values(p.addr(), 0, std::slice::from_ref(&value))?;
        if self.write_redo(p.addr(), redo::bytes_of(std::slice::from_ref(&value)))? {
            return Ok(());
        }
        self.log_range(p.addr(), size_of::<T>() as u64)?;
        // SAFETY: inside the mapped heap (checked); the old bytes are logged.
        unsafe { std::ptr::write(p.addr() as *mut T, value) };
        crate::failpoint::Failpoint::TxAfterWrite.hit();
        Ok(())
    }

    /// Reads, changes and writes back the object `p` points to.
    pub fn update<T: Persistent, R>(&self, p: PPtr<T>, f: impl FnOnce(&mut T) -> R) -> Result<R> {
        let mut v = self.read(p)?;
        let r = f(&mut v);
        self.write(p, v)?;
        Ok(r)
    }

    /// Element `i` of array `a`.
    pub fn get<T: Persistent>(&self, a: PArray<T>, i: u64) -> Result<T> {
        let addr = self.elem_addr(a, i, 1)?;
        // SAFETY: in bounds of the array and the mapping (checked by elem_addr).
        let v = unsafe { std::ptr::read(addr as *const T) };
        Ok(self.overlaid(addr, v))
    }

    /// Sets element `i` of array `a`.
    pub fn set<T: Persistent>(&self, a: PArray<T>, i: u64, value: T) -> Result<()> {
        let addr = self.elem_addr(a, i, 1)?;
        self.check_values(a.addr(), i, std::slice::from_ref(&value))?;
        if self.write_redo(addr, redo::bytes_of(std::slice::from_ref(&value)))? {
            return Ok(());
        }
        self.log_range(addr, size_of::<T>() as u64)?;
        // SAFETY: in bounds (checked); old bytes logged.
        unsafe { std::ptr::write(addr as *mut T, value) };
        crate::failpoint::Failpoint::TxAfterWrite.hit();
        Ok(())
    }

    /// Copies elements `start..start+out.len()` of `a` into `out`.
    pub fn read_slice<T: Persistent>(&self, a: PArray<T>, start: u64, out: &mut [T]) -> Result<()> {
        let addr = self.elem_addr(a, start, out.len() as u64)?;
        // SAFETY: in bounds (checked); `out` is a distinct volatile buffer.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const T, out.as_mut_ptr(), out.len()) };
        self.overlay_values(addr, out);
        Ok(())
    }

    /// Copies `src` into elements `start..start+src.len()` of `a`.
    pub fn write_slice<T: Persistent>(&self, a: PArray<T>, start: u64, src: &[T]) -> Result<()> {
        let addr = self.elem_addr(a, start, src.len() as u64)?;
        self.check_values(a.addr(), start, src)?;
        if self.write_redo(addr, redo::bytes_of(src))? {
            return Ok(());
        }
        self.log_range(addr, std::mem::size_of_val(src) as u64)?;
        // SAFETY: in bounds (checked); old bytes logged; `src` is volatile memory.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), addr as *mut T, src.len()) };
        crate::failpoint::Failpoint::TxAfterWrite.hit();
        Ok(())
    }

    fn elem_addr<T: Persistent>(&self, a: PArray<T>, i: u64, n: u64) -> Result<u64> {
        let len = self.len(a)?;
        if i.checked_add(n).is_none_or(|e| e > len) {
            return Err(Error::OutOfBounds { index: i, count: n, len });
        }
        // i + n <= len and len * size fits the slot, which lies in the
        // mapping and is aligned for T (checked by `len`), so this cannot
        // overflow and needs no further check.
        Ok(a.addr() + i * size_of::<T>() as u64)
    }

    /// Logs `[addr, addr+len)` so the region may modify it in place. Ranges
    /// of objects allocated in this region, and ranges already logged, are
    /// not logged again. Used by front ends that write through raw pointers.
    #[inline]
    pub fn log_range(&self, addr: u64, len: u64) -> Result<()> {
        let off = addr.wrapping_sub(self.pool.space.base());
        // Already logged in this region (and validated then): nothing to do.
        if self.st.borrow().sets.words.covered(off, len) {
            return Ok(());
        }
        self.log_new_range(addr, len)
    }

    /// [`Tx::log_range`] for each `(addr, len)` of `ranges`, with one fence
    /// for all of their undo entries instead of one each (the region may
    /// modify none of them before this returns). On an error the ranges
    /// before the bad one may be logged (and are fenced: the region may go
    /// on and change them); none was modified.
    pub fn log_ranges<I>(&self, ranges: I) -> Result<()>
    where
        I: IntoIterator<Item = (u64, u64)>,
        I::IntoIter: Clone,
    {
        let (logged, result) = self.log_ranges_unfenced(ranges);
        if logged {
            // Step 1 of the protocol for every entry above, under one fence.
            self.pool.space.persist.fence(crate::fences::UNDO_ENTRY)?;
        }
        result
    }

    /// The logging half of [`Tx::log_ranges`]: an undo entry for each range
    /// not yet covered, up to the first error, every entry written back
    /// on return (the batch's lines once each, `LogWriter::flush_batch`).
    /// Returns whether it wrote any entry (the caller must then fence
    /// before changing any of the ranges, whatever the result: a range
    /// logged is covered, so a later write to it logs nothing and fences
    /// nothing) and the result.
    ///
    /// Each range's bitmap word is read first, in a loop of loads alone: a
    /// front end logging a pipeline's ranges ahead passes dozens at random
    /// addresses, and the cache misses of those reads overlap there, where
    /// in the logging loop each would wait behind the previous entry's work.
    /// Leaving the redo path and marking the region's new objects
    /// ([`Tx::ready_to_log`]) is done once, at the first range not covered:
    /// nothing in the loop allocates for the region or returns to redo.
    pub(crate) fn log_ranges_unfenced<I>(&self, ranges: I) -> (bool, Result<()>)
    where
        I: IntoIterator<Item = (u64, u64)>,
        I::IntoIter: Clone,
    {
        let base = self.pool.space.base();
        let ranges = ranges.into_iter();
        {
            let st = self.st.borrow();
            let sink = ranges.clone().fold(0u64, |a, (addr, _)| a | st.sets.words.peek(addr.wrapping_sub(base)));
            std::hint::black_box(sink);
        }
        let (mut logged, mut ready) = (false, false);
        let each = || -> Result<()> {
            for (addr, len) in ranges {
                if len == 0 || self.st.borrow().sets.words.covered(addr.wrapping_sub(base), len) {
                    continue;
                }
                if !ready {
                    ready = true;
                    if !self.ready_to_log(addr, len)? {
                        continue;
                    }
                }
                self.log_entry(addr, len, false)?;
                logged = true;
            }
            Ok(())
        };
        let result = each();
        self.st.borrow_mut().log.flush_batch(&self.pool.space);
        (logged, result)
    }

    /// [`Tx::log_range`] for a caller that keeps a bitmap page between
    /// calls (`Region::log_range`, the C ABI's `engram_region_log`): a range
    /// already logged is answered from `page` with one compare and one bit
    /// test; otherwise as `log_range`, and `page` then caches the page of
    /// the range's first word. `page` must not outlive the region (it is
    /// valid until the set is cleared in `Drop`; `logged::PageCache`).
    #[inline]
    pub(crate) fn log_range_cached(&self, page: &std::cell::Cell<logged::PageCache>, addr: u64, len: u64) -> Result<()> {
        let off = addr.wrapping_sub(self.pool.space.base());
        if page.get().covered(off, len) {
            return Ok(());
        }
        self.log_range(addr, len)?;
        if let Some(c) = logged::PageCache::of(&self.st.borrow().sets.words, off) {
            page.set(c);
        }
        Ok(())
    }

    /// `log_range` for a range the caller found not covered: validates and
    /// logs it, durably (its entry fenced), unless it turned out to be
    /// covered once the region left the redo path or marked its new
    /// objects.
    fn log_new_range(&self, addr: u64, len: u64) -> Result<()> {
        if self.ready_to_log(addr, len)? {
            self.log_entry(addr, len, true)?;
        }
        Ok(())
    }

    /// Readies the region for an undo entry of `[addr, addr+len)`, which
    /// the caller found not covered: a region on the redo path leaves it
    /// (`tx/redo.rs`; leaving logs and marks the pending ranges), and the
    /// region's new objects are marked (they need no undo). Returns
    /// whether the range still needs its entry.
    fn ready_to_log(&self, addr: u64, len: u64) -> Result<bool> {
        let space = &self.pool.space;
        let mut changed = self.redo.get() != redo::RedoState::Off;
        self.leave_redo()?;
        let mut st = self.st.borrow_mut();
        if st.sets.unmarked_fresh() {
            // The region's new objects need no undo: mark them now, once.
            st.sets.mark_fresh(space.base());
            changed = true;
        }
        // The caller asked `covered` already: ask again only if the set
        // changed since (an sps swap, a front end's log, skip this).
        Ok(!(changed && st.sets.words.covered(addr.wrapping_sub(space.base()), len)))
    }

    /// Validates `[addr, addr+len)` ([`Tx::loggable`]) and writes its undo
    /// entry: fenced if `durable`, else batched (the caller writes the
    /// batch back and fences before changing the range); the range is
    /// covered from here on.
    #[inline(always)]
    fn log_entry(&self, addr: u64, len: u64, durable: bool) -> Result<()> {
        self.loggable(addr, len)?;
        let space = &self.pool.space;
        let off = addr.wrapping_sub(space.base());
        let mut st = self.st.borrow_mut();
        // (Objects allocated by this region need no undo, a rollback frees
        // them: their words are in `words` since `mark_fresh`.)
        let st = &mut *st;
        if durable {
            st.log.append(space, self, off, len as u32)?;
        } else {
            st.log.append_batched(space, self, off, len as u32)?;
        }
        st.sets.logged.push((off, len as u32));
        st.sets.words.mark(off, len);
        self.note_changed(&mut st.sets.dirty, off, len);
        Ok(())
    }

    /// Whether `[addr, addr+len)` may be logged (undo or redo): inside one
    /// live object's payload ([`Tx::in_live_object`]), or in the root
    /// table, and the pool is writable.
    fn loggable(&self, addr: u64, len: u64) -> Result<()> {
        let space = &self.pool.space;
        let off = addr.wrapping_sub(space.base());
        let in_roots = off >= ROOTS_OFF && off.saturating_add(len) <= ROOTS_OFF + ROOTS_CAP as u64 * crate::format::ROOT_ENTRY_SIZE;
        if !(in_roots || self.in_live_object(addr, len)) || len > u32::MAX as u64 {
            return Err(Error::BadPointer { addr });
        }
        if space.read_only {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }

    // ----- locks ------------------------------------------------------------

    /// Takes the lock for `key` until the region ends (two-phase locking).
    /// Waits at most the pool's lock timeout, then fails with
    /// [`Error::LockTimeout`] and the region rolls back.
    pub fn lock(&self, key: u64) -> Result<()> {
        let mut st = self.st.borrow_mut();
        if self.id.get() == 0 {
            self.id.set(NEXT_TX_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        }
        match self.pool.locks.acquire(key, self.id.get(), self.pool.lock_timeout) {
            Ok(true) => {
                st.sets.locks.push(key);
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(e) => {
                st.doomed = true;
                Err(e)
            }
        }
    }

    /// Takes the lock guarding the object `p` points to, until the region ends.
    pub fn lock_ptr<T>(&self, p: PPtr<T>) -> Result<()> {
        self.lock(p.addr())
    }

    // ----- end of region ----------------------------------------------------

    /// Makes the region durable (steps 1-4 of the module docs). By
    /// reference, like [`Tx::rollback`]: the caller drops the `Tx` (its
    /// locks, log slot and gate) afterwards, so the ~500-byte `Tx` is not
    /// moved into the call (a `memcpy` per region).
    pub(crate) fn commit(&self) -> Result<()> {
        let space = &self.pool.space;
        {
            let st = self.st.borrow();
            let gen = if !st.sets.redo.is_empty() {
                self.commit_redo(&st)?
            } else if self.commits_by_record(&st) {
                self.commit_by_record(&st)?
            } else {
                if st.sets.dirty.is_empty() {
                    // nothing written
                } else if st.log.entries() == 0 && !st.eager_new && space.persist.defers_fresh() {
                    // 1'. nothing logged: `dirty` holds only the region's new
                    //     objects, which nothing durable reaches; they are
                    //     written back by the next fence of any thread, before
                    //     any region that links them commits (`fresh.rs`).
                    self.defer_fresh(&st.sets.dirty);
                } else {
                    // 1. flush what the region wrote and allocated.
                    for &(off, len) in &st.sets.dirty {
                        space.flush(off, len);
                    }
                    // 2. the new data is durable before the log stops protecting it.
                    space.persist.fence(crate::fences::REGION_DATA)?;
                }
                crate::failpoint::Failpoint::TxBeforeCommit.hit();
                // 3. one generation bump commits the region.
                if st.log.entries() > 0 {
                    st.log.commit(space)?
                } else {
                    st.log.gen()
                }
            };
            // The generation the slot now holds goes to the slot set's
            // cache, for the slot's next region (only here: any other way
            // out of the region leaves the cache "unknown").
            self.pool.slot_gen_known(st.slot, gen);
        }
        crate::failpoint::Failpoint::TxAfterCommit.hit();
        // 4. deferred frees, then release.
        if self.st.borrow().sets.frees.is_empty() {
            return Ok(());
        }
        // A freed object may be reused at once and stored into unlogged: no
        // earlier region's commit record may still need its bytes (`log.rs`,
        // step 4'; a region that only frees issues no other fence).
        space.persist.settle_bumps(crate::fences::BUMPS_BEFORE_REUSE)?;
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        let cache = st.cache.clone().unwrap_or_else(|| self.pool.heap.cache());
        // A freed object loses its tag, so a second free or a dangling
        // pointer is caught (`free`, `check`). Not logged: the region that
        // unlinked it is committed. All tags first: a slot handed back may
        // be reused by another thread at once.
        let sets = &mut **st.sets;
        let freed = FreedSlots { hdrs: &mut sets.freed_hdrs, runs: &mut sets.freed_runs };
        clear_tags(space, &sets.frees, freed);
        self.pool.heap.free_runs(space, &cache, &sets.freed_hdrs, &sets.freed_runs);
        self.pool.heap.free_many(space, &cache, &sets.frees_large)
    }

    /// Step 1' of [`Tx::commit`]: the region's new objects (`dirty`, pool
    /// offsets) listed for the next fence of any thread (`fresh.rs`).
    /// With the planted bug `tx.fresh_never_written_back` they are neither
    /// listed nor flushed.
    fn defer_fresh(&self, dirty: &[(u64, u64)]) {
        if crate::failpoint::planted("tx.fresh_never_written_back") {
            return;
        }
        let space = &self.pool.space;
        space.persist.defer_fresh(space.base(), dirty);
    }

    /// Whether the region commits by commit record (`log.rs`, steps 3' and
    /// 4'): it logged, its log stayed in its slot, and it neither allocated
    /// nor freed, so its writes are exactly its logged ranges; and the
    /// durability mode allows it (`Persister::commits_by_record`).
    #[inline]
    fn commits_by_record(&self, st: &TxState) -> bool {
        st.log.entries() > 0
            && !st.log.spilled()
            && st.sets.frees.is_empty()
            && st.sets.large.is_empty()
            && st.sets.mag.handed_out_count() == 0
            && self.pool.space.persist.commits_by_record()
    }

    /// Steps 1-3 for a region whose writes are exactly its logged ranges:
    /// data and commit record share one fence, the commit point; the
    /// generation bump waits for the next fence of any thread (`log.rs`,
    /// steps 3' and 4'). Returns the slot's new generation.
    fn commit_by_record(&self, st: &TxState) -> Result<u64> {
        let space = &self.pool.space;
        // 0. new objects of earlier regions that this region may have linked
        //    (another thread's, listed after this region's first entry
        //    fence), durable before the record can be (`fresh.rs`).
        space.persist.settle_fresh(crate::fences::FRESH_BEFORE_RECORD)?;
        // 1. the checksum of what the region wrote (its logged ranges),
        //    read before the write-back (which may evict the lines), then
        //    the data flushed.
        let sum = crate::log::data_sum(space, st.sets.logged.iter().copied())?;
        for &(off, len) in &st.sets.dirty {
            space.flush(off, len);
        }
        // 2. the commit record holding that checksum, flushed.
        st.log.commit_record(space, sum)?;
        crate::failpoint::Failpoint::TxBeforeCommit.hit();
        // 3. one fence: data and record durable, the region is committed.
        space.persist.fence(crate::fences::RECORD_COMMIT)?;
        // 4'. retire the log; durable with the next fence (log.rs).
        st.log.commit_lazily(space)
    }

    /// Undoes the region (the caller then drops the `Tx`).
    pub(crate) fn rollback(&self) -> Result<()> {
        let space = &self.pool.space;
        self.rollback_redo()?;
        let (slot, entries) = {
            let st = self.st.borrow();
            (st.slot, st.log.entries())
        };
        if entries > 0 {
            crate::log::undo_slot(space, slot, &|a| a)?;
        }
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        let Some(cache) = &st.cache else { return Ok(()) };
        self.pool.heap.free_magazine(space, cache, &mut st.sets.mag);
        let large: Vec<Loc> = st.sets.large.iter().map(|&(_, _, loc)| loc).collect();
        self.pool.heap.free_many(space, cache, &large)
    }
}

impl ChunkAlloc for Tx<'_> {
    fn alloc_chunk(&self, bytes: u64) -> Result<u64> {
        // Chunks are linked from the slot as soon as they exist, so they are
        // not the region's allocations: a rollback keeps them for reuse.
        let cell = self.pool.heap.cache();
        self.pool.heap.alloc(&self.pool.space, &cell, bytes, TYPE_LOG_CHUNK, 0, 1).map(|(a, _)| a)
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        let st = self.st.get_mut();
        for &key in &st.sets.locks {
            self.pool.locks.release(key);
        }
        if let Some(cache) = &st.cache {
            self.pool.heap.end_region(&self.pool.space, cache, &mut st.sets.mag);
        }
        self.pool.put_slot(st.slot);
        // SAFETY: `sets` is taken once, here, and `st` is not used again
        // (`drop` runs once; a `ManuallyDrop` field is not dropped after it).
        let mut sets = unsafe { std::mem::ManuallyDrop::take(&mut st.sets) };
        sets.recycle(self.pool.space.base());
        // try_with: a region may end while its thread's locals are torn down.
        let _ = SPARE_SETS.try_with(|s| s.set(Some(sets)));
    }
}

#[cfg(test)]
mod tests {
    use crate::{CreateOptions, Durability, Error, Pool};

    /// The thread's next region starts with no "already logged" bit set,
    /// whatever the last one did (logged and committed, nothing, or rolled
    /// back; `RegionSets::recycle` skips the bitmaps only when nothing was
    /// marked): a stale bit would let a store skip its undo entry, and a
    /// rollback would then keep the store.
    #[test]
    fn a_later_region_logs_again_what_an_earlier_one_logged() {
        let path = std::env::temp_dir().join(format!("engram-tx-relog-{}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let pool = Pool::create(&path, CreateOptions::new("tx").durability(Durability::Process)).unwrap();
        let p = pool.txn(|tx| tx.alloc(1u64)).unwrap();
        pool.txn(|tx| tx.write(p, 2)).unwrap();
        for v in 3..6u64 {
            pool.txn(|_| Ok::<_, Error>(())).unwrap();
            let r = pool.txn(|tx| {
                tx.write(p, v)?;
                Err::<(), _>(Error::Aborted)
            });
            assert!(matches!(r, Err(Error::Aborted)));
            assert_eq!(pool.txn(|tx| tx.read(p)).unwrap(), 2, "a rolled-back store survived");
        }
        pool.close().unwrap();
        let _ = std::fs::remove_file(&path);
    }
}
