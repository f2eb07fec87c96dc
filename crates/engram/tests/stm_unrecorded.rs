//! Reads without read-set entries (TL2's read-only mode, `stm/engine/tx.rs`):
//! an attempt reads without recording until its first write. These tests
//! make another thread commit in the middle of such an attempt and check
//! that the outcome is still serialisable: the snapshot is never extended
//! over unrecorded reads, an update whose unrecorded reads may be stale
//! does not commit, and a retry after unrecorded reads still waits and
//! wakes. Each runs the body a counted number of times.

mod common;
use common::TempPool;
use engram::stm::PTVar;
use engram::{CreateOptions, Durability, Pool};
use std::sync::mpsc;

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("stm").durability(Durability::Process)).unwrap()
}

/// Runs `other` on another thread and waits for it (a commit in the middle
/// of the caller's attempt).
fn on_other_thread(other: impl FnOnce() + Send) {
    std::thread::scope(|s| {
        s.spawn(other).join().unwrap();
    });
}

#[test]
fn an_update_after_a_stale_unrecorded_read_runs_again() {
    let t = TempPool::new("stm-unrec-update");
    let pool = create(&t);
    let a: PTVar<u64> = pool.root("a", || 0).unwrap();
    let b: PTVar<u64> = pool.root("b", || 0).unwrap();
    // Warm up: the first commit chooses the HTM backend (before it every
    // attempt records its reads).
    pool.atomically(|tx| tx.write(&b, 0)).unwrap();
    let mut runs = 0;
    pool.atomically(|tx| {
        runs += 1;
        let x = tx.read(&a)?; // unrecorded: nothing written yet
        if runs == 1 {
            on_other_thread(|| pool.atomically(|tx| tx.modify(&a, |v| v + 1)).unwrap());
        }
        tx.write(&b, x)
    })
    .unwrap();
    let (x, y) = pool.atomically(|tx| Ok((tx.read(&a)?, tx.read(&b)?))).unwrap();
    assert_eq!((x, y), (1, 1), "b must copy a's committed value, not the stale one");
    assert_eq!(runs, 2, "the stale attempt ran again");
    pool.close().unwrap();
}

#[test]
fn a_read_only_snapshot_is_not_extended_over_unrecorded_reads() {
    let t = TempPool::new("stm-unrec-ro");
    let pool = create(&t);
    let ((x, y), runs) = read_across_a_commit(&pool, None);
    let a: PTVar<u64> = pool.root("a", || 0).unwrap();
    assert_eq!((x, y), (1, 1), "a and b come from one snapshot");
    assert_eq!(runs, 2);
    // The second attempt recorded its reads, so a change after them can be
    // checked by extension: here nothing changed, and a read-only attempt
    // of a quiet pool runs once.
    let mut runs = 0;
    pool.atomically(|tx| {
        runs += 1;
        tx.read(&a).map(|_| ())
    })
    .unwrap();
    assert_eq!(runs, 1);
    pool.close().unwrap();
}

/// An attempt reads `a`, another thread commits `a` and `b` together, the
/// attempt reads `b` (its version newer than the snapshot: the inline
/// read path, `STx::stable_words`, hands it to the full read, which runs
/// the attempt again). Returns the pair returned and the runs. `plant`: a
/// bug planted for the call.
fn read_across_a_commit(pool: &Pool, plant: Option<&str>) -> ((u64, u64), u32) {
    let a: PTVar<u64> = pool.root("a", || 0).unwrap();
    let b: PTVar<u64> = pool.root("b", || 0).unwrap();
    // (a commit first: it chooses the HTM backend, before which every
    // attempt records its reads; b keeps its value)
    pool.atomically(|tx| tx.modify(&b, |v| v)).unwrap();
    if let Some(bug) = plant {
        engram::failpoint::plant(bug);
    }
    let mut runs = 0;
    let r = pool
        .atomically(|tx| {
            runs += 1;
            let x = tx.read(&a)?;
            if runs == 1 {
                on_other_thread(|| {
                    pool.atomically(|tx| {
                        tx.modify(&a, |v| v + 1)?;
                        tx.modify(&b, |v| v + 1)
                    })
                    .unwrap()
                });
            }
            Ok((x, tx.read(&b)?))
        })
        .unwrap();
    engram::failpoint::disarm_all();
    (r, runs)
}

/// The inline read path leaves a version newer than the snapshot to the
/// full read: the two reads come from one snapshot. With the planted
/// `stm.fast_read_ignores_snapshot` (the inline path takes any unlocked
/// version) the attempt returns half of the other thread's commit.
#[test]
fn the_inline_read_path_keeps_the_snapshot() {
    let t = TempPool::new("stm-unrec-inline");
    let pool = create(&t);
    assert_eq!(read_across_a_commit(&pool, None), ((1, 1), 2));
    let (pair, runs) = read_across_a_commit(&pool, Some("stm.fast_read_ignores_snapshot"));
    assert_eq!((pair, runs), ((1, 2), 1), "the planted bug reads a from before the commit, b from after");
    pool.close().unwrap();
}

#[test]
fn a_retry_after_unrecorded_reads_still_waits_and_wakes() {
    let t = TempPool::new("stm-unrec-retry");
    let pool = create(&t);
    let a: PTVar<u64> = pool.root("a", || 0).unwrap();
    pool.atomically(|tx| tx.write(&a, 0)).unwrap();
    let (go, wait) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let before = engram::stm::stats().retries;
            let mut told = false;
            let v = pool
                .atomically(|tx| {
                    let x = tx.read(&a)?;
                    if x == 0 {
                        if !told {
                            told = true;
                            go.send(()).unwrap();
                        }
                        return tx.retry();
                    }
                    Ok(x)
                })
                .unwrap();
            (v, engram::stm::stats().retries - before)
        });
        wait.recv().unwrap();
        pool.atomically(|tx| tx.write(&a, 7)).unwrap();
        let (v, retries) = waiter.join().unwrap();
        assert_eq!(v, 7);
        assert!(retries <= 1, "waited {retries} times for one change");
    });
    pool.close().unwrap();
}

/// One increment of `a` by 10 across another thread's increment by 1,
/// read before its first write (`recorded` false: an unrecorded read) or
/// after it (a recorded one, validated at commit). Returns `a` after both
/// and how many times the body ran. The write set is one plain pool value:
/// the lean commit (`stm/engine/lean.rs`).
fn lost_update(pool: &Pool, recorded: bool, plant: Option<&str>) -> (u64, u32) {
    let a: PTVar<u64> = pool.root("a", || 0).unwrap();
    let b: PTVar<u64> = pool.root("b", || 0).unwrap();
    pool.atomically(|tx| tx.write(&a, 0)).unwrap();
    if let Some(bug) = plant {
        engram::failpoint::plant(bug);
    }
    let mut runs = 0;
    pool.atomically(|tx| {
        runs += 1;
        if recorded {
            tx.write(&b, runs as u64)?;
        }
        let x = tx.read(&a)?;
        if runs == 1 {
            on_other_thread(|| pool.atomically(|tx| tx.modify(&a, |v| v + 1)).unwrap());
        }
        tx.write(&a, x + 10)
    })
    .unwrap();
    engram::failpoint::disarm_all();
    (pool.atomically(|tx| tx.read(&a)).unwrap(), runs)
}

/// The lean commit validates (or, with unrecorded reads, refuses) a read
/// another thread's commit made stale, as the general path does: the
/// attempt runs again and both increments land. With the planted
/// `stm.lean_skips_validation` (the lean path takes every read as still
/// valid) the first attempt commits over the other's increment.
#[test]
fn a_lean_commit_validates_its_reads() {
    let t = TempPool::new("stm-unrec-lean");
    let pool = create(&t);
    for recorded in [false, true] {
        assert_eq!(lost_update(&pool, recorded, None), (11, 2), "recorded: {recorded}");
        let lost = lost_update(&pool, recorded, Some("stm.lean_skips_validation"));
        assert_eq!(lost, (10, 1), "recorded: {recorded}: the planted bug loses the other increment");
    }
    pool.close().unwrap();
}

/// Hardware commits are armed only when an HTM runtime was asked for
/// before the process's first commit, on an RTM machine as on any other
/// (`stm/runtime.rs`): armed, the software commit gives up the read-set
/// skip, unrecorded reads and the lean commit that the tests above
/// exercise, so RTM alone must not arm them. Nothing in this process asks
/// for an HTM runtime; asking after the first commit is a clear error.
#[test]
fn rtm_alone_does_not_arm_hardware_commits() {
    use engram::stm::runtime::{self, Runtime};
    if std::env::var_os("ENGRAM_STM_RUNTIME").is_some() {
        println!("skipped: ENGRAM_STM_RUNTIME is set, so the process asked for a runtime");
        return;
    }
    let t = TempPool::new("stm-unrec-unarmed");
    let pool = create(&t);
    let a: PTVar<u64> = pool.root("a", || 0).unwrap();
    pool.atomically(|tx| tx.write(&a, 1)).unwrap();
    let backend = runtime::backend().name();
    assert!(!runtime::htm_armed(), "the {backend} backend armed hardware commits nobody asked for");
    let e = runtime::set_thread_runtime(Some(Runtime::FineHtm)).unwrap_err();
    assert!(e.to_string().contains("first commit"), "{e}");
    assert_eq!(runtime::current(), Runtime::Fine);
    pool.close().unwrap();
}
