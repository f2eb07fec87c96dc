//! The recovery GC on a big heap (issue 8): not run by default.
//!
//! `gc_bench_build` creates a pool at `$ENGRAM_GC_BENCH_POOL` holding a
//! `PHashMap<u64, u64>` of `$ENGRAM_GC_BENCH_N` entries (default 1,000,000:
//! one small node object each, plus the bucket array) and some garbage,
//! then abandons it as a crash would. `gc_bench_open` opens it (recovery),
//! reads one existing key, and prints the time from open to that read.
//! Run the open under `perf stat -e task-clock` / `perf record` (see
//! docs/gc.md). Each open recovers again only if the pool is crashed again:
//! `gc_bench_open` abandons the pool after the read, so it can be repeated.

use engram::collections::PHashMap;
use engram::{CreateOptions, Durability, OpenOptions, Pool, RecoveryGc};
use std::path::PathBuf;

fn pool_path() -> PathBuf {
    std::env::var_os("ENGRAM_GC_BENCH_POOL").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/dev/shm/engram-gc-bench.pool"))
}

fn entries() -> u64 {
    std::env::var("ENGRAM_GC_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000)
}

#[test]
#[ignore]
fn gc_bench_build() {
    let path = pool_path();
    let _ = std::fs::remove_file(&path);
    let pool = Pool::create(&path, CreateOptions::new("gcbench").durability(Durability::Process).check_pointers(false)).unwrap();
    let n = entries();
    pool.txn(|tx| PHashMap::<u64, u64>::new(tx)?.set_root(tx, "map")).unwrap();
    let batch = 10_000;
    for start in (0..n).step_by(batch) {
        pool.txn(|tx| {
            let m = PHashMap::<u64, u64>::from_root(tx, "map")?.expect("map");
            for k in start..(start + batch as u64).min(n) {
                m.insert(tx, k, k * 3)?;
                // one unlinked object per 10 keys: garbage after the crash
                if k % 10 == 0 {
                    tx.alloc(k)?;
                }
            }
            Ok::<_, engram::Error>(())
        })
        .unwrap();
    }
    eprintln!("built {n} entries at {}", path.display());
    pool.simulate_crash();
}

/// `ENGRAM_GC_BENCH_MODE`: `eager` (default) or `deferred`; deferred
/// learns the written pages from the regions (`region_write_cards`) unless
/// `ENGRAM_GC_BENCH_SOFT_DIRTY=1` (a kernel with soft-dirty bits).
#[test]
#[ignore]
fn gc_bench_open() {
    let path = pool_path();
    let deferred = std::env::var("ENGRAM_GC_BENCH_MODE").as_deref() == Ok("deferred");
    let mut o = OpenOptions::new("gcbench").durability(Durability::Process).check_pointers(false);
    if deferred {
        o = o.recovery_gc(RecoveryGc::Deferred);
        o.region_write_cards = std::env::var("ENGRAM_GC_BENCH_SOFT_DIRTY").as_deref() != Ok("1");
    } else {
        o = o.recovery_gc(RecoveryGc::Eager);
    }
    let t = std::time::Instant::now();
    let pool = Pool::open(&path, o).unwrap();
    let opened = t.elapsed();
    let v = pool.txn(|tx| PHashMap::<u64, u64>::from_root(tx, "map")?.expect("map").get(tx, &7)).unwrap();
    let first = t.elapsed();
    assert_eq!(v, Some(21));
    // the program keeps writing while the GC runs: 1000 regions of 10 updates
    for i in 0..1000u64 {
        pool.txn(|tx| {
            let m = PHashMap::<u64, u64>::from_root(tx, "map")?.expect("map");
            for k in 0..10 {
                let key = (i * 7919 + k * 104_729) % entries();
                m.insert(tx, key, key * 3)?;
            }
            Ok::<_, engram::Error>(())
        })
        .unwrap();
    }
    let st = pool.wait_recovery_gc().unwrap();
    eprintln!(
        "mode {}: open {:?}, first read {:?}; deferred: {}; status {:?}",
        if deferred { "deferred" } else { "eager" },
        opened,
        first,
        pool.open_report().deferred_gc,
        st
    );
    pool.simulate_crash();
}
