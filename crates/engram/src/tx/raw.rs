//! Untyped region operations, for front ends whose types are described at
//! run time (the C ABI, Go, Java, C++) rather than by [`crate::Persistent`].
//!
//! Each takes a type id from [`crate::Pool::register_type`] where the typed
//! API takes a Rust type; the engine validates the id, sizes, and every
//! address (a bad one is [`Error::BadPointer`], never a wild access). The
//! crash behaviour is that of the typed calls in `tx/mod.rs` and `roots.rs`:
//! allocations are garbage after a crash unless a committed region linked
//! them; root changes are undo-logged.

use super::Tx;
use crate::error::{Error, Result};
use crate::format::{OBJ_ARRAY, ROOT_ARRAY};
use crate::types::TYPE_LOG_CHUNK;

/// A named root as stored: what [`Tx::root_entry`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootEntryInfo {
    /// Address of the object (0 for a null root).
    pub addr: u64,
    /// Type id of the object (of its elements for an array).
    pub type_id: u32,
    /// Whether the root names an array.
    pub array: bool,
}

impl Tx<'_> {
    /// The size of registered type `type_id` (not the internal log chunk):
    /// read under the table's read lock, without taking a reference to its
    /// description (an allocation through the C ABI asks it every time).
    fn type_size(&self, type_id: u32) -> Result<u64> {
        if type_id == TYPE_LOG_CHUNK {
            return Err(Error::invalid("type id 3 (log chunk) is internal"));
        }
        self.pool.types.size(type_id).ok_or_else(|| Error::invalid(format!("unknown type id {type_id}")))
    }

    /// Allocates one zeroed object of type `type_id`; returns its address.
    /// Freed again if the region rolls back.
    pub fn alloc_object(&self, type_id: u32) -> Result<u64> {
        let size = self.type_size(type_id)?;
        let addr = self.alloc_raw(size, type_id, 0, 1)?;
        // SAFETY: a fresh slot of at least `size` bytes inside the mapping,
        // owned by this region alone.
        unsafe { std::ptr::write_bytes(addr as *mut u8, 0, size as usize) };
        Ok(addr)
    }

    /// Allocates a zeroed array of `count` elements of type `type_id`.
    pub fn alloc_array_of(&self, type_id: u32, count: u64) -> Result<u64> {
        let size = self.type_size(type_id)?;
        let bytes = count.checked_mul(size).ok_or_else(|| Error::invalid("array size overflows"))?;
        let addr = self.alloc_raw(bytes, type_id, OBJ_ARRAY, count)?;
        // SAFETY: a fresh slot of at least `bytes` bytes inside the mapping.
        unsafe { std::ptr::write_bytes(addr as *mut u8, 0, bytes as usize) };
        Ok(addr)
    }

    /// Frees the object or array at `addr` when the region commits.
    pub fn free_object(&self, addr: u64) -> Result<()> {
        self.free_addr(addr)
    }

    /// Points root `name` at `addr` (0 for null), recording `type_id`.
    pub fn set_root_addr(&self, name: &str, addr: u64, type_id: u32, array: bool) -> Result<()> {
        self.type_size(type_id)?;
        self.set_root_raw(name, addr, type_id, if array { ROOT_ARRAY } else { 0 })
    }

    /// Root `name` as stored, if it exists (takes the root-table lock).
    pub fn root_entry(&self, name: &str) -> Result<Option<RootEntryInfo>> {
        self.lock(super::roots::ROOTS_LOCK)?;
        Ok(super::roots::find(&self.pool.space, name)?.map(|(_, e)| RootEntryInfo {
            addr: e.ptr,
            type_id: e.type_id,
            array: e.flags & ROOT_ARRAY != 0,
        }))
    }
}
