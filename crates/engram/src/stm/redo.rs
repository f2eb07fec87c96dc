//! Redo logs of durable STM commits, and their recovery.
//!
//! Each thread that commits to a pool owns a redo log: a heap object of two
//! halves, linked from the pool's STM metadata (root `engram::stm`). Commit
//! N writes its record into half N % 2.
//!
//! Crash cases, step by step (see `stm/engine/commit.rs` for the commit pipeline):
//! 1. The record (timestamp `wv`, and for every written variable its pool
//!    offset and new bytes, CRC32C over all of it) and every object copied
//!    into the pool for this commit are flushed, then ONE fence: a crash
//!    before it leaves a bad CRC or an older record, and nothing of the
//!    commit was visible in place yet.
//! 2. The new values are stored in place, each variable's version word
//!    last (value and word share a cache line, so they persist in order),
//!    and flushed without a fence. The thread's next fence (its next commit)
//!    makes them durable before it reuses this half; online GC and the clean
//!    close flush and fence them for idle threads.
//! 3. Recovery replays every retained record in timestamp order, writing a
//!    variable only if its persisted version is older than the record: a
//!    variable is never moved backwards by an old record, whatever order the
//!    lines reached the media in. Then the records are cleared, and the epoch
//!    is bumped so that locks left in the pool by the crash read as free.
//!
//! New objects: a commit that creates transactional objects carries their
//! bytes in its record (init entries); recovery writes them back whole,
//! before the record's values, and every later retained record is replayed
//! after it. A record with init entries is cleared durably before any later
//! record (here, in quiesce, and by a helping thread: `engine/young.rs`), so
//! a retained one never writes its objects' first bytes over a later change
//! whose record is gone.
//!
//! Log overflow: a record larger than a half (a transaction writing more
//! than about 1,300 variables) is written whole to a byte array of its own,
//! and the half gets a stand-in record naming the array's offset, length
//! and CRC32C; both are flushed before the commit's one fence, so a crash
//! before it leaves a stand-in whose array fails its CRC (the commit is
//! lost whole, as in case 1). The array is freed when the half is reused
//! (the record it held is durable in place by then), or by the GC once a
//! quiesce or a recovery has cleared the record.

use crate::crc::Fold;
use crate::error::{Error, Result};
use crate::format::{ObjHeader, RedoEntryHeader, RedoRecordHeader, HEAP_OFF, OBJ_ARRAY, OBJ_HEADER, OBJ_TAG, OBJ_TAG_MASK};
use crate::format::{
    REDO_CHECK_FLAG as CHECK_FLAG, REDO_CRC_FROM, REDO_INIT_FLAG as INIT_FLAG, REDO_MAGIC as MAGIC, REDO_OVERFLOW as OVERFLOW,
};
use crate::pool::space::Space;
use crate::ptr::PArray;
use crate::Persistent;
use std::mem::{offset_of, size_of};

/// Name of the root holding the STM metadata.
pub(crate) const META_ROOT: &str = "engram::stm";
/// Bytes per log half (a record must fit).
pub(crate) const HALF: u64 = 32 * 1024;
/// Bytes of a record header ([`RedoRecordHeader`]: magic, crc, wv, n, len).
pub(crate) const REC_HDR: u64 = size_of::<RedoRecordHeader>() as u64;
/// Bytes of an entry header ([`RedoEntryHeader`]: off, vlen, pad).
pub(crate) const ENT_HDR: u64 = size_of::<RedoEntryHeader>() as u64;
// Field offsets of the two headers (format.rs asserts them).
const R_CRC: usize = offset_of!(RedoRecordHeader, crc);
const R_WV: usize = offset_of!(RedoRecordHeader, wv);
const R_N: usize = offset_of!(RedoRecordHeader, n);
const R_LEN: usize = offset_of!(RedoRecordHeader, len);
const E_VLEN: usize = offset_of!(RedoEntryHeader, vlen);
/// Offset of a cell's value (after its lock word; see `VarCell`).
const CELL_VALUE: u64 = offset_of!(super::VarCell<u64>, value) as u64;

/// The STM metadata object.
#[repr(C)]
#[derive(Clone, Copy, Debug, Persistent)]
#[engram(name = "engram::stm::Meta")]
pub(crate) struct StmMeta {
    /// No version at or above this was ever handed out (persisted before use).
    pub clock_reserved: u64,
    /// Bumped on every open; lock words carry it (see `word.rs`).
    pub epoch: u64,
    /// The threads' redo logs (each 2 x HALF bytes), null where unused.
    pub logs: PArray<PArray<u8>>,
}

/// Bytes one entry of `len` value bytes takes in a record (header, value
/// padded to 8).
pub(crate) fn entry_len(len: u64) -> u64 {
    ENT_HDR + len.div_ceil(8) * 8
}

/// CRC32C of `len` bytes at pool offset `off`.
pub(crate) fn object_crc(space: &Space, off: u64, len: u64) -> Result<u32> {
    Ok(crate::crc::crc32c(object_bytes(space, off, len)?))
}

/// The `len` bytes at pool offset `off`: an object nobody writes while the
/// caller reads it (a committed copy, immutable; or one this commit created
/// and still owns alone; or, at recovery, any object).
pub(crate) fn object_bytes(space: &Space, off: u64, len: u64) -> Result<&[u8]> {
    if !space.contains(space.base() + off, len) {
        return Err(Error::corrupt(format!("object {off:#x}+{len} is outside the pool")));
    }
    // SAFETY: inside the mapping (checked); no writer while it is read (the
    // callers' contract above).
    Ok(unsafe { std::slice::from_raw_parts((space.base() + off) as *const u8, len as usize) })
}

/// Starts a record in `buf` (cleared first): its header, counts zero.
fn begin(buf: &mut Vec<u8>, wv: u64) {
    buf.clear();
    buf.extend_from_slice(&MAGIC.to_le_bytes());
    buf.extend_from_slice(&0u32.to_le_bytes());
    buf.extend_from_slice(&wv.to_le_bytes());
    buf.extend_from_slice(&0u32.to_le_bytes()); // n
    buf.extend_from_slice(&0u32.to_le_bytes()); // len
}

/// Ends the record in `buf`: its entry count, length and CRC32C.
fn finish(buf: &mut [u8], n: u32) {
    buf[R_N..R_N + 4].copy_from_slice(&n.to_le_bytes());
    let len = (buf.len() as u64 - REC_HDR) as u32;
    buf[R_LEN..R_LEN + 4].copy_from_slice(&len.to_le_bytes());
    let crc = crate::crc::crc32c(&buf[REDO_CRC_FROM..]);
    buf[R_CRC..R_CRC + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Bytes of a record with these parts: `values` and `inits` the summed
/// [`entry_len`]s of its value and init entries, `checks` its check entries.
pub(crate) fn record_len(values: u64, inits: u64, checks: usize) -> u64 {
    REC_HDR + values + inits + checks as u64 * (ENT_HDR + 8)
}

/// Writes a record's words into `out`, folding each into the record's
/// CRC32C as it is stored (one pass: nothing is read back): one bounds
/// check per entry, then one 8-byte store and one fold per word.
struct Cursor<'b, F> {
    out: &'b mut [u8],
    at: usize,
    n: u32,
    crc: F,
}

impl<F: Fold> Cursor<'_, F> {
    /// Stores `w` (little-endian) at the cursor and folds it in. The
    /// caller checked that 8 bytes are left (`entry`, `header`).
    #[inline(always)]
    fn put(&mut self, w: u64) {
        debug_assert!(self.at + 8 <= self.out.len());
        // SAFETY: `at + 8 <= out.len()` (the caller's check); `[u8; 8]`
        // has alignment 1, so the store is of bytes at any address.
        unsafe { std::ptr::write_unaligned(self.out.as_mut_ptr().add(self.at) as *mut [u8; 8], w.to_le_bytes()) };
        self.crc.word(w);
        self.at += 8;
    }

    /// An entry header (`off`, `vlen`, zero) and `body`, zero-padded to 8.
    #[inline(always)]
    fn entry(&mut self, off: u64, vlen: u32, body: &[u8]) -> Result<()> {
        let len = ENT_HDR as usize + body.len().div_ceil(8) * 8;
        if len > self.out.len() - self.at {
            return Err(too_long());
        }
        self.put(off);
        self.put(vlen as u64);
        // One word (a `u64` or pointer value, a check's CRC): stored
        // straight, without the chunk loop's set-up and remainder test.
        if let Ok(w) = <[u8; 8]>::try_from(body) {
            self.put(u64::from_le_bytes(w));
            self.n += 1;
            return Ok(());
        }
        let mut words = body.chunks_exact(8);
        for w in &mut words {
            self.put(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.put(u64::from_le_bytes(w));
        }
        self.n += 1;
        Ok(())
    }
}

/// [`encode_into`]'s error for entries longer than the slice it was given
/// (out of line: the encoding loop stays small).
#[cold]
#[inline(never)]
fn too_long() -> Error {
    Error::corrupt("STM redo record longer than its reckoned length")
}

/// [`encode_into`]'s error for a new object whose length reaches the init
/// flag's bits (out of line: the encoding loop stays small).
#[cold]
#[inline(never)]
fn init_too_long(len: usize) -> Error {
    Error::invalid(format!("a new transactional object of {len} bytes: a redo record carries at most {} per object", INIT_FLAG - 1))
}

/// Encodes a record into `out`, exactly [`record_len`] bytes of it, with
/// `n` entries: the initial bytes of the transactional objects the commit
/// created (`inits`: pool offset, bytes), the values, then the checksums
/// `checks` (offset, length, CRC32C) of the copies it links. The header's
/// count and length come first and its CRC32C covers them, so the caller
/// counts the entries (`n`) and sizes `out` beforehand; one pass then
/// writes every word once and folds it into the CRC as it goes (the commit
/// passes its log half in the pool itself, so nothing is copied again or
/// read back). An `inits` item that is an error (an object outside the
/// pool) ends the encoding with it; so does an `out` of another length, or
/// another entry count, than the entries need.
#[inline(always)]
pub(crate) fn encode_into<'a>(
    out: &mut [u8],
    wv: u64,
    n: u32,
    inits: impl Iterator<Item = Result<(u64, &'a [u8])>>,
    entries: impl Iterator<Item = (u64, &'a [u8])>,
    checks: &[(u64, u64, u32)],
) -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { encode_hw(out, wv, n, inits, entries, checks) };
        }
    }
    encode_with(crate::crc::LateFold, out, wv, n, inits, entries, checks)
}

/// [`encode_into`] with the CRC folded by the `crc32` instruction.
///
/// # Safety
/// The CPU must support SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn encode_hw<'a>(
    out: &mut [u8],
    wv: u64,
    n: u32,
    inits: impl Iterator<Item = Result<(u64, &'a [u8])>>,
    entries: impl Iterator<Item = (u64, &'a [u8])>,
    checks: &[(u64, u64, u32)],
) -> Result<()> {
    // SAFETY: the CPU has SSE 4.2 (this function's contract).
    let crc = unsafe { crate::crc::HwFold::new() };
    encode_with(crc, out, wv, n, inits, entries, checks)
}

/// [`encode_into`] with the fold `crc`.
#[inline(always)]
fn encode_with<'a, F: Fold>(
    crc: F,
    out: &mut [u8],
    wv: u64,
    n: u32,
    inits: impl Iterator<Item = Result<(u64, &'a [u8])>>,
    entries: impl Iterator<Item = (u64, &'a [u8])>,
    checks: &[(u64, u64, u32)],
) -> Result<()> {
    let Some(len) = out.len().checked_sub(REC_HDR as usize).filter(|&l| l <= u32::MAX as usize) else {
        return Err(Error::corrupt("STM redo record shorter than its header, or longer than 4 GiB"));
    };
    let mut c = Cursor { out, at: REDO_CRC_FROM, n: 0, crc };
    // The header's words the CRC covers: `wv`, then `n` and `len`.
    const _: () = assert!(R_WV == REDO_CRC_FROM && R_N == R_WV + 8 && R_LEN == R_N + 4 && REC_HDR as usize == R_LEN + 4);
    c.put(wv);
    c.put(n as u64 | (len as u64) << 32);
    for init in inits {
        let (off, v) = init?;
        // (The length shares its word with the flags.)
        if v.len() >= INIT_FLAG as usize {
            return Err(init_too_long(v.len()));
        }
        c.entry(off, INIT_FLAG | v.len() as u32, v)?;
    }
    for (off, v) in entries {
        c.entry(off, v.len() as u32, v)?;
    }
    for &(off, len, crc) in checks {
        // The length's low 31 bits beside the flag, the rest after the CRC
        // (a copy of 2 GiB or more: a large boxed value, say).
        let body = (crc as u64 | (len >> 31) << 32).to_le_bytes();
        c.entry(off, CHECK_FLAG | (len as u32 & !CHECK_FLAG), &body)?;
    }
    if c.at != c.out.len() {
        return Err(Error::corrupt("STM redo record shorter than its reckoned length"));
    }
    if c.n != n {
        return Err(Error::corrupt(format!("STM redo record of {} entries, reckoned {n}", c.n)));
    }
    let crc = c.crc.finish(&c.out[REDO_CRC_FROM..]);
    const _: () = assert!(R_CRC == 4);
    c.out[..8].copy_from_slice(&(MAGIC as u64 | (crc as u64) << 32).to_le_bytes());
    Ok(())
}

/// Encodes into `buf` (cleared first) the record that stands in a log half
/// for an overflowing one: its only entry gives the pool offset, length and
/// CRC32C of the whole record, written to a byte array of its own.
pub(crate) fn encode_overflow(buf: &mut Vec<u8>, wv: u64, off: u64, len: u32, crc: u32) {
    begin(buf, wv);
    buf.extend_from_slice(&off.to_le_bytes());
    buf.extend_from_slice(&OVERFLOW.to_le_bytes());
    buf.extend_from_slice(&0u32.to_le_bytes());
    buf.extend_from_slice(&len.to_le_bytes());
    buf.extend_from_slice(&crc.to_le_bytes());
    finish(buf, 1);
}

/// Whether the record at the start of the log half at pool offset
/// `half_off` writes a variable whose cell starts inside one of `boxes`
/// (`[lo, hi)` pool offsets). For the committing thread's own record (the
/// young-object rule, `engine/young.rs`): it reads the half in place, and
/// follows a stand-in to its overflow array (still allocated: it is freed
/// only when the half is reused). Anything it cannot parse answers `true`
/// (the caller then helps: the safe side).
pub(crate) fn record_writes_into(space: &Space, half_off: u64, boxes: impl Iterator<Item = (u64, u64)> + Clone) -> Result<bool> {
    let half = object_bytes(space, half_off, HALF)?;
    let Some(body) = record_body(half) else { return Ok(true) };
    let body = match first_overflow(body) {
        None => body,
        Some((off, len)) => match object_bytes(space, off, len).ok().and_then(record_body) {
            Some(b) => b,
            None => return Ok(true),
        },
    };
    Ok(value_offsets(body).any(|off| off.is_none_or(|off| boxes.clone().any(|(lo, hi)| off >= lo && off < hi))))
}

/// A record's entries (after its header), if `bytes` starts with one whose
/// length fits (the checksum is not checked: for records this process wrote).
fn record_body(bytes: &[u8]) -> Option<&[u8]> {
    let u32_at = |o: usize| Some(u32::from_le_bytes(bytes.get(o..o + 4)?.try_into().ok()?));
    if u32_at(0)? != MAGIC {
        return None;
    }
    bytes.get(REC_HDR as usize..REC_HDR as usize + u32_at(R_LEN)? as usize)
}

/// A stand-in's overflow array (offset, length), if `body` is one.
fn first_overflow(body: &[u8]) -> Option<(u64, u64)> {
    let e = body.get(..ENT_HDR as usize + 8)?;
    let raw = u32::from_le_bytes(e[E_VLEN..E_VLEN + 4].try_into().ok()?);
    let off = u64::from_le_bytes(e[..8].try_into().ok()?);
    (raw == OVERFLOW).then(|| (off, u32::from_le_bytes(e[ENT_HDR as usize..ENT_HDR as usize + 4].try_into().unwrap_or([0; 4])) as u64))
}

/// The cell offsets of a record body's value entries, in order (init and
/// check entries skipped); `None` for an entry that overruns the body.
fn value_offsets(body: &[u8]) -> impl Iterator<Item = Option<u64>> + '_ {
    let mut at = 0usize;
    std::iter::from_fn(move || loop {
        if at >= body.len() {
            return None;
        }
        let Some(e) = body.get(at..at + ENT_HDR as usize) else {
            at = body.len();
            return Some(None);
        };
        let off = u64::from_le_bytes(e[..8].try_into().unwrap_or([0; 8]));
        let raw = u32::from_le_bytes(e[E_VLEN..E_VLEN + 4].try_into().unwrap_or([0; 4]));
        if raw == OVERFLOW || raw & CHECK_FLAG != 0 {
            at += ENT_HDR as usize + 8;
            continue;
        }
        at += ENT_HDR as usize + ((raw & !INIT_FLAG) as usize).div_ceil(8) * 8;
        if raw & INIT_FLAG == 0 {
            return Some(Some(off));
        }
    })
}

/// A decoded record: its timestamp, (cell offset, value) entries, the
/// (offset, length, CRC32C) of the copies it links, and, for a stand-in,
/// where the whole record is (offset, length, CRC32C).
struct Record {
    wv: u64,
    /// New objects' initial bytes (pool offset, bytes).
    inits: Vec<(u64, Vec<u8>)>,
    entries: Vec<(u64, Vec<u8>)>,
    checks: Vec<(u64, u64, u32)>,
    overflow: Option<(u64, u64, u32)>,
}

/// Decodes the record at the start of `half`, if there is a valid one.
fn decode(half: &[u8]) -> Option<Record> {
    let u32_at = |o: usize| u32::from_le_bytes(half[o..o + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |o: usize| u64::from_le_bytes(half[o..o + 8].try_into().unwrap_or([0; 8]));
    if half.len() < REC_HDR as usize || u32_at(0) != MAGIC {
        return None;
    }
    let len = u32_at(R_LEN) as usize;
    if REC_HDR as usize + len > half.len() || crc32c::crc32c(&half[REDO_CRC_FROM..REC_HDR as usize + len]) != u32_at(R_CRC) {
        return None;
    }
    let (wv, n) = (u64_at(R_WV), u32_at(R_N) as usize);
    let mut entries = Vec::with_capacity(n.min(4096));
    let mut inits = Vec::new();
    let mut checks = Vec::new();
    let mut overflow = None;
    let mut at = REC_HDR as usize;
    let end = REC_HDR as usize + len;
    for _ in 0..n {
        if at + ENT_HDR as usize > end {
            return None;
        }
        let (off, raw) = (u64_at(at), u32_at(at + E_VLEN));
        if raw == OVERFLOW {
            if at + ENT_HDR as usize + 8 > end {
                return None;
            }
            overflow = Some((off, u32_at(at + ENT_HDR as usize) as u64, u32_at(at + ENT_HDR as usize + 4)));
            at += ENT_HDR as usize + 8;
            continue;
        }
        if raw & CHECK_FLAG != 0 {
            if at + ENT_HDR as usize + 8 > end {
                return None;
            }
            let len = (raw & !CHECK_FLAG) as u64 | (u32_at(at + ENT_HDR as usize + 4) as u64) << 31;
            checks.push((off, len, u32_at(at + ENT_HDR as usize)));
            at += ENT_HDR as usize + 8;
            continue;
        }
        let vlen = (raw & !INIT_FLAG) as usize;
        let v0 = at + ENT_HDR as usize;
        if v0 + vlen > end {
            return None;
        }
        let to = if raw & INIT_FLAG != 0 { &mut inits } else { &mut entries };
        to.push((off, half[v0..v0 + vlen].to_vec()));
        at = v0 + vlen.div_ceil(8) * 8;
    }
    Some(Record { wv, inits, entries, checks, overflow })
}

/// The record a half holds: itself, or for a stand-in the overflowing
/// record it points to. `None` if the stand-in's record did not reach the
/// media whole (its commit's fence did not complete, or its array was freed
/// and reused after the commit was durable in place).
fn resolve(space: &Space, r: Record) -> Option<Record> {
    let Some((off, len, crc)) = r.overflow else { return Some(r) };
    if off < HEAP_OFF || !space.contains(space.base() + off, len) {
        return None;
    }
    // SAFETY: inside the mapping (checked); recovery runs before anything
    // else touches the pool.
    let b = unsafe { std::slice::from_raw_parts((space.base() + off) as *const u8, len as usize) };
    if crc32c::crc32c(b) != crc {
        return None;
    }
    decode(b).filter(|full| full.wv == r.wv && full.overflow.is_none())
}

/// What STM recovery did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StmRecovery {
    /// Records found (valid CRC).
    pub records: u64,
    /// Variables written back (their persisted version was older).
    pub replayed: u64,
}

/// Reads the payload bytes of array object `addr` (validated).
fn array_bytes<'a>(space: &'a Space, addr: u64, what: &str) -> Result<&'a [u8]> {
    let loc = crate::alloc::locate(space, addr).ok_or_else(|| Error::corrupt(format!("{what} at {addr:#x} is not an object")))?;
    let h: ObjHeader = space.read(addr - OBJ_HEADER - space.base())?;
    if h.flags & OBJ_TAG_MASK != OBJ_TAG || h.flags & OBJ_ARRAY == 0 || h.count > loc.capacity() {
        return Err(Error::corrupt(format!("{what} at {addr:#x} has a bad header")));
    }
    // SAFETY: [addr, addr+count) lies in the object's slot (count <= capacity),
    // inside the mapping; recovery runs before anything else touches the pool.
    Ok(unsafe { std::slice::from_raw_parts(addr as *const u8, h.count as usize) })
}

/// Replays and clears the STM redo logs (open, before the GC). Returns what
/// it did, or `None` if the pool has no STM metadata.
pub(crate) fn recover(space: &Space, translate: &dyn Fn(u64) -> u64) -> Result<Option<StmRecovery>> {
    let Some((_, root, _)) = crate::tx::used_root_entries(space)?.into_iter().find(|(_, _, n)| n == META_ROOT) else {
        return Ok(None);
    };
    let meta_addr = translate(root.ptr);
    if crate::alloc::locate(space, meta_addr).is_none() {
        return Err(Error::corrupt(format!("STM metadata at {meta_addr:#x} is not an object")));
    }
    let meta_off = meta_addr - space.base();
    let meta: StmMeta = space.read(meta_off)?;
    let logs_addr = translate(meta.logs.addr());
    let logs = logs_ptrs(space, logs_addr)?;
    let mut records = Vec::new();
    let mut halves = Vec::new();
    for raw in logs {
        let log = translate(raw);
        if log == 0 {
            continue;
        }
        let bytes = array_bytes(space, log, "STM redo log")?;
        if (bytes.len() as u64) < 2 * HALF {
            return Err(Error::corrupt(format!("STM redo log at {log:#x} is too small")));
        }
        for h in 0..2u64 {
            let half = &bytes[(h * HALF) as usize..((h + 1) * HALF) as usize];
            let at = log + h * HALF - space.base();
            if let Some(r) = decode(half).and_then(|r| resolve(space, r)) {
                records.push((at, r));
            }
            halves.push(at);
        }
    }
    // A record whose copies did not all reach the media never committed:
    // its fence did not complete, so nothing of it was visible in place.
    records.retain(|(_, r)| r.checks.iter().all(|&(off, len, crc)| object_crc(space, off, len).is_ok_and(|c| c == crc)));
    let mut rep = StmRecovery { records: records.len() as u64, replayed: 0 };
    records.sort_by_key(|(_, r)| r.wv);
    for (_, r) in &records {
        // New objects first, whole: no later commit changed them unless its
        // record is retained too, and replayed after this one (the helping
        // rule in `stm/engine/young.rs`).
        for (off, v) in &r.inits {
            if *off < HEAP_OFF || !space.contains(space.base() + off, v.len() as u64) {
                return Err(Error::corrupt(format!("STM record creates an object at {off:#x}+{}, outside the heap", v.len())));
            }
            space.write_bytes(*off, v)?;
            space.flush(*off, v.len() as u64);
        }
        for (off, v) in &r.entries {
            rep.replayed += replay(space, *off, v, r.wv)? as u64;
        }
    }
    space.persist.fence(crate::fences::STM_REPLAYED)?;
    // A record with new objects is cleared (durably) before any later one:
    // were it retained alone, the next recovery would write its objects'
    // first bytes back over the later changes (stm/engine/young.rs).
    for (at, r) in &records {
        if !r.inits.is_empty() {
            space.write(*at, &0u32)?;
            space.flush(*at, 4);
            space.persist.fence(crate::fences::STM_YOUNG_CLEARED)?;
        }
    }
    for off in halves {
        space.write(off, &0u32)?;
        space.flush(off, 4);
    }
    // A new epoch: locks a crash left in the pool read as free from now on.
    let epoch_off = meta_off + offset_of!(StmMeta, epoch) as u64;
    space.write(epoch_off, &(meta.epoch + 1))?;
    space.flush(epoch_off, 8);
    space.persist.fence(crate::fences::STM_EPOCH)?;
    Ok(Some(rep))
}

/// The pointers in the logs array at `addr`.
fn logs_ptrs(space: &Space, addr: u64) -> Result<Vec<u64>> {
    if addr == 0 {
        return Ok(Vec::new());
    }
    let loc = crate::alloc::locate(space, addr).ok_or_else(|| Error::corrupt("STM log table is not an object"))?;
    let h: ObjHeader = space.read(addr - OBJ_HEADER - space.base())?;
    if h.count.checked_mul(8).is_none_or(|b| b > loc.capacity()) {
        return Err(Error::corrupt("STM log table overruns its slot"));
    }
    (0..h.count).map(|i| space.read::<u64>(addr - space.base() + i * 8)).collect()
}

/// Writes `v` into the cell at `off` if its persisted version is older than
/// `wv`; returns whether it did.
fn replay(space: &Space, off: u64, v: &[u8], wv: u64) -> Result<bool> {
    if off < HEAP_OFF || v.len() > 56 || !space.contains(space.base() + off, CELL_VALUE + v.len() as u64) {
        return Err(Error::corrupt(format!("STM record targets {off:#x}+{}, outside the heap", v.len())));
    }
    let word: u64 = space.read(off)?;
    if super::word::version(word) >= wv {
        return Ok(false);
    }
    space.write_bytes(off + CELL_VALUE, v)?;
    space.write(off, &super::word::unlocked(wv))?;
    space.flush(off, CELL_VALUE + v.len() as u64);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes a record into `buf` (sized to it): see [`encode_into`].
    fn encode_of(buf: &mut Vec<u8>, wv: u64, inits: &[(u64, &[u8])], entries: &[(u64, &[u8])], checks: &[(u64, u64, u32)]) -> Result<()> {
        let lens = |e: &[(u64, &[u8])]| e.iter().map(|(_, v)| entry_len(v.len() as u64)).sum();
        buf.clear();
        buf.resize(record_len(lens(entries), lens(inits), checks.len()) as usize, 0);
        let n = (inits.len() + entries.len() + checks.len()) as u32;
        encode_into(buf, wv, n, inits.iter().map(|&i| Ok(i)), entries.iter().copied(), checks)
    }

    fn record_len_of(entries: &[(u64, &[u8])]) -> u64 {
        record_len(entries.iter().map(|(_, v)| entry_len(v.len() as u64)).sum(), 0, 0)
    }

    fn encode(buf: &mut Vec<u8>, wv: u64, entries: &[(u64, &[u8])], checks: &[(u64, u64, u32)]) {
        encode_of(buf, wv, &[], entries, checks).unwrap()
    }

    /// A check entry keeps a copy's whole length: 31 bits beside its flag,
    /// the rest after the CRC (zero in records of copies under 2 GiB).
    #[test]
    fn check_entries_keep_lengths_of_2_gib_and_more() {
        let mut buf = Vec::new();
        let checks = [(0x4000, 64, 5), (0x8000, (1 << 31) + 24, 6), (0x10000, 5 << 30, 7), (0x20000, (1 << 31) - 8, 8)];
        encode(&mut buf, 9, &[(0x3000u64, &[1u8; 8][..])], &checks);
        assert_eq!(decode(&buf).unwrap().checks, checks.to_vec());
    }

    /// A new object whose length would reach the init flag's bits is
    /// refused, not recorded with a length that reads back as another.
    /// (`vec!` of zeros is calloc'd: the 512 MiB are never touched.)
    #[test]
    fn an_init_entry_too_long_for_its_length_bits_is_refused() {
        let big = vec![0u8; INIT_FLAG as usize];
        let e = encode_into(&mut [0u8; 64], 9, 1, std::iter::once(Ok((0x2000u64, &big[..]))), std::iter::empty(), &[]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains("at most"), "{e}");
    }

    #[test]
    fn init_entries_roundtrip_before_the_values() {
        let mut buf = Vec::new();
        let obj = [7u8; 44];
        encode_of(&mut buf, 9, &[(0x2000u64, &obj[..])], &[(0x3000u64, &[1u8; 8][..])], &[(0x4000, 64, 5)]).unwrap();
        let r = decode(&buf).unwrap();
        assert_eq!((r.wv, r.inits.len(), r.entries.len(), r.checks.len()), (9, 1, 1, 1));
        assert_eq!(r.inits[0], (0x2000, obj.to_vec()));
        assert_eq!(r.entries[0], (0x3000, vec![1u8; 8]));
    }

    /// `encode_into` fills exactly the bytes it was given, zero-padding an
    /// object's last word (the commit sizes its log half's slice by
    /// `record_len`); a slice of another length is refused, not overrun.
    #[test]
    fn records_fill_exactly_their_reckoned_length() {
        let obj = [7u8; 44];
        let mut buf = vec![0xffu8; record_len(entry_len(8), entry_len(44), 1) as usize];
        let entries = || [(0x3000u64, &[1u8; 8][..])].into_iter();
        encode_into(&mut buf, 9, 3, [Ok((0x2000u64, &obj[..]))].into_iter(), entries(), &[(0x4000, 64, 5)]).unwrap();
        let pad = (REC_HDR + ENT_HDR) as usize + 44;
        assert_eq!(&buf[pad..pad + 4], &[0; 4], "an object's last word is zero-padded");
        assert_eq!(decode(&buf).map(|r| (r.inits.len(), r.entries.len(), r.checks.len())), Some((1, 1, 1)));
        for len in [buf.len() - 8, buf.len() + 8] {
            let mut other = vec![0u8; len];
            assert!(
                encode_into(&mut other, 9, 3, [Ok((0x2000u64, &obj[..]))].into_iter(), entries(), &[(0x4000, 64, 5)]).is_err(),
                "{len}"
            );
        }
        for n in [2, 4] {
            let e = encode_into(&mut buf, 9, n, [Ok((0x2000u64, &obj[..]))].into_iter(), entries(), &[(0x4000, 64, 5)]);
            assert!(e.is_err(), "a count of {n} entries for 3 is refused");
        }
    }

    /// The young-object rule reads back which cells a record wrote: the
    /// value entries' offsets alone (not the new objects', not the
    /// checked copies'), and a stand-in's array.
    #[test]
    fn value_offsets_are_read_back_from_a_record() {
        let mut buf = Vec::new();
        let obj = [7u8; 44];
        let (a, b) = ([1u8; 8], [2u8; 40]);
        encode_of(&mut buf, 9, &[(0x2000u64, &obj[..])], &[(0x3000u64, &a[..]), (0x5000, &b[..])], &[(0x4000, 64, 5)]).unwrap();
        let body = record_body(&buf).unwrap();
        assert_eq!(first_overflow(body), None);
        assert_eq!(value_offsets(body).collect::<Vec<_>>(), vec![Some(0x3000), Some(0x5000)]);
        assert_eq!(value_offsets(&body[..body.len() - 20]).last(), Some(None), "a cut record reads as unknown");
        buf[0] ^= 1;
        assert!(record_body(&buf).is_none());
        encode_overflow(&mut buf, 9, 65536, 3000, 0xfeed);
        assert_eq!(first_overflow(record_body(&buf).unwrap()), Some((65536, 3000)));
    }

    #[test]
    fn records_roundtrip_and_reject_torn() {
        let mut buf = Vec::new();
        let a = [1u8, 2, 3];
        let b = [9u8; 16];
        encode(&mut buf, 77, &[(4096, &a), (8192, &b)], &[(12288, 48, 0xabcd)]);
        assert_eq!(buf.len() as u64, record_len_of(&[(4096, &a), (8192, &b)]) + ENT_HDR + 8);
        let mut half = buf.clone();
        half.resize(HALF as usize, 0);
        let r = decode(&half).unwrap();
        assert_eq!(r.wv, 77);
        assert_eq!(r.entries, vec![(4096, a.to_vec()), (8192, b.to_vec())]);
        assert_eq!(r.checks, vec![(12288, 48, 0xabcd)]);
        half[30] ^= 1;
        assert!(decode(&half).is_none());
    }

    #[test]
    fn overflow_stand_in_roundtrips() {
        let mut buf = Vec::new();
        encode_overflow(&mut buf, 9, 65536, 3_000_000, 0xfeed);
        let mut half = buf.clone();
        half.resize(HALF as usize, 0);
        let r = decode(&half).unwrap();
        assert_eq!((r.wv, r.entries.len(), r.checks.len()), (9, 0, 0));
        assert_eq!(r.overflow, Some((65536, 3_000_000, 0xfeed)));
        half[40] ^= 1;
        assert!(decode(&half).is_none());
    }

    /// The bytes `encode` writes are the `#[repr(C)]` headers of format.rs.
    #[test]
    fn encoding_matches_the_format_structs() {
        let mut buf = Vec::new();
        encode(&mut buf, 5, &[(4096, &[7u8; 8])], &[(8192, 64, 0x1234)]);
        // SAFETY: buf holds a whole record (> 24 + 2 * 16 bytes); both headers
        // are plain integers, read unaligned.
        let (h, e0, e1) = unsafe {
            (
                std::ptr::read_unaligned(buf.as_ptr() as *const RedoRecordHeader),
                std::ptr::read_unaligned(buf.as_ptr().add(REC_HDR as usize) as *const RedoEntryHeader),
                std::ptr::read_unaligned(buf.as_ptr().add((REC_HDR + ENT_HDR + 8) as usize) as *const RedoEntryHeader),
            )
        };
        assert_eq!((h.magic, h.wv, h.n, h.len as usize), (MAGIC, 5, 2, buf.len() - REC_HDR as usize));
        assert_eq!(h.crc, crc32c::crc32c(&buf[REDO_CRC_FROM..]));
        assert_eq!(e0, RedoEntryHeader { off: 4096, vlen: 8, pad: 0 });
        assert_eq!(e1, RedoEntryHeader { off: 8192, vlen: CHECK_FLAG | 64, pad: 0 });
    }
}
