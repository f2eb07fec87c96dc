//! `engram-bench hybrid`, second part: the real volatile STM
//! (`engram::stm`) under each selectable runtime (`Runtime::ALL`: Fine,
//! FineHtm, Hybrid, and any added later) on Yates & Scott's structures
//! (`engram::stm::vcollections`: red-black tree, HAMT, treap), each in two
//! layouts: one `TVar` per node field, or fields embedded in the node
//! (`TField`). Workload: 90:5:5 lookups:inserts:removes, keys
//! 1..=100,000 with 50,000 pre-inserted, one transaction per operation,
//! fixed time per point, 1, 2, 4 and 8 threads.
//!
//! Reports Mops/s and where commits happened: level 1 (all hardware),
//! level 2 (hardware commit), level 3 (software lock commit after
//! hardware attempts), or a software commit with no hardware step
//! (read-only ones; under Fine, all), with hardware aborts by cause and
//! the STM's own conflicts (failed validations: the body ran again). After
//! every point the structure's shape is checked (`VMap::check`); a broken
//! one fails the point. Plots: `hybrid-stm-<structure>.png` (drawn by
//! `hybrid_stm_plot.rs`).
//!
//! The process's HTM backend is armed before the first transaction
//! (`main` in hybrid.rs); with the emulated backend every lock-word write
//! (Fine's too) goes through the emulator's stripe table, so Fine here is
//! slower than in `engram-bench stm`.

use crate::hybrid::{causes, HybridArgs};
use engram::htm::Cause;
use engram::stm::atomically;
use engram::stm::runtime::{self, Runtime, RuntimeStats};
use engram::stm::vcollections::{Boxed, Embedded, Form, Hamt, RbTree, Treap, VMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::{Duration, Instant};

const KEYS: u64 = 100_000;

/// The structures, in report order.
pub const STRUCTURES: [&str; 3] = ["rbtree", "hamt", "treap"];
/// The layouts, in report order.
pub const LAYOUTS: [&str; 2] = [Boxed::NAME, Embedded::NAME];

fn make(structure: &str, embedded: bool) -> Box<dyn VMap> {
    match (structure, embedded) {
        ("rbtree", false) => Box::new(RbTree::<Boxed>::new()),
        ("rbtree", true) => Box::new(RbTree::<Embedded>::new()),
        ("hamt", false) => Box::new(Hamt::<Boxed>::new()),
        ("hamt", true) => Box::new(Hamt::<Embedded>::new()),
        (_, false) => Box::new(Treap::<Boxed>::new()),
        (_, true) => Box::new(Treap::<Embedded>::new()),
    }
}

/// One measured point.
#[derive(Clone, Debug)]
pub struct Point {
    /// Index into [`STRUCTURES`].
    pub structure: usize,
    /// Index into [`LAYOUTS`].
    pub layout: usize,
    /// The runtime.
    pub rt: Runtime,
    /// Threads.
    pub threads: u32,
    /// Operations per second.
    pub rate: f64,
    /// Operations.
    pub ops: u64,
    /// The threads' runtime counters.
    pub st: RuntimeStats,
    /// Attempts the STM ran again on a conflict.
    pub conflicts: u64,
}

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

/// Inserts 50,000 distinct keys of 1..=100,000 (values = keys).
fn prefill(map: &dyn VMap) -> Result<(), String> {
    let mut x = 7u64;
    let mut seen = std::collections::HashSet::new();
    let mut keys = Vec::new();
    while keys.len() < (KEYS / 2) as usize {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let k = (x >> 33) % KEYS + 1;
        if seen.insert(k) {
            keys.push(k);
        }
    }
    for c in keys.chunks(500) {
        atomically(|tx| c.iter().try_for_each(|&k| map.insert(tx, k, k).map(drop))).map_err(|e| format!("prefill: {e}"))?;
    }
    Ok(())
}

/// One thread's loop: operations, its counters, its STM conflicts.
fn worker(map: &dyn VMap, rt: Runtime, t: u32, stop: &AtomicBool) -> Result<(u64, RuntimeStats, u64), String> {
    runtime::set_thread_runtime(Some(rt)).map_err(|e| e.to_string())?;
    let (before, c0) = (runtime::stats(), engram::stm::stats().conflicts);
    let mut r = 0x1234_5678 + u64::from(t) * 7919;
    let mut done = 0u64;
    while !stop.load(SeqCst) {
        r = r.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let (p, k) = ((r >> 20) % 100, (r >> 33) % KEYS + 1);
        let res = match p {
            0..=89 => atomically(|tx| map.get(&engram::stm::RTx::over(tx), k)).map(drop),
            90..=94 => atomically(|tx| map.insert(tx, k, done)).map(drop),
            _ => atomically(|tx| map.remove(tx, k)).map(drop),
        };
        res.map_err(|e| e.to_string())?;
        done += 1;
    }
    let mut d = runtime::stats();
    add(&mut d, &before, false);
    Ok((done, d, engram::stm::stats().conflicts - c0))
}

/// Measures one point.
fn point(a: &HybridArgs, structure: usize, layout: usize, rt: Runtime, threads: u32) -> Result<Point, String> {
    let map = make(STRUCTURES[structure], layout == 1);
    prefill(map.as_ref())?;
    let stop = AtomicBool::new(false);
    let secs = if a.quick { 0.05 } else { a.secs };
    let start = Instant::now();
    let rs: Vec<Result<(u64, RuntimeStats, u64), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (map, stop) = (map.as_ref(), &stop);
                s.spawn(move || worker(map, rt, t, stop))
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, SeqCst);
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a worker panicked".into()))).collect()
    });
    let el = start.elapsed().as_secs_f64();
    let mut p = Point { structure, layout, rt, threads, rate: 0.0, ops: 0, st: RuntimeStats::default(), conflicts: 0 };
    for r in rs {
        let (n, d, c) = r?;
        p.ops += n;
        p.conflicts += c;
        add(&mut p.st, &d, true);
    }
    p.rate = p.ops as f64 / el;
    map.check().map_err(|e| format!("shape after the run: {e}"))?;
    Ok(p)
}

fn row(md: &mut String, p: &Point) {
    let n = p.ops.max(1) as f64;
    let s = &p.st;
    // Hybrid's level-3 commits count in both; Coarse has no fallbacks.
    let lock = if p.rt == Runtime::Coarse { s.coarse_commits } else { s.sw_fallbacks };
    let sw = p.ops.saturating_sub(s.l1_commits + s.hw_commits + lock);
    let pc = |x: u64| format!("{:.1}", 100.0 * x as f64 / n);
    let _ = writeln!(
        md,
        "| {} | {} | {} | {:.3} | {} / {} / {} / {} | {} | {} | {} |",
        p.rt.name(),
        LAYOUTS[p.layout],
        p.threads,
        p.rate / 1e6,
        pc(s.l1_commits),
        pc(s.hw_commits),
        pc(lock),
        pc(sw),
        causes(&s.l1_aborts),
        causes(&s.hw_aborts),
        p.conflicts
    );
}

/// The embedded ÷ TVar throughput ratios, one line per structure and
/// runtime.
fn ratios(md: &mut String, points: &[Point], threads: &[u32]) {
    let _ = writeln!(md, "\n### Embedded fields ÷ one TVar per field (throughput ratio)\n");
    let head: Vec<String> = threads.iter().map(|t| format!("{t} thr")).collect();
    let _ = writeln!(md, "| structure | runtime | {} |", head.join(" | "));
    let _ = writeln!(md, "|---|---|{}", "---:|".repeat(threads.len()));
    for (si, s) in STRUCTURES.iter().enumerate() {
        for &rt in Runtime::ALL {
            let cell = |t: u32, l: usize| {
                points.iter().find(|p| p.structure == si && p.layout == l && p.rt == rt && p.threads == t).map(|p| p.rate)
            };
            let v: Vec<String> = threads
                .iter()
                .map(|&t| match (cell(t, 1), cell(t, 0)) {
                    (Some(e), Some(b)) if b > 0.0 => format!("{:.2}", e / b),
                    _ => "-".into(),
                })
                .collect();
            let _ = writeln!(md, "| {s} | {} | {} |", rt.name(), v.join(" | "));
        }
    }
}

/// Appends the section to `md` (and, with `--out`, draws the plots).
pub fn section(a: &HybridArgs, md: &mut String) {
    let threads: &[u32] = if a.quick { &[1, 2] } else { &[1, 2, 4, 8] };
    let _ = writeln!(md, "\n## The real STM (`engram::stm`): red-black tree, HAMT and treap, one TVar per field vs embedded fields\n");
    let _ = writeln!(
        md,
        "90:5:5 lookups:inserts:removes, keys 1..=100,000, 50,000 pre-inserted, one transaction per operation, {} s per point; \
         structures from `engram::stm::vcollections` (`tvar`: one `TVar` per node field; `embedded`: `TField`s inside the node, \
         keys immutable). Backend: **{}**. L1 = all hardware, L2 = software body + hardware commit, L3 = lock commit \
         (`hybrid`: the global commit lock after the hardware attempts; `fine-htm`: the fine-grain software commit after them; `coarse`: the global commit lock, every update), SW = software commit with no hardware step (read-only commits; under `fine`, every commit); \
         shares of all operations. Level-1 / level-2 aborts are hardware aborts by cause; STM conflicts are software attempts \
         that failed validation and ran again.\n",
        if a.quick { 0.05 } else { a.secs },
        runtime::backend().name()
    );
    let mut points = Vec::new();
    for (si, s) in STRUCTURES.iter().enumerate() {
        let _ = writeln!(md, "\n### {s}\n");
        if a.out.is_some() {
            let _ = writeln!(md, "![{s}: Mops/s against threads](hybrid-stm-{s}.png)\n");
        }
        let _ =
            writeln!(md, "| runtime | layout | threads | Mops/s | L1 / L2 / L3 / SW % | level-1 aborts | level-2 aborts | STM conflicts |");
        let _ = writeln!(md, "|---|---|---:|---:|---|---|---|---:|");
        for &rt in Runtime::ALL {
            for (layout, name) in LAYOUTS.iter().enumerate() {
                for &t in threads {
                    match point(a, si, layout, rt, t) {
                        Ok(p) => {
                            row(md, &p);
                            points.push(p);
                        }
                        Err(e) => {
                            let _ = writeln!(md, "| {} | {name} | {t} | failed: {e} | | | | |", rt.name());
                        }
                    }
                }
            }
        }
    }
    ratios(md, &points, threads);
    if let Some(out) = &a.out {
        for (si, s) in STRUCTURES.iter().enumerate() {
            let path = out.join(format!("hybrid-stm-{s}.png"));
            if let Err(e) = crate::hybrid_stm_plot::draw(&points, si, threads, &path) {
                eprintln!("engram-bench hybrid: plot {}: {e}", path.display());
            }
        }
    }
}
