//! Redo entries and the redo commit record (format 4; issue 13's one-fence
//! region).
//!
//! A region that only writes by value (`Tx::write`, `set`, `write_slice`)
//! and neither logs in place, allocates nor frees may be redo-logged
//! (`tx/redo.rs` decides): each write appends a *redo entry* (header with
//! [`LOG_REDO`] in its length, the range's NEW bytes, CRC32C over both) to
//! the slot's half of generation `g`, and nothing is stored in place yet.
//! Commit, step by step:
//!
//! R1. a *redo commit record* ([`LOG_REDO_COMMIT`]) after the entries holds
//!     a 64-bit checksum of the log bytes from the half's first entry up to
//!     the record; entries and record are written back together.
//! R2. ONE fence ("redo record: the region is committed") is the commit
//!     point. A crash before it completes leaves a torn entry (the scan
//!     stops there, the record is never reached), a torn record (its CRC
//!     fails) or a record whose checksum the entries do not match: the
//!     region never happened, and nothing was stored in place.
//! R3. the new bytes are stored in place, NOT written back; the slot's
//!     retire is listed (`retires.rs`). A crash from here on finds the
//!     valid record and replays it: idempotent, whatever reached the media.
//! R4. the record is retired later, in order: the in-place lines written
//!     back and fenced, then the generation word moved past `g` (by the
//!     slot's next redo region, chained, or by a full settle at any other
//!     fence; `retires.rs`). The chain leaves the write-back out when the
//!     next region's ranges cover every byte of this one's (the subsumed
//!     retire): its record, durable at the same fence, reproduces them.
//!
//! Recovery ([`recover_slot`]) reads the word's generation `w` and also
//! `w + 1`: while a retire is chained, the slot's next region logs under
//! `w + 1` (the other half) before the word says so. It replays a valid redo
//! record of `w`, then of `w + 1` (their order is the slot's commit order);
//! undoes or keeps `w`'s undo entries as before (`log.rs`) and, when a
//! record of `w + 1` is to be replayed over them, first makes that decision
//! durable (fence, word at `w + 1`: the replay changes the bytes the undo
//! record's checksum is compared with, so a crash during recovery must not
//! decide again); ignores `w + 1`'s
//! undo entries (their region changed nothing before its first fence, which
//! settled the chain and made the word `w + 1` durable); and then moves the
//! word to `w + 3`, past any generation written ahead (a writer is at most
//! two generations past the durable word), so a stale entry never joins a
//! later generation's log.

use super::{entry_crc, slot_gen, slot_off, undo_slot_of, undo_target_ok, LogWriter, Record, ENTRY};
use crate::error::{Error, Result};
use crate::format::*;
use crate::pool::space::Space;

impl LogWriter {
    /// Redo entries written by this writer.
    pub fn redo_entries(&self) -> u64 {
        self.redo
    }

    /// Appends a redo entry holding `data`, the new bytes of pool range
    /// `[off, off + data.len())`, neither written back nor fenced (R1 does
    /// both for all entries). Returns the entry's pool offset, or None if
    /// it does not fit the half beside its record (the caller then logs
    /// undo instead).
    pub fn append_redo(&mut self, space: &Space, off: u64, data: &[u8]) -> Result<Option<u64>> {
        let len = data.len() as u32;
        let size = ENTRY + (len as u64).div_ceil(8) * 8;
        if self.cur.chunk.is_some() || data.len() as u64 > LOG_REDO_MAX || self.cur.at + size + ENTRY > self.cur.end {
            return Ok(None);
        }
        let at = self.cur.at;
        let h = LogEntryHeader { gen: self.gen, off, len: len | LOG_REDO, crc: entry_crc(self.gen, off, len | LOG_REDO, data) };
        space.write(at, &h)?;
        // SAFETY: [at+ENTRY, at+size) is inside the slot's half (checked
        // against the cursor above); `data` is volatile memory.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (space.base() + at + ENTRY) as *mut u8, data.len()) };
        self.cur.at += size;
        self.redo += 1;
        Ok(Some(at))
    }

    /// Pool offset of this generation's first entry.
    fn first(&self) -> u64 {
        log_first_entry(self.slot, self.gen, true).0
    }

    /// Writes back every entry written so far (the redo entries before a
    /// region goes over to undo: the scan must read past them).
    pub fn flush_written(&self, space: &Space) {
        space.flush(self.first(), self.cur.at - self.first());
    }

    /// Step R1: writes the redo commit record after the entries and writes
    /// back entries and record; the caller's fence (R2) commits.
    pub fn redo_record(&self, space: &Space) -> Result<()> {
        let first = self.first();
        let sum = data_sum_of_log(space, first, self.cur.at)?;
        let h = LogEntryHeader { gen: self.gen, off: sum, len: LOG_REDO_COMMIT, crc: entry_crc(self.gen, sum, LOG_REDO_COMMIT, &[]) };
        space.write(self.cur.at, &h)?;
        space.flush(first, self.cur.at + ENTRY - first);
        Ok(())
    }
}

/// The checksum a redo record holds: `log::data_sum` of the log bytes `[first, end)`.
fn data_sum_of_log(space: &Space, first: u64, end: u64) -> Result<u64> {
    let len = u32::try_from(end - first).map_err(|_| Error::corrupt("redo entries overrun their half"))?;
    super::data_sum(space, std::iter::once((first, len)))
}

/// Whether the redo record `h` at pool offset `at` is valid: its CRC, and
/// the checksum of the log bytes from `first` (the half's first entry).
pub(super) fn record_valid(space: &Space, h: &LogEntryHeader, first: u64, at: u64) -> Result<bool> {
    Ok(h.crc == entry_crc(h.gen, h.off, h.len, &[]) && data_sum_of_log(space, first, at)? == h.off)
}

/// Writes the new bytes of the redo entries at `entries` (pool offsets,
/// oldest first) in place and writes them back; the caller fences. Each
/// target must be the heap or the root or type table.
fn replay(space: &Space, slot: u32, entries: &[u64]) -> Result<u64> {
    for &at in entries {
        let h: LogEntryHeader = space.read(at)?;
        let len = (h.len & !LOG_REDO) as u64;
        if !undo_target_ok(space, h.off, len) {
            return Err(Error::corrupt(format!("log slot {slot}: redo entry targets {:#x}+{len}, outside the heap", h.off)));
        }
        // SAFETY: both ranges are inside the mapping (target checked above,
        // source by the scan) and do not overlap (logs are never targets).
        unsafe { std::ptr::copy_nonoverlapping((space.base() + at + ENTRY) as *const u8, (space.base() + h.off) as *mut u8, len as usize) };
        space.flush(h.off, len);
    }
    Ok(entries.len() as u64)
}

/// Recovery of slot `slot` at open (format 3 or later; see the module
/// docs). Returns the entries replayed or undone.
pub(crate) fn recover_slot(space: &Space, slot: u32, translate: &dyn Fn(u64) -> u64, halves: bool) -> Result<u64> {
    if !halves {
        return undo_slot_of(space, slot, translate, false);
    }
    let w = slot_gen(space, slot)?;
    let (entries, record) = super::scan_gen(space, slot, w, translate, true)?;
    let (_, ahead) = super::scan_gen(space, slot, (w + 1) & LOG_GEN_MASK, translate, true)?;
    let touched = !entries.is_empty() || record.is_some() || ahead.is_some();
    let mut n = match record {
        // R3 of generation w: replayed (a region that went over to undo
        // has no redo record).
        Some(Record::Redo(redo)) if entries.is_empty() => replay(space, slot, &redo)?,
        // undo entries and the undo record: as before, on this generation.
        record => super::undo_entries(space, slot, &entries, record.and_then(Record::undo_sum))?,
    };
    if let Some(Record::Redo(redo)) = ahead {
        if !entries.is_empty() {
            // `w`'s undo entries were kept or undone by comparing their
            // ranges with the undo record's checksum; replaying `w + 1`
            // changes those bytes, so a crash during this recovery would
            // make the next one decide again, wrongly (undo a committed
            // region over the replay: a double-crash bug). The decision is
            // made durable first: restored bytes fenced, word at `w + 1`
            // (its live entries are exactly the record replayed next).
            let gen = (w + 1) & LOG_GEN_MASK;
            if !crate::failpoint::planted("log.redo_replay_before_decision") {
                space.write_persist(slot_off(slot), &log_gen_word(gen), crate::fences::GEN_BUMP)?;
            }
        }
        n += replay(space, slot, &redo)?;
    }
    if touched || written_ahead(space, slot, w)? {
        space.persist.fence(crate::fences::RECOVERED_BYTES)?;
        // Three: past the record's generation and the two a next region
        // may have written ahead (one, as before 78040e5, is a planted bug).
        let step = if crate::failpoint::planted("log.record_recovery_one_step") { 1 } else { 3 };
        let past = (w + step) & LOG_GEN_MASK;
        space.write_persist(slot_off(slot), &log_gen_word(past), crate::fences::RECOVERED_PAST)?;
    }
    Ok(n)
}

/// Whether a half of slot `slot` starts with an entry of generation `w + 1`
/// or `w + 2` (written ahead of the durable word `w`).
fn written_ahead(space: &Space, slot: u32, w: u64) -> Result<bool> {
    for g in [w + 1, w + 2] {
        let g = g & LOG_GEN_MASK;
        let h: LogEntryHeader = space.read(log_first_entry(slot, g, true).0)?;
        if h.gen == g {
            return Ok(true);
        }
    }
    Ok(false)
}
