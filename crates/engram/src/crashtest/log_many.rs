//! `log-many`: ledger transfers whose undo entries are written by one
//! [`crate::Tx::log_ranges`] call (both account words and the ledger
//! header, three entries under one fence: what `engram_region_log_many`
//! and the Go front end's `LogBatch` do), then changed through the
//! ordinary calls, which find the ranges logged. Every crash image must
//! keep the ledger invariant: money conserved, no returned region lost,
//! no half transfer.

use super::{move_money, returned, Harness, Ledger, ACCOUNTS};
use crate::error::{Error, Result};
use engram_model::Trace;

pub(super) fn w_log_many(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.ledger_pool()?;
    h.traced(pool, &tracer, |pool| {
        for i in 0..h.settings.regions {
            pool.txn(|tx| {
                let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
                let mut l = tx.read(lp)?;
                let (from, to) = (i % ACCOUNTS, (i * 5 + 3) % ACCOUNTS);
                let word = |k: u64| l.accounts.addr() + 8 * k;
                tx.log_ranges([(word(from), 8), (word(to), 8), (lp.addr(), std::mem::size_of::<Ledger>() as u64)])?;
                move_money(tx, l.accounts, from, to, i % 5 + 1)?;
                l.count += 1;
                tx.write(lp, l)
            })?;
            returned(pool)?;
        }
        Ok(())
    })
}
