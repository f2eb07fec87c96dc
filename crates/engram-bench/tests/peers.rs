//! Cross-checks the C peers (PMDK and malloc) against each other and against
//! the pure-Rust workload definitions.
//!
//! Keeps true: every pool lives under /dev/shm with a name unique to this
//! process and test, and is removed when the test ends, pass or fail.

use std::num::NonZeroU64;
use std::path::{Path, PathBuf};

use engram_bench::peers::{self, PeerError};
use engram_bench::workloads::{self, binary_trees_node_count};

/// A pool path that is removed when dropped.
struct TempPool(PathBuf);

impl TempPool {
    fn new(test: &str) -> Self {
        let name = format!("engram-bench-{}-{test}.pool", std::process::id());
        let path = Path::new("/dev/shm").join(name);
        let _ = std::fs::remove_file(&path);
        TempPool(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempPool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const DEPTH: u32 = 6;

#[test]
fn malloc_binary_trees_count_matches_formula() {
    let m = peers::malloc_binary_trees(DEPTH);
    assert_eq!(m.value, binary_trees_node_count(DEPTH));
    assert_eq!(peers::malloc_binary_trees(8).value, binary_trees_node_count(8));
}

#[test]
fn malloc_binary_trees_clamps_small_depths() {
    assert_eq!(peers::malloc_binary_trees(0).value, binary_trees_node_count(6));
}

#[test]
fn pmdk_binary_trees_tx_and_atomic_agree_with_formula() {
    let tx_pool = TempPool::new("bt-tx");
    let atomic_pool = TempPool::new("bt-atomic");
    let tx = peers::pmdk_binary_trees_tx(tx_pool.path(), DEPTH).expect("tx variant");
    let atomic = peers::pmdk_binary_trees_atomic(atomic_pool.path(), DEPTH).expect("atomic variant");
    assert_eq!(tx.value, binary_trees_node_count(DEPTH));
    assert_eq!(atomic.value, binary_trees_node_count(DEPTH));
    assert!(tx.nanos > 0 && atomic.nanos > 0);
}

#[test]
fn pmdk_binary_trees_reuses_an_existing_pool_file() {
    let pool = TempPool::new("bt-again");
    let first = peers::pmdk_binary_trees_tx(pool.path(), DEPTH).expect("first run");
    let second = peers::pmdk_binary_trees_tx(pool.path(), DEPTH).expect("second run");
    assert_eq!(first.value, second.value);
}

#[test]
fn rust_nbody_matches_c_volatile_and_pmdk() {
    let pool = TempPool::new("nbody");
    for steps in [0u64, 1, 1000] {
        let rust = workloads::nbody_run(steps);
        let c = peers::volatile_nbody(steps);
        let pmdk = peers::pmdk_nbody(pool.path(), steps).expect("pmdk n-body");
        assert!((rust - c).abs() < 1e-9, "steps {steps}: rust {rust} vs C {c}");
        assert!((rust - pmdk.value).abs() < 1e-9, "steps {steps}: rust {rust} vs pmdk {}", pmdk.value);
    }
}

#[test]
fn pmdk_sps_matches_rust_reference() {
    let pool = TempPool::new("sps");
    for seed in [1u64, 42, 0xDEAD_BEEF] {
        let seed = NonZeroU64::new(seed).unwrap();
        let expected = workloads::sps_reference(1000, 1000, seed);
        let got = peers::pmdk_sps(pool.path(), 1000, 1000, seed).expect("pmdk sps");
        assert_eq!(got.value, expected, "seed {seed}");
    }
}

#[test]
fn pmdk_sps_rejects_empty_array() {
    let pool = TempPool::new("sps-empty");
    let err = peers::pmdk_sps(pool.path(), 0, 10, NonZeroU64::MIN).unwrap_err();
    assert!(matches!(err, PeerError::InvalidArgument { .. }), "{err}");
}

#[test]
fn create_failure_reports_libpmemobj_message() {
    let path = Path::new("/nonexistent-dir-engram-bench/pool");
    let err = peers::pmdk_nbody(path, 1).unwrap_err();
    match &err {
        PeerError::Create { message, .. } => assert!(!message.is_empty(), "{err}"),
        other => panic!("expected Create, got {other}"),
    }
}

#[test]
fn path_with_nul_is_rejected() {
    use std::os::unix::ffi::OsStrExt;
    let path = Path::new(std::ffi::OsStr::from_bytes(b"/dev/shm/a\0b"));
    let err = peers::pmdk_nbody(path, 1).unwrap_err();
    assert!(matches!(err, PeerError::BadPath { .. }), "{err}");
}

#[test]
fn unremovable_old_pool_is_reported() {
    // A directory at the pool path cannot be unlinked (EISDIR).
    let pool = TempPool::new("unlink-dir");
    std::fs::create_dir(pool.path()).expect("create directory");
    let err = peers::pmdk_nbody(pool.path(), 1).unwrap_err();
    let _ = std::fs::remove_dir(pool.path());
    assert!(matches!(err, PeerError::Unlink { .. }), "{err}");
}
