//! The front ends' persistence protocol (`raw`): plain stores into the
//! mapping made durable with [`Pool::flush`], [`Pool::fence`] and
//! [`Pool::persist`], as the C ABI, Go, Java and C++ front ends do for
//! their sequential (non-region) stores.
//!
//! An append-only table in one root array: word 0 is the record count, each
//! record `RECORD` words in their own lines. A record is written, flushed
//! and fenced ("front end fence") before the count that covers it is
//! stored and persisted. Every image must show a count no smaller than the
//! number of appends that had returned, and every counted record whole.

use super::Harness;
use crate::error::{Error, Result};
use crate::{PArray, Pool};
use engram_model::Trace;

/// Words per record (two cache lines).
const RECORD: u64 = 16;
/// Words before the first record (the count's line).
const HEAD: u64 = 8;

fn word(k: u64, j: u64) -> u64 {
    k * 1000 + j + 1
}

fn table(pool: &Pool) -> Result<PArray<u64>> {
    pool.txn(|tx| tx.root_array::<u64>("raw.table"))?.ok_or_else(|| Error::corrupt("no raw table"))
}

/// Stores `v` at word `i` of `a` through a raw pointer, as a front end does.
fn store(a: PArray<u64>, i: u64, v: u64) {
    // SAFETY: `a` is a live array of `HEAD + n * RECORD` words in the
    // mapping (allocated by the workload, never freed) and every caller's
    // `i` is below that length; u64 stores are aligned.
    unsafe { ((a.addr() + 8 * i) as *mut u64).write_volatile(v) }
}

pub(super) fn w_raw(h: &Harness) -> Result<Trace> {
    let n = h.settings.regions + 1;
    let (pool, tracer) = h.create(0)?;
    pool.txn(|tx| {
        let a = tx.alloc_array::<u64>(HEAD + n * RECORD)?;
        tx.set_root_array("raw.table", a)
    })?;
    let a = table(&pool)?;
    let trace = h.traced(pool, &tracer, |pool| {
        for k in 0..n {
            let at = HEAD + k * RECORD;
            for j in 0..RECORD {
                store(a, at + j, word(k, j));
            }
            pool.flush(a.addr() + 8 * at, 8 * RECORD)?;
            pool.fence()?;
            store(a, 0, k + 1);
            pool.persist(a.addr(), 8)?;
            super::note_returned(k + 1);
        }
        Ok(())
    })?;
    h.expect(move |pool, returned| check(pool, n, returned));
    Ok(trace)
}

fn check(pool: &Pool, n: u64, returned: u64) -> std::result::Result<(), String> {
    let words = pool
        .txn(|tx| {
            let a = tx.root_array::<u64>("raw.table")?.ok_or_else(|| Error::corrupt("no raw table"))?;
            let mut w = vec![0u64; (HEAD + n * RECORD) as usize];
            tx.read_slice(a, 0, &mut w)?;
            Ok::<_, Error>(w)
        })
        .map_err(|e| format!("reading the raw table: {e}"))?;
    let count = words[0];
    if count < returned || count > n {
        return Err(format!("raw table counts {count} records, {returned} appends had returned (of {n})"));
    }
    for k in 0..count {
        let at = (HEAD + k * RECORD) as usize;
        if let Some(j) = (0..RECORD).find(|&j| words[at + j as usize] != word(k, j)) {
            return Err(format!("raw record {k} is counted but word {j} is {:#x}", words[at + j as usize]));
        }
    }
    Ok(())
}
