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
//! Volatile and per region: nothing here outlives the region; no crash
//! behaviour.

use crate::alloc::classes::{slot_index, slot_size, slots_per_span};
use crate::alloc::{span_off, Loc};
use crate::format::{HEAP_OFF, OBJ_HEADER, SPAN_SIZE};
use std::cell::Cell;

/// Entries, direct-mapped by span index.
const WAYS: u64 = 8;

/// Spans of small objects the running region has seen, with their class.
#[derive(Default)]
pub(super) struct SpanCache {
    /// `(span + 1) << 8 | class`; 0 = empty.
    ways: [Cell<u64>; WAYS as usize],
}

impl SpanCache {
    #[inline]
    fn class_of(&self, g: u64) -> Option<usize> {
        let v = self.ways[(g % WAYS) as usize].get();
        (v >> 8 == g + 1).then_some((v & 0xFF) as usize)
    }

    /// Remembers the span of `loc` if it holds small objects. `loc` must
    /// come from the span tables or from the allocator.
    #[inline]
    pub fn learn(&self, loc: Loc) {
        if let Loc::Small { span, class, .. } = loc {
            self.ways[(span % WAYS) as usize].set((span + 1) << 8 | class as u64);
        }
    }

    /// What `alloc::locate_containing(space, addr)` answers, for an `addr`
    /// in a cached span, else None (ask the tables). `base`: the pool's base.
    #[inline]
    pub fn containing(&self, base: u64, addr: u64) -> Option<(u64, Loc)> {
        let off = addr.checked_sub(base)?;
        let g = off.checked_sub(HEAP_OFF)? / SPAN_SIZE;
        let class = self.class_of(g)?;
        let index = slot_index(class, off - span_off(g));
        let payload = base + span_off(g) + index * slot_size(class) + OBJ_HEADER;
        (index < slots_per_span(class) as u64).then_some((payload, Loc::Small { span: g, class, index: index as u32 }))
    }

    /// What `alloc::locate(space, addr)` answers, for a payload address in
    /// a cached span, else None (ask the tables).
    #[inline]
    pub fn at(&self, base: u64, addr: u64) -> Option<Loc> {
        if addr % 16 != 0 {
            return None;
        }
        let hdr = addr.checked_sub(base)?.checked_sub(OBJ_HEADER)?;
        let g = hdr.checked_sub(HEAP_OFF)? / SPAN_SIZE;
        let class = self.class_of(g)?;
        let within = hdr - span_off(g);
        let index = slot_index(class, within);
        (index * slot_size(class) == within && index < slots_per_span(class) as u64).then_some(Loc::Small {
            span: g,
            class,
            index: index as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::SPANS_PER_ARENA;

    #[test]
    fn answers_only_for_learned_spans_and_like_the_tables() {
        let base = 1 << 40;
        let c = SpanCache::default();
        let g = SPANS_PER_ARENA + 9;
        let slot0 = base + span_off(g);
        assert_eq!(c.containing(base, slot0 + 40), None, "nothing learned yet");
        c.learn(Loc::Small { span: g, class: 1, index: 0 }); // 48-byte slots
                                                             // slot 2 starts 96 bytes in; its payload 16 bytes later
        let p2 = slot0 + 96 + OBJ_HEADER;
        assert_eq!(c.containing(base, p2 + 5), Some((p2, Loc::Small { span: g, class: 1, index: 2 })));
        assert_eq!(c.containing(base, slot0 + 96), Some((p2, Loc::Small { span: g, class: 1, index: 2 })), "its header");
        assert_eq!(c.at(base, p2), Some(Loc::Small { span: g, class: 1, index: 2 }));
        assert_eq!(c.at(base, p2 + 16), None, "not a payload start");
        assert_eq!(c.at(base, p2 + 8), None, "misaligned");
        // the tail of the span past its last slot holds no object
        let per = slots_per_span(1) as u64;
        assert_eq!(c.containing(base, slot0 + per * 48 + 4), None);
        // a span that shares the way evicts, never aliases
        c.learn(Loc::Small { span: g + WAYS, class: 0, index: 0 });
        assert_eq!(c.containing(base, p2), None);
        // large objects are never cached; addresses below the heap are refused
        c.learn(Loc::Large { span: g + 1, spans: 2 });
        assert_eq!(c.containing(base, base + span_off(g + 1) + 64), None);
        assert_eq!(c.containing(base, base + 8), None);
        assert_eq!(c.at(base, base), None);
    }
}
