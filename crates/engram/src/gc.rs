//! Garbage collection and pointer swizzling.
//!
//! Mark: every object reachable from the named roots and from the undo-log
//! chunk chains is live; pointer fields are found through the persistent type
//! table, so no program is needed. Each pointer is validated on the way (it
//! must be null or the payload address of an object whose header carries the
//! tag and a known type), which makes the same walk serve `engram check`.
//! A field that fails (a pointer from another pool, a stray value, a dangling
//! pointer) does not stop the walk: it is reported as a [`BadField`] and
//! treated as null, so one bad word never makes a pool unopenable. A slot a
//! bad field names (a freed object's) is quarantined: marked, not scanned,
//! so it is not handed out again while the field still names it.
//!
//! Swizzle: when the pool is mapped at a new base, the mark walk also rewrites
//! every pointer found in an old base's range to the new range, flushing each
//! rewritten word. Rewriting is idempotent, and the header lists the old bases
//! until the walk has finished and fenced, so a crash mid-way resumes on the
//! next open.
//!
//! Sweep: the allocator's bitmaps become the mark bitmaps; empty spans and
//! unmarked large objects are freed (`Heap::sweep`). Online collection runs
//! only while no region is active (the pool's GC gate).

use crate::alloc::{locate, Loc, Marks};
use crate::error::Result;
use crate::format::*;
use crate::pointers::BadField;
use crate::pool::space::Space;
use crate::types::{TypeDesc, TypeTable};
use std::sync::Arc;

/// Pointers in `[from[i], from[i] + len)` move to `[to, to + len)`.
pub(crate) struct Reloc {
    pub from: Vec<u64>,
    pub to: u64,
    pub len: u64,
}

impl Reloc {
    /// Where `v` points after relocation.
    pub fn translate(&self, v: u64) -> u64 {
        for &b in &self.from {
            if v >= b && v < b + self.len {
                return v - b + self.to;
            }
        }
        v
    }
}

/// What a mark phase found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarkStats {
    /// Live objects.
    pub objects: u64,
    /// Live payload bytes.
    pub bytes: u64,
    /// Pointers rewritten by relocation.
    pub swizzled: u64,
    /// Pointer fields that point at no live object (treated as null).
    pub bad_fields: u64,
}

/// What a mark phase found, with every bad field.
pub(crate) struct MarkResult {
    pub marks: Marks,
    pub stats: MarkStats,
    pub bad: Vec<BadField>,
    /// With [`mark_checking_headers`]: live objects whose header disagrees
    /// with how the engine writes headers (see `pointers::header_doubt`).
    pub doubts: Vec<String>,
}

/// An object marked but not yet scanned: its payload address, where it
/// lives, the pool offset of the field that named it and the payload
/// address of the object holding that field (0 for a root or a log link).
/// Its header is validated when it is scanned, so the walk reads each
/// header once (see "Mark cost" in docs/gc.md).
#[derive(Clone, Copy)]
struct Grey {
    v: u64,
    loc: Loc,
    at: u64,
    holder: u64,
}

/// Objects taken off the stack ahead of their scan, their headers
/// prefetched meanwhile: the walk is bound by cache misses on headers, and
/// this keeps several in flight.
const PREFETCH_AHEAD: usize = 16;

/// The mark walk's state.
struct Marker<'a> {
    space: &'a Space,
    types: &'a TypeTable,
    /// The type table as the walk started, indexed by type id - 1.
    tys: Vec<Option<Arc<TypeDesc>>>,
    reloc: Option<&'a Reloc>,
    marks: Marks,
    stack: Vec<Grey>,
    stats: MarkStats,
    bad: Vec<BadField>,
    /// Names of the roots and log links, by the pool offset of their word.
    named: Vec<(u64, String)>,
    /// Some when headers are doubted too (`engram check`).
    doubts: Option<Vec<String>>,
    /// The deferred GC's concurrent phase: bad fields become suspects.
    quiet: bool,
    suspects: Vec<Grey>,
}

/// Marks from the roots and logs. `progress` is called with the number of
/// objects marked so far, every 4096 objects.
pub(crate) fn mark(space: &Space, types: &TypeTable, reloc: Option<&Reloc>, progress: &dyn Fn(u64)) -> Result<MarkResult> {
    mark_with(space, types, reloc, None, progress)
}

/// [`mark`] for `engram check`: also lists live objects whose header
/// fields disagree with how the engine writes them (heap objects have no
/// checksum). Marking itself is the same.
pub(crate) fn mark_checking_headers(space: &Space, types: &TypeTable, progress: &dyn Fn(u64)) -> Result<MarkResult> {
    mark_with(space, types, None, Some(Vec::new()), progress)
}

fn mark_with(
    space: &Space,
    types: &TypeTable,
    reloc: Option<&Reloc>,
    doubts: Option<Vec<String>>,
    progress: &dyn Fn(u64),
) -> Result<MarkResult> {
    let mut m = Marker {
        space,
        types,
        tys: types.snapshot(),
        reloc,
        marks: Marks::default(),
        stack: Vec::new(),
        stats: MarkStats::default(),
        bad: Vec::new(),
        named: Vec::new(),
        doubts,
        quiet: false,
        suspects: Vec::new(),
    };
    m.grey_roots()?;
    m.drain(progress, &|| false)?;
    if m.stats.swizzled > 0 {
        space.persist.fence(crate::fences::SWIZZLED)?;
    }
    progress(m.stats.objects);
    m.stats.bad_fields = m.bad.len() as u64;
    Ok(MarkResult { marks: m.marks, stats: m.stats, bad: m.bad, doubts: m.doubts.unwrap_or_default() })
}

impl Marker<'_> {
    /// Greys what the named roots and the log slots' chunk links point at.
    fn grey_roots(&mut self) -> Result<()> {
        for (i, _, name) in crate::tx::used_root_entries(self.space)? {
            let at = ROOTS_OFF + i as u64 * crate::format::ROOT_ENTRY_SIZE;
            self.named.push((at, format!("root {name:?}")));
            self.field(at, 0)?;
        }
        for slot in 0..LOG_SLOTS {
            let at = crate::log::chunk_links(slot);
            self.named.push((at, format!("log slot {slot}")));
            self.field(at, 0)?;
        }
        Ok(())
    }

    /// Scans grey objects until none is left, a few taken ahead with their
    /// headers prefetched. Returns false if `stop` (asked every 4096
    /// objects) said to stop first.
    fn drain(&mut self, progress: &dyn Fn(u64), stop: &dyn Fn() -> bool) -> Result<bool> {
        let mut ahead = std::collections::VecDeque::with_capacity(PREFETCH_AHEAD);
        let mut n = 0u64;
        loop {
            while ahead.len() < PREFETCH_AHEAD {
                let Some(g) = self.stack.pop() else { break };
                crate::hint::prefetch(g.v - OBJ_HEADER);
                ahead.push_back(g);
            }
            let Some(g) = ahead.pop_front() else { return Ok(true) };
            self.scan(g)?;
            n += 1;
            if n % 4096 == 0 {
                progress(self.stats.objects);
                if stop() {
                    return Ok(false);
                }
            }
        }
    }

    /// Handles the pointer stored at pool offset `at` of the object at
    /// `holder` (0: a root or log link): marks its target and greys it, or
    /// reports it and treats it as null. A slot that holds no live object
    /// (a dangling pointer's target) is marked too but, found bad when it
    /// is scanned, never scanned: kept out of allocation until the field
    /// is repaired, so the bad field never comes to alias a new object.
    fn field(&mut self, at: u64, holder: u64) -> Result<()> {
        let v = self.read_field(at)?;
        if v == 0 {
            return Ok(());
        }
        match locate(self.space, v) {
            Some(loc) => {
                if self.marks.mark(loc) {
                    self.stack.push(Grey { v, loc, at, holder });
                }
            }
            None => {
                if let Some(reason) = crate::pointers::problem(self.space, self.types, v) {
                    self.report(Grey { v, loc: Loc::Large { span: 0, spans: 0 }, at, holder }, reason);
                }
            }
        }
        Ok(())
    }

    /// The pointer at pool offset `at`, rewritten first if it points into
    /// an old base's range.
    fn read_field(&mut self, at: u64) -> Result<u64> {
        let v: u64 = self.space.read(at)?;
        let Some(r) = self.reloc else { return Ok(v) };
        let t = r.translate(v);
        if t != v {
            self.space.write(at, &t)?;
            self.space.flush(at, 8);
            self.stats.swizzled += 1;
            crate::failpoint::Failpoint::GcSwizzle.hit();
        }
        Ok(t)
    }

    /// Records the bad field that named `g` (a suspect, while quiet).
    fn report(&mut self, g: Grey, reason: &'static str) {
        if self.quiet {
            self.suspects.push(g);
            return;
        }
        let (holder, field) = self.holder_of(&g);
        self.bad.push(BadField { object: g.holder, holder, field, at: g.at, value: g.v, reason });
    }

    /// For reports (rare, so names are built here): who holds the field
    /// that named `g`, and the field's offset in its payload.
    fn holder_of(&self, g: &Grey) -> (String, u64) {
        if g.holder == 0 {
            let name = self.named.iter().find(|(at, _)| *at == g.at).map(|(_, n)| n.clone()).unwrap_or_default();
            return (name, 0);
        }
        let base = self.space.base();
        let h: Option<ObjHeader> = self.space.read(g.holder - OBJ_HEADER - base).ok();
        let name = h.and_then(|h| self.ty(h.type_id)).map(|t| t.name.clone()).unwrap_or_default();
        (name, g.at - (g.holder - base))
    }

    /// The type with id `id`, from the snapshot (or the table, for a type
    /// registered since the walk started).
    #[inline]
    fn ty(&self, id: u32) -> Option<Arc<TypeDesc>> {
        match self.tys.get((id as usize).wrapping_sub(1)) {
            Some(t) => t.clone(),
            None => self.types.get(id),
        }
    }

    /// With header doubts on, records one for the live object `g` if its
    /// header disagrees with how the engine writes headers.
    fn doubt(&mut self, g: &Grey) {
        if self.doubts.is_none() {
            return;
        }
        if let Some(why) = crate::pointers::header_doubt(self.space, self.types, g.v, g.loc) {
            let (holder, field) = self.holder_of(g);
            if let Some(doubts) = self.doubts.as_mut() {
                doubts.push(format!("object {:#x} (from {holder} field {field}): {why}", g.v));
            }
        }
    }

    /// Validates the marked object `g` (a bad one is reported, not
    /// scanned), counts it and visits its pointer fields.
    fn scan(&mut self, g: Grey) -> Result<()> {
        let space = self.space;
        let h: ObjHeader = space.read(g.v - OBJ_HEADER - space.base())?;
        let ty = self.ty(h.type_id);
        if let Some(reason) = crate::pointers::header_problem(ty.as_deref(), &h, g.loc) {
            if g.holder != RESCAN {
                self.report(g, reason);
            }
            return Ok(());
        }
        let Some(ty) = ty else { return Ok(()) };
        self.doubt(&g);
        let count = if h.flags & OBJ_ARRAY != 0 { h.count } else { 1 };
        if g.holder != RESCAN {
            self.stats.objects += 1;
            self.stats.bytes += count.saturating_mul(ty.size).min(g.loc.capacity());
        }
        if ty.ptrs.is_empty() {
            // Nothing to scan: a big array of plain data costs no loop.
            return Ok(());
        }
        let base_off = g.v - space.base();
        for i in 0..count {
            for &p in &ty.ptrs {
                self.field(base_off + i * ty.size + p as u64, g.v)?;
            }
        }
        Ok(())
    }
}

/// `Grey::holder` of an object rescanned by the deferred GC's final pause
/// because it lies on a page written during the concurrent mark: if its
/// header no longer validates (the program freed it), it is skipped, not
/// reported: nothing need point at it.
const RESCAN: u64 = u64::MAX;

/// The deferred recovery GC's mark (`pool/deferred.rs`): a concurrent phase
/// that only reads the heap while the program runs, then a final phase with
/// the world stopped that catches up with what the program wrote meanwhile.
///
/// During the concurrent phase a field that fails validation is not
/// reported (the program may be changing it): it is kept as a suspect. The
/// final phase re-reads each suspect field: one that still holds the value
/// is validated again (reported if still bad, scanned if good now); one that
/// changed was written, so its page is rescanned anyway.
pub(crate) struct ConcurrentMark<'a> {
    m: Marker<'a>,
}

impl<'a> ConcurrentMark<'a> {
    pub fn new(space: &'a Space, types: &'a TypeTable) -> Self {
        let m = Marker {
            space,
            types,
            tys: types.snapshot(),
            reloc: None,
            marks: Marks::default(),
            stack: Vec::new(),
            stats: MarkStats::default(),
            bad: Vec::new(),
            named: Vec::new(),
            doubts: None,
            quiet: true,
            suspects: Vec::new(),
        };
        ConcurrentMark { m }
    }

    /// The concurrent phase: marks from the roots and logs. Returns false
    /// if `stop` said so (checked every 4096 objects) before the end.
    pub fn concurrent(&mut self, stop: &dyn Fn() -> bool) -> Result<bool> {
        self.m.grey_roots()?;
        self.m.drain(&|_| {}, stop)
    }

    /// The final phase (world stopped): the roots and logs again, the
    /// suspects, and every marked object on a page of the heap that
    /// `written` (one bool per page from pool offset 0) says was written;
    /// then marks to a fixpoint. Returns how many objects it rescanned.
    pub fn finish(&mut self, written: &[bool]) -> Result<u64> {
        self.m.quiet = false;
        self.m.named.clear();
        self.m.grey_roots()?;
        self.grey_log_chains()?;
        for g in std::mem::take(&mut self.m.suspects) {
            self.recheck(g)?;
        }
        let mut rescanned = 0;
        let mut seen_large = crate::hash::FastSet::default();
        let first = HEAP_OFF / PAGE;
        let last = (self.m.space.size() / PAGE).min(written.len() as u64);
        for p in first..last {
            if written[p as usize] {
                rescanned += self.rescan_page(p * PAGE, &mut seen_large);
            }
        }
        self.m.drain(&|_| {}, &|| false)?;
        Ok(rescanned)
    }

    /// Objects marked so far.
    pub fn marked(&self) -> u64 {
        self.m.stats.objects
    }

    /// The marks and findings.
    pub fn result(self) -> MarkResult {
        let mut m = self.m;
        m.stats.bad_fields = m.bad.len() as u64;
        MarkResult { marks: m.marks, stats: m.stats, bad: m.bad, doubts: Vec::new() }
    }

    /// Every chunk of every log slot's chain, followed from the slot (the
    /// roots grey only the first): a region links a new chunk into the
    /// header of the chunk before it without logging (`log.rs`,
    /// `new_chunk`), a store the regions' card table does not see. Chains
    /// are short; a cycle (a corrupt pool) ends at `MAX_CHAIN` hops.
    fn grey_log_chains(&mut self) -> Result<()> {
        const MAX_CHAIN: u32 = 1 << 16;
        let base = self.m.space.base();
        for slot in 0..LOG_SLOTS {
            let (mut at, mut holder) = (crate::log::chunk_links(slot), 0);
            for _ in 0..MAX_CHAIN {
                self.m.field(at, holder)?;
                let v: u64 = self.m.space.read(at)?;
                if v == 0 || locate(self.m.space, v).is_none() {
                    break;
                }
                // the next chunk's link is the first word of its payload
                (at, holder) = (v - base, v);
            }
        }
        Ok(())
    }

    /// A suspect field, read again with the world stopped.
    fn recheck(&mut self, g: Grey) -> Result<()> {
        let v: u64 = self.m.space.read(g.at)?;
        if v != g.v {
            return Ok(());
        }
        match locate(self.m.space, v) {
            // marked when first seen: scanned now (reported if still bad)
            Some(loc) => self.m.stack.push(Grey { loc, ..g }),
            None => {
                if let Some(reason) = crate::pointers::problem(self.m.space, self.m.types, v) {
                    self.m.report(g, reason);
                }
            }
        }
        Ok(())
    }

    /// Greys the marked objects overlapping the page at pool offset `off`.
    fn rescan_page(&mut self, off: u64, seen_large: &mut crate::hash::FastSet<u64>) -> u64 {
        let base = self.m.space.base();
        let (mut a, end, mut n) = (off, off + PAGE, 0);
        while a < end {
            let Some((v, loc)) = crate::alloc::locate_containing(self.m.space, base + a) else { break };
            let next = match loc {
                Loc::Small { class, .. } => v - OBJ_HEADER - base + crate::alloc::classes::slot_size(class),
                _ => end,
            };
            let fresh = matches!(loc, Loc::Small { .. }) || seen_large.insert(v);
            if fresh && self.m.marks.is_marked(loc) {
                self.m.stack.push(Grey { v, loc, at: 0, holder: RESCAN });
                n += 1;
            }
            a = next.max(a + 16);
        }
        n
    }
}

const PAGE: u64 = 4096;
