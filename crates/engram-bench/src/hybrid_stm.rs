//! `engram-bench hybrid`, second part: the real STM (`engram::stm`) under
//! each selectable runtime (`engram::stm::runtime`): Fine (software lock
//! commit), FineHtm (write set locked and reads validated in one hardware
//! transaction) and Hybrid (level 1 all in hardware, then FineHtm, then the
//! software lock). Workload: 90:5:5 lookups:inserts:removes on the volatile
//! red-black tree of the STM benchmarks (`TVarRbTree`: one `TVar` per node
//! field), keys 1..=100,000 with 50,000 pre-inserted, one transaction per
//! operation, fixed time per point, 1, 2, 4 and 8 threads. Reports commits
//! per second and where commits happened: level 1 (all hardware), level 2
//! (hardware commit), level 3 (software lock commit after hardware
//! attempts), or a software commit with no hardware step (read-only ones;
//! under Fine, all), with aborts by cause.
//!
//! The process's HTM backend is armed before the first transaction
//! (`main` in hybrid.rs); with the emulated backend every lock-word write
//! (Fine's too) goes through the emulator's stripe table, so Fine here is
//! slower than in `engram-bench stm`.

use crate::hybrid::HybridArgs;
use crate::stm::tvar_rbtree::TVarRbTree;
use crate::stm::workload::{prefill, Op, TxMap};
use engram::htm::Cause;
use engram::stm::runtime::{self, Runtime, RuntimeStats};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::{Duration, Instant};

const KEYS: u64 = 100_000;

fn add(a: &mut RuntimeStats, b: &RuntimeStats, sign_b: bool) {
    let f = |x: &mut u64, y: u64| *x = if sign_b { *x + y } else { *x - y };
    f(&mut a.hw_commits, b.hw_commits);
    f(&mut a.sw_fallbacks, b.sw_fallbacks);
    f(&mut a.l1_commits, b.l1_commits);
    f(&mut a.validate_aborts, b.validate_aborts);
    f(&mut a.locked_aborts, b.locked_aborts);
    for i in 0..Cause::COUNT {
        f(&mut a.hw_aborts[i], b.hw_aborts[i]);
        f(&mut a.l1_aborts[i], b.l1_aborts[i]);
    }
}

/// One point: operations per second, operations, and the threads' counters.
fn point(a: &HybridArgs, rt: Runtime, threads: usize) -> Result<(f64, u64, RuntimeStats), String> {
    let tree = TVarRbTree::new();
    let mut x = 7u64;
    let mut pairs = Vec::new();
    let mut seen = std::collections::HashSet::new();
    while pairs.len() < (KEYS / 2) as usize {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let k = (x >> 33) % KEYS + 1;
        if seen.insert(k) {
            pairs.push((k, k));
        }
    }
    prefill(&tree, &pairs).map_err(|e| format!("prefill: {e:?}"))?;
    let stop = AtomicBool::new(false);
    let secs = if a.quick { 0.05 } else { a.secs };
    let start = Instant::now();
    let rs: Vec<Result<(u64, RuntimeStats), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (tree, stop) = (&tree, &stop);
                s.spawn(move || {
                    runtime::set_thread_runtime(Some(rt)).map_err(|e| e.to_string())?;
                    let before = runtime::stats();
                    let mut local = Vec::new();
                    let mut r = 0x1234_5678 + t as u64 * 7919;
                    let mut done = 0u64;
                    while !stop.load(SeqCst) {
                        r = r.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let (p, k) = ((r >> 20) % 100, (r >> 33) % KEYS + 1);
                        let op = match p {
                            0..=89 => Op::Lookup(k),
                            90..=94 => Op::Insert(k, k),
                            _ => Op::Delete(k),
                        };
                        tree.apply(&mut local, op).map_err(|e| format!("{e:?}"))?;
                        done += 1;
                    }
                    let mut d = runtime::stats();
                    add(&mut d, &before, false);
                    Ok((done, d))
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, SeqCst);
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a worker panicked".into()))).collect()
    });
    let el = start.elapsed().as_secs_f64();
    let mut ops = 0;
    let mut st = RuntimeStats::default();
    for r in rs {
        let (n, d) = r?;
        ops += n;
        add(&mut st, &d, true);
    }
    tree.contents().map_err(|e| format!("tree invariants after the run: {e:?}"))?;
    Ok((ops as f64 / el, ops, st))
}

fn causes(c: &[u64; Cause::COUNT]) -> String {
    let v: Vec<String> = Cause::NAMES.iter().zip(c).filter(|(_, &n)| n > 0).map(|(name, n)| format!("{name} {n}")).collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(", ")
    }
}

/// Appends the section to `md`.
pub fn section(a: &HybridArgs, md: &mut String) {
    let threads: &[usize] = if a.quick { &[1, 2] } else { &[1, 2, 4, 8] };
    let _ = writeln!(md, "\n## The real STM (`engram::stm`) under each runtime\n");
    let _ = writeln!(
        md,
        "90:5:5 on `TVarRbTree` (one `TVar` per node field), keys 1..=100,000, 50,000 pre-inserted. \
         Backend: **{}**. L1 = all hardware, L2 = software body + hardware commit, L3 = software lock commit, \
         SW = software commit with no hardware step (read-only commits; under `fine`, every commit); shares of all transactions.\n",
        runtime::backend().name()
    );
    let _ = writeln!(md, "| runtime | threads | commits/s | L1 / L2 / L3 / SW % | level-1 aborts | level-2 aborts |");
    let _ = writeln!(md, "|---|---:|---:|---|---|---|");
    for &rt in Runtime::ALL {
        for &t in threads {
            match point(a, rt, t) {
                Ok((rate, ops, s)) => {
                    let n = ops.max(1) as f64;
                    let sw = ops.saturating_sub(s.l1_commits + s.hw_commits + s.sw_fallbacks);
                    let pc = |x: u64| format!("{:.1}", 100.0 * x as f64 / n);
                    let _ = writeln!(
                        md,
                        "| {} | {t} | {rate:.0} | {} / {} / {} / {} | {} | {} |",
                        rt.name(),
                        pc(s.l1_commits),
                        pc(s.hw_commits),
                        pc(s.sw_fallbacks),
                        pc(sw),
                        causes(&s.l1_aborts),
                        causes(&s.hw_aborts)
                    );
                }
                Err(e) => {
                    let _ = writeln!(md, "| {} | {t} | failed: {e} | | | |", rt.name());
                }
            }
        }
    }
}
