//! Crash-consistency workloads of persistent laziness (`lazy-*`).
//!
//! Each workload makes its thunks, stream or memo table before tracing
//! starts, then traces forcing them (the update protocol of
//! `lazy/publish.rs`: stage, flush, one fence, one 8-byte link). Every
//! crash image must
//!
//! - open and pass `Pool::check` (the harness);
//! - hold, for each thunk / cell / memo entry, either nothing (unevaluated,
//!   absent) or exactly the value the function computes — never a partial
//!   copy, never a dangling link;
//! - show the updates of the traced run as a prefix: they are linked in
//!   order, and each link is made durable by the next update's fence, so an
//!   image may lose a suffix, never a hole; in `lazy-force`, never the
//!   thunks a `lazy::sync` that had returned made durable;
//! - accept the remaining evaluations (forcing or computing everything
//!   left gives the right values).
//!
//! The workloads: `lazy-force` (thunks whose results are vectors of
//! different sizes, one larger than a span), `lazy-stream` (a stream whose
//! cells carry a vector and stage the next cell's thunk with the result),
//! `lazy-memo` (the trie memo over keys on every trie level, big-integer
//! values of growing size, so inserts create nodes on different levels)
//! and `lazy-hashmemo` (the HAMT memo: a fenced copy, then an STM commit).

use super::Harness;
use crate::error::{Error, Result};
use crate::lazy::{self, Cx, HashMemo, Memo, PLazy, PStream, ThunkObj, TrieMemo};
use crate::Pool;
use engram_model::Trace;
use num_bigint::BigUint;

type Check = std::result::Result<(), String>;

const THUNK_FUNC: &str = "crashtest.lazy-vec";
const STREAM_FUNC: &str = "crashtest.lazy-stream";

/// The value thunk `i` computes: `len(i)` copies of a pattern of `i`.
fn vec_of(i: u64) -> Vec<u64> {
    let len = if i == 2 { 9000 } else { 3 + 17 * i as usize };
    (0..len as u64).map(|k| i * 1_000_003 + k).collect()
}

/// The value memo entry `k` holds: 3^(40 k mod 400 + 5), many limbs.
fn memo_value(k: u64) -> BigUint {
    BigUint::from(3u32).pow((k % 10) as u32 * 40 + 5)
}

/// Keys on every trie level, in insertion order.
const KEYS: [u64; 12] = [0, 1, 63, 64, 65, 4095, 4096, 262_144, 1 << 30, 7, 1 << 50, u64::MAX];

fn register() -> Result<()> {
    lazy::register(THUNK_FUNC, |_cx: &Cx<'_>, i: u64| Ok(vec_of(i)))?;
    PStream::<Vec<u64>, u64>::register(STREAM_FUNC, |_cx: &Cx<'_>, i: u64| Ok((i < 64).then(|| (vec_of(i % 5), i + 1))))
}

/// The evaluated prefix of `flags` (all set before the first unset), or
/// the hole that breaks it.
fn prefix(flags: &[bool], what: &str) -> std::result::Result<usize, String> {
    let n = flags.iter().take_while(|&&f| f).count();
    match flags[n..].iter().position(|&f| f) {
        Some(k) => Err(format!("{what} {} is present but {what} {n} is not", n + k)),
        None => Ok(n),
    }
}

fn thunk_root(i: u64) -> String {
    format!("lazy.thunk{i}")
}

// ----- lazy-force -------------------------------------------------------------------

pub(super) fn w_force(h: &Harness) -> Result<Trace> {
    register()?;
    let k = h.settings.regions + 2;
    let (pool, tracer) = h.create(0)?;
    for i in 0..k {
        PLazy::<Vec<u64>>::root(&pool, &thunk_root(i), THUNK_FUNC, i)?;
    }
    let trace = h.traced(pool, &tracer, |pool| {
        for i in 0..k {
            let t = PLazy::<Vec<u64>>::root(pool, &thunk_root(i), THUNK_FUNC, i)?;
            if t.force(pool)? != vec_of(i) {
                return Err(Error::corrupt("a thunk forced to the wrong value"));
            }
            // Every other thunk, and the last: lazy::sync makes the links
            // durable now; thunks 0..=i must then survive every crash.
            if i % 2 == 1 || i + 1 == k {
                lazy::sync(pool)?;
                super::note_returned(i + 1);
            }
        }
        Ok(())
    })?;
    h.expect(move |pool, returned| check_force(pool, k, returned));
    Ok(trace)
}

/// The `lazy-force` invariant; `synced` thunks had been made durable by
/// `lazy::sync` before the crash point.
fn check_force(pool: &Pool, k: u64, synced: u64) -> Check {
    let thunks: Vec<PLazy<Vec<u64>>> = (0..k)
        .map(|i| pool.txn(|tx| tx.root::<ThunkObj<u64>>(&thunk_root(i))))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|p| p.map(PLazy::from_ptr).ok_or("a thunk root is missing"))
        .collect::<std::result::Result<_, _>>()?;
    let flags: Vec<bool> = thunks.iter().map(|t| t.is_evaluated(pool)).collect::<Result<_>>().map_err(|e| e.to_string())?;
    let evaluated = prefix(&flags, "thunk")?;
    if (evaluated as u64) < synced {
        return Err(format!("thunks made durable by lazy::sync lost: {evaluated} evaluated, {synced} had been synced"));
    }
    for (i, t) in thunks.iter().enumerate() {
        let v = t.force(pool).map_err(|e| format!("forcing thunk {i}: {e}"))?;
        if v != vec_of(i as u64) {
            return Err(format!("thunk {i} holds a wrong value (evaluated before: {})", flags[i]));
        }
    }
    Ok(())
}

// ----- lazy-stream ------------------------------------------------------------------

pub(super) fn w_stream(h: &Harness) -> Result<Trace> {
    register()?;
    let cells = h.settings.regions as usize + 3;
    let (pool, tracer) = h.create(0)?;
    PStream::<Vec<u64>, u64>::root(&pool, "lazy.stream", STREAM_FUNC, 0)?;
    let trace = h.traced(pool, &tracer, |pool| {
        let s = PStream::<Vec<u64>, u64>::root(pool, "lazy.stream", STREAM_FUNC, 0)?;
        for (i, v) in s.iter(pool).take(cells).enumerate() {
            if v? != vec_of(i as u64 % 5) {
                return Err(Error::corrupt("a stream cell has the wrong value"));
            }
        }
        Ok(())
    })?;
    h.expect(move |pool, _returned| check_stream(pool, cells as u64));
    Ok(trace)
}

fn check_stream(pool: &Pool, cells: u64) -> Check {
    let s = PStream::<Vec<u64>, u64>::root(pool, "lazy.stream", STREAM_FUNC, 0).map_err(|e| e.to_string())?;
    let (done, end) = s.evaluated(pool).map_err(|e| e.to_string())?;
    if done > cells || end {
        return Err(format!("{done} cells evaluated, the run evaluated {cells}"));
    }
    for (i, v) in s.iter(pool).enumerate() {
        let v = v.map_err(|e| format!("cell {i}: {e}"))?;
        if v != vec_of(i as u64 % 5) {
            return Err(format!("cell {i} holds a wrong value (evaluated before the crash: {})", (i as u64) < done));
        }
    }
    Ok(())
}

// ----- lazy-memo / lazy-hashmemo ------------------------------------------------------

fn memo_workload<M: Memo<BigUint> + 'static>(h: &Harness, open: fn(&Pool) -> Result<M>) -> Result<Trace> {
    let n = (h.settings.regions as usize + 5).min(KEYS.len());
    let (pool, tracer) = h.create(0)?;
    drop(open(&pool)?);
    let trace = h.traced(pool, &tracer, |pool| {
        let m = open(pool)?;
        for &k in &KEYS[..n] {
            if m.get_or_compute(k, |k, _| Ok(memo_value(k)))? != memo_value(k) {
                return Err(Error::corrupt("a memo entry has the wrong value"));
            }
        }
        Ok(())
    })?;
    h.expect(move |pool, _returned| check_memo(pool, open, n));
    Ok(trace)
}

fn check_memo<M: Memo<BigUint>>(pool: &Pool, open: fn(&Pool) -> Result<M>, n: usize) -> Check {
    let m = open(pool).map_err(|e| e.to_string())?;
    let mut flags = Vec::new();
    for &k in &KEYS[..n] {
        match m.get(k).map_err(|e| format!("key {k}: {e}"))? {
            Some(v) if v != memo_value(k) => return Err(format!("key {k} holds a wrong value")),
            got => flags.push(got.is_some()),
        }
    }
    prefix(&flags, "key")?;
    for &k in &KEYS[..n] {
        if m.get_or_compute(k, |k, _| Ok(memo_value(k))).map_err(|e| e.to_string())? != memo_value(k) {
            return Err(format!("key {k}: wrong value after recovery"));
        }
    }
    Ok(())
}

pub(super) fn w_memo(h: &Harness) -> Result<Trace> {
    memo_workload(h, |p| TrieMemo::<BigUint>::root(p, "lazy.trie"))
}

pub(super) fn w_hashmemo(h: &Harness) -> Result<Trace> {
    memo_workload(h, |p| HashMemo::<BigUint>::root(p, "lazy.hamt"))
}
