//! The GC gate as the STM takes it (`pool/gate.rs`): an attempt holds the
//! gate through its thread's own slot, not the shared lock, and an online
//! GC (`Pool::collect`) must still wait for every attempt in flight, and
//! start once they are done. Counts and flags only, no timing.

mod common;
use common::TempPool;
use engram::stm::PTVar;
use engram::{CreateOptions, Durability, Pool};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("stm").durability(Durability::Process)).unwrap()
}

#[test]
fn collect_waits_for_an_attempt_in_flight() {
    let t = TempPool::new("stm-gate-wait");
    let pool = create(&t);
    let a: PTVar<u64> = pool.root("a", || 7).unwrap();
    let (calling, done) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|s| {
        let mut runs = 0;
        pool.atomically(|tx| {
            runs += 1;
            if runs == 1 {
                s.spawn(|| {
                    calling.store(true, Ordering::SeqCst);
                    pool.collect().unwrap();
                    done.store(true, Ordering::SeqCst);
                });
                while !calling.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                // Give the collector every chance to get in (it must not).
                for _ in 0..2000 {
                    std::thread::yield_now();
                    assert!(!done.load(Ordering::SeqCst), "collect ran while a transaction was in flight");
                }
            }
            tx.read(&a)
        })
        .unwrap();
    });
    assert!(done.load(Ordering::SeqCst));
    assert_eq!(pool.atomically(|tx| tx.read(&a)).unwrap(), 7);
}

#[test]
fn transactions_and_collections_interleave_on_two_threads() {
    let t = TempPool::new("stm-gate-mix");
    let pool = create(&t);
    let a: PTVar<u64> = pool.root("a", || 0).unwrap();
    let stop = AtomicBool::new(false);
    let collections = AtomicU64::new(0);
    let commits = std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                pool.collect().unwrap();
                collections.fetch_add(1, Ordering::Relaxed);
            }
        });
        let mut commits = 0u64;
        while commits < 2000 || collections.load(Ordering::Relaxed) < 20 {
            pool.atomically(|tx| {
                let x = tx.read(&a)?;
                tx.write(&a, x + 1)
            })
            .unwrap();
            commits += 1;
        }
        stop.store(true, Ordering::Relaxed);
        commits
    });
    assert_eq!(pool.atomically(|tx| tx.read(&a)).unwrap(), commits);
}
