//! The persistent heap allocator: 64 KiB spans in 64 MiB arenas, size
//! classes for small objects, whole spans for large ones, per-thread caches.
//!
//! What it keeps true:
//! - The persistent span table (one u32 per span, at the start of each arena)
//!   says what every span holds: free, a size class, or a large object.
//!   It is written (and flushed, not fenced) only on the slow path, when a
//!   span changes hands; the region that links an object from the new span
//!   fences before it commits, which makes the entry durable first.
//! - Which slots of a small span are in use is volatile while the pool is
//!   open. The allocation fast path writes the object header and nothing else:
//!   no log, no flush. After a crash the GC rebuilds the slot bitmaps by
//!   marking from the roots, so an object allocated and never linked is free
//!   again. After a clean close the bitmaps are written into the arena
//!   metadata and reopening reads them (O(metadata), not O(heap)).
//! - A span-table entry naming a size class changes only in `sweep` (the
//!   span became empty), which runs while no region runs (GC gate held
//!   exclusively): a region's span cache (`tx/spans.rs`) relies on it.
//! - Every way an allocated object stops being one (`free`, `free_many`,
//!   `free_runs`, `free_magazine`, `sweep`) first bumps the heap's free
//!   count ([`Heap::frees_seen`]), before the object's memory can be
//!   reused: a validation a thread keeps between regions (`tx/kept.rs`)
//!   holds while the count has not moved.
//! - Lock order: class lock, then the span lock. Thread caches are locked
//!   alone (each only by its thread, and by `drain_caches` while no region runs).

pub(crate) mod cache;
pub mod classes;

use crate::error::{Error, Result};
use crate::format::*;
use crate::hash::{FastMap, FastSet};
use crate::pool::space::Space;
use cache::{CacheCell, Magazine};
use classes::{class_for, slot_size, slots_per_span, NUM_CLASSES};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Slots moved between a thread cache and its class at a time.
pub(crate) const BATCH: usize = 32;

/// Where an object lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    /// Slot `index` of small span `span` (global span index) of class `class`.
    Small { span: u64, class: usize, index: u32 },
    /// A large object starting at span `span`, `spans` long.
    Large { span: u64, spans: u32 },
    /// A huge object filling arenas `arena..arena + arenas`.
    Huge { arena: u64, arenas: u32 },
}

impl Loc {
    /// The allocator metadata that says this object exists: (pool offset,
    /// bytes) of its span-table entries, or of its arena-table entries for a
    /// huge object. It must be durable before anything durable links the object.
    pub fn meta_range(self) -> (u64, u64) {
        match self {
            Loc::Small { span, .. } => (entry_off(span), 4),
            Loc::Large { span, spans } => (entry_off(span), 4 * spans as u64),
            Loc::Huge { arena, arenas } => (arena_entry_off(arena), 8 * arenas as u64),
        }
    }

    /// Bytes available to the payload.
    pub fn capacity(self) -> u64 {
        match self {
            Loc::Small { class, .. } => slot_size(class) - OBJ_HEADER,
            Loc::Large { spans, .. } => spans as u64 * SPAN_SIZE - OBJ_HEADER,
            Loc::Huge { arenas, .. } => arenas as u64 * ARENA_SIZE - OBJ_HEADER,
        }
    }
}

/// Where [`Heap::alloc_batched`] placed an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placed {
    /// A slot of small span `span` (global span index) of class `class`.
    Small { span: u64, class: usize },
    /// A large or huge object.
    Other(Loc),
}

/// Volatile state of one small span.
#[derive(Clone)]
pub(crate) struct SpanBits {
    pub bits: [u64; 32],
    pub live: u32,
}

impl SpanBits {
    fn empty() -> Self {
        SpanBits { bits: [0; 32], live: 0 }
    }
}

#[derive(Default)]
struct Class {
    spans: FastMap<u64, SpanBits>,
    /// Spans with at least one free slot.
    partial: Vec<u64>,
}

/// Free spans, per arena (bit set = free and mapped).
#[derive(Default)]
struct SpanSpace {
    free: Vec<[u64; 16]>,
    /// Spans below this global index have been incorporated.
    mapped_spans: u64,
}

/// Objects found live by a mark phase.
#[derive(Default)]
pub(crate) struct Marks {
    pub small: FastMap<u64, [u64; 32]>,
    pub large: FastSet<u64>,
}

impl Marks {
    /// Whether `loc` is marked.
    pub fn is_marked(&self, loc: Loc) -> bool {
        match loc {
            Loc::Small { span, index, .. } => self.small.get(&span).is_some_and(|w| w[(index / 64) as usize] & (1u64 << (index % 64)) != 0),
            Loc::Large { span, .. } => self.large.contains(&span),
            Loc::Huge { arena, .. } => self.large.contains(&(arena * SPANS_PER_ARENA)),
        }
    }

    /// Marks `loc`; returns false if it was already marked.
    pub fn mark(&mut self, loc: Loc) -> bool {
        match loc {
            Loc::Small { span, index, .. } => {
                let w = self.small.entry(span).or_insert([0; 32]);
                let (i, b) = ((index / 64) as usize, 1u64 << (index % 64));
                let fresh = w[i] & b == 0;
                w[i] |= b;
                fresh
            }
            Loc::Large { span, .. } => self.large.insert(span),
            // Span 0 of an arena is never a large head, so the keys are distinct.
            Loc::Huge { arena, .. } => self.large.insert(arena * SPANS_PER_ARENA),
        }
    }
}

/// Counts reported by `engram info` and the GC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Bytes in free spans plus free slots of small spans.
    pub free_bytes: u64,
    /// Spans in use (small or large).
    pub used_spans: u64,
    /// Spans free.
    pub free_spans: u64,
}

static NEXT_HEAP_ID: AtomicU64 = AtomicU64::new(1);

/// The allocator of one open pool.
pub(crate) struct Heap {
    pub id: u64,
    classes: Box<[Mutex<Class>]>,
    spans: Mutex<SpanSpace>,
    large: Mutex<FastMap<u64, u32>>,
    /// Huge objects: first arena -> arena count.
    huge: Mutex<FastMap<u64, u32>>,
    caches: Mutex<Vec<Arc<CacheCell>>>,
    /// How many times objects were freed or swept (see the module docs).
    frees: FreeCount,
}

/// [`Heap::frees`] on a line of its own: every region reads it, frees
/// write it, and the class and cache locks beside it are written often.
#[repr(align(128))]
#[derive(Default)]
struct FreeCount(AtomicU64);

/// Pool offset of global span `g`.
#[inline]
pub(crate) fn span_off(g: u64) -> u64 {
    HEAP_OFF + g * SPAN_SIZE
}

/// Pool offset of span `g`'s span-table entry.
#[inline]
fn entry_off(g: u64) -> u64 {
    arena_off(g / SPANS_PER_ARENA) + (g % SPANS_PER_ARENA) * 4
}

/// Pool offset of span `g`'s saved allocation bitmap.
fn bitmap_off(g: u64) -> u64 {
    arena_off(g / SPANS_PER_ARENA) + ARENA_BITMAP_OFF + (g % SPANS_PER_ARENA) * SPAN_BITMAP_BYTES
}

/// Pool offset of the checksum of span `g`'s saved allocation bitmap.
fn bitmap_crc_off(g: u64) -> u64 {
    arena_off(g / SPANS_PER_ARENA) + ARENA_BITMAP_CRC_OFF + (g % SPANS_PER_ARENA) * 4
}

/// Global span count covered by `size` bytes of pool.
fn spans_in(size: u64) -> u64 {
    size.saturating_sub(HEAP_OFF) / SPAN_SIZE
}

/// Pool offset of arena `a`'s arena-table entry.
fn arena_entry_off(a: u64) -> u64 {
    ARENA_TABLE_OFF + a * 8
}

fn set_arena_entry(space: &Space, a: u64, v: u64) -> Result<()> {
    space.write(arena_entry_off(a), &v)?;
    space.flush(arena_entry_off(a), 8);
    Ok(())
}

/// Span `g`'s logical span-table value, or None if the stored word fails its check.
fn entry(space: &Space, g: u64) -> Option<u32> {
    space.read::<u32>(entry_off(g)).ok().and_then(span_entry_decode)
}

/// [`entry`], with a failed check as `Corrupt`.
fn entry_checked(space: &Space, g: u64) -> Result<u32> {
    let w: u32 = space.read(entry_off(g))?;
    span_entry_decode(w).ok_or_else(|| Error::corrupt(format!("span {g}: span-table entry {w:#x} fails its checksum")))
}

fn set_entry(space: &Space, g: u64, v: u32) -> Result<()> {
    space.write(entry_off(g), &span_entry_encode(v))?;
    space.flush_named(entry_off(g), 4, crate::fences::SPAN_ENTRY);
    Ok(())
}

/// What the pool's tables say span `g` holds.
enum SpanView {
    /// Arena `a` belongs to a huge object (its arena-table entry `ae`).
    Huge { a: u64, ae: u64 },
    /// The span's logical span-table value.
    Entry(u32),
}

/// Reads span `g`'s arena-table entry and (for an arena of spans) its
/// span-table entry: one load each and a CRC-16 of two bytes. None when
/// `g` is beyond the pool, a metadata span, or its word fails its check.
#[inline]
fn span_view(space: &Space, g: u64) -> Option<SpanView> {
    if g >= spans_in(space.size()) {
        return None;
    }
    let a = g / SPANS_PER_ARENA;
    let ae: u64 = space.read(arena_entry_off(a)).ok()?;
    if ae != 0 {
        return Some(SpanView::Huge { a, ae });
    }
    if g % SPANS_PER_ARENA < ARENA_META_SPANS {
        return None;
    }
    entry(space, g).map(SpanView::Entry)
}

/// The object of span `g` (span-table value `e`) whose header is `within`
/// bytes into the span, if one can start there.
#[inline]
fn loc_at(space: &Space, g: u64, e: u32, within: u64) -> Option<Loc> {
    match e {
        1..=39 => {
            let class = (e - 1) as usize;
            let index = classes::slot_index(class, within);
            (index * slot_size(class) == within && index < slots_per_span(class) as u64).then_some(Loc::Small {
                span: g,
                class,
                index: index as u32,
            })
        }
        _ if e & SPAN_LARGE_HEAD != 0 && e != SPAN_META => {
            let spans = e & SPAN_LARGE_MASK;
            (within == 0 && spans > 0 && g + spans as u64 <= spans_in(space.size())).then_some(Loc::Large { span: g, spans })
        }
        _ => None,
    }
}

/// Finds the object whose payload starts at `addr`, from the persistent span table.
pub(crate) fn locate(space: &Space, addr: u64) -> Option<Loc> {
    let base = space.base();
    if addr < base + HEAP_OFF + OBJ_HEADER || addr % 16 != 0 {
        return None;
    }
    let hdr = addr - OBJ_HEADER - base;
    let g = (hdr - HEAP_OFF) / SPAN_SIZE;
    match span_view(space, g)? {
        SpanView::Huge { a, ae } => {
            let arenas = (ae & ARENA_HUGE_MASK) as u32;
            let fits = arena_off(a + arenas as u64) <= space.size();
            (ae & ARENA_HUGE_HEAD != 0 && hdr == arena_off(a) && arenas > 0 && fits).then_some(Loc::Huge { arena: a, arenas })
        }
        SpanView::Entry(e) => loc_at(space, g, e, hdr - span_off(g)),
    }
}

/// Finds the object whose slot contains `addr`: its payload address and
/// place, the answer `locate(payload)` gives (checked the same way), in
/// O(1) from the span named by `addr`'s bits. For a span of small objects
/// (the common case, inlined here) that is two loads (its arena's entry
/// and its span-table word), the word's CRC-16 and a multiply: the class
/// gives the slot boundaries, no object header is read. Large and huge
/// objects go out of line (`locate_containing_large`, `_other`).
/// Called by every pointer check the region's caches cannot answer and by
/// every PSTM write (`cell_offset`).
pub(crate) fn locate_containing(space: &Space, addr: u64) -> Option<(u64, Loc)> {
    let base = space.base();
    let off = addr.wrapping_sub(base);
    let g = off.wrapping_sub(HEAP_OFF) / SPAN_SIZE;
    if off < HEAP_OFF || g >= spans_in(space.size()) {
        return None;
    }
    let (a, s) = (g / SPANS_PER_ARENA, g % SPANS_PER_ARENA);
    // SAFETY: the arena table lies in the pool header, below `HEAP_OFF`,
    // which is always mapped; `a` is below `MAX_ARENAS` (span `g` is in
    // the pool, which is at most `MAX_POOL_SIZE`). Aligned: the base is
    // page-aligned and the entry at a multiple of 8.
    let ae = unsafe { std::ptr::read((base + arena_entry_off(a)) as *const u64) };
    if ae != 0 || s < ARENA_META_SPANS {
        return locate_containing_other(space, addr);
    }
    // SAFETY: the arena's span table lies in its first span, below span
    // `g`, which is mapped (checked above); the arena holds spans (its
    // entry is 0), so the table is one. Aligned: a multiple of 4.
    let word = unsafe { std::ptr::read((base + entry_off(g)) as *const u32) };
    match span_entry_decode(word)? {
        e @ 1..=39 => {
            let class = (e - 1) as usize;
            let index = classes::slot_index(class, off - span_off(g));
            // (base, HEAP_OFF, spans and slot sizes are multiples of 16,
            // so the payload is 16-aligned, as `locate` requires.)
            let payload = base + span_off(g) + index * slot_size(class) + OBJ_HEADER;
            let whole = index < slots_per_span(class) as u64 || crate::failpoint::planted("alloc.slot_past_span_end");
            whole.then_some((payload, Loc::Small { span: g, class, index: index as u32 }))
        }
        e => locate_containing_large(space, g, e),
    }
}

/// [`locate_containing`] for an `addr` in the heap whose arena holds a
/// huge object (through `locate` of its head) or in an arena's metadata
/// spans (nothing).
#[inline(never)]
fn locate_containing_other(space: &Space, addr: u64) -> Option<(u64, Loc)> {
    let base = space.base();
    let g = (addr - base - HEAP_OFF) / SPAN_SIZE;
    match span_view(space, g)? {
        SpanView::Huge { a, ae } => {
            let head = if ae & ARENA_HUGE_HEAD != 0 { a } else { a.checked_sub(ae & ARENA_HUGE_MASK)? };
            let payload = base + arena_off(head) + OBJ_HEADER;
            locate(space, payload).map(|loc| (payload, loc))
        }
        SpanView::Entry(e) => locate_containing_large(space, g, e),
    }
}

/// [`locate_containing`] in span `g` of an arena of spans (not a
/// metadata span) whose span-table value `e` is not a small class: a
/// large object's head, or a tail, whose entry gives the distance to its
/// head, whose entry is read directly (the head is in the same arena: a
/// large object never crosses one, `load_with`); else nothing.
#[inline(never)]
fn locate_containing_large(space: &Space, g: u64, e: u32) -> Option<(u64, Loc)> {
    let payload = |head: u64| space.base() + span_off(head) + OBJ_HEADER;
    match e {
        SPAN_META => None,
        _ if e & SPAN_LARGE_HEAD != 0 => loc_at(space, g, e, 0).map(|loc| (payload(g), loc)),
        _ if e & SPAN_LARGE_TAIL != 0 => {
            // Not a metadata span (the caller's): the subtraction cannot wrap.
            let k = (e & SPAN_LARGE_MASK) as u64;
            if k > g % SPANS_PER_ARENA - ARENA_META_SPANS {
                return None;
            }
            let head = g - k;
            let loc = loc_at(space, head, entry(space, head)?, 0)?;
            Some((payload(head), loc))
        }
        _ => None,
    }
}

impl Heap {
    fn empty() -> Self {
        Heap {
            id: NEXT_HEAP_ID.fetch_add(1, Ordering::Relaxed),
            classes: (0..NUM_CLASSES).map(|_| Mutex::new(Class::default())).collect(),
            spans: Mutex::new(SpanSpace::default()),
            large: Mutex::new(FastMap::default()),
            huge: Mutex::new(FastMap::default()),
            caches: Mutex::new(Vec::new()),
            frees: FreeCount::default(),
        }
    }

    /// The free count now: it moves (before the memory can be reused)
    /// whenever any object of this heap is freed or swept, so an object
    /// validated when the count read `n` is still allocated, unchanged,
    /// while the count still reads `n`.
    #[inline]
    pub fn frees_seen(&self) -> u64 {
        self.frees.0.load(Ordering::Acquire)
    }

    /// Moves the free count: called first by every way out of an object
    /// (the memory is reused only after the caller's later lock release,
    /// which orders this increment before it).
    #[inline]
    fn note_frees(&self) {
        self.frees.0.fetch_add(1, Ordering::AcqRel);
    }

    /// Builds the allocator from the persistent span tables, with every
    /// small span empty: the caller must run a collection before allocating.
    pub fn load(space: &Space) -> Result<Self> {
        // An unclean load reads no bitmaps, so it always yields a heap.
        Self::load_with(space, false)?.ok_or_else(|| Error::corrupt("heap load without bitmaps failed"))
    }

    /// Builds the allocator after a clean close: slot bitmaps come from the
    /// arena metadata. None if a bitmap fails its checksum; the caller then
    /// rebuilds them by marking ([`Heap::load`] and a collection).
    pub fn load_clean(space: &Space) -> Result<Option<Self>> {
        Self::load_with(space, true)
    }

    fn load_with(space: &Space, clean: bool) -> Result<Option<Self>> {
        let heap = Heap::empty();
        let limit = spans_in(space.size());
        let mut ss = heap.spans.lock();
        let mut large = heap.large.lock();
        let mut g = 0;
        while g < limit {
            let s = g % SPANS_PER_ARENA;
            if s == 0 {
                if !clean && !crate::failpoint::planted("alloc.partial_huge_not_repaired") {
                    clear_partial_huge(space, g / SPANS_PER_ARENA)?;
                }
                if let Some(k) = huge_at(space, g / SPANS_PER_ARENA)? {
                    heap.huge.lock().insert(g / SPANS_PER_ARENA, k);
                    g += k as u64 * SPANS_PER_ARENA;
                    continue;
                }
            }
            if s < ARENA_META_SPANS {
                g += 1;
                continue;
            }
            let e = entry_checked(space, g)?;
            match e {
                SPAN_FREE => set_free(&mut ss, g, true),
                1..=39 => {
                    let c = (e - 1) as usize;
                    let bits = if clean {
                        match read_bitmap(space, g, c)? {
                            Some(b) => b,
                            None => return Ok(None),
                        }
                    } else {
                        SpanBits::empty()
                    };
                    heap.classes[c].lock().spans.insert(g, bits);
                }
                _ if e & SPAN_LARGE_HEAD != 0 && e != SPAN_META => {
                    let n = (e & SPAN_LARGE_MASK) as u64;
                    if n == 0 || s + n > SPANS_PER_ARENA || g + n > limit {
                        return Err(Error::corrupt(format!("span {g}: large object of {n} spans overruns its arena")));
                    }
                    check_tails(space, g, n, clean)?;
                    large.insert(g, n as u32);
                    g += n;
                    continue;
                }
                // A tail without its head: left by a crash while a large
                // object was being set up (never linked) or freed. Its head
                // entry is gone, so nothing can point into it: free.
                _ if e & SPAN_LARGE_TAIL != 0 && e & SPAN_LARGE_HEAD == 0 && !clean => {
                    set_entry(space, g, SPAN_FREE)?;
                    set_free(&mut ss, g, true);
                }
                _ => return Err(Error::corrupt(format!("span {g}: bad span-table entry {e:#x}"))),
            }
            g += 1;
        }
        ss.mapped_spans = limit;
        drop((ss, large));
        heap.rebuild_partials();
        Ok(Some(heap))
    }

    fn rebuild_partials(&self) {
        for (c, cls) in self.classes.iter().enumerate() {
            let mut cls = cls.lock();
            let per = slots_per_span(c);
            let mut partial: Vec<u64> = cls.spans.iter().filter(|(_, b)| b.live < per).map(|(&g, _)| g).collect();
            partial.sort_unstable_by(|a, b| b.cmp(a));
            cls.partial = partial;
        }
    }

    /// For the deferred recovery GC (`pool/deferred.rs`): every slot of
    /// every small span counts as allocated (it may hold a live object until
    /// the final mark says otherwise), so the program allocates from free
    /// spans only until the sweep replaces these bitmaps with the marks.
    pub fn seal_small_spans(&self) {
        for (c, cls) in self.classes.iter().enumerate() {
            let per = slots_per_span(c);
            let mut cls = cls.lock();
            for sb in cls.spans.values_mut() {
                for i in 0..per {
                    sb.bits[(i / 64) as usize] |= 1 << (i % 64);
                }
                sb.live = per;
            }
            cls.partial.clear();
        }
    }

    /// This thread's allocation cache (look it up once per region).
    pub fn cache(&self) -> Arc<CacheCell> {
        cache::cell(self)
    }

    /// [`Heap::alloc`] for a region: small slots come from `mag`, refilled
    /// from `cell` a batch at a time (one cache lock per batch), and `mag`
    /// records them as handed out. `head`: the type id, flags and count of
    /// the header to write (the tag is added). Large and huge objects are
    /// not recorded in `mag` (the caller records their `Loc`). A small
    /// object's slot index is not computed (nothing on this path needs it):
    /// the answer names its span and class only.
    #[inline]
    pub fn alloc_batched(
        &self,
        space: &Space,
        cell: &CacheCell,
        mag: &mut Magazine,
        payload: u64,
        head: ObjHeader,
    ) -> Result<(u64, Placed)> {
        let ObjHeader { type_id, flags, count } = head;
        let need = payload.checked_add(OBJ_HEADER).ok_or_else(|| Error::invalid("allocation size overflows"))?;
        let Some(c) = class_for(need) else {
            let (addr, loc) = self.alloc(space, cell, payload, type_id, flags, count)?;
            return Ok((addr, Placed::Other(loc)));
        };
        let hdr = match mag.pop(c) {
            Some(h) => h,
            None => self.refill(space, cell, mag, c)?,
        };
        let off = hdr - space.base();
        space.write(off, &ObjHeader { type_id, flags: OBJ_TAG | flags, count })?;
        Ok((hdr + OBJ_HEADER, Placed::Small { span: (off - HEAP_OFF) / SPAN_SIZE, class: c }))
    }

    /// Ends `mag`'s batch and starts one of class `c`; hands out its first slot.
    #[cold]
    fn refill(&self, space: &Space, cell: &CacheCell, mag: &mut Magazine, c: usize) -> Result<u64> {
        self.close_batch(space, cell, mag);
        mag.class = c;
        let n = mag.next_batch();
        cell.take_batch(c, n, &mut mag.slots);
        if mag.is_empty() {
            // The bin is empty: take at least a BATCH from the class (one
            // class lock), the rest of it cached for the next small batches.
            let mut got = self.take_from_class(space, c, n.max(BATCH))?;
            if got.len() > n {
                cell.push_all(c, got.split_off(n));
            }
            mag.slots.extend(got);
        }
        mag.pop(c).ok_or_else(|| Error::corrupt("refill returned nothing"))
    }

    /// Ends `mag`'s current batch: its unused slots go back into `cell`,
    /// its handed-out ones stay recorded (the region ends, or it refills).
    pub fn close_batch(&self, space: &Space, cell: &CacheCell, mag: &mut Magazine) {
        if !mag.is_empty() {
            if let Some(spill) = cell.put_from(mag.class, &mag.slots[mag.next..]) {
                self.give_back(space, mag.class, spill);
            }
            mag.slots.truncate(mag.next);
        }
        if mag.next > mag.start {
            mag.runs.push((mag.class, mag.next));
        }
        mag.start = mag.next;
    }

    /// The region that filled `mag` ends: its current batch ends as in
    /// [`Heap::close_batch`], and under the same one lock `cell` takes the
    /// batch's unused slots back and learns how many slots of each class
    /// the region handed out, so its bins keep what this thread's regions
    /// use (`CacheCell::note_use`).
    pub fn end_region(&self, space: &Space, cell: &CacheCell, mag: &mut Magazine) {
        let next = mag.next;
        if next > mag.start {
            mag.runs.push((mag.class, next));
        }
        mag.start = next;
        if mag.runs.is_empty() && mag.is_empty() {
            return;
        }
        let spills = cell.note_use((mag.class, &mag.slots[next..]), &mag.used_per_class());
        mag.slots.truncate(next);
        for (c, spill) in spills {
            self.give_back(space, c, spill);
        }
    }

    /// Rollback: every slot `mag` handed out goes back into `cell` (under
    /// one lock), as do its unused ones. `mag` still lists them (the region
    /// unmarks its bookkeeping by it) until `Magazine::reset`.
    pub fn free_magazine(&self, space: &Space, cell: &CacheCell, mag: &mut Magazine) {
        self.note_frees();
        self.close_batch(space, cell, mag);
        for (c, spill) in cell.push_many(mag.handed_out()) {
            self.give_back(space, c, spill);
        }
    }

    /// Frees small objects into `cell` under one lock: header addresses
    /// `hdrs`, in runs of one class, `runs` giving each run's class and
    /// start in `hdrs` (`CacheCell::push_runs`).
    pub fn free_runs(&self, space: &Space, cell: &CacheCell, hdrs: &[u64], runs: &[(usize, usize)]) {
        self.note_frees();
        for (c, spill) in cell.push_runs(hdrs, runs) {
            self.give_back(space, c, spill);
        }
    }

    /// [`Heap::free`] for many objects: the small ones go into `cell`
    /// under one lock.
    pub fn free_many(&self, space: &Space, cell: &CacheCell, locs: &[Loc]) -> Result<()> {
        if locs.is_empty() {
            return Ok(());
        }
        self.note_frees();
        let small = locs.iter().filter_map(|&loc| match loc {
            Loc::Small { span, class, index } => Some((class, space.base() + span_off(span) + index as u64 * slot_size(class))),
            _ => None,
        });
        for (c, spill) in cell.push_many(small) {
            self.give_back(space, c, spill);
        }
        for &loc in locs {
            if !matches!(loc, Loc::Small { .. }) {
                self.free(space, cell, loc)?;
            }
        }
        Ok(())
    }

    /// Allocates `payload` bytes and writes the object header. Returns the
    /// payload address and where it lives. No log is written and nothing is
    /// flushed.
    pub fn alloc(&self, space: &Space, cell: &CacheCell, payload: u64, type_id: u32, flags: u32, count: u64) -> Result<(u64, Loc)> {
        let need = payload.checked_add(OBJ_HEADER).ok_or_else(|| Error::invalid("allocation size overflows"))?;
        let (hdr, loc) = match class_for(need) {
            Some(c) => {
                let hdr = match cell.pop(c) {
                    Some(a) => a,
                    None => self.refill_and_pop(space, cell, c)?,
                };
                let off = hdr - space.base();
                let g = (off - HEAP_OFF) / SPAN_SIZE;
                let index = classes::slot_index(c, off - span_off(g)) as u32;
                (hdr, Loc::Small { span: g, class: c, index })
            }
            None => self.alloc_large(space, need)?,
        };
        let h = ObjHeader { type_id, flags: OBJ_TAG | flags, count };
        space.write(hdr - space.base(), &h)?;
        Ok((hdr + OBJ_HEADER, loc))
    }

    fn refill_and_pop(&self, space: &Space, cell: &CacheCell, c: usize) -> Result<u64> {
        let mut got = self.take_from_class(space, c, BATCH)?;
        let first = got.pop().ok_or_else(|| Error::corrupt("refill returned nothing"))?;
        cell.push_all(c, got);
        Ok(first)
    }

    /// Takes up to `want` free slots (header addresses) of class `c`.
    fn take_from_class(&self, space: &Space, c: usize, want: usize) -> Result<Vec<u64>> {
        let per = slots_per_span(c);
        let slot = slot_size(c);
        let mut out = Vec::with_capacity(want);
        let mut cls = self.classes[c].lock();
        while out.len() < want {
            let g = match cls.partial.last() {
                Some(&g) => g,
                None => {
                    let g = match self.take_spans(space, 1) {
                        Ok(g) => g,
                        // A partial batch is still a batch; nothing is lost.
                        Err(_) if !out.is_empty() => return Ok(out),
                        Err(e) => return Err(e),
                    };
                    set_entry(space, g, c as u32 + 1)?;
                    crate::failpoint::Failpoint::AllocNewSpan.hit();
                    cls.spans.insert(g, SpanBits::empty());
                    cls.partial.push(g);
                    g
                }
            };
            let sb = cls.spans.get_mut(&g).ok_or_else(|| Error::corrupt("partial span without state"))?;
            let had = out.len();
            take_free_slots(sb, per, want - out.len(), |i| out.push(space.base() + span_off(g) + i as u64 * slot));
            if out.len() == had {
                return Err(Error::corrupt(format!("span {g}: on the partial list with no free slot")));
            }
            if sb.live >= per {
                cls.partial.pop();
            }
        }
        Ok(out)
    }

    /// Returns header addresses of class `c` to their spans. Slots of one
    /// span usually come in runs (freed in allocation order): the span map
    /// is looked up once per run, not per slot.
    pub(crate) fn give_back(&self, space: &Space, c: usize, hdrs: impl IntoIterator<Item = u64>) {
        let per = slots_per_span(c);
        let mut cls = self.classes[c].lock();
        let Class { spans, partial } = &mut *cls;
        let span_of = |h: u64| (h - space.base() - HEAP_OFF) / SPAN_SIZE;
        let mut hdrs = hdrs.into_iter().peekable();
        while let Some(first) = hdrs.next() {
            let g = span_of(first);
            let Some(sb) = spans.get_mut(&g) else { continue };
            let was_full = sb.live >= per;
            let base = space.base() + span_off(g);
            let mut h = first;
            loop {
                let i = classes::slot_index(c, h - base) as u32;
                let (w, b) = ((i / 64) as usize, 1u64 << (i % 64));
                if sb.bits[w] & b != 0 {
                    sb.bits[w] &= !b;
                    sb.live -= 1;
                }
                match hdrs.next_if(|&n| span_of(n) == g) {
                    Some(n) => h = n,
                    None => break,
                }
            }
            if was_full && sb.live < per {
                partial.push(g);
            }
        }
    }

    fn alloc_large(&self, space: &Space, need: u64) -> Result<(u64, Loc)> {
        let n = need.div_ceil(SPAN_SIZE);
        if n > SPANS_PER_ARENA - ARENA_META_SPANS {
            return self.alloc_huge(space, need);
        }
        let g = self.take_spans(space, n)?;
        set_entry(space, g, SPAN_LARGE_HEAD | n as u32)?;
        for k in 1..n {
            set_entry(space, g + k, SPAN_LARGE_TAIL | k as u32)?;
        }
        self.large.lock().insert(g, n as u32);
        Ok((space.base() + span_off(g), Loc::Large { span: g, spans: n as u32 }))
    }

    /// A huge object: whole arenas, marked in the arena table.
    fn alloc_huge(&self, space: &Space, need: u64) -> Result<(u64, Loc)> {
        let k = need.div_ceil(ARENA_SIZE);
        let a = self.take_arenas(space, k)?;
        set_arena_entry(space, a, ARENA_HUGE_HEAD | k)?;
        for d in 1..k {
            set_arena_entry(space, a + d, ARENA_HUGE_TAIL | d)?;
        }
        // The header and payload overwrite the arenas' span tables: were a
        // payload line evicted to the media before the arena table says
        // "huge", an open after a crash would read it as span-table entries
        // (found by the `huge` crash-explorer workload).
        space.persist.fence(crate::fences::HUGE_ALLOC)?;
        self.huge.lock().insert(a, k as u32);
        Ok((space.base() + arena_off(a), Loc::Huge { arena: a, arenas: k as u32 }))
    }

    /// Takes `k` contiguous arenas whose spans are all free, growing the pool.
    fn take_arenas(&self, space: &Space, k: u64) -> Result<u64> {
        let mut ss = self.spans.lock();
        let arena_free = |ss: &SpanSpace, a: u64| {
            let first = a * SPANS_PER_ARENA;
            (first + ARENA_META_SPANS..first + SPANS_PER_ARENA).all(|g| g >= ss.mapped_spans || is_free(ss, g))
        };
        let mut a = 0;
        while a + k <= MAX_ARENAS {
            match (a..a + k).find(|&j| !arena_free(&ss, j)) {
                Some(busy) => a = busy + 1,
                None => break,
            }
        }
        if a + k > MAX_ARENAS {
            return Err(Error::PoolFull { requested: k * ARENA_SIZE, max_size: space.header().max_size });
        }
        space.grow(arena_off(a + k))?;
        clear_new_entries(space, ss.mapped_spans)?;
        incorporate(&mut ss, spans_in(space.size()));
        space.back(arena_off(a + k))?;
        for g in a * SPANS_PER_ARENA..(a + k) * SPANS_PER_ARENA {
            set_free(&mut ss, g, false);
        }
        Ok(a)
    }

    fn release_huge(&self, space: &Space, a: u64, k: u32) -> Result<()> {
        // 1. clear the span tables the payload overwrote, while the arena
        //    table still says "huge" (so a crash here leaves a huge object,
        //    unreachable, that the next recovery frees again);
        let zero = [0u32; SPANS_PER_ARENA as usize];
        for d in 0..k as u64 {
            space.write(arena_off(a + d), &zero)?;
            space.flush(arena_off(a + d), 4 * SPANS_PER_ARENA);
        }
        space.persist.fence(crate::fences::HUGE_SPAN_TABLES)?;
        // 2. then hand the arenas back to span allocation.
        for d in 0..k as u64 {
            set_arena_entry(space, a + d, 0)?;
        }
        space.persist.fence(crate::fences::HUGE_FREE)?;
        self.huge.lock().remove(&a);
        let mut ss = self.spans.lock();
        for g in a * SPANS_PER_ARENA..(a + k as u64) * SPANS_PER_ARENA {
            if g % SPANS_PER_ARENA >= ARENA_META_SPANS {
                set_free(&mut ss, g, true);
            }
        }
        Ok(())
    }

    /// Frees the object at payload address `addr` (already validated as `loc`).
    pub fn free(&self, space: &Space, cell: &CacheCell, loc: Loc) -> Result<()> {
        self.note_frees();
        match loc {
            Loc::Small { span, class, index } => {
                let hdr = space.base() + span_off(span) + index as u64 * slot_size(class);
                if let Some(spill) = cell.push(class, hdr) {
                    self.give_back(space, class, spill);
                }
                Ok(())
            }
            Loc::Large { span, spans } => self.release_large(space, span, spans),
            Loc::Huge { arena, arenas } => self.release_huge(space, arena, arenas),
        }
    }

    fn release_large(&self, space: &Space, g: u64, n: u32) -> Result<()> {
        for k in 0..n as u64 {
            set_entry(space, g + k, SPAN_FREE)?;
        }
        self.large.lock().remove(&g);
        let mut ss = self.spans.lock();
        for k in 0..n as u64 {
            set_free(&mut ss, g + k, true);
        }
        Ok(())
    }

    /// Takes `n` contiguous free spans in one arena, growing the pool if needed.
    fn take_spans(&self, space: &Space, n: u64) -> Result<u64> {
        let mut ss = self.spans.lock();
        loop {
            if let Some(g) = find_run(&ss, n) {
                // The file's blocks exist before anything is stored in the run.
                space.back(span_off(g + n))?;
                for k in 0..n {
                    set_free(&mut ss, g + k, false);
                }
                return Ok(g);
            }
            space.grow(space.size() + (n + ARENA_META_SPANS) * SPAN_SIZE)?;
            clear_new_entries(space, ss.mapped_spans)?;
            incorporate(&mut ss, spans_in(space.size()));
        }
    }

    /// Moves every thread cache's slots back to their classes.
    pub fn drain_caches(&self, space: &Space) {
        let cells: Vec<Arc<CacheCell>> = self.caches.lock().clone();
        for cell in cells {
            for (c, hdrs) in cell.take_all().into_iter().enumerate() {
                if !hdrs.is_empty() {
                    self.give_back(space, c, hdrs);
                }
            }
        }
    }

    /// Replaces every slot bitmap with `marks`, frees unmarked large objects
    /// and empty spans (persisting their span-table entries), and rebuilds
    /// the free lists. Caller holds the pool exclusively with caches drained.
    pub fn sweep(&self, space: &Space, marks: &Marks) -> Result<()> {
        self.note_frees();
        let mut empty = Vec::new();
        for cls in self.classes.iter() {
            let mut cls = cls.lock();
            for (&g, sb) in cls.spans.iter_mut() {
                sb.bits = marks.small.get(&g).copied().unwrap_or([0; 32]);
                sb.live = sb.bits.iter().map(|w| w.count_ones()).sum();
                if sb.live == 0 {
                    empty.push(g);
                }
            }
            for g in &empty {
                cls.spans.remove(g);
            }
            for &g in &empty {
                set_entry(space, g, SPAN_FREE)?;
                set_free(&mut self.spans.lock(), g, true);
            }
            empty.clear();
        }
        let dead: Vec<(u64, u32)> = self.large.lock().iter().filter(|(g, _)| !marks.large.contains(g)).map(|(&g, &n)| (g, n)).collect();
        for (g, n) in dead {
            self.release_large(space, g, n)?;
        }
        let dead: Vec<(u64, u32)> =
            self.huge.lock().iter().filter(|(a, _)| !marks.large.contains(&(*a * SPANS_PER_ARENA))).map(|(&a, &k)| (a, k)).collect();
        for (a, k) in dead {
            self.release_huge(space, a, k)?;
        }
        self.rebuild_partials();
        space.persist.fence(crate::fences::SWEPT_SPANS)
    }

    /// Marked (reachable) objects the allocator holds as free: a small
    /// object whose slot bit is clear or whose span no class owns, a large
    /// or huge object not in the allocator's tables. Such an object would
    /// be handed out again and overwritten while still linked (a pointer
    /// kept after its object was freed, or damaged allocator metadata).
    /// Returns how many there are and the first few, described. Caches
    /// must be drained first (a slot freed into a thread cache still has
    /// its bit set). `reported(payload_offset)` skips targets already
    /// reported as bad fields (the mark keeps a dangling pointer's slot
    /// marked, unscanned, so it is not handed out again).
    pub fn reachable_but_free(&self, marks: &Marks, limit: usize, reported: &dyn Fn(u64) -> bool) -> (u64, Vec<String>) {
        let mut found = (0u64, Vec::new());
        let mut note = |what: String| {
            found.0 += 1;
            if found.1.len() < limit {
                found.1.push(what);
            }
        };
        for (&g, words) in &marks.small {
            let owner = self.classes.iter().enumerate().find_map(|(c, cls)| cls.lock().spans.get(&g).map(|sb| (c, sb.bits)));
            match owner {
                None => note(format!("span {g}: holds reachable objects but no size class owns it")),
                Some((c, bits)) => {
                    for (w, (&m, &b)) in words.iter().zip(bits.iter()).enumerate() {
                        let mut lost = m & !b;
                        while lost != 0 {
                            let index = w as u64 * 64 + lost.trailing_zeros() as u64;
                            lost &= lost - 1;
                            let at = span_off(g) + index * slot_size(c) + OBJ_HEADER;
                            if reported(at) {
                                continue;
                            }
                            note(format!("object at offset {at:#x} (span {g}, slot {index}): reachable but its slot is free"));
                        }
                    }
                }
            }
        }
        let (large, huge) = (self.large.lock(), self.huge.lock());
        for &g in &marks.large {
            let known = large.contains_key(&g) || (g % SPANS_PER_ARENA == 0 && huge.contains_key(&(g / SPANS_PER_ARENA)));
            if !known {
                note(format!("large object at span {g}: reachable but its spans are free"));
            }
        }
        found
    }

    /// Writes every small span's bitmap into its arena metadata (clean close).
    pub fn save_bitmaps(&self, space: &Space) -> Result<()> {
        for (c, cls) in self.classes.iter().enumerate() {
            let cls = cls.lock();
            for (&g, sb) in cls.spans.iter() {
                space.write(bitmap_off(g), &sb.bits)?;
                space.flush(bitmap_off(g), SPAN_BITMAP_BYTES);
                space.write(bitmap_crc_off(g), &bitmap_crc(g, c as u32, &sb.bits))?;
                space.flush(bitmap_crc_off(g), 4);
            }
        }
        space.persist.fence(crate::fences::CLEAN_BITMAPS)
    }

    /// Free space figures.
    pub fn stats(&self) -> HeapStats {
        let mut st = HeapStats::default();
        {
            let ss = self.spans.lock();
            let free: u64 = ss.free.iter().flat_map(|a| a.iter()).map(|w| w.count_ones() as u64).sum();
            st.free_spans = free;
            st.free_bytes = free * SPAN_SIZE;
        }
        for (c, cls) in self.classes.iter().enumerate() {
            let cls = cls.lock();
            for sb in cls.spans.values() {
                st.used_spans += 1;
                st.free_bytes += (slots_per_span(c) - sb.live) as u64 * slot_size(c);
            }
        }
        st.used_spans += self.large.lock().values().map(|&n| n as u64).sum::<u64>();
        st.used_spans += self.huge.lock().values().map(|&k| k as u64 * SPANS_PER_ARENA).sum::<u64>();
        st
    }

    /// Objects in use and the bytes of their slots (headers included).
    pub fn live(&self) -> (u64, u64) {
        let (mut objects, mut bytes) = (0, 0);
        for (c, cls) in self.classes.iter().enumerate() {
            for sb in cls.lock().spans.values() {
                objects += sb.live as u64;
                bytes += sb.live as u64 * slot_size(c);
            }
        }
        for &n in self.large.lock().values() {
            objects += 1;
            bytes += n as u64 * SPAN_SIZE;
        }
        for &k in self.huge.lock().values() {
            objects += 1;
            bytes += k as u64 * ARENA_SIZE;
        }
        // Cached slots are marked in use but hold no object.
        for cell in self.caches.lock().iter() {
            // (read at another moment than the bitmaps: clamp, never underflow)
            for (c, n) in cell.counts().into_iter().enumerate() {
                objects = objects.saturating_sub(n as u64);
                bytes = bytes.saturating_sub(n as u64 * slot_size(c));
            }
        }
        (objects, bytes)
    }

    pub(crate) fn register_cache(&self, cell: Arc<CacheCell>) {
        let mut caches = self.caches.lock();
        caches.push(cell);
    }

    /// Drops registry entries of threads that have exited, returning their slots.
    pub(crate) fn prune_caches(&self, space: &Space) {
        let gone: Vec<Arc<CacheCell>> = {
            let mut caches = self.caches.lock();
            let (gone, keep) = caches.drain(..).partition(|c| Arc::strong_count(c) == 1);
            *caches = keep;
            gone
        };
        for cell in gone {
            for (c, hdrs) in cell.take_all().into_iter().enumerate() {
                self.give_back(space, c, hdrs);
            }
        }
    }

    /// Marks the heap's caches dead (pool closing).
    pub fn retire(&self) {
        for cell in self.caches.lock().iter() {
            cell.retire();
        }
    }
}

/// Checks the tail entries of the large object at span `g` (`n` spans). A
/// crash while one was being set up (head first) leaves free tails: after
/// a crash (`!clean`) they are completed; anything else is `Corrupt`.
fn check_tails(space: &Space, g: u64, n: u64, clean: bool) -> Result<()> {
    for k in 1..n {
        let want = SPAN_LARGE_TAIL | k as u32;
        match entry_checked(space, g + k)? {
            e if e == want => {}
            SPAN_FREE if !clean => set_entry(space, g + k, want)?,
            e => return Err(Error::corrupt(format!("span {}: entry {e:#x} where large tail {k} of span {g} belongs", g + k))),
        }
    }
    Ok(())
}

/// Clears the arena-table entries of a huge object left partial by a crash:
/// a tail at arena `a` whose head entry is 0, or a head at `a` some of whose
/// tail entries are 0. The entries of a multi-arena object are written (on
/// allocation) and cleared (on free) under one fence, in no order the media
/// must keep (two lines when the object crosses arena 7, 15, ...; in one
/// line a crash keeps a prefix: a head without its tail). Such an object is
/// unreachable and its arenas' span tables are clean: its payload is
/// written only after the fence that completes every entry, and the free
/// clears the span tables (fenced) before any entry. So the arenas go back
/// to spans. Any other mismatch is no crash state: it is left for
/// [`huge_at`] to report as `Corrupt`. (`load` meets a tail of a whole
/// object only by skipping it with its head, so a tail read here is lone.)
fn clear_partial_huge(space: &Space, a: u64) -> Result<()> {
    let entry = |a: u64| space.read::<u64>(arena_entry_off(a));
    let ae = entry(a)?;
    let n = ae & ARENA_HUGE_MASK;
    if ae == ARENA_HUGE_TAIL | n {
        let head_gone = n >= 1 && n <= a && entry(a - n)? == 0;
        return if head_gone { set_arena_entry(space, a, 0) } else { Ok(()) };
    }
    if ae != ARENA_HUGE_HEAD | n || n == 0 || a + n > MAX_ARENAS {
        return Ok(());
    }
    let mut present = Vec::new();
    for d in 1..n {
        match entry(a + d)? {
            t if t == ARENA_HUGE_TAIL | d => present.push(a + d),
            0 => {}
            _ => return Ok(()),
        }
    }
    if present.len() as u64 == n - 1 {
        return Ok(());
    }
    for t in present {
        set_arena_entry(space, t, 0)?;
    }
    set_arena_entry(space, a, 0)
}

/// The arena count of a huge object whose head is arena `a`, if any.
fn huge_at(space: &Space, a: u64) -> Result<Option<u32>> {
    let ae: u64 = space.read(arena_entry_off(a))?;
    if ae == 0 {
        return Ok(None);
    }
    let k = ae & ARENA_HUGE_MASK;
    if ae & ARENA_HUGE_HEAD == 0 || k == 0 || a + k > MAX_ARENAS || arena_off(a + k) > space.size() {
        return Err(Error::corrupt(format!("arena {a}: bad arena-table entry {ae:#x}")));
    }
    for d in 1..k {
        let t: u64 = space.read(arena_entry_off(a + d))?;
        if t != ARENA_HUGE_TAIL | d {
            return Err(Error::corrupt(format!("arena {}: expected huge tail {d}, found {t:#x}", a + d)));
        }
    }
    Ok(Some(k as u32))
}

/// Span `g`'s saved bitmap, or None if it fails its checksum.
fn read_bitmap(space: &Space, g: u64, c: usize) -> Result<Option<SpanBits>> {
    let bits: [u64; 32] = space.read(bitmap_off(g))?;
    let crc: u32 = space.read(bitmap_crc_off(g))?;
    if crc != bitmap_crc(g, c as u32, &bits) {
        return Ok(None);
    }
    let per = slots_per_span(c);
    for i in per..2048 {
        if bits[(i / 64) as usize] & (1 << (i % 64)) != 0 {
            return Err(Error::corrupt(format!("span {g}: bitmap marks slot {i} beyond {per} slots")));
        }
    }
    let live = bits.iter().map(|w| w.count_ones()).sum();
    Ok(Some(SpanBits { bits, live }))
}

fn set_free(ss: &mut SpanSpace, g: u64, free: bool) {
    let a = (g / SPANS_PER_ARENA) as usize;
    while ss.free.len() <= a {
        ss.free.push([0; 16]);
    }
    let s = g % SPANS_PER_ARENA;
    let (w, b) = ((s / 64) as usize, 1u64 << (s % 64));
    if free {
        ss.free[a][w] |= b;
    } else {
        ss.free[a][w] &= !b;
    }
}

fn is_free(ss: &SpanSpace, g: u64) -> bool {
    let a = (g / SPANS_PER_ARENA) as usize;
    let s = g % SPANS_PER_ARENA;
    ss.free.get(a).is_some_and(|bits| bits[(s / 64) as usize] & (1 << (s % 64)) != 0)
}

fn find_run(ss: &SpanSpace, n: u64) -> Option<u64> {
    for (a, bits) in ss.free.iter().enumerate() {
        if bits.iter().all(|&w| w == 0) {
            continue;
        }
        let first = a as u64 * SPANS_PER_ARENA;
        let mut run = 0;
        for s in ARENA_META_SPANS..SPANS_PER_ARENA {
            if is_free(ss, first + s) {
                run += 1;
                if run == n {
                    return Some(first + s + 1 - n);
                }
            } else {
                run = 0;
            }
        }
    }
    None
}

/// Marks up to `want` free slots of span `sb` (`per` slots) in use, lowest
/// first, calling `take(index)` for each: a whole bitmap word at a time,
/// skipping full words.
#[inline]
fn take_free_slots(sb: &mut SpanBits, per: u32, want: usize, mut take: impl FnMut(u32)) {
    let mut left = want;
    for w in 0..per.div_ceil(64) as usize {
        if left == 0 {
            break;
        }
        let valid = if (w as u32 + 1) * 64 <= per { u64::MAX } else { (1u64 << (per % 64)) - 1 };
        let mut free = !sb.bits[w] & valid;
        while free != 0 && left > 0 {
            let bit = free.trailing_zeros();
            free &= free - 1;
            sb.bits[w] |= 1 << bit;
            sb.live += 1;
            left -= 1;
            take(w as u32 * 64 + bit);
        }
    }
}

/// Spans from `from` up to the pool's new size were never in the heap, so
/// they are free: a span-table word there that is not 0 (damage to bytes no
/// one read until now) is cleared, so no later open trips over it.
fn clear_new_entries(space: &Space, from: u64) -> Result<()> {
    for g in from..spans_in(space.size()) {
        let a = g / SPANS_PER_ARENA;
        if g % SPANS_PER_ARENA >= ARENA_META_SPANS && space.read::<u64>(arena_entry_off(a))? == 0 && space.read::<u32>(entry_off(g))? != 0 {
            set_entry(space, g, SPAN_FREE)?;
        }
    }
    Ok(())
}

/// Adds freshly mapped spans (free) up to global index `limit`.
fn incorporate(ss: &mut SpanSpace, limit: u64) {
    for g in ss.mapped_spans..limit {
        if g % SPANS_PER_ARENA >= ARENA_META_SPANS {
            set_free(ss, g, true);
        }
    }
    ss.mapped_spans = ss.mapped_spans.max(limit);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_offsets_and_table_entries() {
        assert_eq!(span_off(0), HEAP_OFF);
        assert_eq!(span_off(ARENA_META_SPANS), HEAP_OFF + ARENA_META_SPANS * SPAN_SIZE);
        // the span table sits at the start of each arena, one u32 per span
        assert_eq!(entry_off(0), arena_off(0));
        assert_eq!(entry_off(5), arena_off(0) + 20);
        assert_eq!(entry_off(SPANS_PER_ARENA), arena_off(1));
        assert_eq!(entry_off(SPANS_PER_ARENA + 3), arena_off(1) + 12);
        // ... inside the arena's metadata spans, before the bitmaps
        assert!(entry_off(SPANS_PER_ARENA - 1) + 4 <= arena_off(0) + ARENA_BITMAP_OFF);
        assert_eq!(bitmap_off(0), arena_off(0) + ARENA_BITMAP_OFF);
        assert_eq!(bitmap_off(SPANS_PER_ARENA + 2), arena_off(1) + ARENA_BITMAP_OFF + 2 * SPAN_BITMAP_BYTES);
        assert!(bitmap_off(SPANS_PER_ARENA - 1) + SPAN_BITMAP_BYTES <= span_off(ARENA_META_SPANS));
        assert_eq!(arena_entry_off(0), ARENA_TABLE_OFF);
        assert_eq!(arena_entry_off(MAX_ARENAS - 1) + 8, ARENA_TABLE_OFF + MAX_ARENAS * 8);
    }

    #[test]
    fn spans_covered_by_a_pool_size() {
        assert_eq!(spans_in(0), 0);
        assert_eq!(spans_in(HEAP_OFF), 0);
        assert_eq!(spans_in(HEAP_OFF + SPAN_SIZE - 1), 0);
        assert_eq!(spans_in(HEAP_OFF + 3 * SPAN_SIZE), 3);
        assert_eq!(spans_in(MIN_POOL_SIZE), ARENA_META_SPANS + 4);
    }

    #[test]
    fn locations_give_capacity_and_metadata() {
        let small = Loc::Small { span: 9, class: 0, index: 3 };
        assert_eq!(small.capacity(), classes::slot_size(0) - OBJ_HEADER);
        assert_eq!(small.meta_range(), (entry_off(9), 4));
        let large = Loc::Large { span: SPANS_PER_ARENA + 8, spans: 3 };
        assert_eq!(large.capacity(), 3 * SPAN_SIZE - OBJ_HEADER);
        assert_eq!(large.meta_range(), (arena_off(1) + 32, 12));
        let huge = Loc::Huge { arena: 2, arenas: 2 };
        assert_eq!(huge.capacity(), 2 * ARENA_SIZE - OBJ_HEADER);
        assert_eq!(huge.meta_range(), (ARENA_TABLE_OFF + 16, 16));
    }

    #[test]
    fn free_slots_are_taken_lowest_first_a_word_at_a_time() {
        let mut sb = SpanBits::empty();
        // 200 slots; 0, 2 and all of word 1 (64..128) in use
        sb.bits[0] = 0b101;
        sb.bits[1] = u64::MAX;
        sb.live = 2 + 64;
        let mut got = Vec::new();
        take_free_slots(&mut sb, 200, 3, |i| got.push(i));
        assert_eq!(got, vec![1, 3, 4]);
        assert_eq!(sb.live, 69);
        got.clear();
        take_free_slots(&mut sb, 200, 1000, |i| got.push(i));
        let want: Vec<u32> = (5..64).chain(128..200).collect();
        assert_eq!(got, want, "the rest of word 0, none of full word 1, never beyond slot 199");
        assert_eq!(sb.live, 200);
        assert_eq!(sb.bits[3], 0xFF);
        got.clear();
        take_free_slots(&mut sb, 200, 5, |i| got.push(i));
        assert!(got.is_empty(), "a full span yields nothing");
    }

    #[test]
    fn free_runs_skip_metadata_and_stay_in_one_arena() {
        let mut ss = SpanSpace::default();
        // two arenas mapped
        incorporate(&mut ss, 2 * SPANS_PER_ARENA);
        assert_eq!(ss.mapped_spans, 2 * SPANS_PER_ARENA);
        for g in 0..ARENA_META_SPANS {
            assert!(!is_free(&ss, g) && !is_free(&ss, SPANS_PER_ARENA + g), "metadata span {g} is never free");
        }
        assert_eq!(find_run(&ss, 1), Some(ARENA_META_SPANS));
        assert_eq!(find_run(&ss, SPANS_PER_ARENA - ARENA_META_SPANS), Some(ARENA_META_SPANS));
        // a run as long as an arena's usable spans, plus one, fits nowhere
        assert_eq!(find_run(&ss, SPANS_PER_ARENA - ARENA_META_SPANS + 1), None);
        // take all but the last three spans of arena 0: a run of 4 moves to arena 1
        for g in ARENA_META_SPANS..SPANS_PER_ARENA - 3 {
            set_free(&mut ss, g, false);
        }
        assert_eq!(find_run(&ss, 3), Some(SPANS_PER_ARENA - 3));
        assert_eq!(find_run(&ss, 4), Some(SPANS_PER_ARENA + ARENA_META_SPANS));
        // a hole of one in the middle of arena 1 splits its run
        set_free(&mut ss, SPANS_PER_ARENA + 100, false);
        assert_eq!(find_run(&ss, 200), Some(SPANS_PER_ARENA + 101));
        // incorporating again does not undo allocations
        incorporate(&mut ss, 2 * SPANS_PER_ARENA);
        assert!(!is_free(&ss, SPANS_PER_ARENA + 100));
        // spans beyond the table read as not free
        assert!(!is_free(&ss, 5 * SPANS_PER_ARENA));
    }
}
