//! Persistent types and the pool's type table.
//!
//! A type may live in a pool when it implements [`Persistent`]: plain data
//! (every bit pattern valid, no volatile pointers), `Copy`, with its pointer
//! fields described so that the GC, relocation and `engram check` can walk
//! the heap without the program. `#[derive(Persistent)]` writes the impl.
//!
//! What it keeps true: each type a program uses is registered once per pool,
//! in a [`TypeEntry`] whose `used` word is persisted only after the rest of
//! the entry, so a crash never leaves a half-written entry that counts. A
//! type whose name is in the table with a different layout hash is refused
//! with [`Error::LayoutMismatch`] naming the type. Each entry carries a
//! CRC32C of itself as it reads once used; a used entry failing it is
//! `Corrupt` (a flipped size or pointer offset would misguide every walk).

use crate::error::{Error, Result};
use crate::format::{TypeEntry, TYPES_CAP, TYPES_OFF, TYPE_ENTRY_SIZE, TYPE_NAME_MAX, TYPE_PTRS_MAX};
use crate::pool::space::Space;
use parking_lot::RwLock;
use std::any::TypeId;
use std::sync::Arc;

/// A type that can be stored in a pool.
///
/// # Safety
/// Implementors promise that every bit pattern of `size_of::<Self>()` bytes
/// is a valid value (integers, floats, byte arrays, [`crate::PPtr`] and
/// structs of those; not `bool`, `char`, enums or references), that the type
/// holds no pointer to volatile memory, and that `pointer_offsets` lists
/// exactly the offsets of its pool pointers, and that `HAS_POINTERS` is
/// true when it lists any (registering a type whose `HAS_POINTERS` is false
/// but which lists offsets is refused). Use `#[derive(Persistent)]`.
pub unsafe trait Persistent: Copy + Send + Sync + 'static {
    /// Whether `pointer_offsets` may list any offset. Checked writes skip
    /// the pointer validation of types without pointers by this constant
    /// alone (no offset list is built); the default, `true`, is always
    /// sound. `#[derive(Persistent)]` computes it from the fields.
    const HAS_POINTERS: bool = true;
    /// Stable name recorded in the pool's type table.
    fn type_name() -> String;
    /// Pushes the offsets (relative to `at`) of this type's pool pointers.
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        let _ = (out, at);
    }
    /// A description of the fields for the layout hash (defaults to the name).
    fn signature() -> String {
        Self::type_name()
    }
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        // SAFETY: every bit pattern of a primitive integer or float is valid;
        // it holds no pointer.
        unsafe impl Persistent for $t {
            const HAS_POINTERS: bool = false;
            fn type_name() -> String { stringify!($t).to_string() }
        }
    )*};
}
plain!(u8, u16, u32, u64, u128, i8, i16, i32, i64, i128, f32, f64);

// SAFETY: an array of Persistent values is Persistent; offsets repeat per element.
unsafe impl<T: Persistent, const N: usize> Persistent for [T; N] {
    const HAS_POINTERS: bool = T::HAS_POINTERS && N > 0;
    fn type_name() -> String {
        format!("[{};{}]", T::type_name(), N)
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        let size = std::mem::size_of::<T>() as u32;
        for i in 0..N as u32 {
            T::pointer_offsets(out, at + i * size);
        }
    }
    fn signature() -> String {
        format!("[{};{}]", T::signature(), N)
    }
}

/// Whether values of `T` hold pool pointers to validate: the one place
/// checked writes (`Tx::write`, `set`, `write_slice`, `alloc`) and array
/// views ask. A constant, so a type without pointers costs nothing.
#[inline(always)]
pub const fn has_pointers<T: Persistent>() -> bool {
    T::HAS_POINTERS
}

/// The layout of a Rust type, as recorded in the pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeDesc {
    /// Stable name.
    pub name: String,
    /// `size_of`.
    pub size: u64,
    /// `align_of`.
    pub align: u32,
    /// Offsets of pool pointers.
    pub ptrs: Vec<u32>,
    /// Layout hash.
    pub hash: u64,
}

impl TypeDesc {
    /// The description of `T`.
    pub fn of<T: Persistent>() -> Self {
        let mut ptrs = Vec::new();
        T::pointer_offsets(&mut ptrs, 0);
        let name = T::type_name();
        let size = std::mem::size_of::<T>() as u64;
        let align = std::mem::align_of::<T>() as u32;
        let hash = layout_hash(&T::signature(), size, align, &ptrs);
        TypeDesc { name, size, align, ptrs, hash }
    }

    /// A built-in description.
    pub(crate) fn builtin(name: &str, size: u64, ptrs: Vec<u32>) -> Self {
        let hash = layout_hash(name, size, 8, &ptrs);
        TypeDesc { name: name.to_string(), size, align: 8, ptrs, hash }
    }
}

/// FNV-1a over the signature, size, alignment and pointer offsets.
pub(crate) fn layout_hash(sig: &str, size: u64, align: u32, ptrs: &[u32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(sig.as_bytes());
    eat(&size.to_le_bytes());
    eat(&align.to_le_bytes());
    for p in ptrs {
        eat(&p.to_le_bytes());
    }
    h
}

/// Type id of an undo-log overflow chunk (a pointer to the next chunk first).
pub const TYPE_LOG_CHUNK: u32 = 3;

pub(crate) fn builtins() -> [TypeDesc; 3] {
    [
        TypeDesc::builtin("engram::bytes", 1, vec![]),
        TypeDesc::builtin("engram::ptr", 8, vec![0]),
        TypeDesc::builtin("engram::log_chunk", 16, vec![0]),
    ]
}

/// The pool's type table and the program's cache of it.
pub(crate) struct TypeTable {
    /// Type id -> description, for every registered entry (index = id - 1).
    by_id: RwLock<Vec<Option<Arc<TypeDesc>>>>,
    /// Rust type -> id, for the types this program has used. FxHash of
    /// the `TypeId` (the compiler's, not an adversary's, key), not SipHash.
    by_rust: RwLock<crate::hash::FastMap<TypeId, u32>>,
}

impl TypeTable {
    /// Loads every used entry of the table.
    pub fn load(space: &Space) -> Result<Self> {
        let mut by_id = vec![None; TYPES_CAP as usize];
        for i in 0..TYPES_CAP {
            let e: TypeEntry = space.read(TYPES_OFF + i as u64 * TYPE_ENTRY_SIZE)?;
            if e.used == 0 {
                continue;
            }
            if e.used != 1 || e.crc != e.compute_crc() || e.nptr as usize > TYPE_PTRS_MAX || e.name_len as usize > TYPE_NAME_MAX {
                return Err(Error::corrupt(format!("type table entry {} is malformed or fails its checksum", i + 1)));
            }
            let name = String::from_utf8_lossy(&e.name[..e.name_len as usize]).into_owned();
            let ptrs = e.ptrs[..e.nptr as usize].to_vec();
            if ptrs.iter().any(|&p| p as u64 + 8 > e.size) {
                return Err(Error::corrupt(format!("type {name}: pointer offset beyond its size {}", e.size)));
            }
            by_id[i as usize] = Some(Arc::new(TypeDesc { name, size: e.size, align: e.align, ptrs, hash: e.hash }));
        }
        Ok(TypeTable { by_id: RwLock::new(by_id), by_rust: RwLock::new(Default::default()) })
    }

    /// Writes the built-in types into a fresh pool.
    pub fn init_builtins(space: &Space) -> Result<()> {
        for (i, d) in builtins().iter().enumerate() {
            write_entry(space, i as u32, d)?;
        }
        Ok(())
    }

    /// The description of type id `id`.
    #[inline]
    pub fn get(&self, id: u32) -> Option<Arc<TypeDesc>> {
        self.with(id, Arc::clone)
    }

    /// The size of type id `id`: [`TypeTable::get`]'s `size` without the
    /// reference count's two atomic updates.
    #[inline]
    pub fn size(&self, id: u32) -> Option<u64> {
        self.with(id, |d| d.size)
    }

    /// `f` of type id `id`'s description, under the read lock.
    #[inline]
    fn with<R>(&self, id: u32, f: impl FnOnce(&Arc<TypeDesc>) -> R) -> Option<R> {
        let v = self.by_id.read();
        v.get(id.checked_sub(1)? as usize)?.as_ref().map(f)
    }

    /// The types by id - 1, as now (the GC looks types up without the lock).
    pub fn snapshot(&self) -> Vec<Option<Arc<TypeDesc>>> {
        self.by_id.read().clone()
    }

    /// All registered types with their ids.
    pub fn all(&self) -> Vec<(u32, Arc<TypeDesc>)> {
        let v = self.by_id.read();
        v.iter().enumerate().filter_map(|(i, d)| d.clone().map(|d| (i as u32 + 1, d))).collect()
    }

    /// The id of `T` in this pool, registering it on first use.
    #[inline]
    pub fn id_of<T: Persistent>(&self, space: &Space) -> Result<u32> {
        if let Some(&id) = self.by_rust.read().get(&TypeId::of::<T>()) {
            return Ok(id);
        }
        let desc = TypeDesc::of::<T>();
        if !has_pointers::<T>() && !desc.ptrs.is_empty() {
            // Checked writes would skip this type's pointers.
            return Err(Error::invalid(format!("type {} lists pointer fields but says HAS_POINTERS = false", desc.name)));
        }
        let id = self.register(space, &desc)?;
        self.by_rust.write().insert(TypeId::of::<T>(), id);
        Ok(id)
    }

    /// Finds `desc` by name, checks its hash, or adds it.
    pub fn register(&self, space: &Space, desc: &TypeDesc) -> Result<u32> {
        if desc.name.len() > TYPE_NAME_MAX {
            return Err(Error::invalid(format!("type name {} longer than {TYPE_NAME_MAX} bytes", desc.name)));
        }
        if desc.ptrs.len() > TYPE_PTRS_MAX {
            return Err(Error::invalid(format!("type {} has more than {TYPE_PTRS_MAX} pointer fields", desc.name)));
        }
        let mut v = self.by_id.write();
        for (i, d) in v.iter().enumerate() {
            if let Some(d) = d {
                if d.name == desc.name {
                    if d.hash != desc.hash || d.size != desc.size {
                        let changed = layout_changes(d, desc);
                        return Err(Error::LayoutMismatch { path: space.path.clone(), type_name: desc.name.clone(), changed });
                    }
                    return Ok(i as u32 + 1);
                }
            }
        }
        let free = v.iter().position(Option::is_none).ok_or(Error::TableFull { table: "type", capacity: TYPES_CAP })?;
        if space.read_only {
            return Err(Error::ReadOnly);
        }
        write_entry(space, free as u32, desc)?;
        v[free] = Some(Arc::new(desc.clone()));
        Ok(free as u32 + 1)
    }
}

/// What differs between the pool's description `old` and the program's
/// `new`, old value first (for [`Error::LayoutMismatch`]).
fn layout_changes(old: &TypeDesc, new: &TypeDesc) -> String {
    let mut out = Vec::new();
    if old.size != new.size {
        out.push(format!("size {} -> {}", old.size, new.size));
    }
    if old.align != new.align {
        out.push(format!("align {} -> {}", old.align, new.align));
    }
    if old.ptrs != new.ptrs {
        out.push(format!("pointer offsets {:?} -> {:?}", old.ptrs, new.ptrs));
    }
    if out.is_empty() {
        out.push(format!("field signature hash {:#018x} -> {:#018x} (field names or types changed)", old.hash, new.hash));
    }
    out.join(", ")
}

/// Writes entry `index`: the body first, then `used = 1`, each persisted.
fn write_entry(space: &Space, index: u32, d: &TypeDesc) -> Result<()> {
    let mut e = TypeEntry {
        used: 0,
        flags: 0,
        size: d.size,
        align: d.align,
        nptr: d.ptrs.len() as u32,
        hash: d.hash,
        name_len: d.name.len() as u32,
        pad: 0,
        name: [0; TYPE_NAME_MAX],
        ptrs: [0; TYPE_PTRS_MAX],
        crc: 0,
        reserved: 0,
    };
    e.name[..d.name.len()].copy_from_slice(d.name.as_bytes());
    e.ptrs[..d.ptrs.len()].copy_from_slice(&d.ptrs);
    if crate::failpoint::planted("types.pointer_map_not_persisted") {
        // A planted bug for the crash explorer's tests (see failpoint::BUGS).
        // An off-by-one: the last pointer offset is not recorded.
        e.nptr = e.nptr.saturating_sub(1);
        e.ptrs[e.nptr as usize] = 0;
    }
    // The checksum of the entry as it will read once `used` is set.
    e.crc = e.compute_crc();
    let off = TYPES_OFF + index as u64 * TYPE_ENTRY_SIZE;
    // 1. the body, durable before it can count; a crash here leaves used = 0.
    space.write_persist(off, &e, crate::fences::TYPE_BODY)?;
    // 2. the used flag (8-byte atomic store).
    space.write_persist(off, &1u32, crate::fences::TYPE_USED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_depends_on_layout() {
        let a = TypeDesc::of::<u64>();
        let b = TypeDesc::of::<i64>();
        assert_ne!(a.hash, b.hash);
        let arr = TypeDesc::of::<[u32; 4]>();
        assert_eq!(arr.size, 16);
        assert!(arr.ptrs.is_empty());
    }
}
