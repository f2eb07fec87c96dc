//! Persistent STM under threads: invariants that must hold whatever the
//! interleaving, with every test bounded by a watchdog (a hang, such as a
//! lost `retry` wake-up or a starved transaction, fails instead of blocking
//! the suite).
//!
//! - a bank whose transactions move money between persistent and volatile
//!   accounts at once, checked by read-only auditors that must never see a
//!   broken total, with 4 and with 8 (oversubscribed) workers, then closed,
//!   reopened and counted again;
//! - `retry` wake-ups: a bounded producer/consumer queue (volatile items, a
//!   persistent count), every item consumed exactly once;
//! - `or_else` choosing between two queues;
//! - contention: a transaction that reads all 64 variables commits within a
//!   bound while three threads hammer short transfers (the engine runs a
//!   transaction that keeps losing serially);
//! - online GC (`Pool::collect`) called while transactions run.

mod common;
use common::TempPool;
use engram::stm::{PTVar, STx, StmResult, TVar};
use engram::{CreateOptions, Durability, OpenOptions, Pool};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Watchdog bound of each test body.
const BOUND: Duration = Duration::from_secs(60);

/// [`common::bounded`] with BOUND.
fn bounded<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    common::bounded(what, BOUND, f)
}

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("stm-stress").durability(Durability::Process)).unwrap()
}

fn reopen(t: &TempPool) -> Pool {
    Pool::open(&t.0, OpenOptions::new("stm-stress").durability(Durability::Process)).unwrap()
}

/// A small deterministic generator per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn accounts(pool: &Pool, prefix: &str, n: usize, init: u64) -> Arc<Vec<PTVar<u64>>> {
    Arc::new((0..n).map(|i| pool.root(&format!("{prefix}{i}"), || init).unwrap()).collect())
}

fn sum(tx: &STx<'_>, vars: &[PTVar<u64>]) -> StmResult<u64> {
    vars.iter().map(|v| tx.read(v)).sum()
}

// ----- bank: persistent and volatile accounts in the same transactions -------

const ACCTS: usize = 16;
const START: u64 = 1000;
const TOTAL: u64 = ACCTS as u64 * START;

fn mixed_bank(workers: u64, per_worker: u64) {
    let t = TempPool::new("stm-stress-bank");
    let pool = create(&t);
    let p = accounts(&pool, "p", ACCTS, START);
    let v: Arc<Vec<TVar<u64>>> = Arc::new((0..ACCTS).map(|_| TVar::new(START)).collect());
    let n: (PTVar<u64>, TVar<u64>) = (pool.root("commits", || 0).unwrap(), TVar::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let audits = Arc::new(AtomicU64::new(0));
    let auditors: Vec<_> = (0..2)
        .map(|_| {
            let (pool, p, v, n, done, audits) = (pool.clone(), p.clone(), v.clone(), n.clone(), done.clone(), audits.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Acquire) {
                    let (ps, vs, np, nv) = pool
                        .atomically(|tx| {
                            let vs = v.iter().map(|x| tx.read(x)).sum::<StmResult<u64>>()?;
                            Ok((sum(tx, &p)?, vs, tx.read(&n.0)?, tx.read(&n.1)?))
                        })
                        .unwrap();
                    assert_eq!((ps, vs), (TOTAL, TOTAL), "an auditor saw a broken total");
                    assert_eq!(np, nv, "an auditor saw the persistent and volatile halves of a commit apart");
                    audits.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let hs: Vec<_> = (0..workers)
        .map(|w| {
            let (pool, p, v, n) = (pool.clone(), p.clone(), v.clone(), n.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(w * 7919 + 13);
                for _ in 0..per_worker {
                    let (a, b) = (rng.next(ACCTS as u64) as usize, rng.next(ACCTS as u64) as usize);
                    let (c, d) = (rng.next(ACCTS as u64) as usize, rng.next(ACCTS as u64) as usize);
                    let want = rng.next(40);
                    pool.atomically(|tx| {
                        let x = tx.read(&p[a])?.min(want);
                        tx.write(&p[a], tx.read(&p[a])? - x)?;
                        tx.write(&p[b], tx.read(&p[b])? + x)?;
                        let y = tx.read(&v[c])?.min(want);
                        tx.write(&v[c], tx.read(&v[c])? - y)?;
                        tx.write(&v[d], tx.read(&v[d])? + y)?;
                        // one commit counter of each kind: always equal
                        tx.write(&n.0, tx.read(&n.0)? + 1)?;
                        tx.write(&n.1, tx.read(&n.1)? + 1)
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    done.store(true, Ordering::Release);
    for a in auditors {
        a.join().unwrap();
    }
    assert!(audits.load(Ordering::Relaxed) > 0, "the auditors never ran");
    println!("{workers} workers: {} audits", audits.load(Ordering::Relaxed));
    let before: Vec<u64> = pool.atomically(|tx| p.iter().map(|x| tx.read(x)).collect()).unwrap();
    assert_eq!(before.iter().sum::<u64>(), TOTAL);
    assert_eq!(v.iter().map(TVar::load).sum::<u64>(), TOTAL);
    let commits = pool.atomically(|tx| tx.read(&n.0)).unwrap();
    assert_eq!((commits, n.1.load()), (workers * per_worker, workers * per_worker));
    drop(p);
    pool.close().unwrap();
    // the persistent half survives the close, account by account
    let pool = reopen(&t);
    pool.check().unwrap();
    let p = accounts(&pool, "p", ACCTS, 0);
    let after: Vec<u64> = pool.atomically(|tx| p.iter().map(|x| tx.read(x)).collect()).unwrap();
    assert_eq!(after, before);
    pool.close().unwrap();
}

#[test]
fn mixed_bank_with_four_workers_and_auditors() {
    bounded("mixed bank, 4 workers", || mixed_bank(4, 20_000));
}

#[test]
fn mixed_bank_with_eight_workers_oversubscribed() {
    bounded("mixed bank, 8 workers", || mixed_bank(8, 10_000));
}

// ----- retry: a bounded producer/consumer queue ------------------------------

/// A queue of volatile items whose length is also kept in a persistent
/// variable (the two change together or not at all).
#[derive(Clone)]
struct Queue {
    items: TVar<Vec<u64>>,
    len: PTVar<u64>,
}

const CAP: usize = 4;

impl Queue {
    fn new(pool: &Pool, name: &str) -> Queue {
        Queue { items: TVar::new(Vec::new()), len: pool.root(name, || 0u64).unwrap() }
    }

    /// Appends `x`, retrying while the queue is full.
    fn push(&self, tx: &STx<'_>, x: u64) -> StmResult<()> {
        let mut items = tx.read(&self.items)?;
        if items.len() >= CAP {
            return tx.retry();
        }
        items.push(x);
        tx.write(&self.len, items.len() as u64)?;
        tx.write(&self.items, items)
    }

    /// Takes the oldest item, retrying while the queue is empty.
    fn take(&self, tx: &STx<'_>) -> StmResult<u64> {
        let mut items = tx.read(&self.items)?;
        if tx.read(&self.len)? != items.len() as u64 {
            panic!("queue length {} persisted for {} items", tx.read(&self.len)?, items.len());
        }
        if items.is_empty() {
            return tx.retry();
        }
        let x = items.remove(0);
        tx.write(&self.len, items.len() as u64)?;
        tx.write(&self.items, items).map(|_| x)
    }
}

/// Every id in `got` exactly once, and nothing else.
fn exactly_once(mut got: Vec<u64>, mut want: Vec<u64>) {
    got.sort_unstable();
    want.sort_unstable();
    let dups = got.windows(2).filter(|w| w[0] == w[1]).count();
    assert_eq!(dups, 0, "items consumed twice");
    assert_eq!(got.len(), want.len(), "items lost");
    assert_eq!(got, want);
}

#[test]
fn retry_wakes_producers_and_consumers() {
    bounded("producer/consumer", || {
        let t = TempPool::new("stm-stress-queue");
        let pool = create(&t);
        let q = Queue::new(&pool, "q");
        let taken: PTVar<u64> = pool.root("taken", || 0).unwrap();
        const PER: u64 = 20_000;
        let producers: Vec<_> = (0..2u64)
            .map(|p| {
                let (pool, q) = (pool.clone(), q.clone());
                std::thread::spawn(move || {
                    for i in 0..PER {
                        pool.atomically(|tx| q.push(tx, p * 1_000_000 + i)).unwrap();
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let (pool, q) = (pool.clone(), q.clone());
                std::thread::spawn(move || {
                    (0..PER)
                        .map(|_| {
                            pool.atomically(|tx| {
                                let x = q.take(tx)?;
                                tx.write(&taken, tx.read(&taken)? + 1).map(|_| x)
                            })
                            .unwrap()
                        })
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        for h in producers {
            h.join().unwrap();
        }
        let got: Vec<u64> = consumers.into_iter().flat_map(|h| h.join().unwrap()).collect();
        exactly_once(got, (0..2).flat_map(|p| (0..PER).map(move |i| p * 1_000_000 + i)).collect());
        let (len, n) = pool.atomically(|tx| Ok((tx.read(&q.len)?, tx.read(&taken)?))).unwrap();
        assert_eq!((len, n), (0, 2 * PER));
        pool.close().unwrap();
    });
}

#[test]
fn or_else_takes_from_whichever_queue_has_items() {
    bounded("or_else between two queues", || {
        let t = TempPool::new("stm-stress-orelse");
        let pool = create(&t);
        let (a, b) = (Queue::new(&pool, "a"), Queue::new(&pool, "b"));
        let left: PTVar<u64> = pool.root("left", || 0).unwrap();
        const PER: u64 = 10_000;
        pool.atomically(|tx| tx.write(&left, 2 * PER)).unwrap();
        let producers: Vec<_> = [(a.clone(), 0u64, 0u64), (b.clone(), 1, 3)]
            .into_iter()
            .map(|(q, id, pause_every)| {
                let pool = pool.clone();
                std::thread::spawn(move || {
                    for i in 0..PER {
                        pool.atomically(|tx| q.push(tx, id * 1_000_000 + i)).unwrap();
                        if pause_every > 0 && i % pause_every == 0 {
                            std::thread::sleep(Duration::from_micros(200));
                        }
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..3)
            .map(|_| {
                let (pool, a, b) = (pool.clone(), a.clone(), b.clone());
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    loop {
                        // None once every item is taken; blocks while both are empty
                        let x = pool
                            .atomically(|tx| {
                                let n = tx.read(&left)?;
                                if n == 0 {
                                    return Ok(None);
                                }
                                let x = tx.or_else(|tx| a.take(tx), |tx| b.take(tx))?;
                                tx.write(&left, n - 1).map(|_| Some(x))
                            })
                            .unwrap();
                        match x {
                            Some(x) => got.push(x),
                            None => return got,
                        }
                    }
                })
            })
            .collect();
        for h in producers {
            h.join().unwrap();
        }
        let got: Vec<u64> = consumers.into_iter().flat_map(|h| h.join().unwrap()).collect();
        exactly_once(got, (0..2).flat_map(|q| (0..PER).map(move |i| q * 1_000_000 + i)).collect());
        let lens = pool.atomically(|tx| Ok((tx.read(&a.len)?, tx.read(&b.len)?, tx.read(&left)?))).unwrap();
        assert_eq!(lens, (0, 0, 0));
        pool.close().unwrap();
    });
}

// ----- contention: a long transaction against short ones ----------------------

#[test]
fn a_long_transaction_commits_while_short_ones_hammer() {
    bounded("long transaction under contention", || {
        let t = TempPool::new("stm-stress-long");
        let pool = create(&t);
        let vars = accounts(&pool, "x", 64, 100);
        let snapshot: PTVar<u64> = pool.root("snapshot", || 0).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let shorts = Arc::new(AtomicU64::new(0));
        let hammers: Vec<_> = (0..3u64)
            .map(|w| {
                let (pool, vars, stop, shorts) = (pool.clone(), vars.clone(), stop.clone(), shorts.clone());
                std::thread::spawn(move || {
                    let mut rng = Rng(w + 1);
                    while !stop.load(Ordering::Acquire) {
                        let (a, b) = (rng.next(64) as usize, rng.next(64) as usize);
                        pool.atomically(|tx| {
                            let x = tx.read(&vars[a])?.min(3);
                            tx.write(&vars[a], tx.read(&vars[a])? - x)?;
                            tx.write(&vars[b], tx.read(&vars[b])? + x)
                        })
                        .unwrap();
                        shorts.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        // let the hammering start
        while shorts.load(Ordering::Relaxed) < 200 {
            std::thread::yield_now();
        }
        const ROUNDS: u64 = 20;
        let (mut worst, mut most_runs) = (Duration::ZERO, 0);
        for round in 1..=ROUNDS {
            let runs = AtomicU64::new(0);
            let t0 = Instant::now();
            let total = pool
                .atomically(|tx| {
                    runs.fetch_add(1, Ordering::Relaxed);
                    let mut s = 0;
                    for (i, v) in vars.iter().enumerate() {
                        s += tx.read(v)?;
                        if i % 4 == 0 {
                            std::thread::yield_now(); // widen the window for conflicts
                        }
                    }
                    tx.write(&snapshot, s + round).map(|_| s)
                })
                .unwrap();
            worst = worst.max(t0.elapsed());
            most_runs = most_runs.max(runs.load(Ordering::Relaxed));
            assert_eq!(total, 6400, "the long transaction saw a broken total");
            assert!(t0.elapsed() < Duration::from_secs(10), "round {round}: {:?} and {} runs", t0.elapsed(), runs.load(Ordering::Relaxed));
        }
        stop.store(true, Ordering::Release);
        for h in hammers {
            h.join().unwrap();
        }
        let (s, snap) = pool.atomically(|tx| Ok((sum(tx, &vars)?, tx.read(&snapshot)?))).unwrap();
        assert_eq!((s, snap), (6400, 6400 + ROUNDS));
        println!("long transaction: worst {worst:?}, at most {most_runs} runs; {} short commits", shorts.load(Ordering::Relaxed));
        pool.close().unwrap();
    });
}

// ----- online GC while transactions run -----------------------------------------

#[test]
fn collect_runs_between_transactions() {
    bounded("collect during transactions", || {
        let t = TempPool::new("stm-stress-gc");
        let pool = create(&t);
        let p = accounts(&pool, "g", ACCTS, START);
        let note: PTVar<String> = pool.root("note", || "transfer 0".to_string()).unwrap();
        pool.collect().unwrap();
        let base = pool.info().live_objects;
        let done = Arc::new(AtomicBool::new(false));
        let gc = {
            let (pool, p, done) = (pool.clone(), p.clone(), done.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !done.load(Ordering::Acquire) || n < 3 {
                    pool.collect().unwrap_or_else(|e| panic!("collection {}: {e}", n + 1));
                    n += 1;
                    // right after a collection: totals intact, the note readable
                    let (s, text) = pool
                        .atomically(|tx| Ok((sum(tx, &p)?, tx.read(&note)?.as_str(tx)?.to_string())))
                        .unwrap_or_else(|e| panic!("reading after collection {n}: {e}"));
                    assert_eq!(s, TOTAL, "total broken after collection {n}");
                    assert!(text.starts_with("transfer "), "note {text:?} after collection {n}");
                    std::thread::sleep(Duration::from_micros(300));
                }
                n
            })
        };
        let workers: Vec<_> = (0..3u64)
            .map(|w| {
                let (pool, p) = (pool.clone(), p.clone());
                std::thread::spawn(move || {
                    let mut rng = Rng(w + 99);
                    for i in 0..5000 {
                        let (a, b) = (rng.next(ACCTS as u64) as usize, rng.next(ACCTS as u64) as usize);
                        pool.atomically(|tx| {
                            // the previous note must be intact: GC never frees what a
                            // running transaction can still reach
                            let old = tx.read(&note)?.as_str(tx)?.to_string();
                            assert!(old.starts_with("transfer "), "note {old:?}");
                            let x = tx.read(&p[a])?.min(5);
                            tx.write(&p[a], tx.read(&p[a])? - x)?;
                            tx.write(&p[b], tx.read(&p[b])? + x)?;
                            tx.write(&note, format!("transfer {i} by {w}: {x} from {a} to {b}"))
                        })
                        .unwrap_or_else(|e| panic!("worker {w}, transfer {i}: {e}"));
                    }
                })
            })
            .collect();
        for h in workers {
            h.join().unwrap();
        }
        done.store(true, Ordering::Release);
        let collections = gc.join().unwrap();
        assert!(collections >= 3);
        println!("{collections} collections during the run");
        pool.collect().unwrap();
        // old notes were freed: what is left is the live note, the thread logs
        // and their table (15000 notes were written)
        let live = pool.info().live_objects;
        assert!(live <= base + 16, "{live} objects live after the final collection, {base} before the run");
        pool.check().unwrap();
        drop(p);
        pool.close().unwrap();
        let pool = reopen(&t);
        let p = accounts(&pool, "g", ACCTS, 0);
        assert_eq!(pool.atomically(|tx| sum(tx, &p)).unwrap(), TOTAL);
        pool.close().unwrap();
    });
}
