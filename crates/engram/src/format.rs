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
//! Checksums (version 2): besides the header copies and the undo entries,
//! every piece of metadata whose flipped bit could otherwise open "fine"
//! with wrong data carries a check: the log generation word (a CRC-16 in its
//! top 16 bits, so it stays one atomic 8-byte store), each span-table entry
//! (a CRC-16 in its top 16 bits, one atomic 4-byte store; 0 = free), each
//! slot bitmap (a CRC32C per span, written with the bitmaps at a clean
//! close), each root entry and each type entry (a CRC32C in the entry).
//!
//! Invariants: the header copy with the larger sequence number and a good
//! CRC32C is current; the other copy is the previous version. All integers are
//! little-endian (the engine runs on x86-64). Pointers stored in the heap are
//! absolute addresses inside `[base, base + max_size)`; they are rewritten
//! (swizzled) if the pool is mapped elsewhere.

use std::mem::{offset_of, size_of};

/// First eight bytes of every pool file.
pub const MAGIC: [u8; 8] = *b"ENGRAMP\x01";
/// The format version this build writes and reads. Version 2 added the
/// checksums of the log generation words, span tables, slot bitmaps, root
/// entries and type entries. Version 3 added the undo log's commit record
/// ([`LOG_COMMIT`]) and the two halves of a log slot ([`log_first_entry`]).
/// Version 4 added redo entries ([`LOG_REDO`]) and the redo commit record
/// ([`LOG_REDO_COMMIT`]): a version-3 engine would stop its scan at a redo
/// entry and drop a committed region whose bytes are not yet in place, so
/// it must refuse such a pool (it does: the version is unknown to it).
pub const FORMAT_VERSION: u32 = 4;

/// The oldest format version this engine opens. A version-2 pool's logs
/// hold no commit record and start every generation at the slot's first
/// entry; recovery reads them so, and a writable open then upgrades the
/// header to [`FORMAT_VERSION`] before any region runs.
pub const MIN_FORMAT_VERSION: u32 = 2;

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
/// Offset in an arena of the bitmaps' checksums: one u32 per span, CRC32C of
/// (span index, class, bitmap); see [`bitmap_crc`].
pub const ARENA_BITMAP_CRC_OFF: u64 = ARENA_BITMAP_OFF + SPANS_PER_ARENA * SPAN_BITMAP_BYTES;
/// Smallest pool file.
pub const MIN_POOL_SIZE: u64 = HEAP_OFF + ARENA_META_SPANS * SPAN_SIZE + 4 * SPAN_SIZE;
/// Largest pool file.
pub const MAX_POOL_SIZE: u64 = HEAP_OFF + MAX_ARENAS * ARENA_SIZE;

// Span-table values below are the *logical* values the allocator works
// with; the word stored in the table is [`span_entry_encode`] of them (a
// 16-bit form plus its CRC-16), read back with [`span_entry_decode`].

/// Span-table value of a free span (stored as 0).
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
    /// CRC32C of the entry with this field zero and `ptr` replaced by its
    /// offset from the pool's base ([`RootEntry::compute_crc`]), so that
    /// relocation, which rewrites `ptr`, leaves it valid. Checked for used
    /// entries. A removed root's entry is all zero.
    pub crc: u32,
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
    /// CRC32C of the entry as it reads once used (`used` = 1, this field
    /// zero): [`TypeEntry::compute_crc`], checked for used entries.
    pub crc: u32,
    /// Zero.
    pub reserved: u32,
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
    /// Current generation word ([`log_gen_word`]): the generation in the low
    /// 48 bits, its CRC-16 in the high 16. Only entries stamped with the
    /// generation are live.
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
    /// Bytes logged (with [`LOG_REDO`] set for a redo entry), or
    /// [`LOG_JUMP`], or [`LOG_COMMIT`], or [`LOG_REDO_COMMIT`].
    pub len: u32,
    /// CRC32C of gen, off, len and the data.
    pub crc: u32,
}

/// An entry with this length says "continue in the next chunk".
pub const LOG_JUMP: u32 = u32::MAX;

/// An entry with this length is a region's commit record (version 3): no
/// data follows, `off` holds the checksum (`log::data_sum`) of the *new*
/// bytes of every live entry's range before it, and it ends the live
/// entries. A record whose checksum matches the current bytes means the
/// region committed (`log.rs`, step 3').
pub const LOG_COMMIT: u32 = u32::MAX - 1;

/// Set in an entry's `len` (version 4): a *redo* entry, whose data are the
/// range's NEW bytes (`log/redo.rs`); the length is `len & !LOG_REDO`
/// (at most [`LOG_REDO_MAX`]). An undo scan skips redo entries; only a
/// valid [`LOG_REDO_COMMIT`] after them makes them count.
pub const LOG_REDO: u32 = 1 << 31;

/// Bytes of new data one region may hold in redo entries (version 4); a
/// region that would write more goes over to undo logging. With the
/// entries' headers and the record this stays well inside [`LOG_HALF`].
pub const LOG_REDO_MAX: u64 = 4096;

/// An entry with this length is a region's *redo commit record* (version
/// 4): no data follows, `off` holds the checksum (`log::data_sum`) of the
/// log bytes from the generation's first entry up to the record (every
/// redo entry, header and data). A valid record means the region committed
/// and its redo entries are replayed (`log/redo.rs`).
pub const LOG_REDO_COMMIT: u32 = u32::MAX - 2;
const _: () = assert!(LOG_REDO_COMMIT > LOG_REDO && LOG_REDO_MAX < LOG_REDO as u64);

/// Entry bytes in each half of a log slot (version 3): the entries of
/// generation `g` start in half `g & 1`, so a region never overwrites the
/// entries and commit record of the slot's previous generation, whose
/// bump may not be durable yet (`log.rs`, step 4').
pub const LOG_HALF: u64 = (LOG_SLOT_SIZE as u64 - LOG_SLOT_HEADER) / 2 / 8 * 8;

/// Pool offset of the first entry of generation `gen` in slot `slot`, and
/// the end of its half: `[start, end)`. `halves` is false for a version-2
/// pool (one region of entries after the header, whatever the generation).
pub const fn log_first_entry(slot: u32, gen: u64, halves: bool) -> (u64, u64) {
    let slot_start = LOG_OFF + slot as u64 * LOG_SLOT_SIZE as u64;
    if halves {
        let start = slot_start + LOG_SLOT_HEADER + (gen & 1) * LOG_HALF;
        (start, start + LOG_HALF)
    } else {
        (slot_start + LOG_SLOT_HEADER, slot_start + LOG_SLOT_SIZE as u64)
    }
}

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
/// the low 31 bits are the length of the copy at pool offset `off`, and 8
/// bytes follow: its CRC32C, then the length's bits from bit 31 up (zero
/// for a copy under 2 GiB). An overflow entry (`vlen` is
/// exactly [`REDO_OVERFLOW`]), the only entry of a record too large for a
/// log half: the whole record (header included) lies in a byte array at pool
/// offset `off`, and 8 bytes follow: its length, then its CRC32C. An init
/// entry (`vlen` has [`REDO_INIT_FLAG`]) carries a new object's bytes.
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
/// `RedoEntryHeader::vlen` of an overflow entry (no value is that long, and
/// it lacks [`REDO_CHECK_FLAG`]).
pub const REDO_OVERFLOW: u32 = 0x4000_0000;
/// `RedoEntryHeader::vlen` flag of an init entry: the low bits are the
/// length of an object the commit created (header included, at pool offset
/// `off`), whose initial bytes follow (padded to 8). Recovery writes them
/// back before the record's values (see `stm/redo.rs`).
pub const REDO_INIT_FLAG: u32 = 0x2000_0000;

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
const _: () = assert!(ARENA_BITMAP_CRC_OFF + SPANS_PER_ARENA * 4 <= ARENA_META_SPANS * SPAN_SIZE);
const _: () = assert!(std::mem::offset_of!(RootEntry, crc) == 20);
const _: () = assert!(std::mem::offset_of!(TypeEntry, crc) == 248);

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

/// CRC-16/CCITT-FALSE lookup table (polynomial 0x1021), built at compile time.
const CRC16_TABLE: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut b = 0;
        while b < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            b += 1;
        }
        t[i] = crc;
        i += 1;
    }
    t
};

/// CRC-16/CCITT-FALSE (polynomial 0x1021, initial value 0xFFFF) of `data`.
/// It detects every error burst of up to 16 bits, so any change confined to
/// one byte of the checked value is seen.
pub const fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0xFFFF;
    let mut i = 0;
    while i < data.len() {
        crc = (crc << 8) ^ CRC16_TABLE[((crc >> 8) as u8 ^ data[i]) as usize];
        i += 1;
    }
    crc
}

/// [`crc16`] of the two little-endian bytes of `l`, unrolled: the check of
/// a span-table word, which every pointer check that asks the span table
/// decodes (two table loads, no loop, no slice bounds checks).
#[inline]
pub const fn crc16_u16(l: u16) -> u16 {
    let b = l.to_le_bytes();
    let c = 0xFF00 ^ CRC16_TABLE[(0xFF ^ b[0]) as usize];
    (c << 8) ^ CRC16_TABLE[((c >> 8) as u8 ^ b[1]) as usize]
}

/// Bits of a log generation word that hold the generation.
pub const LOG_GEN_MASK: u64 = (1 << 48) - 1;

/// The stored word of log generation `gen` (taken modulo 2^48): `gen` low,
/// its CRC-16 high. One 8-byte store writes it atomically.
///
/// Every commit computes one, so the CRC is taken by slicing: CRC-16 is
/// affine in its input, so the CRC of the six bytes is the CRC of six zero
/// bytes XOR one table entry per byte position (`GEN_CRC_TABLES`): six
/// independent lookups instead of a chain of six dependent ones. The value
/// is `crc16` of the six little-endian bytes (a test compares them).
#[inline]
pub fn log_gen_word(gen: u64) -> u64 {
    let g = gen & LOG_GEN_MASK;
    let t = &GEN_CRC_TABLES;
    let b = |i: usize| ((g >> (8 * i)) & 0xFF) as usize;
    let crc = GEN_CRC_ZEROS ^ t[0][b(0)] ^ t[1][b(1)] ^ t[2][b(2)] ^ t[3][b(3)] ^ t[4][b(4)] ^ t[5][b(5)];
    g | (crc as u64) << 48
}

/// CRC-16/CCITT-FALSE of six zero bytes (the initial value's part).
const GEN_CRC_ZEROS: u16 = crc16(&[0; 6]);

/// `GEN_CRC_TABLES[i][v]`: the CRC-16 part contributed by byte value `v` at
/// position `i` of six (initial value 0: the linear part of the CRC). A
/// `static`: a `const` indexed at run time may be copied to the stack.
static GEN_CRC_TABLES: [[u16; 256]; 6] = {
    let mut t = [[0u16; 256]; 6];
    let mut i = 0;
    while i < 6 {
        let mut v = 0;
        while v < 256 {
            let mut crc: u16 = 0;
            let mut k = 0;
            while k < 6 {
                let byte = if k == i { v as u8 } else { 0 };
                crc = (crc << 8) ^ CRC16_TABLE[((crc >> 8) as u8 ^ byte) as usize];
                k += 1;
            }
            t[i][v] = crc;
            v += 1;
        }
        i += 1;
    }
    t
};

/// The generation in a stored word, or None if its check fails.
pub fn log_gen_decode(word: u64) -> Option<u64> {
    let g = word & LOG_GEN_MASK;
    if log_gen_word(g) == word {
        Some(g)
    } else {
        None
    }
}

/// The 16-bit form of a logical span-table value, or None if it has none.
const fn span_entry_short(v: u32) -> Option<u16> {
    if v == SPAN_META {
        Some(0xFFFF)
    } else if v & SPAN_LARGE_HEAD != 0 && v & !SPAN_LARGE_HEAD <= 0x3FFF {
        Some(0x8000 | (v & 0x3FFF) as u16)
    } else if v & SPAN_LARGE_TAIL != 0 && v & !SPAN_LARGE_TAIL <= 0x3FFF {
        Some(0x4000 | (v & 0x3FFF) as u16)
    } else if v <= 0x3FFF {
        Some(v as u16)
    } else {
        None
    }
}

/// The stored span-table word of logical value `v`: 0 for a free span,
/// otherwise a 16-bit form (kind in bits 14-15: 0 small class, 1 large tail,
/// 2 large head, 3 metadata) with its CRC-16 in the high 16 bits. Values
/// with no 16-bit form are stored as 0xFFFF_FFFF, which never decodes.
pub const fn span_entry_encode(v: u32) -> u32 {
    match span_entry_short(v) {
        Some(0) => 0,
        Some(l) => {
            let b = l.to_le_bytes();
            l as u32 | (crc16(&b) as u32) << 16
        }
        None => u32::MAX,
    }
}

/// The logical value of a stored span-table word, or None if its check fails.
pub const fn span_entry_decode(word: u32) -> Option<u32> {
    if word == 0 {
        return Some(SPAN_FREE);
    }
    let l = (word & 0xFFFF) as u16;
    if l == 0 || crc16_u16(l) as u32 != word >> 16 {
        return None;
    }
    Some(match l >> 14 {
        3 if l == 0xFFFF => SPAN_META,
        2 => SPAN_LARGE_HEAD | (l & 0x3FFF) as u32,
        1 => SPAN_LARGE_TAIL | (l & 0x3FFF) as u32,
        0 => l as u32,
        _ => return None,
    })
}

/// Checksum of span `g`'s saved slot bitmap, bound to the span and its class
/// so a bitmap left from an earlier use of the span never passes.
pub fn bitmap_crc(g: u64, class: u32, bits: &[u64; 32]) -> u32 {
    let mut c = crc32c::crc32c(&g.to_le_bytes());
    c = crc32c::crc32c_append(c, &class.to_le_bytes());
    for w in bits {
        c = crc32c::crc32c_append(c, &w.to_le_bytes());
    }
    c
}

impl RootEntry {
    /// The entry as bytes.
    pub fn as_bytes(&self) -> &[u8; 64] {
        // SAFETY: RootEntry is repr(C), 64 bytes (checked above) with no
        // padding (u64, 4 x u32, then bytes), and any u8 pattern is valid.
        unsafe { &*(self as *const Self as *const [u8; 64]) }
    }

    /// CRC32C of the entry with `crc` zero and `ptr` replaced by `ptr_off`,
    /// the pointer's offset from the base of the range it points into.
    pub fn compute_crc(&self, ptr_off: u64) -> u32 {
        let mut e = *self;
        e.crc = 0;
        e.ptr = ptr_off;
        crc32c::crc32c(e.as_bytes())
    }
}

impl TypeEntry {
    /// The entry as bytes.
    pub fn as_bytes(&self) -> &[u8; 256] {
        // SAFETY: TypeEntry is repr(C), 256 bytes (checked above) with no
        // padding (every field naturally aligned, sizes add up).
        unsafe { &*(self as *const Self as *const [u8; 256]) }
    }

    /// CRC32C of the entry as it reads once used: `used` = 1, `crc` zero.
    pub fn compute_crc(&self) -> u32 {
        let mut e = *self;
        e.used = 1;
        e.crc = 0;
        crc32c::crc32c(e.as_bytes())
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

    /// The check value of CRC-16/CCITT-FALSE.
    #[test]
    fn crc16_check_value() {
        assert_eq!(crc16(b"123456789"), 0x29B1);
    }

    /// The unrolled two-byte CRC is `crc16` of the two bytes, for all of them.
    #[test]
    fn crc16_u16_is_crc16_of_the_two_bytes() {
        for l in 0..=u16::MAX {
            assert_eq!(crc16_u16(l), crc16(&l.to_le_bytes()), "{l:#x}");
        }
    }

    /// The sliced generation CRC is `crc16` of the six little-endian bytes.
    #[test]
    fn log_gen_word_is_crc16_of_the_generation() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for gen in [i, x, x & 0xFF_FFFF, u64::MAX - i] {
                let g = gen & LOG_GEN_MASK;
                let b = g.to_le_bytes();
                let want = g | (crc16(&b[..6]) as u64) << 48;
                assert_eq!(log_gen_word(gen), want, "gen {gen:#x}");
            }
        }
    }

    /// Every change confined to one byte of a generation word is seen.
    #[test]
    fn log_gen_word_detects_any_one_byte_change() {
        for gen in [1u64, 2, 3, 255, 256, 0xFFFF, 1 << 40, LOG_GEN_MASK] {
            let w = log_gen_word(gen);
            assert_eq!(log_gen_decode(w), Some(gen));
            for byte in 0..8 {
                for x in 1..=255u64 {
                    assert_eq!(log_gen_decode(w ^ (x << (8 * byte))), None, "gen {gen} byte {byte} ^ {x:#x}");
                }
            }
        }
        assert_eq!(log_gen_decode(0), None, "a zeroed slot has no generation");
    }

    /// Every logical span-table value round-trips, and every change confined
    /// to one byte of its stored word fails to decode.
    #[test]
    fn span_entries_detect_any_one_byte_change() {
        let mut values: Vec<u32> = (0..=39).collect();
        for n in 1..SPANS_PER_ARENA as u32 {
            values.push(SPAN_LARGE_HEAD | n);
            values.push(SPAN_LARGE_TAIL | n);
        }
        values.push(SPAN_META);
        for v in values {
            let w = span_entry_encode(v);
            assert_eq!(span_entry_decode(w), Some(v), "{v:#x}");
            for byte in 0..4 {
                for x in 1..=255u32 {
                    assert_eq!(span_entry_decode(w ^ (x << (8 * byte))), None, "{v:#x} byte {byte} ^ {x:#x}");
                }
            }
        }
    }
}
