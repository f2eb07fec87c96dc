//! Where a PSTM red-black-tree lookup's time goes: the memory floor of the
//! tree's layout against the STM's own work, measured in CPU time on one
//! thread (the VM has no hardware counters: misses are bounded, not
//! counted, by variants that do only the loads a lookup must do). The
//! tree counterpart of `hash_floor`.
//!
//! It builds the benchmark's tree (`RbTree<u64, u64>`, 50,000 keys out of
//! 100,000 from the benchmark's own prefill, inserted in 64-key
//! transactions, then collected) in a pool on `--dir`, then times the same
//! random lookups (keys below 100,000, precomputed) in each variant, round
//! after round alternately:
//! - `ro`: one `Pool::atomically_read` per lookup, `RbTree::get` (what the
//!   benchmark's lookups do); `stm`: the same in a full `Pool::atomically`;
//! - `ro-batch`: 1,000 lookups per read-only transaction (the per-level
//!   work of the STM's reads without the per-transaction part);
//!   `empty-ro`: a read-only transaction whose body does nothing;
//! - `raw-pool`: the walk's loads alone (the top, then each node's key and
//!   the child the compare selects, then the value) on the pool mapping:
//!   no lock word, no bounds check, no transaction — the layout's floor;
//!   `raw-pool-dep`: the same with each key made to depend on the
//!   previous lookup's result, so one lookup's misses are in flight at a
//!   time (as in a transaction, whose instruction stream keeps the
//!   processor from running ahead into the next lookup);
//! - `raw-dense` / `raw-dense-dep`: a RomulusLog-like layout (32-byte
//!   nodes of key, left, right, value; no headers, lock words or padding;
//!   in the pool's address order, which is about insertion order), free
//!   and serialised.
//!
//! It prints the mean depth of a lookup (nodes visited), so the figures
//! divide into per-level costs. Not a benchmark of the engine (use
//! `engram-bench stm` for that): a throw-away measurement. Run:
//! `cargo run --release -p engram-bench --example tree_floor -- /dev/shm 1000000 5`
//! (directory, lookups per variant and round, rounds; a fourth argument
//! names the one variant to run, for `perf record`).

use engram::stm::collections::RbTree;
use engram::{CreateOptions, Durability, Pool};
use engram_bench::stm::floor::{self, rng, serial, Variant};
use engram_bench::stm::workload::prefill_pairs;
use std::hint::black_box;
use std::path::PathBuf;

const KEYS: u64 = 100_000;
const PREFILL: u64 = 50_000;
const SEED: u64 = 104_373_470_437_409;

/// A node's words in the pool (layout `RbTree.v2`): one cell, the lock
/// word at the payload's start, then key, left, right, value and `up`.
const KEY: u64 = 8;
const LEFT: u64 = 16;
const RIGHT: u64 = 24;
const VALUE: u64 = 32;

/// Reads the u64 at `addr`.
fn rd(addr: u64) -> u64 {
    // SAFETY: every address read is inside the open pool's mapping,
    // 8-aligned, and nothing writes it during the measurement.
    unsafe { std::ptr::read_volatile(addr as *const u64) }
}

/// The loads of a lookup in the pool's layout from the root cell `root`;
/// also counts the nodes visited into `depth`.
fn raw_get(root: u64, key: u64, depth: &mut u64) -> Option<u64> {
    let mut n = rd(root + 8);
    while n != 0 {
        *depth += 1;
        let k = rd(n + KEY);
        n = match key.cmp(&k) {
            std::cmp::Ordering::Less => rd(n + LEFT),
            std::cmp::Ordering::Greater => rd(n + RIGHT),
            std::cmp::Ordering::Equal => return Some(rd(n + VALUE)),
        };
    }
    None
}

/// Every node address of the tree (walking it raw).
fn nodes(root: u64) -> Vec<u64> {
    let (mut out, mut stack) = (Vec::new(), vec![rd(root + 8)]);
    while let Some(n) = stack.pop() {
        if n != 0 {
            out.push(n);
            stack.push(rd(n + LEFT));
            stack.push(rd(n + RIGHT));
        }
    }
    out
}

/// The RomulusLog-like dense layout: nodes of key, left, right, value
/// (links as index + 1, 0 for none), and the top's index + 1.
struct Dense {
    top: u64,
    nodes: Vec<[u64; 4]>,
}

impl Dense {
    fn build(root: u64) -> Dense {
        let mut addrs = nodes(root);
        addrs.sort_unstable();
        let index = |a: u64| if a == 0 { 0 } else { addrs.binary_search(&a).expect("a node") as u64 + 1 };
        let nodes = addrs.iter().map(|&n| [rd(n + KEY), index(rd(n + LEFT)), index(rd(n + RIGHT)), rd(n + VALUE)]).collect();
        Dense { top: index(rd(root + 8)), nodes }
    }
    fn get(&self, key: u64) -> Option<u64> {
        let mut n = black_box(self.top);
        while n != 0 {
            let node = &self.nodes[n as usize - 1];
            n = match key.cmp(&node[0]) {
                std::cmp::Ordering::Less => node[1],
                std::cmp::Ordering::Greater => node[2],
                std::cmp::Ordering::Equal => return Some(node[3]),
            };
        }
        None
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "/dev/shm".into()));
    let ops: usize = args.next().map_or(1_000_000, |s| s.parse().expect("lookups per round"));
    let rounds: usize = args.next().map_or(5, |s| s.parse().expect("rounds"));
    // An optional variant name: run only that one (for perf record).
    let only = args.next();
    let path = dir.join(format!("tree_floor.{}.pool", std::process::id()));
    let opts = CreateOptions::new("engram_bench_stm").durability(Durability::Pmem).initial_size(256 << 20).overwrite();
    let pool = Pool::create(&path, opts).expect("create pool");
    let tree = RbTree::<u64, u64>::root(&pool, "map").expect("tree");
    for c in prefill_pairs(KEYS, PREFILL, SEED).chunks(64) {
        pool.atomically(|tx| c.iter().try_for_each(|&(k, v)| tree.insert(tx, k, v).map(drop))).expect("prefill");
    }
    pool.collect().expect("collect");
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let keys: Vec<u64> = (0..ops).map(|_| rng(&mut s) % KEYS).collect();

    let root = tree.addr();
    let ns = nodes(root);
    let lines: std::collections::BTreeSet<u64> = ns.iter().map(|n| n / 64).collect();
    let pages: std::collections::BTreeSet<u64> = ns.iter().map(|n| n / 4096).collect();
    let (lo, hi) = (*ns.iter().min().unwrap(), *ns.iter().max().unwrap());
    let shape = pool.atomically(|tx| tree.check(tx)).expect("check");
    println!(
        "tree: {} nodes ({} lines, {} 4-KiB pages, spread over {:.1} MiB), height {}",
        ns.len(),
        lines.len(),
        pages.len(),
        (hi - lo) as f64 / (1 << 20) as f64,
        shape.height
    );
    let dense = Dense::build(root);
    // The variants agree with the STM; the mean depth of a lookup.
    let mut depth = 0;
    for &k in &keys {
        let want = pool.atomically_read(|tx| tree.get(tx, &k)).expect("get");
        assert_eq!(raw_get(root, k, &mut depth), want);
        assert_eq!(dense.get(k), want);
    }
    println!("mean nodes visited per lookup: {:.2}", depth as f64 / keys.len() as f64);

    let raw = |k| raw_get(root, k, &mut 0);
    let variants: Vec<Variant<'_>> = vec![
        ("ro", Box::new(|ks| ks.iter().map(|k| pool.atomically_read(|tx| tree.get(tx, k)).unwrap().unwrap_or(0)).sum())),
        ("stm", Box::new(|ks| ks.iter().map(|k| pool.atomically(|tx| tree.get(tx, k)).unwrap().unwrap_or(0)).sum())),
        (
            "ro-batch",
            Box::new(|ks| {
                ks.chunks(1000)
                    .map(|c| pool.atomically_read(|tx| c.iter().try_fold(0u64, |a, k| Ok(a + tree.get(tx, k)?.unwrap_or(0)))).unwrap())
                    .sum()
            }),
        ),
        ("empty-ro", Box::new(|ks| ks.iter().map(|&k| pool.atomically_read(|_| Ok(k)).unwrap()).sum())),
        ("raw-pool", Box::new(|ks| ks.iter().map(|&k| raw(k).unwrap_or(0)).sum())),
        ("raw-pool-dep", Box::new(|ks| serial(ks, raw))),
        ("raw-dense", Box::new(|ks| ks.iter().map(|&k| dense.get(k).unwrap_or(0)).sum())),
        ("raw-dense-dep", Box::new(|ks| serial(ks, |k| dense.get(k)))),
    ];
    floor::run(variants, &keys, rounds, only.as_deref());
    drop(pool);
    let _ = std::fs::remove_file(&path);
}
