//! Pointer fields: what makes one valid, the checked mode that refuses bad
//! ones before they are stored, and the report of those that slipped through.
//!
//! A pointer field is valid when it is null or the payload address of a live
//! object of this pool: a slot the span table places there, whose header
//! carries the tag (a freed object loses it) and a registered type whose size
//! times count fits the slot. A pointer from another pool, a stray
//! `PPtr::from_addr` value and a pointer left dangling by `Tx::free` are not.
//!
//! Checked mode (on by default in debug builds, `OpenOptions::check_pointers`
//! selects it) validates the pointer fields of every value a region stores
//! through `alloc`, `write`, `set` and `write_slice`, and at commit every
//! object the region allocated or logged (which covers front ends writing
//! through raw pointers); a bad field is [`Error::BadPointerField`] naming
//! the type and the field, and the region rolls back.
//!
//! What slips through (unchecked mode, damage, a program bug in another
//! front end) never bricks the pool: the GC, recovery and `check` report each
//! bad field as a [`BadField`] and treat it as null for marking, and
//! [`crate::Pool::repair`] clears them in one undo-logged region. Clearing
//! is crash-safe: a crash mid-repair rolls the region back, and the fields
//! are still reported (and still treated as null) on the next open.

use crate::alloc::locate;
use crate::error::{Error, Result};
use crate::format::*;
use crate::pool::space::Space;
use crate::types::TypeTable;

/// A pointer field that does not point at a live object of its pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadField {
    /// Payload address of the object holding the field, or 0 for a root or
    /// a log slot's chunk link.
    pub object: u64,
    /// Type name of that object, or `root "name"` / `log slot N`.
    pub holder: String,
    /// Byte offset of the field in the object's payload (element index x
    /// element size + field offset for arrays).
    pub field: u64,
    /// Pool offset of the field (what a repair clears).
    pub at: u64,
    /// The value found there.
    pub value: u64,
    /// Why it is not a valid pointer.
    pub reason: &'static str,
}

impl std::fmt::Display for BadField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.object == 0 {
            write!(f, "{} holds {:#x}: {}", self.holder, self.value, self.reason)
        } else {
            write!(f, "field +{} of {} at {:#x} holds {:#x}: {}", self.field, self.holder, self.object, self.value, self.reason)
        }
    }
}

/// Why `v` is not a valid pointer in this pool, or None if it is one (or null).
pub(crate) fn problem(space: &Space, types: &TypeTable, v: u64) -> Option<&'static str> {
    if v == 0 {
        return None;
    }
    if !space.contains(v, 1) || v < space.base() + HEAP_OFF {
        return Some("outside this pool's heap (a pointer from another pool, or a stray value)");
    }
    let Some(loc) = locate(space, v) else {
        return Some("not the address of an object (a stray value, or into the middle of one)");
    };
    object_problem(space, types, v, loc)
}

/// Why the object `locate` placed at `v` is not live, or None if it is.
pub(crate) fn object_problem(space: &Space, types: &TypeTable, v: u64, loc: crate::alloc::Loc) -> Option<&'static str> {
    let Ok(h) = space.read::<ObjHeader>(v - OBJ_HEADER - space.base()) else {
        return Some("unreadable object header");
    };
    header_problem(types.get(h.type_id).as_deref(), &h, loc)
}

/// [`object_problem`] for a header already read (the GC reads each header once).
#[inline]
/// `ty`: the registered type of `h.type_id`, if any.
pub(crate) fn header_problem(ty: Option<&crate::types::TypeDesc>, h: &ObjHeader, loc: crate::alloc::Loc) -> Option<&'static str> {
    match h.flags & OBJ_TAG_MASK {
        OBJ_TAG => {}
        0 => return Some("a freed object, or a slot that holds none (a dangling pointer)"),
        _ => return Some("an object whose header is damaged (bad tag)"),
    }
    let Some(ty) = ty else {
        return Some("an object of an unknown type");
    };
    let count = if h.flags & OBJ_ARRAY != 0 { h.count } else { 1 };
    if count.checked_mul(ty.size).is_none_or(|b| b > loc.capacity()) {
        return Some("an object whose header overruns its slot");
    }
    None
}

/// Heap objects carry no checksum; what `engram check` can still doubt in a
/// header that [`object_problem`] accepts, because the engine writes every
/// header one way: only the tag and [`OBJ_ARRAY`] among the flags; a count
/// of 1 for a plain object; and an array's slot sized by the allocator from
/// its count (the smallest size class, span run or arena run that holds
/// `count * size` bytes and the header), so a flipped count that still fits
/// its slot shows unless it stays within the slot's size class. Reported by
/// `Pool::check` only: marking still trusts such an object, so a doubt never
/// frees anything.
pub(crate) fn header_doubt(space: &Space, types: &TypeTable, v: u64, loc: crate::alloc::Loc) -> Option<&'static str> {
    use crate::alloc::Loc;
    let h = space.read::<ObjHeader>(v - OBJ_HEADER - space.base()).ok()?;
    if h.flags & !(OBJ_TAG_MASK | OBJ_ARRAY) != 0 {
        return Some("its header has flag bits the engine never sets");
    }
    if h.flags & OBJ_ARRAY == 0 {
        return (h.count != 1).then_some("a plain object whose header count is not 1");
    }
    let need = h.count.checked_mul(types.get(h.type_id)?.size)?.checked_add(OBJ_HEADER)?;
    let tight = match (loc, crate::alloc::classes::class_for(need)) {
        (Loc::Small { class, .. }, Some(c)) => c == class,
        (Loc::Large { spans, .. }, None) => need.div_ceil(SPAN_SIZE) == spans as u64,
        (Loc::Huge { arenas, .. }, None) => need.div_ceil(ARENA_SIZE) == arenas as u64,
        _ => false,
    };
    (!tight).then_some("an array whose count does not match the size of its slot")
}

/// Checks pointer values against one pool. `freed` says whether an address
/// was freed by the running region (its tag goes only at commit).
pub(crate) struct FieldCheck<'a> {
    pub space: &'a Space,
    pub types: &'a TypeTable,
    pub freed: &'a dyn Fn(u64) -> bool,
}

impl FieldCheck<'_> {
    /// Checks one pointer value stored in field `field` of `object`.
    pub fn value(&self, type_name: &dyn Fn() -> String, object: u64, field: u64, value: u64) -> Result<()> {
        let reason = if value != 0 && (self.freed)(value) {
            Some("an object freed by this region (a dangling pointer)")
        } else {
            problem(self.space, self.types, value)
        };
        match reason {
            None => Ok(()),
            Some(reason) => Err(Error::BadPointerField { type_name: type_name(), field, object, value, reason }),
        }
    }

    /// Checks the pointer fields (offsets `ptrs` into a `T`) of values about
    /// to be stored as elements `first..` of `object`.
    pub fn values<T: Copy>(&self, type_name: &dyn Fn() -> String, object: u64, first: u64, vals: &[T], ptrs: &[u32]) -> Result<()> {
        let size = std::mem::size_of::<T>();
        for (i, v) in vals.iter().enumerate() {
            for &p in ptrs {
                if p as usize + 8 > size {
                    continue;
                }
                // SAFETY: p + 8 <= size_of::<T>(), so the 8 bytes at offset p
                // lie inside `*v`; a Persistent type's pointer offsets name
                // its (initialised) PPtr fields.
                let w = unsafe { std::ptr::read_unaligned((v as *const T as *const u8).add(p as usize) as *const u64) };
                self.value(type_name, object, (first + i as u64) * size as u64 + p as u64, w)?;
            }
        }
        Ok(())
    }

    /// Checks the pointer fields of the live object at payload `addr` that
    /// lie in payload bytes `[from, from + len)`, reading its type from the pool.
    pub fn object(&self, addr: u64, from: u64, len: u64) -> Result<()> {
        let Some(loc) = locate(self.space, addr) else { return Ok(()) };
        let h: ObjHeader = self.space.read(addr - OBJ_HEADER - self.space.base())?;
        let Some(ty) = self.types.get(h.type_id) else { return Ok(()) };
        let count = if h.flags & OBJ_ARRAY != 0 { h.count } else { 1 };
        if ty.ptrs.is_empty() || ty.size == 0 || count.checked_mul(ty.size).is_none_or(|b| b > loc.capacity()) {
            return Ok(());
        }
        let end = from.saturating_add(len);
        for i in from / ty.size..count.min(end.div_ceil(ty.size)) {
            for &p in &ty.ptrs {
                let field = i * ty.size + p as u64;
                if field + 8 <= from || field >= end {
                    continue;
                }
                let v: u64 = self.space.read(addr - self.space.base() + field)?;
                self.value(&|| ty.name.clone(), addr, field, v)?;
            }
        }
        Ok(())
    }
}
