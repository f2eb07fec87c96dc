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
//! Commit by commit record (format 3; the 2-fence commit), for a region
//! whose writes are exactly its logged ranges (it logged, did not spill into
//! a chunk, and neither allocated nor freed; see `tx/mod.rs`):
//! 3'. commit flushes the new data and writes a *commit record* after the
//!    entries ([`LOG_COMMIT`]), holding a 64-bit checksum of the new bytes of
//!    every logged range ([`data_sum`]); ONE fence makes data and record
//!    durable and is the commit point. A crash before it completes leaves no
//!    record, a torn one (its CRC fails), or a record the bytes (old, or a
//!    torn mix) do not match: case 2, undone. After it the record matches,
//!    and recovery only bumps `gen`.
//! 4'. the generation bump is written, neither written back nor fenced:
//!    the pair (slot, new gen) joins the pool's pending bumps (`bumps.rs`),
//!    which *every* later fence of any thread writes back first (on its own
//!    thread, the flush "pending generation bump") and then retires. The invariant this needs: (I) no byte of a range the region
//!    logged changes before its bump is durable, else a crash would find the
//!    record unmatched and write its pre-images over later committed data.
//!    Every way a byte changes is preceded by a fence after the commit:
//!    a logged store by its entry's fence; an unlogged store into a fresh
//!    object by the fence of the region that freed the object
//!    (`tx/mod.rs`, "pending generation bumps before freed objects are
//!    reused"), or of the GC before its sweep; an STM or front-end store by
//!    its own record or entry fence. The slot's own log is the one store
//!    that precedes its region's first fence: hence the two halves. The
//!    entries of generation `g` start in half `g & 1` (`format::
//!    log_first_entry`), so the next region on the slot writes the other
//!    half; by the time a region writes half `g & 1` again (generation
//!    `g + 2`), generation `g + 1`'s first entry fence made bump `g + 1`
//!    durable, so the scan never needs what it overwrites. Overflow chunks
//!    are shared by both halves: a region that spilled commits with 3
//!    fences, so a chunk never holds entries a pending bump still needs.
//!
//! The multi-threaded argument (the explorer runs one thread): a later
//! region that changes a logged byte is ordered after the committing region
//! by the program's own synchronisation (`Tx::lock`, a mutex, a channel),
//! which is released after `commit` added the pair; its fence loads the
//! pending mask after that, flushes the word from its own core and fences.
//! Retiring is by (slot, gen) pair: a bump re-added between another
//! thread's flush and its retire stays listed (`bumps.rs`).
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
//! `tx/slots.rs`), which holds the value the slot's last commit wrote (its
//! bump durable, or pending until the next fence, step 4'); the cache is
//! volatile and plays no part in recovery.

mod redo;
// The crash explorer's check after recovery (`crashtest`).
#[cfg(feature = "testing")]
mod settled;

pub(crate) use redo::recover_slot;
#[cfg(feature = "testing")]
pub(crate) use settled::unsettled;

use crate::error::{Error, Result};
use crate::format::*;
use crate::pool::space::Space;

/// Bytes of an entry header.
const ENTRY: u64 = std::mem::size_of::<LogEntryHeader>() as u64;
/// [`ENTRY`], for the region's redo path (`tx/redo.rs`): an entry's data
/// start this many bytes after it.
pub(crate) const ENTRY_BYTES: u64 = ENTRY;
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

/// Checksum of the current bytes of `ranges` (pool offset, length), in
/// order: what a commit record holds. CRC32C (chained through the ranges,
/// each with its offset and length) in the low half; in the high half a
/// multiply-xor hash of the same words in four independent lanes (so the
/// multiplies overlap), folded to 32 bits. Bytes other than the ones
/// checksummed at commit (old bytes, or a torn mix) match by chance with a
/// probability of about 2^-64. `Corrupt` if a range is outside the pool.
pub(crate) fn data_sum(space: &Space, ranges: impl Iterator<Item = (u64, u32)>) -> Result<u64> {
    const K: [u64; 4] = [0x9E37_79B9_7F4A_7C15, 0xC2B2_AE3D_27D4_EB4F, 0x1656_67B1_9E37_79F9, 0xD6E8_FEB8_6659_FD93];
    let (mut crc, mut lanes) = (0u32, [1u64, 2, 3, 4]);
    for (off, len) in ranges {
        if !space.contains(space.base().wrapping_add(off), len as u64) {
            return Err(Error::corrupt(format!("logged range {off:#x}+{len} is outside the pool")));
        }
        // SAFETY: [off, off+len) is inside the mapping (checked above).
        let data = unsafe { std::slice::from_raw_parts((space.base() + off) as *const u8, len as usize) };
        crc = entry_crc(crc as u64, off, len, data);
        lanes[0] = (lanes[0] ^ off ^ (len as u64) << 48).wrapping_mul(K[0]);
        // Four words at a time, one per lane, then the rest zero-padded.
        let mut quads = data.chunks_exact(32);
        for q in &mut quads {
            for (j, lane) in lanes.iter_mut().enumerate() {
                let mut b = [0u8; 8];
                b.copy_from_slice(&q[8 * j..8 * j + 8]);
                *lane = (*lane ^ u64::from_le_bytes(b)).wrapping_mul(K[j]);
            }
        }
        let mut tail = [0u8; 32];
        tail[..quads.remainder().len()].copy_from_slice(quads.remainder());
        for (j, lane) in lanes.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(&tail[8 * j..8 * j + 8]);
            *lane = (*lane ^ u64::from_le_bytes(b)).wrapping_mul(K[j]);
        }
    }
    let h = lanes.iter().zip(K).fold(0u64, |h, (&l, k)| (h ^ l.rotate_left(29)).wrapping_mul(k));
    Ok(crc as u64 | (h ^ (h >> 32)) << 32)
}

/// Appends entries to one slot's log for one region.
#[derive(Debug)]
pub(crate) struct LogWriter {
    slot: u32,
    gen: u64,
    cur: Cursor,
    entries: u64,
    /// Redo entries written since the last reset (`log/redo.rs`).
    redo: u64,
    /// Where the entries [`LogWriter::append_batched`] wrote and no flush
    /// has written back yet start: they run to `cur.at`, in one segment
    /// (the slot or a chunk). None outside a batch.
    batch: Option<u64>,
}

/// Needs the allocator to make overflow chunks.
pub(crate) trait ChunkAlloc {
    /// Allocates a chunk object of `bytes` payload; returns its payload address.
    fn alloc_chunk(&self, bytes: u64) -> Result<u64>;
}

/// Slot `slot`'s current generation, or `Corrupt` if its word fails the check.
pub(crate) fn slot_gen(space: &Space, slot: u32) -> Result<u64> {
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
    /// A writer at the start of slot `slot`, for the slot's current
    /// generation (regions read it with `slot_gen` in `Tx::take_slot`;
    /// the tests below open writers with it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn open(space: &Space, slot: u32) -> Result<Self> {
        // While the slot's redo retire is listed, its word still holds the
        // record's generation and the next region logs under the next one
        // (`log/redo.rs`). The retire is read first: a settler moves the
        // word before it unlists the retire.
        let listed = space.persist.retires().of(slot);
        let gen = slot_gen(space, slot)?;
        let gen = if listed == Some(gen) { (gen + 1) & LOG_GEN_MASK } else { gen };
        Ok(Self::resume(slot, gen))
    }

    /// A writer at the start of slot `slot` whose generation `gen` the
    /// caller knows (the slot set's cache, `tx/slots.rs`): what `open`
    /// returns, without reading and checking the word.
    pub fn resume(slot: u32, gen: u64) -> Self {
        let (at, end) = log_first_entry(slot, gen, true);
        LogWriter { slot, gen, cur: Cursor { chunk: None, at, end }, entries: 0, redo: 0, batch: None }
    }

    /// Whether the log went on into an overflow chunk (such a region
    /// commits with 3 fences, see the module docs).
    pub fn spilled(&self) -> bool {
        self.cur.chunk.is_some()
    }

    /// Step 3': writes the region's commit record after its entries and
    /// flushes it; the caller's commit fence makes it durable together with
    /// the data `sum` ([`data_sum`]) covers. Every append left room for one
    /// header-sized entry (for a jump), which the record takes.
    pub fn commit_record(&self, space: &Space, sum: u64) -> Result<()> {
        debug_assert!(self.batch.is_none(), "a batch of entries was left unflushed");
        let h = LogEntryHeader { gen: self.gen, off: sum, len: LOG_COMMIT, crc: entry_crc(self.gen, sum, LOG_COMMIT, &[]) };
        space.write(self.cur.at, &h)?;
        space.flush(self.cur.at, ENTRY);
        Ok(())
    }

    /// Step 4': bumps the slot's generation (as `commit`), neither writing
    /// the word back nor fencing; the pair joins the pool's pending bumps,
    /// which the next fence of any thread writes back (on its own thread)
    /// and makes durable. Returns the new generation.
    pub fn commit_lazily(&self, space: &Space) -> Result<u64> {
        let gen = (self.gen + 1) & LOG_GEN_MASK;
        space.write(slot_off(self.slot), &log_gen_word(gen))?;
        space.persist.bumps().add(self.slot, gen);
        Ok(gen)
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
        space.write_persist(slot_off(self.slot), &log_gen_word(gen), crate::fences::GEN_BUMP)?;
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
        space.persist.fence(crate::fences::UNDO_ENTRY)?;
        crate::failpoint::Failpoint::LogAfterAppend.hit();
        Ok(())
    }

    /// [`LogWriter::append`] without the fence: the entry is written and
    /// flushed; the caller fences (under the same name) before it changes the
    /// range, once for several entries (a crash before that fence finds
    /// the entries torn or whole, and their ranges unchanged either way).
    pub fn append_unfenced(&mut self, space: &Space, chunks: &dyn ChunkAlloc, off: u64, len: u32) -> Result<()> {
        let (at, size) = self.write_entry(space, chunks, off, len)?;
        space.flush(at, size);
        Ok(())
    }

    /// [`LogWriter::append_unfenced`] without the write-back: the entry is
    /// written, and [`LogWriter::flush_batch`] writes back the lines of
    /// every entry appended since the last one, each line once (a batch
    /// of small entries shares lines: written back per entry, a line of
    /// four 32-byte entries went four times, the next entry's stores
    /// landing on a line whose write-back was just issued). The caller
    /// flushes the batch, then fences, before it changes any of the ranges;
    /// a crash before that fence finds the entries torn or whole and the
    /// ranges unchanged, as for `append_unfenced`.
    #[inline]
    pub fn append_batched(&mut self, space: &Space, chunks: &dyn ChunkAlloc, off: u64, len: u32) -> Result<()> {
        let (at, _) = self.write_entry(space, chunks, off, len)?;
        self.batch.get_or_insert(at);
        Ok(())
    }

    /// Writes back the entries [`LogWriter::append_batched`] appended since
    /// the last flush (nothing if none); the caller's fence makes them
    /// durable. The one write-back of a batch's entries: its fault switch
    /// (`fences::UNDO_BATCH`) leaves them in the cache.
    pub fn flush_batch(&mut self, space: &Space) {
        if let Some(start) = self.batch.take() {
            space.flush_named(start, self.cur.at - start, crate::fences::UNDO_BATCH);
        }
    }

    /// Writes one undo entry (header and the current `len` bytes at pool
    /// offset `off`) at the cursor, moving on to a chunk first if the
    /// entry does not fit (a batch's entries so far are written back
    /// before: the cursor leaves their segment); returns where it starts
    /// and its size. Nothing is written back.
    #[inline(always)]
    fn write_entry(&mut self, space: &Space, chunks: &dyn ChunkAlloc, off: u64, len: u32) -> Result<(u64, u64)> {
        let size = ENTRY + (len as u64).div_ceil(8) * 8;
        // Leave room for a jump entry at the end of every region.
        if self.cur.at + size + ENTRY > self.cur.end {
            self.flush_batch(space);
            self.jump(space, chunks, size)?;
        }
        let at = self.cur.at;
        if !space.contains(space.base() + off, len as u64) {
            return Err(Error::invalid(format!("logged range {off:#x}+{len} is outside the pool")));
        }
        // SAFETY: [off, off+len) is inside the mapping (checked above).
        let data = unsafe { std::slice::from_raw_parts((space.base() + off) as *const u8, len as usize) };
        // The old bytes are copied while their CRC is taken (one pass).
        // SAFETY: the destination [at+ENTRY, at+size) is inside the log region
        // checked by the cursor bounds; source and destination do not overlap
        // (the log area and chunks are never logged ranges).
        let crc = unsafe { crate::crc::entry_copy(self.gen, off, len, data, (space.base() + at + ENTRY) as *mut u8) };
        // SAFETY: the header [at, at+ENTRY) is inside the log region, as above.
        unsafe { space.write_known(space.base() + at, LogEntryHeader { gen: self.gen, off, len, crc }) };
        self.cur.at += size;
        self.entries += 1;
        Ok((at, size))
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
        space.write_persist(self.cur.at, &h, crate::fences::JUMP_ENTRY)?;
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
        space.persist.fence(crate::fences::CHUNK_HEADERS)?;
        // 2. link it (8-byte atomic store); from here the GC keeps it alive.
        space.write_persist(link_off, &addr, crate::fences::CHUNK_LINK)?;
        Ok((off, cap))
    }
}

/// Pool offsets of the live entries of slot `slot`, oldest first, and the
/// checksum of the valid commit record that ends them, if one does.
/// `translate` maps a stored chunk address to the current mapping
/// (relocation); `halves` is false for a version-2 pool.
fn scan(space: &Space, slot: u32, translate: &dyn Fn(u64) -> u64, halves: bool) -> Result<(Vec<u64>, Option<u64>)> {
    let (entries, record) = scan_gen(space, slot, slot_gen(space, slot)?, translate, halves)?;
    Ok((entries, record.and_then(Record::undo_sum)))
}

/// What ends a generation's live entries.
#[derive(Debug)]
enum Record {
    /// A valid undo commit record with this checksum (step 3').
    Undo(u64),
    /// A valid redo commit record: the redo entries before it, oldest first
    /// (`log/redo.rs`).
    Redo(Vec<u64>),
}

impl Record {
    fn undo_sum(self) -> Option<u64> {
        match self {
            Record::Undo(sum) => Some(sum),
            Record::Redo(_) => None,
        }
    }
}

/// [`scan`] for generation `gen` (whatever the word says): the live undo
/// entries and the valid record that ends them. Redo entries are skipped
/// (they hold new bytes, not old) and collected for a redo record.
fn scan_gen(space: &Space, slot: u32, gen: u64, translate: &dyn Fn(u64) -> u64, halves: bool) -> Result<(Vec<u64>, Option<Record>)> {
    let (at, end) = log_first_entry(slot, gen, halves);
    let mut cur = Cursor { chunk: None, at, end };
    let mut out = Vec::new();
    let mut redo = Vec::new();
    let mut hops = 0u64;
    while cur.at + ENTRY <= cur.end {
        let h: LogEntryHeader = space.read(cur.at)?;
        if h.gen != gen {
            break;
        }
        if h.len == LOG_COMMIT {
            let valid = halves && h.crc == entry_crc(h.gen, h.off, h.len, &[]);
            return Ok((out, valid.then_some(Record::Undo(h.off))));
        }
        if h.len == LOG_REDO_COMMIT {
            let valid = halves && cur.chunk.is_none() && redo::record_valid(space, &h, at, cur.at)?;
            return Ok((out, valid.then_some(Record::Redo(redo))));
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
        let is_redo = halves && h.len != LOG_JUMP && h.len & LOG_REDO != 0;
        let len = if is_redo { h.len & !LOG_REDO } else { h.len };
        let size = ENTRY + (len as u64).div_ceil(8) * 8;
        if cur.at + size > cur.end {
            break;
        }
        // SAFETY: [at+ENTRY, at+ENTRY+len) is inside the cursor's region, which
        // is inside the mapping.
        let data = unsafe { std::slice::from_raw_parts((space.base() + cur.at + ENTRY) as *const u8, len as usize) };
        if h.crc != entry_crc(h.gen, h.off, h.len, data) {
            break;
        }
        if is_redo {
            redo.push(cur.at);
        } else {
            out.push(cur.at);
        }
        cur.at += size;
    }
    Ok((out, None))
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
    undo_slot_of(space, slot, translate, true)
}

/// [`undo_slot`] for a pool of the given layout (`halves`: format 3). A log
/// that ends in a valid commit record whose checksum matches the current
/// bytes of its ranges belongs to a committed region (step 3'): nothing is
/// undone, the generation moves on by two, and 0 is returned. Two, not one:
/// the lost bump means the slot's next region may have written entries of
/// generation `g + 1` into the other half before its first fence (the one
/// that would have made the bump durable) completed; under `g + 1` those
/// would be live, and a later crash would undo them over data committed
/// since. Under `g + 2` they are stale, as are the committed region's.
pub(crate) fn undo_slot_of(space: &Space, slot: u32, translate: &dyn Fn(u64) -> u64, halves: bool) -> Result<u64> {
    let (entries, record) = scan(space, slot, translate, halves)?;
    if entries.is_empty() {
        return Ok(0);
    }
    let n = undo_entries(space, slot, &entries, record)?;
    if n == 0 {
        // committed (step 3'): past the next region's generation too.
        let gen = slot_gen(space, slot)?;
        let step = if crate::failpoint::planted("log.record_recovery_one_step") { 1 } else { 2 };
        space.write_persist(slot_off(slot), &log_gen_word(gen + step), crate::fences::GEN_BUMP)?;
        return Ok(0);
    }
    space.persist.fence(crate::fences::RESTORED_BYTES)?;
    invalidate(space, slot)?;
    Ok(n)
}

/// Undoes the undo entries at `entries` (newest first) and writes the
/// restored bytes back, unless a commit record's checksum `record` matches
/// their ranges' current bytes (step 3': the region committed, 0 is
/// returned). The caller fences and moves the generation.
fn undo_entries(space: &Space, slot: u32, entries: &[u64], record: Option<u64>) -> Result<u64> {
    if let Some(sum) = record {
        if !entries.is_empty() && committed(space, entries, sum)? {
            return Ok(0);
        }
    }
    if !entries.is_empty() && crate::failpoint::planted("log.recovery_invalidates_first") {
        invalidate(space, slot)?;
    }
    for &at in entries.iter().rev() {
        let h: LogEntryHeader = space.read(at)?;
        if !undo_target_ok(space, h.off, h.len as u64) {
            return Err(Error::corrupt(format!("log slot {slot}: entry targets {:#x}+{}, outside the heap", h.off, h.len)));
        }
        // SAFETY: both ranges are inside the mapping (target checked above,
        // source by scan) and do not overlap (logs are never targets).
        unsafe {
            std::ptr::copy_nonoverlapping((space.base() + at + ENTRY) as *const u8, (space.base() + h.off) as *mut u8, h.len as usize)
        };
        space.flush(h.off, h.len as u64);
        crate::failpoint::Failpoint::LogUndoEntry.hit();
    }
    Ok(entries.len() as u64)
}

/// Whether the current bytes of the ranges of `entries` match a commit
/// record's checksum `sum` (ranges outside the heap: no, they are undone
/// and refused there).
fn committed(space: &Space, entries: &[u64], sum: u64) -> Result<bool> {
    let mut ranges = Vec::with_capacity(entries.len());
    for &at in entries {
        let h: LogEntryHeader = space.read(at)?;
        if !undo_target_ok(space, h.off, h.len as u64) {
            return Ok(false);
        }
        ranges.push((h.off, h.len));
    }
    Ok(data_sum(space, ranges.into_iter())? == sum)
}

/// Bumps the slot's generation: every entry written so far stops counting.
pub(crate) fn invalidate(space: &Space, slot: u32) -> Result<()> {
    let gen = slot_gen(space, slot)?;
    space.write_persist(slot_off(slot), &log_gen_word(gen + 1), crate::fences::GEN_BUMP)
}

/// The first chunk address of each slot (GC roots).
pub(crate) fn chunk_links(slot: u32) -> u64 {
    slot_off(slot) + LOG_SLOT_CHUNK_OFF
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CreateOptions, Durability, Pool};

    /// A pool on tmpfs, removed when dropped (also `log/settled.rs`'s tests).
    pub(super) struct Temp(pub(super) Pool, std::path::PathBuf);

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.1);
        }
    }

    pub(super) fn pool(tag: &str) -> Temp {
        pool_in(tag, Durability::Process)
    }

    /// [`pool`] in durability mode `mode` (Pmem: the write-backs counted).
    fn pool_in(tag: &str, mode: Durability) -> Temp {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        let path = dir.join(format!("engram-unit-log-{tag}-{}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        Temp(Pool::create(&path, CreateOptions::new("log").durability(mode)).unwrap(), path)
    }

    /// Pool offsets of the live entries of slot `slot`, oldest first (a
    /// commit record, if any, ends them and is not among them).
    fn live_entries(space: &Space, slot: u32, translate: &dyn Fn(u64) -> u64) -> Result<Vec<u64>> {
        scan(space, slot, translate, true).map(|(entries, _)| entries)
    }

    /// A copy of `len` bytes at pool offset `off` (inside the pool).
    fn bytes(space: &Space, off: u64, len: usize) -> Vec<u8> {
        (0..len as u64).map(|i| space.read::<u8>(off + i).unwrap()).collect()
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

    /// A batch's entries are written back once per line, not once per
    /// entry: sixteen 32-byte entries (a pipeline of INCRs) take 8 or 9
    /// lines and as many write-backs (16 entries cost at least 16 one by
    /// one); and a batch that spills into a chunk is written back on both
    /// sides of the jump, every entry live and in order.
    #[test]
    fn a_batch_is_written_back_once_per_line() {
        let t = pool_in("batch", Durability::Pmem);
        let (p, space) = (&t.0, &t.0.inner().space);
        let off = target(p, 4096);
        let flushes = || crate::pmem::counters().flushes;
        let mut w = LogWriter::open(space, 12).unwrap();
        let (start, before) = (w.cur.at, flushes());
        for k in 0..16 {
            w.append_batched(space, &Chunks(p), off + 64 * k, 8).unwrap();
        }
        assert_eq!(flushes(), before, "a batched entry was written back by itself");
        w.flush_batch(space);
        let lines = (w.cur.at - 1) / 64 - start / 64 + 1;
        assert_eq!(w.cur.at - start, 16 * 32);
        assert_eq!(flushes() - before, lines, "each of the batch's lines once");
        w.flush_batch(space);
        assert_eq!(flushes() - before, lines, "an empty batch wrote something back");
        // one by one, the same entries cost a write-back each at least
        let before = flushes();
        for k in 0..16 {
            w.append_unfenced(space, &Chunks(p), off + 64 * k, 8).unwrap();
        }
        assert!(flushes() - before >= 16);
        invalidate(space, 12).unwrap();
        // a batch across the jump into a chunk
        let mut w = LogWriter::open(space, 12).unwrap();
        let lens: Vec<u32> = (0..1000).map(|i| 1 + (i * 7) % 40).collect();
        for &len in &lens {
            w.append_batched(space, &Chunks(p), off, len).unwrap();
        }
        assert!(w.spilled());
        w.flush_batch(space);
        let live = live_entries(space, 12, &|v| v).unwrap();
        assert_eq!(live.len(), lens.len());
        for (at, &len) in live.iter().zip(&lens) {
            let h: LogEntryHeader = space.read(*at).unwrap();
            assert_eq!((h.off, h.len), (off, len));
        }
        invalidate(space, 12).unwrap();
    }

    #[test]
    fn entries_are_read_back_in_order_across_chunks() {
        let t = pool("chunks");
        let (p, space) = (&t.0, &t.0.inner().space);
        let off = target(p, 4096);
        let mut w = LogWriter::open(space, 7).unwrap();
        // 1000 entries of 40 + 24 bytes: half of the 32 KiB slot, then a chunk.
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
        let gen = w.gen();
        assert_eq!(in_slot[0], log_first_entry(7, gen, true).0, "first entry at the start of the generation's half");
        assert!(in_slot.iter().all(|&at| at < log_first_entry(7, gen, true).1), "entries stay in their half");
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
        // a new writer starts in the other half, then the first again
        for g in [gen + 1, gen + 2] {
            let mut w = LogWriter::open(space, 7).unwrap();
            w.append(space, &Chunks(p), off, 8).unwrap();
            let start = slot + LOG_SLOT_HEADER + (g & 1) * LOG_HALF;
            assert_eq!(live_entries(space, 7, &|v| v).unwrap(), vec![start]);
            invalidate(space, 7).unwrap();
        }
    }

    /// Step 3': a log that ends in a commit record is committed if the
    /// bytes match the record, and undone if they do not (the data did not
    /// all reach the media) or if the record is torn.
    #[test]
    fn a_commit_record_holds_only_if_the_data_matches() {
        let t = pool("record");
        let (p, space) = (&t.0, &t.0.inner().space);
        let off = target(p, 64);
        for (tamper, undone) in [("none", 0), ("data", 2), ("record", 2), ("none", 0)] {
            space.write(off, &1u64).unwrap();
            space.write(off + 16, &10u64).unwrap();
            let mut w = LogWriter::open(space, 5).unwrap();
            w.append(space, &Chunks(p), off, 8).unwrap();
            w.append(space, &Chunks(p), off + 16, 8).unwrap();
            space.write(off, &2u64).unwrap();
            space.write(off + 16, &20u64).unwrap();
            let sum = data_sum(space, [(off, 8u32), (off + 16, 8)].into_iter()).unwrap();
            w.commit_record(space, sum).unwrap();
            match tamper {
                // one new byte did not reach the media: a torn region
                "data" => space.write(off + 20, &0xFFu8).unwrap(),
                // the record's checksum field is torn
                "record" => space.write(w.cur.at + 8, &(sum ^ 1)).unwrap(),
                _ => {}
            }
            assert_eq!(undo_slot(space, 5, &|v| v).unwrap(), undone, "{tamper}");
            let want = if undone > 0 { (1, 10) } else { (2, 20) };
            assert_eq!((space.read::<u64>(off).unwrap(), space.read::<u64>(off + 16).unwrap()), want, "{tamper}");
            assert!(live_entries(space, 5, &|v| v).unwrap().is_empty(), "the log is retired either way");
        }
    }

    /// A version-2 pool's log starts every generation right after the slot
    /// header and holds no commit record: recovery reads it so.
    #[test]
    fn a_version_2_log_is_read_from_the_slot_start() {
        let t = pool("v2");
        let (p, space) = (&t.0, &t.0.inner().space);
        let off = target(p, 64);
        space.write(off, &1u64).unwrap();
        // make the slot's generation odd, so halves would start in half 1
        if slot_gen(space, 4).unwrap() & 1 == 0 {
            invalidate(space, 4).unwrap();
        }
        let gen = slot_gen(space, 4).unwrap();
        let mut w = LogWriter::open(space, 4).unwrap();
        w.cur = Cursor { chunk: None, at: slot_off(4) + LOG_SLOT_HEADER, end: slot_off(4) + LOG_SLOT_SIZE as u64 };
        w.append(space, &Chunks(p), off, 8).unwrap();
        space.write(off, &2u64).unwrap();
        assert_eq!(gen & 1, 1);
        assert_eq!(undo_slot(space, 4, &|v| v).unwrap(), 0, "format 3 looks in half 1");
        // the same bytes again, read as version 2
        invalidate(space, 4).unwrap();
        invalidate(space, 4).unwrap();
        let mut w = LogWriter::open(space, 4).unwrap();
        w.cur = Cursor { chunk: None, at: slot_off(4) + LOG_SLOT_HEADER, end: slot_off(4) + LOG_SLOT_SIZE as u64 };
        w.append(space, &Chunks(p), off, 8).unwrap();
        space.write(off, &3u64).unwrap();
        assert_eq!(undo_slot_of(space, 4, &|v| v, false).unwrap(), 1);
        assert_eq!(space.read::<u64>(off).unwrap(), 2);
    }

    /// Step 4' needs the two halves: while a record-committed region's bump
    /// is pending, the slot's next region (the next generation) writes its
    /// entries, even a full half of them, and its own record without
    /// touching a byte of the previous generation's entries and record;
    /// with the bump lost, recovery still finds that region committed.
    #[test]
    fn the_next_generation_never_touches_the_previous_log() {
        let t = pool("halves");
        let (p, space) = (&t.0, &t.0.inner().space);
        let off = target(p, 4096);
        for round in 0..2 {
            let mut w = LogWriter::open(space, 6).unwrap();
            let gen = w.gen();
            for k in 0..3 {
                w.append(space, &Chunks(p), off + 64 * k, 40).unwrap();
                space.write(off + 64 * k, &(round * 10 + k + 1)).unwrap();
            }
            let ranges: Vec<(u64, u32)> = (0..3).map(|k| (off + 64 * k, 40)).collect();
            w.commit_record(space, data_sum(space, ranges.iter().copied()).unwrap()).unwrap();
            let (start, _) = log_first_entry(6, gen, true);
            let len = (w.cur.at + ENTRY - start) as usize;
            let before = bytes(space, start, len);
            w.commit_lazily(space).unwrap();
            // the next region logs until its half is full (then it spills)
            let mut next = LogWriter::open(space, 6).unwrap();
            while !next.spilled() {
                next.append(space, &Chunks(p), off + 2048, 200).unwrap();
            }
            next.commit_record(space, 0).unwrap();
            assert_eq!(bytes(space, start, len), before, "round {round}: generation {gen}'s log was overwritten");
            // a crash that lost the bump: the first region stands
            space.write(slot_off(6), &log_gen_word(gen)).unwrap();
            assert_eq!(undo_slot(space, 6, &|v| v).unwrap(), 0);
            assert_eq!(space.read::<u64>(off + 128).unwrap(), round * 10 + 3);
            // and the next region's entries, whose fence never completed,
            // are not live under the recovered generation either: a later
            // crash would undo them over data committed since
            assert!(
                live_entries(space, 6, &|v| v).unwrap().is_empty(),
                "round {round}: recovery left generation {}'s entries live",
                gen + 1
            );
        }
    }

    /// Nothing of generation `w` or `w + 1` of slot `slot` is live: no
    /// entry, undo or redo, and no record (what a second crash's recovery
    /// would read first).
    fn nothing_live(space: &Space, slot: u32, round: u64) {
        let w = slot_gen(space, slot).unwrap();
        for g in [w, (w + 1) & LOG_GEN_MASK] {
            let (entries, record) = scan_gen(space, slot, g, &|v| v, true).unwrap();
            assert!(entries.is_empty() && record.is_none(), "round {round}: generation {g} (word {w}) still live: {entries:?} {record:?}");
        }
    }

    /// Format 4's recovery has the property format 3's got from its move
    /// by two (`the_next_generation_never_touches_the_previous_log`): a
    /// chain of redo regions writes ahead of the durable word (the slot's
    /// next region under `g + 1` while `g`'s retire is listed, the one
    /// after under `g + 2`), and after a crash that lost every bump,
    /// recovery replays the committed records in order and moves the word
    /// past all of them, so no stale entry or record of either half is
    /// live when a second crash comes, and the slot's next regions log
    /// and recover as on a fresh slot.
    #[test]
    fn recovery_moves_past_every_redo_generation_written_ahead() {
        let t = pool("redo-ahead");
        let (p, space) = (&t.0, &t.0.inner().space);
        let off = target(p, 4096);
        let retires = space.persist.retires();
        // one redo region of slot 6: `vals` to off + 64 k, committed by record or not
        let region = |vals: &[u64], record: bool| {
            let mut w = LogWriter::open(space, 6).unwrap();
            for (k, v) in vals.iter().enumerate() {
                w.append_redo(space, off + 64 * k as u64, &v.to_le_bytes()).unwrap().unwrap();
            }
            if record {
                w.redo_record(space).unwrap();
            }
            w.gen()
        };
        let read = |k: u64| space.read::<u64>(off + 64 * k).unwrap();
        for round in 0..3u64 {
            let g = slot_gen(space, 6).unwrap();
            // A commits under g (bytes in place later: not stored here)
            assert_eq!(region(&[round * 10 + 1, round * 10 + 1], true), g);
            retires.publish(6, g, std::iter::empty());
            // B, chained: logs under g + 1; its fence moves the word in memory
            assert_eq!(region(&[round * 10 + 2, round * 10 + 2], true), (g + 1) & LOG_GEN_MASK);
            retires.bump(6, g);
            retires.clear(6, g);
            retires.publish(6, (g + 1) & LOG_GEN_MASK, std::iter::empty());
            // C, chained again: logs under g + 2 (over A's half) and crashes
            // before its fence, with every bump lost: the media word is g
            assert_eq!(region(&[round * 10 + 3, round * 10 + 3, round * 10 + 3], round == 2), (g + 2) & LOG_GEN_MASK);
            retires.clear(6, (g + 1) & LOG_GEN_MASK);
            space.write(slot_off(6), &log_gen_word(g)).unwrap();
            // (round 2: C wrote its record too, but the word never said g + 1,
            // so C's fence never completed: C did not happen.)
            assert_eq!(recover_slot(space, 6, &|v| v, true).unwrap(), 2, "round {round}: B's two entries replayed");
            assert_eq!((read(0), read(1), read(2)), (round * 10 + 2, round * 10 + 2, 0), "round {round}: B stands, C never happened");
            assert_eq!(slot_gen(space, 6).unwrap(), (g + 3) & LOG_GEN_MASK, "round {round}");
            nothing_live(space, 6, round);
            // a second crash right now changes nothing
            assert_eq!(recover_slot(space, 6, &|v| v, true).unwrap(), 0, "round {round}: second recovery");
            nothing_live(space, 6, round);
            // the slot's next region (undo, one entry, over B's first)
            // crashes before its commit: only its own entry is undone
            let mut d = LogWriter::open(space, 6).unwrap();
            d.append(space, &Chunks(p), off, 8).unwrap();
            space.write(off, &999u64).unwrap();
            assert_eq!(recover_slot(space, 6, &|v| v, true).unwrap(), 1, "round {round}: D's one entry undone");
            assert_eq!((read(0), read(1), read(2)), (round * 10 + 2, round * 10 + 2, 0), "round {round}: after D");
            nothing_live(space, 6, round);
        }
    }

    /// Step 4': the bump is pending until some fence, of this or any
    /// thread, retires it; the next generation writes the other half.
    #[test]
    fn a_lazy_bump_is_retired_by_the_next_fence() {
        let t = pool("bumps");
        let (p, space) = (&t.0, &t.0.inner().space);
        let off = target(p, 64);
        let mut w = LogWriter::open(space, 9).unwrap();
        w.append(space, &Chunks(p), off, 8).unwrap();
        let gen = w.commit_lazily(space).unwrap();
        assert_eq!(slot_gen(space, 9).unwrap(), gen);
        assert!(live_entries(space, 9, &|v| v).unwrap().is_empty());
        assert!(space.persist.bumps().is_pending(9));
        std::thread::scope(|s| {
            s.spawn(|| space.persist.fence(crate::fences::FRONT_END).unwrap());
        });
        assert!(!space.persist.bumps().is_pending(9));
    }

    /// Step 4' writes the bump's line back once: not by the committing
    /// thread (its locked instructions right after the commit would wait
    /// for that write-back, `bumps.rs`), but by the next fence, which then
    /// retires the pair, so the fence after that writes back nothing.
    #[test]
    fn a_lazy_bump_is_written_back_once_by_the_next_fence() {
        let t = pool_in("once", Durability::Pmem);
        let (p, space) = (&t.0, &t.0.inner().space);
        let off = target(p, 64);
        let flushes = || crate::pmem::counters().flushes;
        for _ in 0..3 {
            let mut w = LogWriter::open(space, 11).unwrap();
            w.append(space, &Chunks(p), off, 8).unwrap();
            let before = flushes();
            w.commit_lazily(space).unwrap();
            assert_eq!(flushes(), before, "the committing thread wrote the bump back");
            space.persist.fence(crate::fences::FRONT_END).unwrap();
            assert_eq!(flushes(), before + 1, "the next fence wrote back the pending bump's line");
            assert!(!space.persist.bumps().is_pending(11));
            space.persist.fence(crate::fences::FRONT_END).unwrap();
            assert_eq!(flushes(), before + 1, "a retired bump was written back again");
        }
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
