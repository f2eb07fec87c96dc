//! Pool operations for front ends that describe their types at run time and
//! write the mapping through raw pointers (the C ABI, Go, Java, C++).
//!
//! - [`Pool::register_type`]: adds a [`TypeDesc`] to the pool's persistent
//!   type table (or finds it; a changed layout is `LayoutMismatch`), so the
//!   GC, relocation and `engram check` can walk objects of that type;
//! - [`Pool::flush`], [`Pool::fence`], [`Pool::persist`]: the persistence
//!   seam (`pmem.rs`) for a validated range of the mapping, in the pool's
//!   durability mode (in `trace` mode they reach the crash explorer).
//!
//! Crash behaviour: a type entry is written body-first, then its used flag
//! (see `types.rs`); flush and fence promise only what `pmem.rs` promises.
//! An object allocated by a Rust region that logged nothing is durable only
//! after the next fence of any thread (`fresh.rs`), not at that region's
//! commit; front ends link new objects with plain stores after a commit, so
//! their regions (the C ABI's `engram_region_begin`) ask for the old
//! contract, [`Tx::new_objects_durable_at_commit`](crate::Tx::new_objects_durable_at_commit):
//! their commit makes everything the region wrote durable before it returns.

use super::Pool;
use crate::error::{Error, Result};
use crate::types::TypeDesc;

impl Pool {
    /// Registers `desc` (or finds it by name) and returns its type id.
    /// Fails with [`Error::LayoutMismatch`] if the pool holds a type of that
    /// name with another layout hash or size.
    pub fn register_type(&self, desc: &TypeDesc) -> Result<u32> {
        if desc.size == 0 && !desc.ptrs.is_empty() {
            return Err(Error::invalid(format!("type {}: pointer offsets in a zero-sized type", desc.name)));
        }
        if !desc.align.is_power_of_two() || desc.align > 4096 {
            return Err(Error::invalid(format!("type {}: alignment {} is not a power of two up to 4096", desc.name, desc.align)));
        }
        if let Some(&p) = desc.ptrs.iter().find(|&&p| p % 8 != 0 || p as u64 + 8 > desc.size) {
            return Err(Error::invalid(format!("type {}: pointer offset {p} is unaligned or beyond its size {}", desc.name, desc.size)));
        }
        self.inner.types.register(&self.inner.space, desc)
    }

    /// The description of type id `id`, if registered.
    pub fn type_desc(&self, id: u32) -> Option<TypeDesc> {
        self.inner.types.get(id).map(|d| (*d).clone())
    }

    fn range(&self, addr: u64, len: u64) -> Result<()> {
        let space = &self.inner.space;
        if !space.contains(addr, len) {
            return Err(Error::BadPointer { addr });
        }
        Ok(())
    }

    /// Starts writing back `[addr, addr+len)` (durable after the next
    /// [`Pool::fence`] on this thread). The range must lie in the mapping.
    pub fn flush(&self, addr: u64, len: u64) -> Result<()> {
        self.range(addr, len)?;
        // SAFETY: `range` checked that [addr, addr+len) lies inside this
        // pool's mapping, which lives as long as `self`.
        unsafe { self.inner.space.persist.flush(addr as *const u8, len as usize) };
        Ok(())
    }

    /// Orders and completes this thread's earlier flushes.
    pub fn fence(&self) -> Result<()> {
        self.inner.space.persist.fence(crate::fences::FRONT_END)
    }

    /// The object whose payload starts at `addr`: its type id (of the
    /// elements for an array), element count and whether it is an array.
    /// [`Error::BadPointer`] if no allocated object starts there.
    pub fn object_at(&self, addr: u64) -> Result<(u32, u64, bool)> {
        use crate::format::{ObjHeader, OBJ_ARRAY, OBJ_HEADER, OBJ_TAG, OBJ_TAG_MASK};
        let space = &self.inner.space;
        crate::alloc::locate(space, addr).ok_or(Error::BadPointer { addr })?;
        let h: ObjHeader = space.read(addr - OBJ_HEADER - space.base())?;
        if h.flags & OBJ_TAG_MASK != OBJ_TAG {
            return Err(Error::BadPointer { addr });
        }
        Ok((h.type_id, h.count, h.flags & OBJ_ARRAY != 0))
    }

    /// Flush then fence: `[addr, addr+len)` is durable on return.
    pub fn persist(&self, addr: u64, len: u64) -> Result<()> {
        self.range(addr, len)?;
        // SAFETY: `range` checked that [addr, addr+len) lies inside this
        // pool's mapping, which lives as long as `self`.
        unsafe { self.inner.space.persist.persist(addr as *const u8, len as usize, crate::fences::FRONT_END_PERSIST) }
    }
}

impl TypeDesc {
    /// A description given at run time. `signature` describes the fields
    /// (names and types, in the front end's own words) and goes into the
    /// layout hash with the size, alignment and pointer offsets, so a
    /// changed field is a different layout.
    pub fn new(name: &str, size: u64, align: u32, ptrs: Vec<u32>, signature: &str) -> Self {
        let hash = crate::types::layout_hash(signature, size, align, &ptrs);
        TypeDesc { name: name.to_string(), size, align, ptrs, hash }
    }
}
