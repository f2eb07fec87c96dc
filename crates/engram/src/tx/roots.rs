//! Named durable roots: a persistent map from a name to a typed pointer.
//!
//! The root table is a fixed array of [`RootEntry`] in the pool's metadata.
//! Roots change only inside a region: the entry is undo-logged before it is
//! written, so setting or removing a root is atomic with the rest of the
//! region. Every root operation takes the root-table lock until the region
//! ends. Everything reachable from a root is live; the rest is garbage.

use super::Tx;
use crate::error::{Error, Result};
use crate::format::*;
use crate::pool::space::Space;
use crate::ptr::{PArray, PPtr};
use crate::types::Persistent;

/// Lock key of the root table (no object lives at this address).
pub(crate) const ROOTS_LOCK: u64 = 1;

/// One root, as listed by [`crate::Pool::roots`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootInfo {
    /// The root's name.
    pub name: String,
    /// Address of the object it names.
    pub addr: u64,
    /// Type name of the object (element type for arrays).
    pub type_name: String,
    /// Whether it names an array.
    pub array: bool,
    /// Type id of the object (element type for arrays).
    pub type_id: u32,
}

fn entry_off(i: u32) -> u64 {
    ROOTS_OFF + i as u64 * ROOT_ENTRY_SIZE
}

/// The checksum root entry `e` must carry: its pointer counts as an offset
/// from the base of whichever range it points into (the current base or,
/// while a relocation is in progress, an old one), so swizzling a root's
/// pointer never invalidates its checksum (a crash may leave either value).
fn entry_crc(space: &Space, e: &RootEntry) -> u32 {
    let h = space.header();
    let in_range = |b: u64| e.ptr >= b && e.ptr - b < h.max_size;
    let ranges = std::iter::once(h.base).chain(h.reloc_from[..(h.reloc_count as usize).min(4)].iter().copied());
    let off = match ranges.into_iter().find(|&b| e.ptr != 0 && in_range(b)) {
        Some(b) => e.ptr - b,
        None => e.ptr,
    };
    e.compute_crc(off)
}

/// Reads every used root entry: (index, entry, name).
pub(crate) fn used_entries(space: &Space) -> Result<Vec<(u32, RootEntry, String)>> {
    let mut out = Vec::new();
    for i in 0..ROOTS_CAP {
        let e: RootEntry = space.read(entry_off(i))?;
        if e.flags & ROOT_USED == 0 {
            continue;
        }
        if e.crc != entry_crc(space, &e) {
            return Err(Error::corrupt(format!("root entry {i} fails its checksum")));
        }
        if e.name_len as usize > ROOT_NAME_MAX {
            return Err(Error::corrupt(format!("root entry {i} has a name of {} bytes", e.name_len)));
        }
        let name = String::from_utf8_lossy(&e.name[..e.name_len as usize]).into_owned();
        out.push((i, e, name));
    }
    Ok(out)
}

pub(super) fn find(space: &Space, name: &str) -> Result<Option<(u32, RootEntry)>> {
    Ok(used_entries(space)?.into_iter().find(|(_, _, n)| n == name).map(|(i, e, _)| (i, e)))
}

impl Tx<'_> {
    /// Points root `name` at `p` (creating the root if needed).
    pub fn set_root<T: Persistent>(&self, name: &str, p: PPtr<T>) -> Result<()> {
        let id = self.pool.types.id_of::<T>(&self.pool.space)?;
        self.set_root_raw(name, p.addr(), id, 0)
    }

    /// Points root `name` at array `a`.
    pub fn set_root_array<T: Persistent>(&self, name: &str, a: PArray<T>) -> Result<()> {
        let id = self.pool.types.id_of::<T>(&self.pool.space)?;
        self.set_root_raw(name, a.addr(), id, ROOT_ARRAY)
    }

    pub(crate) fn set_root_raw(&self, name: &str, addr: u64, type_id: u32, flags: u32) -> Result<()> {
        if name.is_empty() || name.len() > ROOT_NAME_MAX {
            return Err(Error::invalid(format!("root name must be 1 to {ROOT_NAME_MAX} bytes")));
        }
        if addr != 0 && crate::alloc::locate(&self.pool.space, addr).is_none() {
            return Err(Error::BadPointer { addr });
        }
        self.check_root_target(name, addr)?;
        self.lock(ROOTS_LOCK)?;
        let space = &self.pool.space;
        let index = match find(space, name)? {
            Some((i, _)) => i,
            None => (0..ROOTS_CAP)
                .find(|&i| space.read::<RootEntry>(entry_off(i)).is_ok_and(|e| e.flags & ROOT_USED == 0))
                .ok_or(Error::TableFull { table: "root", capacity: ROOTS_CAP })?,
        };
        let mut e =
            RootEntry { ptr: addr, type_id, flags: ROOT_USED | flags, name_len: name.len() as u32, crc: 0, name: [0; ROOT_NAME_MAX] };
        e.name[..name.len()].copy_from_slice(name.as_bytes());
        e.crc = entry_crc(space, &e);
        self.log_range(space.base() + entry_off(index), ROOT_ENTRY_SIZE)?;
        space.write(entry_off(index), &e)
    }

    /// The object root `name` points to, if the root exists.
    /// Fails with [`Error::RootType`] if it holds another type.
    pub fn root<T: Persistent>(&self, name: &str) -> Result<Option<PPtr<T>>> {
        Ok(self.root_raw::<T>(name, false)?.map(PPtr::from_addr))
    }

    /// The array root `name` points to, if the root exists.
    pub fn root_array<T: Persistent>(&self, name: &str) -> Result<Option<PArray<T>>> {
        Ok(self.root_raw::<T>(name, true)?.map(PArray::from_addr))
    }

    fn root_raw<T: Persistent>(&self, name: &str, array: bool) -> Result<Option<u64>> {
        self.lock(ROOTS_LOCK)?;
        let Some((_, e)) = find(&self.pool.space, name)? else { return Ok(None) };
        let id = self.pool.types.id_of::<T>(&self.pool.space)?;
        if e.type_id != id || (e.flags & ROOT_ARRAY != 0) != array {
            let found = self.pool.types.get(e.type_id).map(|d| d.name.clone()).unwrap_or_else(|| format!("type id {}", e.type_id));
            let wrap = |n: String| if array { format!("[{n}]") } else { n };
            let found = if e.flags & ROOT_ARRAY != 0 { format!("[{found}]") } else { found };
            return Err(Error::RootType { name: name.to_string(), expected: wrap(T::type_name()), found });
        }
        Ok(Some(e.ptr))
    }

    /// Removes root `name`; returns whether it existed. The object it named
    /// becomes garbage unless reachable otherwise.
    pub fn remove_root(&self, name: &str) -> Result<bool> {
        self.lock(ROOTS_LOCK)?;
        let space = &self.pool.space;
        let Some((i, _)) = find(space, name)? else { return Ok(false) };
        self.log_range(space.base() + entry_off(i), ROOT_ENTRY_SIZE)?;
        // All zero: a flipped used bit cannot bring the old root back.
        space.write(entry_off(i), &[0u8; ROOT_ENTRY_SIZE as usize])?;
        Ok(true)
    }
}
