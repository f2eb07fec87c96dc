//! The pool format, defined once. `docs/format.md` mirrors this file.
//!
//! A pool is one file:
//!
//! ```text
//! 0        header copy A (4 KiB slot; a 512-byte PoolHeader)
//! 4 KiB    header copy B
//! 8 KiB    arena table      MAX_ARENAS x u64
//! 40 KiB   root table       ROOTS_CAP x RootEntry (64 B)
//! 104 KiB  type table       TYPES_CAP x TypeEntry (256 B)
//! 256 KiB  log area         LOG_SLOTS x LOG_SLOT_SIZE (one undo log per running region)
//! 4 MiB    arena 0, arena 1, ... (ARENA_SIZE each; the file ends wherever growth has reached)
//! ```
//!
//! Each arena starts with ARENA_META_SPANS spans of metadata: the span table
//! (one u32 per span: free, size class, or large-object head/tail) and, written
//! only on a clean close, the allocation bitmap of every small-object span.
//!
//! Invariants: the header copy with the larger sequence number and a good
//! CRC32C is current; the other copy is the previous version. All integers are
//! little-endian (the engine runs on x86-64). Pointers stored in the heap are
//! absolute addresses inside `[base, base + max_size)`; they are rewritten
//! (swizzled) if the pool is mapped elsewhere.

use std::mem::{offset_of, size_of};

/// First eight bytes of every pool file.
pub const MAGIC: [u8; 8] = *b"ENGRAMP\x01";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Each header copy sits in its own 4 KiB slot.
pub const HEADER_SLOT: u64 = 4096;
/// Longest layout name, in bytes.
pub const LAYOUT_MAX: usize = 64;

/// Offset of the arena table: one u64 per arena, 0 for an arena of spans,
/// or a huge object's head/tail mark (the arena then holds payload only).
pub const ARENA_TABLE_OFF: u64 = 8 * 1024;
/// Most arenas a pool can have (256 GiB of heap).
pub const MAX_ARENAS: u64 = 4096;
/// Offset of the root table.
pub const ROOTS_OFF: u64 = 40 * 1024;
/// Number of named roots.
pub const ROOTS_CAP: u32 = 1024;
/// Offset of the type table.
pub const TYPES_OFF: u64 = 104 * 1024;
/// Number of type-table entries (type ids are 1..=TYPES_CAP).
pub const TYPES_CAP: u32 = 256;
/// Offset of the log area.
pub const LOG_OFF: u64 = 256 * 1024;
/// Number of undo-log slots (regions that may run at once).
pub const LOG_SLOTS: u32 = 64;
/// Bytes per log slot (more is chained from the heap).
pub const LOG_SLOT_SIZE: u32 = 32 * 1024;
/// Where arena 0 starts.
pub const HEAP_OFF: u64 = 4 * 1024 * 1024;

/// Bytes per arena.
pub const ARENA_SIZE: u64 = 64 * 1024 * 1024;
/// Bytes per span, the allocator's page.
pub const SPAN_SIZE: u64 = 64 * 1024;
/// Spans per arena.
pub const SPANS_PER_ARENA: u64 = ARENA_SIZE / SPAN_SIZE;
/// Spans at the start of each arena that hold its metadata.
pub const ARENA_META_SPANS: u64 = 8;
/// Offset in an arena of its allocation bitmaps (after the span table).
pub const ARENA_BITMAP_OFF: u64 = 4096;
/// Bytes of allocation bitmap per span (2048 slots of the smallest class).
pub const SPAN_BITMAP_BYTES: u64 = 256;
/// Smallest pool file.
pub const MIN_POOL_SIZE: u64 = HEAP_OFF + ARENA_META_SPANS * SPAN_SIZE + 4 * SPAN_SIZE;
/// Largest pool file.
pub const MAX_POOL_SIZE: u64 = HEAP_OFF + MAX_ARENAS * ARENA_SIZE;

/// Span-table value of a free span.
pub const SPAN_FREE: u32 = 0;
/// Span-table value of an arena's metadata spans.
pub const SPAN_META: u32 = 0xFFFF_FFFF;
/// Span-table flag of the first span of a large object (low bits: span count).
pub const SPAN_LARGE_HEAD: u32 = 0x8000_0000;
/// Span-table flag of a following span of a large object (low bits: distance to head).
pub const SPAN_LARGE_TAIL: u32 = 0x4000_0000;
/// Mask of the count/distance in large-object span entries.
pub const SPAN_LARGE_MASK: u32 = 0x3FFF_FFFF;
// Small spans store `class index + 1` (1..=NUM_CLASSES).

/// Arena-table flag of the first arena of a huge object (low bits: arena count).
pub const ARENA_HUGE_HEAD: u64 = 1 << 63;
/// Arena-table flag of a following arena of a huge object (low bits: distance to head).
pub const ARENA_HUGE_TAIL: u64 = 1 << 62;
/// Mask of the count/distance in huge-object arena entries.
pub const ARENA_HUGE_MASK: u64 = (1 << 32) - 1;

/// The pool header. Two copies; see the module docs.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PoolHeader {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// [`FORMAT_VERSION`] of the writer.
    pub version: u32,
    /// `size_of::<PoolHeader>()` of the writer.
    pub header_len: u32,
    /// Bumped on every header write; the valid copy with the larger one wins.
    pub seq: u64,
    /// Random identity of the pool, fixed at creation.
    pub uuid: [u8; 16],
    /// The user's layout name, NUL-padded.
    pub layout: [u8; LAYOUT_MAX],
    /// Address the pool is mapped at; heap pointers are relative to it.
    pub base: u64,
    /// Largest the file may grow to (the size of the address reservation).
    pub max_size: u64,
    /// Bytes of the file in use (mapped). The file may be longer, never shorter.
    pub size: u64,
    /// [`HEAP_OFF`].
    pub heap_off: u64,
    /// [`ARENA_TABLE_OFF`].
    pub arena_table_off: u64,
    /// [`ROOTS_OFF`].
    pub roots_off: u64,
    /// [`TYPES_OFF`].
    pub types_off: u64,
    /// [`LOG_OFF`].
    pub log_off: u64,
    /// [`ROOTS_CAP`].
    pub roots_cap: u32,
    /// [`TYPES_CAP`].
    pub types_cap: u32,
    /// [`LOG_SLOTS`].
    pub log_slots: u32,
    /// [`LOG_SLOT_SIZE`].
    pub log_slot_size: u32,
    /// 1 if the pool was closed cleanly (allocator state written out), else 0.
    pub clean: u32,
    /// Number of valid entries in `reloc_from`: a relocation is in progress.
    pub reloc_count: u32,
    /// Earlier bases whose pointers may still be in the heap (relocation).
    pub reloc_from: [u64; 4],
    /// Creation time, seconds since the Unix epoch.
    pub created_unix: u64,
    /// Live objects at the last clean close or collection.
    pub stat_objects: u64,
    /// Live payload bytes at the last clean close or collection.
    pub stat_bytes: u64,
    /// Zero.
    pub reserved: [u8; 256],
    /// CRC32C of every byte before this field.
    pub crc: u32,
    /// Zero.
    pub pad: u32,
}

/// Bytes of a header covered by its checksum.
pub const HEADER_CRC_LEN: usize = 504;

/// Header in front of every object.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjHeader {
    /// Type id (index into the type table + 1); of the element for arrays.
    pub type_id: u32,
    /// [`OBJ_TAG`] in the high 16 bits, [`OBJ_ARRAY`] and other flags low.
    pub flags: u32,
    /// Number of elements (1 for a plain object).
    pub count: u64,
}

/// Bytes of [`ObjHeader`]; object payloads start this far into a slot.
pub const OBJ_HEADER: u64 = 16;
/// Offset of `flags` in [`ObjHeader`] (a freed object's tag is cleared there).
pub const OBJ_FLAGS_OFF: u64 = offset_of!(ObjHeader, flags) as u64;
/// Tag in the high bits of `ObjHeader::flags`, checked by `engram check`.
pub const OBJ_TAG: u32 = 0xE9A0_0000;
/// Mask of the tag.
pub const OBJ_TAG_MASK: u32 = 0xFFFF_0000;
/// The object is an array of `count` elements.
pub const OBJ_ARRAY: u32 = 1;

/// One named durable root.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RootEntry {
    /// Address of the object (payload), or 0.
    pub ptr: u64,
    /// Type id of the object.
    pub type_id: u32,
    /// [`ROOT_USED`] | [`ROOT_ARRAY`].
    pub flags: u32,
    /// Bytes of `name` in use.
    pub name_len: u32,
    /// Zero.
    pub pad: u32,
    /// UTF-8 name.
    pub name: [u8; ROOT_NAME_MAX],
}

/// Longest root name, in bytes.
pub const ROOT_NAME_MAX: usize = 40;
/// Bytes of one [`RootEntry`] (the root table's stride).
pub const ROOT_ENTRY_SIZE: u64 = size_of::<RootEntry>() as u64;
/// The root entry is in use.
pub const ROOT_USED: u32 = 1;
/// The root points to an array.
pub const ROOT_ARRAY: u32 = 2;

/// One persistent type description.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TypeEntry {
    /// 1 once every other field is durable (written last).
    pub used: u32,
    /// Zero (reserved for type kinds).
    pub flags: u32,
    /// `size_of` the type (the element size for arrays).
    pub size: u64,
    /// `align_of` the type.
    pub align: u32,
    /// Entries of `ptrs` in use.
    pub nptr: u32,
    /// Hash of the full layout (name, size, fields, pointer offsets).
    pub hash: u64,
    /// Bytes of `name` in use.
    pub name_len: u32,
    /// Zero.
    pub pad: u32,
    /// UTF-8 type name.
    pub name: [u8; TYPE_NAME_MAX],
    /// Byte offsets of pointer fields within the type.
    pub ptrs: [u32; TYPE_PTRS_MAX],
    /// Zero.
    pub reserved: [u8; 8],
}

/// Longest type name, in bytes.
pub const TYPE_NAME_MAX: usize = 96;
/// Most pointer fields in one type.
pub const TYPE_PTRS_MAX: usize = 28;
/// Bytes of one [`TypeEntry`] (the type table's stride).
pub const TYPE_ENTRY_SIZE: u64 = size_of::<TypeEntry>() as u64;

/// Start of each log slot.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LogSlotHeader {
    /// Current generation: only entries stamped with it are live.
    pub gen: u64,
    /// Address of the first overflow chunk's payload, or 0.
    pub chunk: u64,
    /// Zero.
    pub reserved: [u64; 6],
}

/// Bytes of [`LogSlotHeader`]: a slot's entries start this far into it.
pub const LOG_SLOT_HEADER: u64 = size_of::<LogSlotHeader>() as u64;
/// Offset of `chunk` in [`LogSlotHeader`]: the link to the first overflow
/// chunk (a GC root, and where a writer links a new chunk).
pub const LOG_SLOT_CHUNK_OFF: u64 = offset_of!(LogSlotHeader, chunk) as u64;

/// Header of one undo-log entry; `len` bytes of old data follow, padded to 8.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LogEntryHeader {
    /// Generation the entry was written in.
    pub gen: u64,
    /// Pool offset of the logged range.
    pub off: u64,
    /// Bytes logged, or [`LOG_JUMP`].
    pub len: u32,
    /// CRC32C of gen, off, len and the data.
    pub crc: u32,
}

/// An entry with this length says "continue in the next chunk".
pub const LOG_JUMP: u32 = u32::MAX;

/// Start of a log overflow chunk (a heap object of type `engram::log_chunk`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LogChunkHeader {
    /// Address of the next chunk's payload, or 0.
    pub next: u64,
    /// Bytes of entry space after this header.
    pub cap: u64,
}

/// Header of an STM redo record, at the start of a redo-log half
/// (`stm/redo.rs`). `n` entries follow, each a [`RedoEntryHeader`] and its
/// data padded to 8 bytes; `len` is the bytes after this header. The CRC32C
/// covers everything from `wv` to the end of the last entry. All fields are
/// little-endian.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedoRecordHeader {
    /// [`REDO_MAGIC`]; 0 in a cleared half.
    pub magic: u32,
    /// CRC32C of the record from `wv` on.
    pub crc: u32,
    /// The commit's timestamp (replay order).
    pub wv: u64,
    /// Entries that follow.
    pub n: u32,
    /// Bytes of entries that follow.
    pub len: u32,
}

/// `RedoRecordHeader::magic` of a record ("REDO").
pub const REDO_MAGIC: u32 = 0x5245_444F;
/// Offset of the first byte the record CRC covers.
pub const REDO_CRC_FROM: usize = offset_of!(RedoRecordHeader, wv);

/// Header of one redo entry. A value entry: `vlen` bytes of the variable's
/// new value follow (padded to 8), stored at pool offset `off` + 8 (after
/// the cell's lock word). A check entry (`vlen` has [`REDO_CHECK_FLAG`]):
/// the low bits are the length of the copy at pool offset `off`, and 8
/// bytes follow: its CRC32C, then zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedoEntryHeader {
    /// Pool offset of the cell (value entry) or the copy (check entry).
    pub off: u64,
    /// Value length, or [`REDO_CHECK_FLAG`] | copy length.
    pub vlen: u32,
    /// Zero.
    pub pad: u32,
}

/// `RedoEntryHeader::vlen` flag of a check entry.
pub const REDO_CHECK_FLAG: u32 = 0x8000_0000;

const _: () = assert!(size_of::<RedoRecordHeader>() == 24);
const _: () = assert!(offset_of!(RedoRecordHeader, crc) == 4);
const _: () = assert!(offset_of!(RedoRecordHeader, wv) == 8);
const _: () = assert!(offset_of!(RedoRecordHeader, n) == 16);
const _: () = assert!(offset_of!(RedoRecordHeader, len) == 20);
const _: () = assert!(size_of::<RedoEntryHeader>() == 16);
const _: () = assert!(offset_of!(RedoEntryHeader, vlen) == 8);
const _: () = assert!(OBJ_FLAGS_OFF == 4);
const _: () = assert!(LOG_SLOT_HEADER == 64);
const _: () = assert!(LOG_SLOT_CHUNK_OFF == 8);
const _: () = assert!(offset_of!(LogEntryHeader, len) == 16);
const _: () = assert!(offset_of!(RootEntry, name) == 24);
const _: () = assert!(offset_of!(TypeEntry, name) == 40);
const _: () = assert!(offset_of!(TypeEntry, ptrs) == 136);
const _: () = assert!(size_of::<PoolHeader>() == 512);
const _: () = assert!(std::mem::offset_of!(PoolHeader, crc) == HEADER_CRC_LEN);
const _: () = assert!(size_of::<ObjHeader>() as u64 == OBJ_HEADER);
const _: () = assert!(size_of::<RootEntry>() == 64);
const _: () = assert!(size_of::<TypeEntry>() == 256);
const _: () = assert!(size_of::<LogSlotHeader>() == 64);
const _: () = assert!(size_of::<LogEntryHeader>() == 24);
const _: () = assert!(size_of::<LogChunkHeader>() == 16);
const _: () = assert!(ARENA_TABLE_OFF + MAX_ARENAS * 8 <= ROOTS_OFF);
const _: () = assert!(ROOTS_OFF + ROOTS_CAP as u64 * ROOT_ENTRY_SIZE <= TYPES_OFF);
const _: () = assert!(TYPES_OFF + TYPES_CAP as u64 * TYPE_ENTRY_SIZE <= LOG_OFF);
const _: () = assert!(LOG_OFF + LOG_SLOTS as u64 * LOG_SLOT_SIZE as u64 <= HEAP_OFF);
const _: () = assert!(ARENA_BITMAP_OFF + SPANS_PER_ARENA * SPAN_BITMAP_BYTES <= ARENA_META_SPANS * SPAN_SIZE);

impl PoolHeader {
    /// The header as bytes.
    pub fn as_bytes(&self) -> &[u8; 512] {
        // SAFETY: PoolHeader is repr(C), 512 bytes (checked above), has no
        // padding (every field is naturally aligned and sizes add up), and
        // every byte pattern of u8 is valid.
        unsafe { &*(self as *const Self as *const [u8; 512]) }
    }

    /// Reads a header from bytes (no validation).
    pub fn from_bytes(b: &[u8; 512]) -> Self {
        // SAFETY: every bit pattern is a valid PoolHeader (integers and byte
        // arrays only); read_unaligned tolerates any alignment of `b`.
        unsafe { std::ptr::read_unaligned(b.as_ptr() as *const Self) }
    }

    /// CRC32C over the checksummed part.
    pub fn compute_crc(&self) -> u32 {
        crc32c::crc32c(&self.as_bytes()[..HEADER_CRC_LEN])
    }

    /// The layout name as a string (lossy for non-UTF-8 bytes).
    pub fn layout_name(&self) -> String {
        let end = self.layout.iter().position(|&b| b == 0).unwrap_or(LAYOUT_MAX);
        String::from_utf8_lossy(&self.layout[..end]).into_owned()
    }

    /// The UUID as text.
    pub fn uuid_string(&self) -> String {
        uuid::Uuid::from_bytes(self.uuid).to_string()
    }
}

/// Bytes a slot of `size` payload bytes needs, header included.
pub const fn slot_bytes(payload: u64) -> u64 {
    payload + OBJ_HEADER
}

/// Pool offset of arena `a`.
pub const fn arena_off(a: u64) -> u64 {
    HEAP_OFF + a * ARENA_SIZE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip_and_crc() {
        let mut h = PoolHeader::from_bytes(&[0u8; 512]);
        h.magic = MAGIC;
        h.version = FORMAT_VERSION;
        h.seq = 7;
        h.crc = h.compute_crc();
        let back = PoolHeader::from_bytes(h.as_bytes());
        assert_eq!(back.seq, 7);
        assert_eq!(back.compute_crc(), back.crc);
        let mut bytes = *h.as_bytes();
        bytes[20] ^= 1;
        let torn = PoolHeader::from_bytes(&bytes);
        assert_ne!(torn.compute_crc(), torn.crc);
    }
}
