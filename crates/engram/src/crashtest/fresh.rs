//! `fresh-link`: new objects made by a region that logged nothing, linked by
//! a later region (`fresh.rs`, `Tx::commit` step 1').
//!
//! Each round, region A reads the ledger and allocates the next log entry
//! and its payload (both ends filled with the entry's number, through the
//! ordinary calls, which log nothing for new objects), and commits: it
//! issues no flush and no fence, its lines are listed for the next fence.
//! A read-only region and, every other round, a region that only frees an
//! object A made (no fence either) follow; then region B moves money,
//! counts the entry, links it as the log's head (logged stores) and drops
//! entries beyond the third (by-value writes: the redo path, whose one
//! fence is `Persister::fence_redo`; every other round undo-logged first,
//! whose entry fence is `Persister::fence`). B's first entry fence must write A's lines back
//! before B can commit: a crash after B's commit that loses A's stores shows
//! as an entry with the wrong number or an unfilled payload in the ledger
//! invariant.

use super::{drop_after, move_money, returned, Entry, Harness, Ledger, ACCOUNTS};
use crate::error::{Error, Result};
use crate::{PArray, PPtr};
use engram_model::Trace;

/// Payload sizes by round: a small object, a larger small one, a large one.
const SIZES: [u64; 3] = [24, 400, 5000];

pub(super) fn w_fresh_link(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.ledger_pool()?;
    h.traced(pool, &tracer, |pool| {
        for i in 0..h.settings.regions.max(3) {
            // A: the next entry, made and filled, linked from nothing.
            let (entry, spare) = pool.txn(|tx| {
                let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
                let l = tx.read(lp)?;
                let seq = l.count + 1;
                let n = SIZES[i as usize % SIZES.len()];
                let data: PArray<u8> = tx.alloc_array(n)?;
                let edge = n.min(64);
                tx.write_slice(data, 0, &vec![seq as u8; edge as usize])?;
                tx.write_slice(data, n - edge, &vec![seq as u8; edge as usize])?;
                let spare = tx.alloc(seq)?;
                Ok::<_, Error>((tx.alloc(Entry { seq, payload: data, next: l.log })?, spare))
            })?;
            returned(pool)?;
            if i % 2 == 0 {
                // a region that only frees (no entry, no data fence)
                pool.txn(|tx| tx.free(spare))?;
            }
            // B: the entry linked by logged stores.
            pool.txn(|tx| link(tx, i, entry))?;
            returned(pool)?;
        }
        Ok(())
    })
}

/// Region B of a round: money moved, the entry counted and linked as the
/// log's head, entries beyond the third dropped.
fn link(tx: &crate::Tx<'_>, i: u64, entry: PPtr<Entry>) -> Result<()> {
    let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
    if i % 2 == 1 {
        // the undo path (an entry fence, then the 3-fence commit); the
        // other rounds take the redo path (one fence: `Persister::fence_redo`)
        tx.log_range(lp.addr(), std::mem::size_of::<Ledger>() as u64)?;
    }
    let mut l = tx.read(lp)?;
    move_money(tx, l.accounts, i % ACCOUNTS, (i * 3 + 1) % ACCOUNTS, i % 7 + 1)?;
    l.count += 1;
    l.log = entry;
    drop_after(tx, l.log, 3)?;
    tx.write(lp, l)
}
