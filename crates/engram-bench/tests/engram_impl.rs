//! The Engram implementations compute the same values as the workload
//! definitions, in every durability mode, and report their persistence work.
//!
//! Keeps true: every pool lives under /dev/shm (or the temp dir) with a name
//! unique to this process and test, and is removed when the test ends.

use std::num::NonZeroU64;
use std::path::PathBuf;

use engram::Durability;
use engram_bench::engram_impl;
use engram_bench::workloads;

/// A pool path that is removed when dropped.
struct TempPool(PathBuf);

impl TempPool {
    fn new(test: &str) -> Self {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let path = dir.join(format!("engram-bench-impl-{}-{test}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        TempPool(path)
    }
}

impl Drop for TempPool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const MODES: [Durability; 3] = [Durability::Process, Durability::Pmem, Durability::Msync];

#[test]
fn binary_trees_counts_every_node() {
    for mode in MODES {
        let pool = TempPool::new(&format!("bt-{}", mode.name()));
        let run = engram_impl::binary_trees(&pool.0, 6, mode).expect("binary-trees");
        assert_eq!(run.value, workloads::binary_trees_node_count(6), "{mode:?}");
        // stretch + long-lived: 2 + 2 regions; 64 + 16 trees of 2 regions each.
        assert_eq!(run.regions, 4 + 2 * (64 + 16));
        if mode == Durability::Pmem {
            // The building and freeing regions log nothing: their new
            // objects' lines are listed, not flushed (`fresh.rs`), and the
            // next fence (the long-lived tree's regions) writes each listed
            // line back once, however often its slot was reused; so fewer
            // flushes than nodes' lines, and a few fences, not one per tree.
            assert!(run.flushes > 0 && run.flushes < run.value / 2, "{run:?}");
            assert!(run.fences > 0 && run.fences < 16, "{run:?}");
        }
    }
}

#[test]
fn nbody_matches_the_volatile_energy() {
    for mode in MODES {
        let pool = TempPool::new(&format!("nbody-{}", mode.name()));
        let run = engram_impl::nbody(&pool.0, 1000, mode).expect("n-body");
        assert!((run.value - workloads::nbody_run(1000)).abs() < 1e-12, "{mode:?}: {}", run.value);
        assert_eq!(run.regions, 1001);
        if mode == Durability::Process {
            assert_eq!((run.flushes, run.fences), (0, 0));
        } else {
            assert!(run.fences >= 1000, "{mode:?}: at least one fence per step: {run:?}");
        }
    }
}

#[test]
fn sps_matches_the_reference_checksum() {
    let seed = NonZeroU64::new(7).unwrap();
    for mode in MODES {
        let pool = TempPool::new(&format!("sps-{}", mode.name()));
        let run = engram_impl::sps(&pool.0, 1000, 5000, seed, mode).expect("sps");
        assert_eq!(run.value, workloads::sps_reference(1000, 5000, seed), "{mode:?}");
        assert_eq!(run.regions, 1);
    }
}

#[test]
fn sps_rejects_an_empty_array() {
    let pool = TempPool::new("sps-empty");
    assert!(engram_impl::sps(&pool.0, 0, 10, NonZeroU64::MIN, Durability::Process).is_err());
}
