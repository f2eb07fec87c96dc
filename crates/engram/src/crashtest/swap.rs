//! `swap`: regions that swap elements of one array through an array view
//! ([`crate::ArrayView::swap`]): the two elements of a swap are logged by
//! one call under one fence ("undo entries of an array swap before either
//! element changes"), mixed with swaps of elements the region logged
//! already (one of the two, or both), a swap of an element with itself,
//! and regions that roll back (an `Err` after their swaps, or a swap out
//! of bounds). Word 0 counts the committed regions; the elements start
//! distinct, so a half swap shows. Every image must hold exactly the state
//! after its count of committed regions, and a count no smaller than the
//! commits that had returned.

use super::{note_returned, Harness};
use crate::error::{Error, Result};
use crate::{PArray, Pool};
use engram_model::Trace;

/// Words of the array: the count, then the elements (three cache lines).
const WORDS: u64 = 24;
/// Elements (words 1..WORDS).
const ELEMS: u64 = WORDS - 1;
const ROOT: &str = "swap.array";

/// Whether region `k` commits (the others roll back).
fn commits(k: u64) -> bool {
    k % 3 != 1
}

/// Region `k`'s swaps, in order: two elements logged by the swap, one
/// already logged and one not, both logged, one with itself.
fn swaps(k: u64) -> [(u64, u64); 4] {
    let e = |d: u64| 1 + (k * 7 + d) % ELEMS;
    let (a, b, c) = (e(0), e(11), e(5));
    [(a, b), (b, c), (a, c), (c, c)]
}

/// The array after the first `count` committing regions.
fn model(count: u64) -> Vec<u64> {
    let mut w: Vec<u64> = (0..WORDS).map(|i| if i == 0 { 0 } else { 100 + i }).collect();
    let mut k = 0;
    while w[0] < count {
        if commits(k) {
            for (i, j) in swaps(k) {
                w.swap(i as usize, j as usize);
            }
            w[0] += 1;
        }
        k += 1;
    }
    w
}

fn array(pool: &Pool) -> Result<PArray<u64>> {
    pool.txn(|tx| tx.root_array::<u64>(ROOT))?.ok_or_else(|| Error::corrupt("no swap array"))
}

/// Region `k`: its swaps through a view, then the count (committing
/// regions), an `Err` or a swap out of bounds (the others).
fn region(pool: &Pool, a: PArray<u64>, k: u64) -> Result<()> {
    pool.txn(|tx| {
        let v = tx.array(a)?;
        for (i, j) in swaps(k) {
            v.swap(i, j)?;
        }
        if commits(k) {
            return v.set(0, v.get(0)? + 1);
        }
        if k % 2 == 0 {
            return Err(Error::Aborted);
        }
        v.swap(1, WORDS)
    })
}

pub(super) fn w_swap(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.create(0)?;
    pool.txn(|tx| {
        let a = tx.alloc_array::<u64>(WORDS)?;
        tx.write_slice(a, 0, &model(0))?;
        tx.set_root_array(ROOT, a)
    })?;
    let a = array(&pool)?;
    let n = h.settings.regions;
    let trace = h.traced(pool, &tracer, |pool| {
        let mut committed = 0;
        for k in 0..n {
            match region(pool, a, k) {
                Ok(()) => committed += 1,
                Err(Error::Aborted | Error::OutOfBounds { .. }) if !commits(k) => {}
                Err(e) => return Err(e),
            }
            note_returned(committed);
        }
        Ok(())
    })?;
    let most = (0..n).filter(|&k| commits(k)).count() as u64;
    h.expect(move |pool, returned| check(pool, most, returned));
    Ok(trace)
}

fn check(pool: &Pool, most: u64, returned: u64) -> std::result::Result<(), String> {
    let words = pool
        .txn(|tx| {
            let a = tx.root_array::<u64>(ROOT)?.ok_or_else(|| Error::corrupt("no swap array"))?;
            let mut w = vec![0u64; WORDS as usize];
            tx.read_slice(a, 0, &mut w)?;
            Ok::<_, Error>(w)
        })
        .map_err(|e| format!("reading the swap array: {e}"))?;
    let count = words[0];
    if count < returned || count > most {
        return Err(format!("swap array counts {count} regions, {returned} commits had returned (of {most})"));
    }
    let want = model(count);
    if words != want {
        return Err(format!("swap array after {count} regions is {:?}, not {:?} (a half swap or a lost undo)", &words[1..], &want[1..]));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_committed_region_moves_elements_and_keeps_a_permutation() {
        for k in 0..40 {
            let [(a, b), (b2, c), ..] = swaps(k);
            assert!(a != b && b == b2 && c != a && c != b, "region {k}");
        }
        for count in 1..20 {
            let (w, before) = (model(count), model(count - 1));
            assert_eq!(w[0], count);
            assert_ne!(w[1..], before[1..], "region {count} is visible in the elements");
            let mut e = w[1..].to_vec();
            e.sort_unstable();
            assert_eq!(e, (101..=100 + ELEMS).collect::<Vec<_>>());
        }
    }
}
