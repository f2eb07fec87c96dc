//! The region's cache of small spans: which size class a span of the heap
//! holds, so the pointer checks of `Tx::read`, `free`, `len` and
//! `log_range` find an object without reading and decoding the span and
//! arena tables again for every object of a span.
//!
//! Why its answers are exactly the tables' answers: a span-table entry that
//! names a size class changes only when the span becomes free, and a small
//! span becomes free only in a sweep (`Heap::sweep`), which runs with the GC
//! gate held exclusively, while no region runs (a region holds the gate
//! shared from begin to end). Its arena's entry stays 0 as long (a huge
//! object takes only arenas whose spans are all free), and the pool never
//! shrinks while open. So once a region has seen "span g holds class c"
//! (from `alloc::locate*`, with every check, or from the allocator that
//! handed it a slot of g), reading the tables again would give the same
//! answer until the region ends. The cache answers only for such spans and
//! otherwise says "ask the tables": it never accepts an address the tables
//! would refuse. Large and huge objects are never cached (a concurrent
//! region may free them).
//!
//! The cache knows spans, not which of their slots are allocated (the slot
//! bitmaps are the allocator's): a first log asks the slot's header tag as
//! well (`Tx::in_live_object`), so that a write through a dangling pointer
//! into a slot an earlier region freed is refused.
//!
//! Kept between a thread's regions: the entries live in a per-thread box
//! with the key they hold for, (the heap's id, its free count when the
//! region began). The next region keeps them only if the key is still the
//! same: the same open pool (heap ids are unique per open), and no object
//! freed or swept since (a sweep moves the free count, `Heap::frees_seen`;
//! no sweep runs while a region runs, so what a region learned holds until
//! the next sweep). Otherwise it empties them.
//!
//! The PSTM's writes use it too (`stm/engine/tx/write.rs`, `cell_offset`):
//! a thread's reused transaction sets keep one cache, which each attempt's
//! begin renews with the same key ([`SpanCache::renew`]); an attempt holds
//! the GC gate as a region does, so the same argument holds. Volatile; no
//! crash behaviour.

use crate::alloc::classes::{reciprocal, slot_size, slots_per_span};
use crate::alloc::Loc;
use crate::format::{HEAP_OFF, OBJ_HEADER, SPAN_SIZE};
use std::cell::Cell;

/// Entries, direct-mapped by span index: 256 spans of 64 KiB cover
/// 16 MiB of heap without a conflict (a PSTM tree's nodes spread over a
/// hundred spans; round 18 of docs/stm.md). Emptying them is O(1)
/// whatever their number (`Ways::stamp`).
const WAYS: u64 = 256;

/// Where a way's tag keeps the stamp of the emptying it was learned
/// after: above every span index + 1 (below 2^48 even for an address
/// below the heap, whose wrapped span index is at most 2^48 - 1).
const STAMP_SHIFT: u32 = 48;

/// One cached span: its tag and its class's geometry, copied out of the
/// class tables when learned so that a check loads nothing else.
#[derive(Clone, Copy, Default)]
struct Way {
    /// Span index + 1, or'd with the `Ways::stamp` it was learned
    /// under; 0 = never learned.
    tag: u64,
    /// `classes::reciprocal(class)`: `x * recip >> 32 == x / slot`.
    recip: u32,
    /// Slot size (header included).
    slot: u32,
    /// Bytes of the span covered by whole slots (`slots_per_span * slot`).
    used: u32,
    /// The class.
    class: u32,
}

/// The cache's entries, and the key they hold for: (heap id, the heap's
/// free count when the region that filled them began); (0, 0): none.
struct Ways {
    key: (u64, u64),
    /// The emptying count, shifted by `STAMP_SHIFT` (never 0): a way
    /// answers only if its tag carries the current stamp, so emptying
    /// the cache is one increment, not a store per way.
    stamp: u64,
    ways: [Cell<Way>; WAYS as usize],
}

impl Ways {
    fn new(key: (u64, u64)) -> Box<Self> {
        Box::new(Ways { key, stamp: 1 << STAMP_SHIFT, ways: std::array::from_fn(|_| Cell::new(Way::default())) })
    }

    /// The tag span `g` has in a way learned under the current stamp.
    #[inline]
    fn tag(&self, g: u64) -> u64 {
        (g + 1) | self.stamp
    }
}

thread_local! {
    /// The entries of this thread's last region's cache, reused by its next
    /// region (emptied unless their key still holds): a region then
    /// allocates nothing for its cache, and the `Tx` holds a pointer
    /// instead of ~200 bytes that `Pool::txn` copied with `memcpy`.
    static SPARE_WAYS: Cell<Option<Box<Ways>>> = const { Cell::new(None) };
}

/// Spans of small objects the running region has seen, with their class.
pub(crate) struct SpanCache {
    /// Absolute address of the heap (pool base + `HEAP_OFF`).
    heap: u64,
    /// Given back to the thread's spare by `Drop` (hence `ManuallyDrop`).
    ways: std::mem::ManuallyDrop<Box<Ways>>,
}

impl Drop for SpanCache {
    fn drop(&mut self) {
        // SAFETY: `ways` is taken once, here, and not used again (`drop`
        // runs once; a `ManuallyDrop` field is not dropped after it).
        let ways = unsafe { std::mem::ManuallyDrop::take(&mut self.ways) };
        // try_with: a region may end while its thread's locals are torn down.
        let _ = SPARE_WAYS.try_with(|s| s.set(Some(ways)));
    }
}

impl Ways {
    /// Keeps the entries if they hold for `key`, else empties them.
    #[inline]
    fn keep_for(&mut self, key: (u64, u64)) {
        if self.key != key && !crate::failpoint::planted("tx.kept_spans_ignore_frees") {
            self.forget(key);
        }
    }

    /// Empties the entries, which now hold for `key`: a new stamp, which
    /// no way carries (when the stamps wrap, every way is cleared).
    #[cold]
    fn forget(&mut self, key: (u64, u64)) {
        self.stamp = self.stamp.wrapping_add(1 << STAMP_SHIFT);
        if self.stamp == 0 {
            for w in self.ways.iter() {
                w.set(Way::default());
            }
            self.stamp = 1 << STAMP_SHIFT;
        }
        self.key = key;
    }
}

/// Where an address falls in a cached span: span `g`, its way, the offset
/// in the span, and the slot (`index`, starting `start` bytes in).
struct Hit {
    g: u64,
    way: Way,
    within: u64,
    index: u64,
    start: u64,
}

impl SpanCache {
    /// The cache for a region of the pool mapped at `base` whose heap has
    /// id `heap` and free count `frees` (`Heap::frees_seen`, read now):
    /// what the thread's last region learned if it ran on the same heap at
    /// the same free count, else empty.
    #[inline]
    pub fn new(base: u64, heap: u64, frees: u64) -> Self {
        let key = (heap, frees);
        let mut ways = SPARE_WAYS.try_with(Cell::take).ok().flatten().unwrap_or_else(|| Ways::new(key));
        ways.keep_for(key);
        SpanCache { heap: base.wrapping_add(HEAP_OFF), ways: std::mem::ManuallyDrop::new(ways) }
    }

    /// Makes a cache kept by its owner (a PSTM thread's sets) hold for an
    /// attempt on the pool mapped at `base` whose heap has id `heap` and
    /// free count `frees` (read now, with the GC gate held): what
    /// [`SpanCache::new`] would answer, keeping the same entries.
    #[inline]
    pub fn renew(&mut self, base: u64, heap: u64, frees: u64) {
        self.ways.keep_for((heap, frees));
        self.heap = base.wrapping_add(HEAP_OFF);
    }

    /// The cached span holding `addr` and the slot of it `addr` falls in,
    /// if the span is cached and the slot is a whole one. An address below
    /// the heap wraps to a span index no tag can match (a tag's span
    /// part is below 2^32, a wrapped index + 1 above 2^47 and at most
    /// 2^48, whose bits below 48 are then 0 while a tag's never are).
    #[inline]
    fn hit(&self, addr: u64) -> Option<Hit> {
        let rel = addr.wrapping_sub(self.heap);
        let g = rel / SPAN_SIZE;
        let way = self.ways.ways[(g % WAYS) as usize].get();
        if way.tag != self.ways.tag(g) {
            return None;
        }
        let within = rel % SPAN_SIZE;
        let index = (within * way.recip as u64) >> 32;
        let start = index * way.slot as u64;
        (start < way.used as u64).then_some(Hit { g, way, within, index, start })
    }

    /// Remembers the span of `loc` if it holds small objects. `loc` must
    /// come from the span tables or from the allocator.
    #[inline]
    pub fn learn(&self, loc: Loc) {
        if let Loc::Small { span, class, .. } = loc {
            self.learn_small(span, class);
        }
    }

    /// Remembers that small span `span` holds class `class` (from the span
    /// tables or from the allocator, which handed out a slot of it).
    #[inline]
    pub fn learn_small(&self, span: u64, class: usize) {
        let cell = &self.ways.ways[(span % WAYS) as usize];
        let tag = self.ways.tag(span);
        if cell.get().tag == tag {
            return; // every allocation learns its span: keep this cheap
        }
        let slot = slot_size(class) as u32;
        let way = Way { tag, recip: reciprocal(class), slot, used: slots_per_span(class) * slot, class: class as u32 };
        cell.set(way);
    }

    /// Whether `[addr, addr+len)` lies inside the payload of one object's
    /// slot in a cached span (what `check_in_object` asks of every
    /// `Tx::read`): a few instructions on the cache's own line, no table
    /// load. false: ask the tables.
    #[inline]
    pub fn holds(&self, addr: u64, len: u64) -> bool {
        match self.hit(addr) {
            // pos < slot: the subtraction cannot wrap, nor `len` overflow.
            Some(h) => {
                let pos = h.within - h.start;
                pos >= OBJ_HEADER && len <= h.way.slot as u64 - pos
            }
            None => false,
        }
    }

    /// The payload `[start, end)` of the slot `[addr, addr+len)` lies
    /// inside, for an `addr` in a cached span (what [`SpanCache::holds`]
    /// accepts, with the bounds it accepted it by), else None (ask the
    /// tables). Whether the slot holds a live object is the caller's to
    /// ask (its header's tag: `Tx::in_live_object`).
    #[inline]
    pub fn payload_holding(&self, addr: u64, len: u64) -> Option<(u64, u64)> {
        let h = self.hit(addr)?;
        // pos < slot: the subtraction cannot wrap, nor `len` overflow.
        let pos = h.within - h.start;
        if pos < OBJ_HEADER || len > h.way.slot as u64 - pos {
            return None;
        }
        let slot = self.heap + h.g * SPAN_SIZE + h.start;
        Some((slot + OBJ_HEADER, slot + h.way.slot as u64))
    }

    /// What `alloc::locate_containing(space, addr)` answers, for an `addr`
    /// in a cached span, else None (ask the tables).
    #[inline]
    pub fn containing(&self, addr: u64) -> Option<(u64, Loc)> {
        let h = self.hit(addr)?;
        let payload = self.heap + h.g * SPAN_SIZE + h.start + OBJ_HEADER;
        Some((payload, self.loc(&h)))
    }

    /// What `alloc::locate(space, addr)` answers, for a payload address in
    /// a cached span, else None (ask the tables).
    #[inline]
    pub fn at(&self, addr: u64) -> Option<Loc> {
        if addr % 16 != 0 {
            return None;
        }
        let h = self.hit(addr.wrapping_sub(OBJ_HEADER))?;
        (h.within == h.start).then(|| self.loc(&h))
    }

    /// The class of the object whose payload starts at `addr`, for an
    /// `addr` that is a payload start in a cached span, else None (ask the
    /// tables): what [`SpanCache::at`] answers, without building the
    /// `Loc` (`Tx::free` records the class only).
    #[inline]
    pub fn payload_class(&self, addr: u64) -> Option<usize> {
        if addr % 16 != 0 {
            return None;
        }
        let h = self.hit(addr.wrapping_sub(OBJ_HEADER))?;
        (h.within == h.start || crate::failpoint::planted("tx.free_any_slot_address")).then_some(h.way.class as usize)
    }

    #[inline]
    fn loc(&self, h: &Hit) -> Loc {
        Loc::Small { span: h.g, class: h.way.class as usize, index: h.index as u32 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::span_off;
    use crate::format::SPANS_PER_ARENA;

    /// Whether the thread's next cache, for heap `heap` at free count
    /// `frees`, still knows the span a cache for heap 1 at free count 5
    /// learned (the entries' memory is reused either way).
    fn next_cache_knows(heap: u64, frees: u64) -> bool {
        let base = 1 << 40;
        let g = SPANS_PER_ARENA + 3;
        let p = base + span_off(g) + OBJ_HEADER;
        let c = SpanCache::new(base, 1, 5);
        c.learn(Loc::Small { span: g, class: 1, index: 0 });
        assert!(c.at(p).is_some());
        let entries = &**c.ways as *const Ways;
        drop(c);
        let c = SpanCache::new(base, heap, frees);
        assert_eq!(&**c.ways as *const Ways, entries, "the thread's spare entries are reused");
        let knows = c.at(p).is_some();
        assert_eq!(c.holds(p, 8), knows);
        drop(c);
        SpanCache::new(base, 0, 0); // empties the thread's entries for the next test
        knows
    }

    /// What a region learned holds for the thread's next region on the
    /// same heap while nothing was freed or swept; after a free or sweep
    /// (the free count moved), or on another heap, nothing survives.
    #[test]
    fn the_next_region_keeps_what_was_learned_until_a_free() {
        assert!(next_cache_knows(1, 5), "same heap, nothing freed: kept");
        assert!(!next_cache_knows(1, 6), "something was freed or swept");
        assert!(!next_cache_knows(2, 5), "another pool (or another open of it)");
        #[cfg(feature = "failpoints")]
        {
            // Planted "the key is not compared": a span learned before a
            // sweep would still be answered after it.
            crate::failpoint::plant("tx.kept_spans_ignore_frees");
            let stale = next_cache_knows(1, 6);
            crate::failpoint::disarm_all();
            assert!(stale, "the plant is what the first asserts catch");
        }
    }

    /// Emptying is a new stamp; when the stamps wrap, every way is
    /// cleared, so an entry learned under the first stamp does not answer
    /// again when the first stamp comes round.
    #[test]
    fn emptying_clears_every_way_when_the_stamps_wrap() {
        let base = 1 << 40;
        let g = SPANS_PER_ARENA + 3;
        let p = base + span_off(g) + OBJ_HEADER;
        let mut c = SpanCache::new(base, 7, 0);
        c.renew(base, 8, 0); // emptied: its stamp is new
        c.learn(Loc::Small { span: g, class: 1, index: 0 });
        assert!(c.at(p).is_some());
        c.renew(base, 8, 0);
        assert!(c.at(p).is_some(), "the same key keeps the entries");
        c.renew(base, 8, 1);
        assert!(c.at(p).is_none(), "a free empties them");
        // An entry learned under the first stamp, then the last stamp
        // before the wrap: the next emptying wraps to the first again.
        c.ways.stamp = 1 << STAMP_SHIFT;
        c.learn(Loc::Small { span: g, class: 1, index: 0 });
        c.ways.stamp = 0u64.wrapping_sub(1 << STAMP_SHIFT);
        c.renew(base, 8, 3);
        assert_eq!(c.ways.stamp, 1 << STAMP_SHIFT);
        assert!(c.at(p).is_none(), "cleared by the wrap, not answered under the first stamp again");
        drop(c);
        SpanCache::new(base, 0, 0); // empties the thread's entries for the next test
    }

    #[test]
    fn answers_only_for_learned_spans_and_like_the_tables() {
        let base = 1 << 40;
        let c = SpanCache::new(base, 1, 0);
        let g = SPANS_PER_ARENA + 9;
        let slot0 = base + span_off(g);
        assert_eq!(c.containing(slot0 + 40), None, "nothing learned yet");
        c.learn(Loc::Small { span: g, class: 1, index: 0 }); // 48-byte slots
                                                             // slot 2 starts 96 bytes in; its payload 16 bytes later
        let p2 = slot0 + 96 + OBJ_HEADER;
        assert_eq!(c.containing(p2 + 5), Some((p2, Loc::Small { span: g, class: 1, index: 2 })));
        assert_eq!(c.containing(slot0 + 96), Some((p2, Loc::Small { span: g, class: 1, index: 2 })), "its header");
        assert_eq!(c.at(p2), Some(Loc::Small { span: g, class: 1, index: 2 }));
        assert_eq!(c.at(p2 + 16), None, "not a payload start");
        assert_eq!(c.at(p2 + 8), None, "misaligned");
        assert_eq!(c.payload_class(p2), Some(1));
        assert_eq!((c.payload_class(p2 + 16), c.payload_class(p2 + 8)), (None, None), "not a payload start");
        // holds: inside one payload only, never the header or the next slot
        assert!(c.holds(p2, 32) && c.holds(p2 + 8, 24) && c.holds(p2 + 31, 1));
        assert!(!c.holds(p2, 33) && !c.holds(p2 - 8, 8) && !c.holds(p2 + 24, 16), "past the payload");
        assert!(!c.holds(p2, u64::MAX) && !c.holds(p2 + 8, u64::MAX - 4), "no overflow");
        // payload_holding: what holds accepts, with the payload's bounds
        for (a, n) in [(p2, 32), (p2 + 8, 24), (p2 + 31, 1), (p2, 33), (p2 - 8, 8), (p2 + 24, 16), (p2 + 8, u64::MAX - 4)] {
            let want = c.holds(a, n).then_some((p2, p2 + 32));
            assert_eq!(c.payload_holding(a, n), want, "{a:#x}+{n}");
        }
        // the tail of the span past its last slot holds no object
        let per = slots_per_span(1) as u64;
        assert_eq!(c.containing(slot0 + per * 48 + 4), None);
        // a span that shares the way evicts, never aliases
        c.learn(Loc::Small { span: g + WAYS, class: 0, index: 0 });
        assert_eq!(c.containing(p2), None);
        // large objects are never cached; addresses below the heap are refused
        c.learn(Loc::Large { span: g + 1, spans: 2 });
        assert_eq!(c.containing(base + span_off(g + 1) + 64), None);
        assert_eq!(c.containing(base + 8), None);
        assert_eq!(c.at(base), None);
        assert!(!c.holds(base + 8, 8) && !c.holds(0, 8) && !c.holds(u64::MAX - 7, 8));
        assert_eq!((c.payload_holding(base + 8, 8), c.payload_holding(u64::MAX - 7, 8)), (None, None));
    }
}
