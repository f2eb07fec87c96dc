//! Workloads of the 2-fence commit (`log.rs`, steps 3' and 4'): regions that
//! commit by a checksummed commit record, their generation bumps left to a
//! later fence.
//!
//! - `record`: ledger transfers that only log (committed by record), mixed
//!   with regions that allocate (3 fences) and regions that roll back, so
//!   pending bumps meet every other way a slot's log is written. Each
//!   transfer logs three ranges (two account words and the ledger), so its
//!   entries and record span several cache lines of its slot's half.
//! - `record-free`: the design review's case 3. A region R writes an object
//!   O and unlinks it (committed by record, its bump pending); a later
//!   region frees O and does nothing else; a third allocates an object of
//!   O's size (O is a one-span large object, so the span just released is
//!   handed out again at the same address), stores into it unlogged, and
//!   only then links it (its first entry fence). Between
//!   R's commit and that store there is no fence but the freeing region's
//!   "pending generation bumps before freed objects are reused". Every
//!   other round an online collection frees an unlinked object instead.
//!
//! Both keep the ledger invariant (money conserved, no returned region
//! lost); a lost bump whose record no longer matches would undo R over later
//! committed data and show as a lost or half transfer.

use super::{move_money, returned, returned_after, Harness, Ledger, ACCOUNTS};
use crate::error::{Error, Result};
use crate::{PArray, Tx};
use engram_model::Trace;

/// A transfer between two accounts that counts itself: three logged ranges
/// (the ledger first, with `log_range`, so the region never takes the redo
/// path), no allocation, so it commits by record.
fn transfer(tx: &Tx<'_>, i: u64) -> Result<()> {
    let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
    // logged in place first: the region is undo-logged, not redo (`tx/redo.rs`)
    tx.log_range(lp.addr(), std::mem::size_of::<Ledger>() as u64)?;
    let mut l = tx.read(lp)?;
    move_money(tx, l.accounts, i % ACCOUNTS, (i * 5 + 2) % ACCOUNTS, i % 5 + 1)?;
    l.count += 1;
    tx.write(lp, l)
}

pub(super) fn w_record(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.ledger_pool()?;
    h.traced(pool, &tracer, |pool| {
        for i in 0..h.settings.regions.max(6) {
            let r = pool.txn(|tx| {
                transfer(tx, i)?;
                match i % 4 {
                    // allocates: the 3-fence commit, after a pending bump
                    2 => tx.set_root("scratch", tx.alloc(i)?),
                    // rolls back with a bump pending
                    3 => Err(Error::Aborted),
                    _ => Ok(()),
                }
            });
            returned_after(pool, r)?;
        }
        Ok(())
    })
}

/// The object regions write and unlink: a large object of one span (just
/// over `MAX_SMALL`), so a fresh one reuses a freed one's span.
type Obj = PArray<u64>;
const OBJ_WORDS: u64 = 4200;

pub(super) fn w_record_free(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.ledger_pool()?;
    pool.txn(|tx| tx.set_root_array("obj", tx.alloc_array::<u64>(OBJ_WORDS)?))?;
    h.traced(pool, &tracer, |pool| {
        for i in 0..h.settings.regions.max(4) {
            // R: a transfer, and O written and unlinked (by record).
            let o = pool.txn(|tx| {
                let o: Obj = tx.root_array("obj")?.ok_or_else(|| Error::corrupt("no obj"))?;
                transfer(tx, i)?;
                tx.set(o, 1, i + 1)?;
                tx.remove_root("obj")?;
                Ok(o)
            })?;
            returned(pool)?;
            if i % 2 == 0 {
                // a region that only frees O (no entry, no data fence)
                pool.txn(|tx| tx.free_array(o))?;
            } else {
                // or the collector frees it
                pool.collect()?;
            }
            // a fresh object in O's slot, stored into unlogged, then linked
            pool.txn(|tx| {
                let n = tx.alloc_array::<u64>(OBJ_WORDS)?;
                for k in 0..4 {
                    tx.set(n, k, 0xF0F0 + i)?;
                }
                tx.set_root_array("obj", n)
            })?;
            returned(pool)?;
        }
        Ok(())
    })
}
