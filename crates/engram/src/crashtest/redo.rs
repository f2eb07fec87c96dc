//! Workloads of the redo path (`tx/redo.rs`, `log/redo.rs`, `retires.rs`):
//! regions committed by ONE fence, their in-place bytes written back by the
//! next region's fence.
//!
//! - `redo`: ledger transfers by value only (committed by redo record, a
//!   chain on one slot), every fourth rolled back, and a region that only
//!   reads between them (no fence: the chain carries over it).
//! - `redo-undo`: regions that start on the redo path and leave it (an
//!   allocation, a `log_range`, a root set after by-value writes), and undo
//!   regions right after a redo region that change the same accounts (the
//!   full settle of the pending retire in their entry fence).
//! - `redo-reads`: regions that read back their own pending writes: each
//!   moves money out of an account twice and into another twice, reading
//!   the balance again each time (a read that missed its region's pending
//!   entry would lose or make money).
//! - `mt-redo`: two threads' redo regions interleaved on one ledger (2PL);
//!   the first two are ordered so that a commit meets the other slot's
//!   pending retire, whose record recovery would replay after its own.
//!
//! - `redo-cover`: successive redo regions on one slot whose ranges cover
//!   the previous region's (the whole accounts array by one `write_slice`,
//!   or by two that meet) and do not (a pair of accounts; every account but
//!   the last, on the same line as the rest): a covered predecessor's
//!   in-place bytes are not written back by the chain (the subsumed retire,
//!   `Persister::fence_redo`), an uncovered one's are; a rollback and an
//!   undo region settle a retire whose predecessor was subsumed.
//!
//! - `redo-recovery`: a redo region crashed after its record's fence,
//!   before any byte was in place; the traced open replays it (and moves
//!   the slot's word past its halves), then a region runs after it.
//!
//! All keep the ledger invariant: money conserved, no returned region lost.

use super::{move_money, note_returned_at, returned, returned_after, Harness, Ledger, ACCOUNTS, LAYOUT};
use crate::error::{Error, Result};
use crate::{failpoint, OpenOptions, Pool, Tx};
use engram_model::Trace;

/// A transfer by value: reads and writes through `read`, `get`, `set` and
/// `write` only, so the region stays on the redo path.
fn transfer(tx: &Tx<'_>, i: u64) -> Result<()> {
    let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
    tx.lock_ptr(lp)?;
    let mut l = tx.read(lp)?;
    move_money(tx, l.accounts, i % ACCOUNTS, (i * 5 + 3) % ACCOUNTS, i % 5 + 1)?;
    l.count += 1;
    tx.write(lp, l)
}

pub(super) fn w_redo(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.ledger_pool()?;
    h.traced(pool, &tracer, |pool| {
        for i in 0..h.settings.regions.max(6) {
            let r = pool.txn(|tx| {
                transfer(tx, i)?;
                if i % 4 == 3 {
                    return Err(Error::Aborted);
                }
                Ok(())
            });
            returned_after(pool, r)?;
        }
        Ok(())
    })
}

pub(super) fn w_redo_undo(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.ledger_pool()?;
    h.traced(pool, &tracer, |pool| {
        for i in 0..h.settings.regions.max(6) {
            pool.txn(|tx| {
                transfer(tx, i)?;
                match i % 3 {
                    // leaves the path: an allocation after by-value writes
                    0 => tx.set_root("scratch", tx.alloc(i)?),
                    // leaves the path: a log-then-store call
                    1 => {
                        let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
                        let l = tx.read(lp)?;
                        tx.log_range(l.accounts.addr(), 8)?;
                        transfer(tx, i + 1)
                    }
                    // stays on it: the next region (undo: it logs first)
                    // changes the same accounts with this one's bytes
                    // perhaps not yet durable
                    _ => Ok(()),
                }
            })?;
            returned(pool)?;
            if i % 3 == 2 {
                pool.txn(|tx| {
                    let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
                    tx.log_range(lp.addr(), std::mem::size_of::<Ledger>() as u64)?;
                    transfer(tx, i)
                })?;
                returned(pool)?;
            }
        }
        Ok(())
    })
}

pub(super) fn w_redo_reads(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.ledger_pool()?;
    h.traced(pool, &tracer, |pool| {
        for i in 0..h.settings.regions.max(4) {
            pool.txn(|tx| {
                let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
                let mut l = tx.read(lp)?;
                let (from, to) = (i % ACCOUNTS, (i + 1) % ACCOUNTS);
                for _ in 0..2 {
                    move_money(tx, l.accounts, from, to, 3)?;
                }
                // a whole-array read sees the pending words too
                let mut all = vec![0u64; ACCOUNTS as usize];
                tx.read_slice(l.accounts, 0, &mut all)?;
                if all.iter().sum::<u64>() != super::TOTAL {
                    return Err(Error::corrupt("a region's read missed its own writes"));
                }
                l.count += 1;
                tx.write(lp, l)?;
                // and the count it just wrote
                if tx.read(lp)?.count != l.count {
                    return Err(Error::corrupt("a region's read missed its own write"));
                }
                Ok(())
            })?;
            returned(pool)?;
        }
        Ok(())
    })
}

/// The shapes of `redo-cover`'s regions: what each writes by value.
#[derive(Clone, Copy, Debug)]
enum Cover {
    /// Every account, by one `write_slice`.
    Whole,
    /// Every account, by two `write_slice`s that meet (covered by their union).
    Split,
    /// Accounts 7 and another, by `set`.
    Pair,
    /// Accounts 0-6 by one `write_slice` (account 7, on the same cache line,
    /// not written: a predecessor that wrote it is not covered).
    AllButLast,
}

/// One `redo-cover` region of shape `c`: moves money (into or out of the
/// last account where the shape writes it) and counts itself; the ledger
/// word is written every time, so it is always covered.
fn cover_region(tx: &Tx<'_>, c: Cover, i: u64) -> Result<()> {
    let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
    let mut l = tx.read(lp)?;
    let last = ACCOUNTS - 1;
    let mut a = [0u64; ACCOUNTS as usize];
    tx.read_slice(l.accounts, 0, &mut a)?;
    let (from, to) = match c {
        Cover::AllButLast => (i % last, (i + 2) % last),
        Cover::Pair => (last, i % last),
        _ => (i % last, last),
    };
    let amount = a[from as usize].min(i % 5 + 1);
    a[from as usize] -= amount;
    a[to as usize] += amount;
    match c {
        Cover::Whole => tx.write_slice(l.accounts, 0, &a)?,
        Cover::Split => {
            tx.write_slice(l.accounts, 4, &a[4..])?;
            tx.write_slice(l.accounts, 0, &a[..4])?;
        }
        Cover::Pair => {
            tx.set(l.accounts, from, a[from as usize])?;
            tx.set(l.accounts, to, a[to as usize])?;
        }
        Cover::AllButLast => tx.write_slice(l.accounts, 0, &a[..last as usize])?,
    }
    l.count += 1;
    tx.write(lp, l)
}

pub(super) fn w_cover(h: &Harness) -> Result<Trace> {
    use Cover::*;
    let (pool, tracer) = h.ledger_pool()?;
    h.traced(pool, &tracer, |pool| {
        // (shape, rolled back): each line says whether the region's ranges
        // cover its predecessor's (the chain's write-back left out) or not.
        let plan = [
            (Whole, false),      // the slot's first redo region of the trace
            (Whole, false),      // covers: subsumed
            (Pair, false),       // does not cover the whole array: written back
            (Split, false),      // covers the pair by the union of two ranges
            (AllButLast, false), // leaves out account 7, which the split wrote
            (Whole, false),      // covers
            (Whole, true),       // rolled back: settles the retire in full
            (Whole, false),      // nothing listed (the rollback settled it)
            (Whole, false),      // covers
        ];
        for (i, &(c, abort)) in plan.iter().enumerate() {
            let r = pool.txn(|tx| {
                cover_region(tx, c, i as u64 + 1)?;
                if abort {
                    return Err(Error::Aborted);
                }
                Ok(())
            });
            returned_after(pool, r)?;
        }
        // an undo region (it logs first): its entry fence settles in full
        // the retire of a region whose predecessor was subsumed
        pool.txn(|tx| {
            let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
            tx.log_range(lp.addr(), std::mem::size_of::<Ledger>() as u64)?;
            transfer(tx, 3)
        })?;
        returned(pool)?;
        pool.txn(|tx| cover_region(tx, Whole, 20))?;
        returned(pool)
    })
}

/// Each region's number is the count it wrote itself (see `mt-regions`).
/// The first regions are ordered so that a record of the lower slot is the
/// later one: thread 0 takes its slot (slot 0) first and waits inside its
/// region until thread 1's region (slot 1) has committed, so thread 0's
/// commit meets slot 1's pending retire (recovery replays slot 0 before
/// slot 1: without that retire settled first, it would replay the older
/// record last).
pub(super) fn w_threads(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.ledger_pool()?;
    let (began, committed) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    h.traced(pool, &tracer, |pool| {
        let regions = h.settings.regions.clamp(2, 3);
        let counted = |tx: &Tx<'_>, i: u64| -> Result<u64> {
            transfer(tx, i)?;
            let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
            Ok(tx.read(lp)?.count)
        };
        let work = |t: u32| -> Result<Vec<(usize, u64)>> {
            let mut notes = Vec::new();
            let first = if t == 0 {
                pool.txn(|tx| {
                    began.wait();
                    committed.wait();
                    counted(tx, 10)
                })?
            } else {
                began.wait();
                let c = pool.txn(|tx| counted(tx, 20))?;
                committed.wait();
                c
            };
            notes.push((tracer.position(), first));
            for k in 1..regions {
                let i = 10 * (t as u64 + 1) + k;
                let count = loop {
                    match pool.txn(|tx| counted(tx, i)) {
                        Ok(count) => break count,
                        Err(Error::LockTimeout) => continue,
                        Err(e) => return Err(e),
                    }
                };
                notes.push((tracer.position(), count));
            }
            Ok(notes)
        };
        // Thread 0 is this thread, so the fault sweep counts the drops of
        // the fence its commit reaches (drops are counted per thread).
        let switches = failpoint::switches();
        let (mine, theirs) = std::thread::scope(|s| {
            let other = s.spawn(|| {
                failpoint::adopt_switches(&switches);
                work(1)
            });
            let mine = work(0);
            (mine, other.join().unwrap_or_else(|_| Err(Error::corrupt("a workload thread panicked"))))
        });
        for (at, n) in mine?.into_iter().chain(theirs?) {
            note_returned_at(at, n);
        }
        Ok(())
    })
}

pub(super) fn w_recovery(h: &Harness) -> Result<Trace> {
    let (pool, _) = h.ledger_pool()?;
    pool.txn(|tx| transfer(tx, 0))?;
    returned(&pool)?;
    // a crash after the record's fence (process crash: memory kept), before
    // the bytes are in place; the accounts moved lie on two cache lines
    failpoint::arm(failpoint::Failpoint::TxRedoAfterRecord, 0);
    let r = std::panic::catch_unwind(|| {
        pool.txn(|tx| {
            let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
            let mut l = tx.read(lp)?;
            move_money(tx, l.accounts, 0, ACCOUNTS - 1, 7)?;
            l.count += 1;
            tx.write(lp, l)
        })
    });
    failpoint::disarm_failpoints();
    if r.is_ok() {
        return Err(Error::corrupt("failpoint did not fire"));
    }
    drop(pool);
    // trace the recovery itself, and a region after it
    let tracer = h.tracer_on_attach();
    let pool = Pool::open(&h.pool_path, OpenOptions::new(LAYOUT).trace(tracer.clone()))?;
    pool.txn(|tx| transfer(tx, 2))?;
    returned(&pool)?;
    let trace = tracer.stop();
    pool.simulate_crash();
    Ok(trace)
}
