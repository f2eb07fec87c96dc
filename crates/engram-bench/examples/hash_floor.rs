//! Where a PSTM hash-table lookup's time goes: the memory floor of the
//! table's layout against the STM's own work, measured in CPU time on one
//! thread (the VM has no hardware counters, so misses are not counted but
//! bounded: a variant that does only the loads a lookup must do).
//!
//! It builds the benchmark's table (`HashTable<u64, u64>`, 65,536 chains,
//! 50,000 keys out of 100,000, prefilled in 64-key transactions, then
//! collected) in a pool on `--dir`, then times the same random lookups
//! (100 % lookups, keys below 100,000, precomputed) in each variant, round
//! after round alternately:
//! - `stm`: one `Pool::atomically` per lookup, `HashTable::get` (what the
//!   benchmark's lookups do);
//! - `stm-batch`: 1,000 lookups per transaction (the STM's per-read work
//!   without its per-transaction setup);
//! - `empty-tx`: one `Pool::atomically` per lookup whose body does nothing
//!   (the per-transaction setup alone);
//! - `ro` / `empty-ro`: `stm` / `empty-tx` as read-only transactions
//!   (`Pool::atomically_read`, what the benchmark's lookups do since
//!   stm14ro; run once with `ENGRAM_GATE_FENCE=exchange` to see what the
//!   GC gate's asymmetric fence saves);
//! - `raw-pool`: the lookup's loads alone (the bucket cell's next and key,
//!   then each overflow node's key and next, then the value: one cell per
//!   entry visited, `raw_get`) on the pool mapping: no lock word, no
//!   bounds check, no transaction — the layout's memory floor;
//! - `raw-pool-dep`: `raw-pool` with each key made to depend on the
//!   previous lookup's result, so one lookup's misses are in flight at a
//!   time (as in a transaction, whose long instruction stream keeps the
//!   processor from running ahead into the next lookup); `raw-head-dep`
//!   the bucket cell's load alone, serialised the same way;
//! - `raw-anon-4k` / `raw-anon-thp`: the same bytes copied to an anonymous
//!   mapping (pointers rebased), with `MADV_NOHUGEPAGE` / `MADV_HUGEPAGE`:
//!   what huge pages would change, where the pool mapping cannot have them
//!   (`shmem_enabled` is `never` on tmpfs here);
//! - `raw-dense`: a RomulusLog-like layout (8-byte bucket heads, 24-byte
//!   nodes of key, value, next, no headers or lock words, nodes in
//!   insertion order): what the layout's density changes.
//!
//! Not a benchmark of the engine (use `engram-bench stm` for that): a
//! throw-away measurement. Run:
//! `cargo run --release -p engram-bench --example hash_floor -- /dev/shm 2000000 5`
//! (directory, lookups per variant and round, rounds; a fourth argument
//! names the one variant to run, for `perf record`).

use engram::stm::collections::HashTable;
use engram::{CreateOptions, Durability, Pool};
use engram_bench::stm::floor::{self, rng, serial, Variant};
use std::hint::black_box;
use std::path::PathBuf;

const BUCKETS: u64 = 65_536;
const KEYS: u64 = 100_000;
const PREFILL: u64 = 50_000;

/// The table's hash for a `u64` key (`HashTable.v4`'s, engram's
/// `hash::stable_word_hash`: one multiply-rotate step, murmur3's
/// finaliser).
fn stable_hash(key: u64) -> u64 {
    let mut h = ((0x243f_6a88_85a3_08d3 ^ key).wrapping_mul(0x9e37_79b9_7f4a_7c15)).rotate_left(26);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Reads the u64 at `addr`.
fn rd(addr: u64) -> u64 {
    // SAFETY: every address read is inside a live mapping this program
    // holds (the open pool, or an anonymous copy of it), 8-aligned, and
    // nothing writes it during the measurement.
    unsafe { std::ptr::read_volatile(addr as *const u64) }
}

/// The address of bucket `i`'s cell in the array at `buckets`
/// (`HashTable::addr`): 32-byte cells from 16 bytes in.
fn bucket(buckets: u64, i: u64) -> u64 {
    buckets + 16 + i * 32
}

/// The loads of a lookup in the pool's layout, every address shifted by
/// `delta` (0 on the pool itself). A bucket is one cell: lock word at 0,
/// then key at 8, value at 16, next at 24 (0: empty; the array's address:
/// no overflow node; else the first overflow node's cell address); an
/// overflow node's cell is laid out the same (next 0 at the end).
fn raw_get(buckets: u64, delta: u64, key: u64) -> Option<u64> {
    let c = bucket(buckets, stable_hash(key) & (BUCKETS - 1)).wrapping_add(delta);
    let next = rd(c + 24);
    if next == 0 {
        return None;
    }
    if rd(c + 8) == key {
        return Some(rd(c + 16));
    }
    let mut n = if next == buckets { 0 } else { next };
    while n != 0 {
        let p = n.wrapping_add(delta);
        if rd(p + 8) == key {
            return Some(rd(p + 16));
        }
        n = rd(p + 24);
    }
    None
}

/// Every overflow node's address (walking the chains raw).
fn nodes(buckets: u64) -> Vec<u64> {
    let mut out = Vec::new();
    for i in 0..BUCKETS {
        let next = rd(bucket(buckets, i) + 24);
        let mut n = if next == buckets { 0 } else { next };
        while n != 0 {
            out.push(n);
            n = rd(n + 24);
        }
    }
    out
}

/// An anonymous mapping of `len` bytes, advised huge (`thp`) or not.
fn anon(len: usize, thp: bool) -> *mut u8 {
    // SAFETY: a fresh private anonymous mapping; checked for failure.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert!(p != libc::MAP_FAILED, "mmap failed");
    let advice = if thp { libc::MADV_HUGEPAGE } else { libc::MADV_NOHUGEPAGE };
    // SAFETY: advice on the mapping just made.
    let r = unsafe { libc::madvise(p, len, advice) };
    assert_eq!(r, 0, "madvise failed");
    p as *mut u8
}

/// A copy of the pool's bytes `lo..hi` (bucket array and nodes) in an
/// anonymous mapping, 2 MiB-aligned so huge pages can back it; returns
/// the delta to add to a pool address.
fn copy_anon(lo: u64, hi: u64, thp: bool) -> u64 {
    let lo = lo & !0xfff;
    let len = (hi - lo) as usize + (4 << 20);
    let base = anon(len, thp);
    let dst = ((base as u64 + (2 << 20) - 1) & !((2 << 20) - 1)) + (lo & ((2 << 20) - 1));
    // SAFETY: `lo..hi` lies in the open pool's mapping; `dst..dst + (hi -
    // lo)` inside the fresh mapping (`len` leaves 4 MiB for the alignment).
    unsafe { std::ptr::copy_nonoverlapping(lo as *const u8, dst as *mut u8, (hi - lo) as usize) };
    dst.wrapping_sub(lo)
}

/// The RomulusLog-like dense layout: 8-byte heads (node index + 1), nodes
/// of key, value, next index + 1.
struct Dense {
    heads: Vec<u64>,
    nodes: Vec<[u64; 3]>,
}

impl Dense {
    fn build(keys: &[u64]) -> Dense {
        let mut d = Dense { heads: vec![0; BUCKETS as usize], nodes: Vec::with_capacity(keys.len()) };
        for &k in keys {
            let i = (stable_hash(k) & (BUCKETS - 1)) as usize;
            d.nodes.push([k, k, d.heads[i]]);
            d.heads[i] = d.nodes.len() as u64;
        }
        d
    }
    fn get(&self, key: u64) -> Option<u64> {
        let mut n = black_box(&self.heads)[(stable_hash(key) & (BUCKETS - 1)) as usize];
        while n != 0 {
            let node = &self.nodes[n as usize - 1];
            if node[0] == key {
                return Some(node[1]);
            }
            n = node[2];
        }
        None
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "/dev/shm".into()));
    let ops: usize = args.next().map_or(2_000_000, |s| s.parse().expect("lookups per round"));
    let rounds: usize = args.next().map_or(5, |s| s.parse().expect("rounds"));
    // An optional variant name: run only that one (for perf record).
    let only = args.next();
    let path = dir.join(format!("hash_floor.{}.pool", std::process::id()));
    let opts = CreateOptions::new("engram_bench_stm").durability(Durability::Pmem).initial_size(256 << 20).overwrite();
    let pool = Pool::create(&path, opts).expect("create pool");
    let table = HashTable::<u64, u64>::root(&pool, "map", BUCKETS).expect("table");

    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut all: Vec<u64> = (0..KEYS).collect();
    for i in (1..all.len()).rev() {
        all.swap(i, (rng(&mut s) % (i as u64 + 1)) as usize);
    }
    let inserted = &all[..PREFILL as usize];
    for c in inserted.chunks(64) {
        pool.atomically(|tx| c.iter().try_for_each(|&k| table.insert(tx, k, k).map(drop))).expect("prefill");
    }
    pool.collect().expect("collect");
    let keys: Vec<u64> = (0..ops).map(|_| rng(&mut s) % KEYS).collect();

    let b = table.addr();
    let ns = nodes(b);
    let occupied = (0..BUCKETS).filter(|&i| rd(bucket(b, i) + 24) != 0).count();
    let (lo, hi) = (b.min(*ns.iter().min().unwrap()), bucket(b, BUCKETS).max(ns.iter().max().unwrap() + 48));
    let lines: std::collections::BTreeSet<u64> = ns.iter().map(|n| (n - 16) / 64).collect();
    let pages: std::collections::BTreeSet<u64> = ns.iter().map(|n| n / 4096).collect();
    println!(
        "table: buckets at {b:#x} ({} KiB, {occupied} with an inline entry), {} overflow nodes in {} lines and {} 4-KiB pages, spread over {:.1} MiB; nodes 64-byte aligned: {}",
        BUCKETS * 32 / 1024,
        ns.len(),
        lines.len(),
        pages.len(),
        (hi - lo) as f64 / (1 << 20) as f64,
        ns.iter().all(|n| (n - 16) % 64 == 0)
    );
    let d4k = copy_anon(lo, hi, false);
    let dthp = copy_anon(lo, hi, true);
    let dense = Dense::build(inserted);
    // The variants agree with the STM.
    for &k in keys.iter().take(10_000) {
        let want = pool.atomically(|tx| table.get(tx, &k)).expect("get");
        assert_eq!(raw_get(b, 0, k), want);
        assert_eq!(raw_get(b, d4k, k), want);
        assert_eq!(raw_get(b, dthp, k), want);
        assert_eq!(dense.get(k), want);
    }
    let thp = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    let anon_huge = thp.lines().find(|l| l.starts_with("AnonHugePages")).unwrap_or("AnonHugePages: ?").to_string();
    println!("{anon_huge}  (the THP copy's huge pages, if the kernel gave any)");

    let variants: Vec<Variant<'_>> = vec![
        ("stm", Box::new(|ks| ks.iter().map(|k| pool.atomically(|tx| table.get(tx, k)).unwrap().unwrap_or(0)).sum())),
        (
            "stm-batch",
            Box::new(|ks| {
                ks.chunks(1000)
                    .map(|c| pool.atomically(|tx| c.iter().try_fold(0u64, |a, k| Ok(a + table.get(tx, k)?.unwrap_or(0)))).unwrap())
                    .sum()
            }),
        ),
        ("empty-tx", Box::new(|ks| ks.iter().map(|&k| pool.atomically(|_| Ok(k)).unwrap()).sum())),
        ("ro", Box::new(|ks| ks.iter().map(|k| pool.atomically_read(|tx| table.get(tx, k)).unwrap().unwrap_or(0)).sum())),
        ("empty-ro", Box::new(|ks| ks.iter().map(|&k| pool.atomically_read(|_| Ok(k)).unwrap()).sum())),
        ("raw-pool", Box::new(|ks| ks.iter().map(|&k| raw_get(b, 0, k).unwrap_or(0)).sum())),
        ("raw-pool-dep", Box::new(|ks| serial(ks, |k| raw_get(b, 0, k)))),
        // The bucket cell's next word alone, serialised likewise.
        ("raw-head-dep", Box::new(|ks| serial(ks, |k| Some(rd(bucket(b, stable_hash(k) & (BUCKETS - 1)) + 24))))),
        (
            "raw-pool-xchg",
            Box::new(|ks| {
                // `raw-pool` with a locked exchange on a private word before
                // each lookup (as the GC gate's slot takes per transaction).
                let slot = std::sync::atomic::AtomicBool::new(false);
                ks.iter()
                    .map(|&k| {
                        slot.swap(true, std::sync::atomic::Ordering::SeqCst);
                        let v = raw_get(b, 0, k).unwrap_or(0);
                        slot.store(false, std::sync::atomic::Ordering::Release);
                        v
                    })
                    .sum()
            }),
        ),
        ("raw-anon-4k", Box::new(|ks| ks.iter().map(|&k| raw_get(b, d4k, k).unwrap_or(0)).sum())),
        ("raw-anon-thp", Box::new(|ks| ks.iter().map(|&k| raw_get(b, dthp, k).unwrap_or(0)).sum())),
        ("raw-dense", Box::new(|ks| ks.iter().map(|&k| dense.get(k).unwrap_or(0)).sum())),
    ];
    floor::run(variants, &keys, rounds, only.as_deref());
    drop(pool);
    let _ = std::fs::remove_file(&path);
}
