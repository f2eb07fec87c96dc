//! What recovery must leave in the undo/redo logs: nothing a later scan
//! could take for a live log (the crash explorer checks it after every
//! open).
//!
//! After an open's recovery (`recover_slot`, every slot) and before any
//! region runs, each slot is *settled*: its generation word passes its
//! check, and a scan of the word's generation `w` or of either of the two
//! after it (`w + 1`, `w + 2`: those the slot's next regions log under
//! before another recovery could move the word) finds no live undo entry
//! and no valid commit record (undo or redo). Such an entry would be
//! joined to a later region's log by the scan (entries run on while their
//! generation matches), or read as live by the next recovery, which would
//! undo or replay bytes committed since: 78040e5's bug (a record-committed
//! region's recovery moved the word on by one, so the next region's
//! entries written ahead became live; the images of that first crash were
//! all consistent, and only a second crash after more work showed the
//! damage). A recovery that is right moves a slot it touched past every
//! generation written ahead (`log/redo.rs`) and leaves an untouched slot,
//! whose halves hold nothing live under those generations, alone. Redo
//! entries without a valid record may stay (a redo region that crashed
//! before its commit fence): the scan skips them, and only a record,
//! whose checksum covers the log from the half's first entry, makes them
//! count.
//!
//! Read only; nothing here writes the pool or changes on a crash.

use super::{scan_gen, slot_gen, Record};
use crate::error::Result;
use crate::format::*;
use crate::pool::space::Space;

/// The first slot that is not settled, described; None if all are. `Err`
/// only if the logs cannot be read. Meant right after an open, with no
/// region running (a running region's entries are live by right).
pub(crate) fn unsettled(space: &Space) -> Result<Option<String>> {
    let halves = space.header().version >= 3;
    for slot in 0..LOG_SLOTS {
        let w = match slot_gen(space, slot) {
            Ok(w) => w,
            Err(e) => return Ok(Some(format!("log slot {slot}: {e}"))),
        };
        for k in 0..3 {
            let g = (w + k) & LOG_GEN_MASK;
            if let Some(what) = live(space, slot, g, halves)? {
                return Ok(Some(format!(
                    "log slot {slot} (generation word {w}): a scan of generation {g} reads {what}, which a later \
                     recovery or region would take for live"
                )));
            }
        }
    }
    Ok(None)
}

/// What a scan of slot `slot` under generation `g` reads as live, if
/// anything: undo entries, a valid commit record.
fn live(space: &Space, slot: u32, g: u64, halves: bool) -> Result<Option<String>> {
    let (entries, record) = scan_gen(space, slot, g, &|v| v, halves)?;
    Ok(match record {
        Some(Record::Undo(_)) => Some(format!("{} undo entries ended by a valid commit record", entries.len())),
        Some(Record::Redo(redo)) => Some(format!("a valid redo record of {} entries", redo.len())),
        None if !entries.is_empty() => Some(format!("{} undo entries", entries.len())),
        None => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::tests::pool;
    use crate::log::{recover_slot, slot_off, LogWriter};

    /// A fresh pool is settled; a redo entry without its record is inert;
    /// a valid redo record written ahead (under `w + 1`) or an undo entry of
    /// the word's generation is not, until recovery moves the word past it;
    /// a word that fails its check is reported.
    #[test]
    fn entries_a_later_scan_would_read_are_reported() {
        let t = pool("ahead");
        let (p, space) = (&t.0, &t.0.inner().space);
        assert_eq!(unsettled(space).unwrap(), None);
        let target = p.txn(|tx| tx.alloc_array::<u8>(8)).unwrap().addr() - space.base();
        let w = slot_gen(space, 5).unwrap();
        let mut ahead = LogWriter::resume(5, (w + 1) & LOG_GEN_MASK);
        ahead.append_redo(space, target, &[1; 8]).unwrap();
        assert_eq!(unsettled(space).unwrap(), None, "a redo entry without a record");
        ahead.redo_record(space).unwrap();
        let m = unsettled(space).unwrap().expect("a redo record written ahead");
        assert!(m.contains("log slot 5") && m.contains("redo record"), "{m}");
        assert_eq!(recover_slot(space, 5, &|v| v, true).unwrap(), 1, "replayed");
        assert_eq!(unsettled(space).unwrap(), None);
        // an undo entry of the word's generation
        struct NoChunks;
        impl crate::log::ChunkAlloc for NoChunks {
            fn alloc_chunk(&self, _: u64) -> Result<u64> {
                Err(crate::Error::corrupt("no chunks here"))
            }
        }
        let w = slot_gen(space, 5).unwrap();
        LogWriter::resume(5, w).append_unfenced(space, &NoChunks, target, 8).unwrap();
        assert!(unsettled(space).unwrap().unwrap().contains("1 undo entries"));
        assert_eq!(recover_slot(space, 5, &|v| v, true).unwrap(), 1, "undone");
        assert_eq!(unsettled(space).unwrap(), None);
        space.write(slot_off(5), &0x1234u64).unwrap();
        assert!(unsettled(space).unwrap().unwrap().contains("fails its checksum"));
    }
}
