//! Versions repeated across pools (issue 14): with `ClockStart::Pool`
//! every fresh pool's clock starts at 1, so two pools of one process hand
//! out the same version numbers at the same time. Nothing process-wide may
//! be keyed by a version (young-object records, redo records, thread logs,
//! the explorer's bookkeeping), so:
//!
//! - two pools whose clocks collide, committed to by two threads at once,
//!   each recover exactly their own commits after a crash, and keep going;
//! - the crash explorer's two-thread workloads (first commits linking their
//!   redo logs, young objects) and the single-thread first commits are
//!   crash consistent while another pool of the process commits the same
//!   version numbers beside them. `ENGRAM_CLOCK_ROUNDS=N` runs them N times
//!   (default 1; each run is one interleaving).
//!
//! Every test here sets `ClockStart::Pool` (process-wide: this file is its
//! own test binary, so no other suite's pools see it). Assertions are on
//! counts and values, never on times.

mod common;
use common::TempPool;
use engram::crashtest::{workload, Settings};
use engram::stm::{set_clock_start, ClockStart, PTVar};
use engram::{CreateOptions, Durability, OpenOptions, Pool};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const ACCOUNTS: usize = 4;
const START: u64 = 100;

/// A bank in one pool: accounts and a commit counter, all named roots.
struct Bank {
    accts: Vec<PTVar<u64>>,
    count: PTVar<u64>,
}

impl Bank {
    fn open(pool: &Pool) -> Bank {
        let accts = (0..ACCOUNTS).map(|i| pool.root(&format!("acct{i}"), || START).unwrap()).collect();
        Bank { accts, count: pool.root("count", || 0u64).unwrap() }
    }

    fn transfer(&self, pool: &Pool, i: u64) {
        let (from, to) = ((i as usize) % ACCOUNTS, (i as usize * 3 + 1) % ACCOUNTS);
        let to = if to == from { (to + 1) % ACCOUNTS } else { to };
        pool.atomically(|tx| {
            let amt = tx.read(&self.accts[from])?.min(i % 5 + 1);
            tx.modify(&self.accts[from], |x| x - amt)?;
            tx.modify(&self.accts[to], |x| x + amt)?;
            tx.modify(&self.count, |c| c + 1)
        })
        .unwrap();
    }

    /// (money, commits) as committed.
    fn state(&self, pool: &Pool) -> (u64, u64) {
        pool.atomically(|tx| {
            let mut money = 0;
            for a in &self.accts {
                money += tx.read(a)?;
            }
            Ok((money, tx.read(&self.count)?))
        })
        .unwrap()
    }

    /// The version of the counter's lock word.
    fn version(&self, pool: &Pool) -> u64 {
        pool.txn(|tx| tx.read(self.count.cell())).unwrap().word >> 16
    }
}

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("stm-clocks").durability(Durability::Process)).unwrap()
}

/// Two pools whose clocks hand out the same versions, two threads
/// committing to both at once (in opposite orders), then a crash of both:
/// each pool's recovery replays its own records only, every commit that
/// returned is there, and both take new commits after the reopen.
#[test]
fn two_pools_with_colliding_clocks_each_recover_their_own_commits() {
    set_clock_start(ClockStart::Pool);
    let (ta, tb) = (TempPool::new("clock-a"), TempPool::new("clock-b"));
    let (a, b) = (create(&ta), create(&tb));
    let (ba, bb) = (Bank::open(&a), Bank::open(&b));
    // The same commits on both: the same versions (the clocks collide).
    for i in 0..3 {
        ba.transfer(&a, i);
        bb.transfer(&b, i);
        assert_eq!(ba.version(&a), bb.version(&b), "the clocks do not collide: nothing is tested");
    }
    const PER: u64 = 200;
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (a, b, ba, bb) = (&a, &b, &ba, &bb);
            s.spawn(move || {
                for i in 0..PER {
                    let k = 1000 * (t + 1) + i;
                    if t == 0 {
                        ba.transfer(a, k);
                        bb.transfer(b, k);
                    } else {
                        bb.transfer(b, k);
                        ba.transfer(a, k);
                    }
                }
            });
        }
    });
    let want = 3 + 2 * PER;
    assert_eq!(ba.state(&a), (START * ACCOUNTS as u64, want));
    assert_eq!(bb.state(&b), (START * ACCOUNTS as u64, want));
    a.simulate_crash();
    b.simulate_crash();
    for t in [&ta, &tb] {
        let p = Pool::open(&t.0, OpenOptions::new("stm-clocks").durability(Durability::Process)).unwrap();
        let rep = p.open_report().stm.unwrap_or_default();
        // the threads' last records (and the main thread's) are retained
        assert!(rep.records > 0, "no redo record retained: {rep:?}");
        let bank = Bank::open(&p);
        assert_eq!(bank.state(&p), (START * ACCOUNTS as u64, want), "{}", t.0.display());
        bank.transfer(&p, 7);
        assert_eq!(bank.state(&p), (START * ACCOUNTS as u64, want + 1));
        p.check().unwrap();
        p.close().unwrap();
    }
}

/// The crash explorer's STM workloads while, beside each run, fresh pools
/// of the process commit one after another (each one's clock starts at 1,
/// so the process hands out the workload's small version numbers again
/// and again while it runs): every crash image is consistent.
#[test]
fn crash_explorer_with_colliding_clocks() {
    set_clock_start(ClockStart::Pool);
    let rounds: usize = std::env::var("ENGRAM_CLOCK_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let dir = TempPool::new("clock-explorer");
    let settings = Settings::moderate(&dir.0);
    let mut runs = 0;
    for round in 0..rounds {
        for name in ["mt-stm-first", "mt-stm", "mt-stm-young", "stm-first"] {
            let stop = AtomicBool::new(false);
            let beside = AtomicU64::new(0);
            let r = std::thread::scope(|s| {
                s.spawn(|| {
                    while !stop.load(Ordering::Acquire) {
                        let t = TempPool::new("clock-other");
                        let pool = create(&t);
                        let bank = Bank::open(&pool);
                        for i in 0..8 {
                            bank.transfer(&pool, i);
                            beside.fetch_add(1, Ordering::Relaxed);
                        }
                        assert_eq!(bank.state(&pool), (START * ACCOUNTS as u64, 8));
                        pool.close().unwrap();
                    }
                });
                let r = workload(name).unwrap().run(&settings, &mut |_, _| {});
                stop.store(true, Ordering::Release);
                r
            });
            let r = r.unwrap();
            println!("{name:<13} round {round}: {r} ({} commits beside)", beside.load(Ordering::Relaxed));
            for v in &r.violations {
                println!("  violation before event {} ({:?}): {} [{}]", v.event_index, v.fence, v.message, v.image);
            }
            assert!(r.violations.is_empty(), "{name}, round {round}: {r}");
            assert!(r.images_checked > 0, "{name}: explored nothing");
            runs += 1;
        }
    }
    println!("{runs} runs");
    let _ = std::fs::remove_dir_all(&dir.0);
}

/// The loop that found the adopted-log bug (docs/stm.md, "Versions
/// repeated across pools"; fixed): runs the workload `ENGRAM_LOOP_RUNS` times (default 50) on each
/// of two threads at once, with the per-pool clock start, and reports how
/// many runs had violations (printing them). Before the fix, about 1 run in
/// 230 failed; ignored by default (minutes): `cargo test -p engram --test stm_clocks
/// -- --ignored --nocapture mt_stm_first_loop`.
#[test]
#[ignore]
fn mt_stm_first_loop() {
    set_clock_start(ClockStart::Pool);
    let n: usize = std::env::var("ENGRAM_LOOP_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(50);
    let dir = TempPool::new("clock-loop");
    let bad = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..2 {
            let (dir, bad) = (&dir, &bad);
            s.spawn(move || {
                for i in 0..n {
                    let r = workload("mt-stm-first").unwrap().run(&Settings::moderate(&dir.0), &mut |_, _| {}).unwrap();
                    println!("run {t}.{i}: {r}");
                    for v in &r.violations {
                        println!("  violation before event {} ({:?}): {} [{}]", v.event_index, v.fence, v.message, v.image);
                    }
                    if !r.violations.is_empty() {
                        bad.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&dir.0);
    let bad = bad.into_inner();
    println!("{bad} of {} runs had violations", 2 * n);
    assert_eq!(bad, 0);
}
