//! Undo logs: one slot per running failure-atomic region.
//!
//! A slot is `LOG_SLOT_SIZE` bytes in the log area: a [`LogSlotHeader`] whose
//! `gen` word says which entries are live, then entries. When the slot is
//! full the log continues in overflow chunks allocated from the heap and
//! chained from the slot header (they stay attached for reuse, and the GC
//! marks them from the slot).
//!
//! Crash cases, step by step:
//! 1. An entry (header + old bytes, CRC32C over both) is written, flushed and
//!    fenced *before* the range it covers is modified. A crash while it is
//!    written leaves a bad CRC or a stale generation: the scan stops there,
//!    and nothing after it was modified yet.
//! 2. A crash after step 1 (region still running): recovery finds entries of
//!    the slot's generation and writes the old bytes back, newest first.
//! 3. Commit persists the new data, then bumps `gen` (one 8-byte store,
//!    flushed and fenced). A crash before the bump is case 2; after it, no
//!    entry matches the generation, so nothing is undone.
//! 4. Recovery itself ends by bumping `gen`; a crash during recovery simply
//!    replays again (undo is idempotent).
//!
//! The `gen` word carries a CRC-16 of the generation in its top 16 bits
//! (`format::log_gen_word`), so it is still written by one atomic 8-byte
//! store, and a flipped bit, which could make an old generation's entries
//! live again, is `Corrupt` instead of a silent rollback of committed data.
//! Overflow chunks are checked before the writer or the scan follows a link:
//! the link must name a live `engram::log_chunk` object.
//!
//! A writer learns its generation from the word (`LogWriter::open`) or, on
//! the fast path, from the slot set's cache (`LogWriter::resume`, see
//! `tx/slots.rs`), which holds a value only after the commit that wrote it
//! has fenced; the cache is volatile and plays no part in recovery.

use crate::error::{Error, Result};
use crate::format::*;
use crate::pool::space::Space;

/// Bytes of an entry header.
const ENTRY: u64 = std::mem::size_of::<LogEntryHeader>() as u64;
/// Bytes of a chunk header.
const CHUNK_HDR: u64 = std::mem::size_of::<LogChunkHeader>() as u64;
/// Smallest overflow chunk.
pub(crate) const MIN_CHUNK: u64 = 1 << 20;

/// Pool offset of log slot `i`.
pub(crate) fn slot_off(i: u32) -> u64 {
    LOG_OFF + i as u64 * LOG_SLOT_SIZE as u64
}

/// CRC32C over `gen`, `off`, `len` (little-endian) and `data`, in that
/// order (`crc.rs`: the header in three instructions, the data in three
/// lanes from 192 bytes on; the same value as the crc32c crate's).
#[inline]
fn entry_crc(gen: u64, off: u64, len: u32, data: &[u8]) -> u32 {
    crate::crc::entry(gen, off, len, data)
}

/// A region of log space: `[at, end)` in pool offsets, inside the slot or a chunk.
#[derive(Clone, Copy, Debug)]
struct Cursor {
    /// Pool offset of the chunk header, or None while in the slot itself.
    chunk: Option<u64>,
    at: u64,
    end: u64,
}

/// Appends entries to one slot's log for one region.
#[derive(Debug)]
pub(crate) struct LogWriter {
    slot: u32,
    gen: u64,
    cur: Cursor,
    entries: u64,
}

/// Needs the allocator to make overflow chunks.
pub(crate) trait ChunkAlloc {
    /// Allocates a chunk object of `bytes` payload; returns its payload address.
    fn alloc_chunk(&self, bytes: u64) -> Result<u64>;
}

/// Slot `slot`'s current generation, or `Corrupt` if its word fails the check.
fn slot_gen(space: &Space, slot: u32) -> Result<u64> {
    let h: LogSlotHeader = space.read(slot_off(slot))?;
    log_gen_decode(h.gen).ok_or_else(|| Error::corrupt(format!("log slot {slot}: generation word {:#x} fails its checksum", h.gen)))
}

/// Whether `addr` is the payload of a live log chunk of at least `CHUNK_HDR + cap` bytes.
fn is_chunk(space: &Space, addr: u64, cap: u64) -> bool {
    let Some(loc) = crate::alloc::locate(space, addr) else { return false };
    let Ok(h) = space.read::<ObjHeader>(addr - OBJ_HEADER - space.base()) else { return false };
    h.flags & OBJ_TAG_MASK == OBJ_TAG
        && h.type_id == crate::types::TYPE_LOG_CHUNK
        && CHUNK_HDR.checked_add(cap).is_some_and(|n| n <= loc.capacity())
}

impl LogWriter {
    /// A writer at the start of slot `slot`, for the slot's current generation.
    pub fn open(space: &Space, slot: u32) -> Result<Self> {
        Ok(Self::resume(slot, slot_gen(space, slot)?))
    }

    /// A writer at the start of slot `slot` whose generation `gen` the
    /// caller knows (the slot set's cache, `tx/slots.rs`): what `open`
    /// returns, without reading and checking the word.
    pub fn resume(slot: u32, gen: u64) -> Self {
        let start = slot_off(slot) + LOG_SLOT_HEADER;
        LogWriter { slot, gen, cur: Cursor { chunk: None, at: start, end: slot_off(slot) + LOG_SLOT_SIZE as u64 }, entries: 0 }
    }

    /// The generation this writer logs under.
    pub fn gen(&self) -> u64 {
        self.gen
    }

    /// Commits the region: bumps the slot's generation past the one this
    /// writer logged under (read and checked by `open`, or known to the
    /// slot set's cache; the slot is this region's alone, so it has not
    /// changed since), as `invalidate` does without reading and decoding the
    /// word again. Returns the new generation, durable on return.
    pub fn commit(&self, space: &Space) -> Result<u64> {
        let gen = (self.gen + 1) & LOG_GEN_MASK;
        space.write_persist(slot_off(self.slot), &log_gen_word(gen), "log generation bump: the region is committed")?;
        Ok(gen)
    }

    /// Entries written since the last reset.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Logs the current `len` bytes at pool offset `off`, durably.
    pub fn append(&mut self, space: &Space, chunks: &dyn ChunkAlloc, off: u64, len: u32) -> Result<()> {
        self.append_unfenced(space, chunks, off, len)?;
        // Step 1 of the protocol: the entry is durable before the range changes.
        space.persist.fence("undo entry before the logged range is modified")?;
        crate::failpoint::Failpoint::LogAfterAppend.hit();
        Ok(())
    }

    /// [`LogWriter::append`] without the fence: the entry is written and
    /// flushed; the caller fences (under the same name) before it changes the
    /// range, once for several entries (a crash before that fence finds
    /// the entries torn or whole, and their ranges unchanged either way).
    pub fn append_unfenced(&mut self, space: &Space, chunks: &dyn ChunkAlloc, off: u64, len: u32) -> Result<()> {
        let size = ENTRY + (len as u64).div_ceil(8) * 8;
        // Leave room for a jump entry at the end of every region.
        if self.cur.at + size + ENTRY > self.cur.end {
            self.jump(space, chunks, size)?;
        }
        let at = self.cur.at;
        if !space.contains(space.base() + off, len as u64) {
            return Err(Error::invalid(format!("logged range {off:#x}+{len} is outside the pool")));
        }
        // SAFETY: [off, off+len) is inside the mapping (checked above).
        let data = unsafe { std::slice::from_raw_parts((space.base() + off) as *const u8, len as usize) };
        let h = LogEntryHeader { gen: self.gen, off, len, crc: entry_crc(self.gen, off, len, data) };
        space.write(at, &h)?;
        // SAFETY: the destination [at+ENTRY, at+size) is inside the log region
        // checked by the cursor bounds; source and destination do not overlap
        // (the log area and chunks are never logged ranges).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (space.base() + at + ENTRY) as *mut u8, len as usize) };
        space.flush(at, size);
        self.cur.at += size;
        self.entries += 1;
        Ok(())
    }

    /// Moves to the next chunk, allocating and linking it if needed.
    fn jump(&mut self, space: &Space, chunks: &dyn ChunkAlloc, need: u64) -> Result<()> {
        let link_off = match self.cur.chunk {
            None => slot_off(self.slot) + LOG_SLOT_CHUNK_OFF,
            Some(c) => c,
        };
        let next: u64 = space.read(link_off)?;
        let (chunk_off, cap) = if next != 0 {
            if !space.contains(next, CHUNK_HDR) {
                return Err(Error::corrupt(format!("log slot {}: chunk link {next:#x} is outside the pool", self.slot)));
            }
            let h: LogChunkHeader = space.read(next - space.base())?;
            if !is_chunk(space, next, h.cap) {
                return Err(Error::corrupt(format!("log slot {}: chunk link {next:#x} is not a log chunk", self.slot)));
            }
            (next - space.base(), h.cap)
        } else {
            (0, 0)
        };
        let (chunk_off, cap) =
            if next != 0 && cap >= need + ENTRY { (chunk_off, cap) } else { self.new_chunk(space, chunks, link_off, next, need)? };
        // The jump entry tells the scan to continue in the linked chunk.
        let h = LogEntryHeader { gen: self.gen, off: 0, len: LOG_JUMP, crc: entry_crc(self.gen, 0, LOG_JUMP, &[]) };
        space.write_persist(self.cur.at, &h, "jump entry before entries in the next chunk")?;
        self.cur = Cursor { chunk: Some(chunk_off), at: chunk_off + CHUNK_HDR, end: chunk_off + CHUNK_HDR + cap };
        Ok(())
    }

    /// Allocates a chunk big enough for `need`, linked at `link_off` in front
    /// of `rest` (the too-small chunk, kept further down the chain).
    fn new_chunk(&self, space: &Space, chunks: &dyn ChunkAlloc, link_off: u64, rest: u64, need: u64) -> Result<(u64, u64)> {
        let bytes = (need + ENTRY + CHUNK_HDR).max(MIN_CHUNK).next_power_of_two().min(32 << 20).max(need + ENTRY + CHUNK_HDR);
        let addr = chunks.alloc_chunk(bytes)?;
        let off = addr - space.base();
        let cap = bytes - CHUNK_HDR;
        // 1. the chunk header and its object header, durable before the
        //    chunk is linked (the GC reads both once it is).
        space.write(off, &LogChunkHeader { next: rest, cap })?;
        space.flush(off - OBJ_HEADER, OBJ_HEADER + CHUNK_HDR);
        space.persist.fence("log chunk headers before the chunk is linked")?;
        // 2. link it (8-byte atomic store); from here the GC keeps it alive.
        space.write_persist(link_off, &addr, "log chunk link before entries use it")?;
        Ok((off, cap))
    }
}

/// Pool offsets of the live entries of slot `slot`, oldest first.
/// `translate` maps a stored chunk address to the current mapping (relocation).
pub(crate) fn live_entries(space: &Space, slot: u32, translate: &dyn Fn(u64) -> u64) -> Result<Vec<u64>> {
    let gen = slot_gen(space, slot)?;
    let mut cur = Cursor { chunk: None, at: slot_off(slot) + LOG_SLOT_HEADER, end: slot_off(slot) + LOG_SLOT_SIZE as u64 };
    let mut out = Vec::new();
    let mut hops = 0u64;
    while cur.at + ENTRY <= cur.end {
        let h: LogEntryHeader = space.read(cur.at)?;
        if h.gen != gen {
            break;
        }
        if h.len == LOG_JUMP {
            if h.crc != entry_crc(h.gen, h.off, h.len, &[]) {
                break;
            }
            let link_off = cur.chunk.unwrap_or(slot_off(slot) + LOG_SLOT_CHUNK_OFF);
            let next = translate(space.read::<u64>(link_off)?);
            hops += 1;
            if next == 0 || hops > space.size() / MIN_CHUNK + 1 || !space.contains(next, CHUNK_HDR) {
                return Err(Error::corrupt(format!("log slot {slot}: jump to a missing chunk")));
            }
            let c: LogChunkHeader = space.read(next - space.base())?;
            let off = next - space.base();
            if !is_chunk(space, next, c.cap) {
                return Err(Error::corrupt(format!("log slot {slot}: chunk at {off:#x} overruns the pool")));
            }
            cur = Cursor { chunk: Some(off), at: off + CHUNK_HDR, end: off + CHUNK_HDR + c.cap };
            continue;
        }
        let size = ENTRY + (h.len as u64).div_ceil(8) * 8;
        if cur.at + size > cur.end {
            break;
        }
        // SAFETY: [at+ENTRY, at+ENTRY+len) is inside the cursor's region, which
        // is inside the mapping.
        let data = unsafe { std::slice::from_raw_parts((space.base() + cur.at + ENTRY) as *const u8, h.len as usize) };
        if h.crc != entry_crc(h.gen, h.off, h.len, data) {
            break;
        }
        out.push(cur.at);
        cur.at += size;
    }
    Ok(out)
}

/// Whether an undo entry may target pool offset range `[off, off+len)`:
/// the root table, the type table or the heap, never headers or logs.
fn undo_target_ok(space: &Space, off: u64, len: u64) -> bool {
    let end = off.saturating_add(len);
    let in_meta = off >= ROOTS_OFF && end <= LOG_OFF;
    let in_heap = off >= HEAP_OFF && end <= space.size();
    in_meta || in_heap
}

/// Undoes every live entry of `slot` (newest first), persists the restored
/// bytes, then invalidates the log. Returns the number of entries undone.
pub(crate) fn undo_slot(space: &Space, slot: u32, translate: &dyn Fn(u64) -> u64) -> Result<u64> {
    let entries = live_entries(space, slot, translate)?;
    for &at in entries.iter().rev() {
        let h: LogEntryHeader = space.read(at)?;
        if !undo_target_ok(space, h.off, h.len as u64) {
            return Err(Error::corrupt(format!("log slot {slot}: entry targets {:#x}+{}, outside the heap", h.off, h.len)));
        }
        // SAFETY: both ranges are inside the mapping (target checked above,
        // source by live_entries) and do not overlap (logs are never targets).
        unsafe {
            std::ptr::copy_nonoverlapping((space.base() + at + ENTRY) as *const u8, (space.base() + h.off) as *mut u8, h.len as usize)
        };
        space.flush(h.off, h.len as u64);
        crate::failpoint::Failpoint::LogUndoEntry.hit();
    }
    if !entries.is_empty() {
        space.persist.fence("restored bytes before the log is invalidated")?;
        invalidate(space, slot)?;
    }
    Ok(entries.len() as u64)
}

/// Bumps the slot's generation: every entry written so far stops counting.
pub(crate) fn invalidate(space: &Space, slot: u32) -> Result<()> {
    let gen = slot_gen(space, slot)?;
    space.write_persist(slot_off(slot), &log_gen_word(gen + 1), "log generation bump: the region is committed")
}

/// The first chunk address of each slot (GC roots).
pub(crate) fn chunk_links(slot: u32) -> u64 {
    slot_off(slot) + LOG_SLOT_CHUNK_OFF
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CreateOptions, Durability, Pool};

    /// A pool on tmpfs, removed when dropped.
    struct Temp(Pool, std::path::PathBuf);

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.1);
        }
    }

    fn pool(tag: &str) -> Temp {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        let path = dir.join(format!("engram-unit-log-{tag}-{}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        Temp(Pool::create(&path, CreateOptions::new("log").durability(Durability::Process)).unwrap(), path)
    }

    struct Chunks<'a>(&'a Pool);

    impl ChunkAlloc for Chunks<'_> {
        fn alloc_chunk(&self, bytes: u64) -> Result<u64> {
            let inner = self.0.inner();
            let cell = inner.heap.cache();
            inner.heap.alloc(&inner.space, &cell, bytes, crate::types::TYPE_LOG_CHUNK, 0, 1).map(|(a, _)| a)
        }
    }

    /// A heap range to log: an object of `len` bytes.
    fn target(p: &Pool, len: u64) -> u64 {
        let a = p.txn(|tx| tx.alloc_array::<u8>(len)).unwrap();
        a.addr() - p.inner().space.base()
    }

    #[test]
    fn entries_are_read_back_in_order_across_chunks() {
        let t = pool("chunks");
        let (p, space) = (&t.0, &t.0.inner().space);
        let off = target(p, 4096);
        let mut w = LogWriter::open(space, 7).unwrap();
        // 1000 entries of 40 + 24 bytes: the 32 KiB slot, then a chunk.
        let lens: Vec<u32> = (0..1000).map(|i| 1 + (i * 7) % 40).collect();
        for &len in &lens {
            w.append(space, &Chunks(p), off, len).unwrap();
        }
        assert_eq!(w.entries(), 1000);
        let live = live_entries(space, 7, &|v| v).unwrap();
        assert_eq!(live.len(), 1000);
        let slot = slot_off(7);
        let (in_slot, in_chunks) = live.iter().partition::<Vec<u64>, _>(|&&at| at >= slot && at < slot + LOG_SLOT_SIZE as u64);
        assert!(!in_slot.is_empty() && !in_chunks.is_empty(), "the log overflowed into a chunk");
        assert_eq!(in_slot[0], slot + LOG_SLOT_HEADER, "first entry right after the slot header");
        for (at, &len) in live.iter().zip(&lens) {
            let h: LogEntryHeader = space.read(*at).unwrap();
            assert_eq!((h.off, h.len), (off, len));
        }
        // entries in one region are packed: each starts where the last ended
        for pair in in_slot.windows(2) {
            let h: LogEntryHeader = space.read(pair[0]).unwrap();
            assert_eq!(pair[1], pair[0] + ENTRY + (h.len as u64).div_ceil(8) * 8);
        }
        // the generation bump retires them all
        invalidate(space, 7).unwrap();
        assert!(live_entries(space, 7, &|v| v).unwrap().is_empty());
        // a new writer reuses the slot (and the linked chunk) from the start
        let mut w = LogWriter::open(space, 7).unwrap();
        w.append(space, &Chunks(p), off, 8).unwrap();
        assert_eq!(live_entries(space, 7, &|v| v).unwrap(), vec![slot + LOG_SLOT_HEADER]);
    }

    /// The slot set's generation cache (`tx/slots.rs`) lets a region skip
    /// reading its slot's word: if the cached value were stale, the region's
    /// entries would carry a dead generation and its rollback would undo
    /// nothing. Commit, rollback, rollback, commit on one slot (a lone
    /// thread always takes the lowest free slot).
    #[test]
    fn a_cached_generation_is_the_one_on_the_media() {
        let t = pool("gencache");
        let p = &t.0;
        let a = p.txn(|tx| tx.alloc_array::<u64>(4)).unwrap();
        let set = |v: u64, fail: bool| {
            p.txn(|tx| {
                tx.set(a, 1, v)?;
                if fail {
                    return Err(Error::Aborted);
                }
                Ok(())
            })
        };
        let get = || p.txn(|tx| tx.get(a, 1)).unwrap();
        set(1, false).unwrap();
        assert!(set(2, true).is_err());
        assert_eq!(get(), 1, "rolled back with the cached generation");
        assert!(set(3, true).is_err());
        assert_eq!(get(), 1, "rolled back after a rollback (generation read from the slot)");
        set(4, false).unwrap();
        assert!(set(5, true).is_err());
        assert_eq!(get(), 4);
        let space = &p.inner().space;
        for slot in 0..LOG_SLOTS {
            assert!(live_entries(space, slot, &|v| v).unwrap().is_empty(), "slot {slot} has live entries");
        }
    }

    #[test]
    fn a_torn_entry_ends_the_log() {
        let t = pool("torn");
        let (p, space) = (&t.0, &t.0.inner().space);
        let off = target(p, 256);
        let mut w = LogWriter::open(space, 3).unwrap();
        for _ in 0..10 {
            w.append(space, &Chunks(p), off, 16).unwrap();
        }
        let live = live_entries(space, 3, &|v| v).unwrap();
        assert_eq!(live.len(), 10);
        // flip a data byte of entry 6: its CRC fails, so 6.. are not live
        space.write(live[6] + ENTRY + 3, &0xA5u8).unwrap();
        assert_eq!(live_entries(space, 3, &|v| v).unwrap(), live[..6].to_vec());
    }

    #[test]
    fn an_entry_outside_the_pool_is_refused() {
        let t = pool("outside");
        let (p, space) = (&t.0, &t.0.inner().space);
        let mut w = LogWriter::open(space, 1).unwrap();
        assert!(w.append(space, &Chunks(p), space.size() - 4, 8).is_err());
        assert!(live_entries(space, 1, &|v| v).unwrap().is_empty());
    }
}
