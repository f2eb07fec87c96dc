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

use crate::alloc::{locate, Marks};
use crate::error::Result;
use crate::format::*;
use crate::pointers::{object_problem, BadField};
use crate::pool::space::Space;
use crate::types::TypeTable;

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

/// Who holds a pointer field: for reports.
#[derive(Clone, Copy)]
struct Holder<'a> {
    object: u64,
    name: &'a str,
    field: u64,
}

/// The mark walk's state.
struct Marker<'a> {
    space: &'a Space,
    types: &'a TypeTable,
    reloc: Option<&'a Reloc>,
    marks: Marks,
    stack: Vec<u64>,
    stats: MarkStats,
    bad: Vec<BadField>,
    /// Some when headers are doubted too (`engram check`).
    doubts: Option<Vec<String>>,
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
    let mut m =
        Marker { space, types, reloc, marks: Marks::default(), stack: Vec::new(), stats: MarkStats::default(), bad: Vec::new(), doubts };
    for (i, _, name) in crate::tx::used_root_entries(space)? {
        let holder = format!("root {name:?}");
        m.field(ROOTS_OFF + i as u64 * crate::format::ROOT_ENTRY_SIZE, Holder { object: 0, name: &holder, field: 0 })?;
    }
    for slot in 0..LOG_SLOTS {
        let holder = format!("log slot {slot}");
        m.field(crate::log::chunk_links(slot), Holder { object: 0, name: &holder, field: 0 })?;
    }
    while let Some(addr) = m.stack.pop() {
        m.scan(addr)?;
        if m.stats.objects % 4096 == 0 {
            progress(m.stats.objects);
        }
    }
    if m.stats.swizzled > 0 {
        space.persist.fence("swizzled pointers before the relocation is finished")?;
    }
    progress(m.stats.objects);
    m.stats.bad_fields = m.bad.len() as u64;
    Ok(MarkResult { marks: m.marks, stats: m.stats, bad: m.bad, doubts: m.doubts.unwrap_or_default() })
}

impl Marker<'_> {
    /// Handles the pointer stored at pool offset `off`: marks its target,
    /// or reports it and treats it as null.
    fn field(&mut self, off: u64, holder: Holder<'_>) -> Result<()> {
        let mut v: u64 = self.space.read(off)?;
        if let Some(r) = self.reloc {
            let t = r.translate(v);
            if t != v {
                self.space.write(off, &t)?;
                self.space.flush(off, 8);
                self.stats.swizzled += 1;
                v = t;
                crate::failpoint::Failpoint::GcSwizzle.hit();
            }
        }
        if v == 0 {
            return Ok(());
        }
        let problem = match locate(self.space, v) {
            Some(loc) if self.marks.is_marked(loc) => None,
            Some(loc) => {
                // A slot that holds no live object (a dangling pointer's
                // target) is marked but not scanned: kept out of allocation
                // until the field is repaired, so the bad field never comes
                // to alias a new object.
                self.marks.mark(loc);
                let p = object_problem(self.space, self.types, v, loc);
                if p.is_none() {
                    self.stack.push(v);
                    self.doubt(v, loc, &holder);
                }
                p
            }
            None => crate::pointers::problem(self.space, self.types, v),
        };
        if let Some(reason) = problem {
            self.bad.push(BadField {
                object: holder.object,
                holder: holder.name.to_string(),
                field: holder.field,
                at: off,
                value: v,
                reason,
            });
        }
        Ok(())
    }

    /// With header doubts on, records one for the live object `v` if its
    /// header disagrees with how the engine writes headers.
    fn doubt(&mut self, v: u64, loc: crate::alloc::Loc, holder: &Holder<'_>) {
        if let Some(doubts) = self.doubts.as_mut() {
            if let Some(why) = crate::pointers::header_doubt(self.space, self.types, v, loc) {
                doubts.push(format!("object {v:#x} (from {} field {}): {why}", holder.name, holder.field));
            }
        }
    }

    /// Counts the (validated, marked) object at `addr` and visits its pointer fields.
    fn scan(&mut self, addr: u64) -> Result<()> {
        let space = self.space;
        let Some(loc) = locate(space, addr) else { return Ok(()) };
        let h: ObjHeader = space.read(addr - OBJ_HEADER - space.base())?;
        let Some(ty) = self.types.get(h.type_id) else { return Ok(()) };
        let count = if h.flags & OBJ_ARRAY != 0 { h.count } else { 1 };
        let bytes = count.saturating_mul(ty.size).min(loc.capacity());
        self.stats.objects += 1;
        self.stats.bytes += bytes;
        if ty.ptrs.is_empty() || count.checked_mul(ty.size).is_none_or(|b| b > loc.capacity()) {
            return Ok(());
        }
        let base_off = addr - space.base();
        for i in 0..count {
            for &p in &ty.ptrs {
                let field = i * ty.size + p as u64;
                self.field(base_off + field, Holder { object: addr, name: &ty.name, field })?;
            }
        }
        Ok(())
    }
}
