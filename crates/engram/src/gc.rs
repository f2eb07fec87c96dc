//! Garbage collection and pointer swizzling.
//!
//! Mark: every object reachable from the named roots and from the undo-log
//! chunk chains is live; pointer fields are found through the persistent type
//! table, so no program is needed. Each pointer is validated on the way (it
//! must be null or the payload address of an object whose header carries the
//! tag and a known type), which makes the same walk serve `engram check`.
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
use crate::error::{Error, Result};
use crate::format::*;
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
}

/// The mark walk's state.
struct Marker<'a> {
    space: &'a Space,
    types: &'a TypeTable,
    reloc: Option<&'a Reloc>,
    marks: Marks,
    stack: Vec<u64>,
    stats: MarkStats,
}

/// Marks from the roots and logs. `progress` is called with the number of
/// objects marked so far, every 4096 objects.
pub(crate) fn mark(space: &Space, types: &TypeTable, reloc: Option<&Reloc>, progress: &dyn Fn(u64)) -> Result<(Marks, MarkStats)> {
    let mut m = Marker { space, types, reloc, marks: Marks::default(), stack: Vec::new(), stats: MarkStats::default() };
    for (i, e, name) in crate::tx::used_root_entries(space)? {
        let at = ROOTS_OFF + i as u64 * crate::format::ROOT_ENTRY_SIZE;
        m.field(at, &format!("root {name:?}"))?;
        let _ = e;
    }
    for slot in 0..LOG_SLOTS {
        m.field(crate::log::chunk_links(slot), &format!("log slot {slot}"))?;
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
    Ok((m.marks, m.stats))
}

impl Marker<'_> {
    /// Handles the pointer stored at pool offset `off`.
    fn field(&mut self, off: u64, what: &dyn std::fmt::Display) -> Result<()> {
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
        let loc =
            locate(self.space, v).ok_or_else(|| Error::corrupt(format!("{what} points to {v:#x}, which is not an object in this pool")))?;
        if self.marks.mark(loc) {
            self.stack.push(v);
        }
        Ok(())
    }

    /// Validates the object at `addr` and visits its pointer fields.
    fn scan(&mut self, addr: u64) -> Result<()> {
        let space = self.space;
        let loc = locate(space, addr).ok_or(Error::BadPointer { addr })?;
        let hoff = addr - OBJ_HEADER - space.base();
        let h: ObjHeader = space.read(hoff)?;
        if h.flags & OBJ_TAG_MASK != OBJ_TAG {
            return Err(Error::corrupt(format!("object at {addr:#x} has a bad header tag {:#x}", h.flags)));
        }
        let ty =
            self.types.get(h.type_id).ok_or_else(|| Error::corrupt(format!("object at {addr:#x} has unknown type id {}", h.type_id)))?;
        let count = if h.flags & OBJ_ARRAY != 0 { h.count } else { 1 };
        let bytes = count.checked_mul(ty.size).filter(|&b| b <= loc.capacity()).ok_or_else(|| {
            Error::corrupt(format!("object at {addr:#x} ({} x {}) overruns its {}-byte slot", count, ty.name, loc.capacity()))
        })?;
        self.stats.objects += 1;
        self.stats.bytes += bytes;
        if ty.ptrs.is_empty() {
            return Ok(());
        }
        let base_off = addr - space.base();
        for i in 0..count {
            for &p in &ty.ptrs {
                let off = base_off + i * ty.size + p as u64;
                self.field(off, &format_args!("field +{} of {} at {addr:#x}", i * ty.size + p as u64, ty.name))?;
            }
        }
        Ok(())
    }
}
