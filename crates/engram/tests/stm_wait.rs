//! The STM's `retry` wait list (engram::stm::wait) in both wake-up modes,
//! Bloom filters (the hybrid TM's) and precise watch sets, on volatile
//! `TVar`s and persistent `PTVar`s:
//!
//! - no lost wake-up: producers and consumers over two bounded queues (one
//!   volatile, one persistent), consumers choosing with `or_else`, both
//!   sides blocking in `retry`, with 4 and 8 threads: every item is consumed
//!   exactly once, every blocked transaction eventually runs, and no wait
//!   had to be rescued by the safety-net timeout (which is set long, so only
//!   a lost wake-up could trigger it);
//! - false wake-ups: one waiter on a flag while commits write 1,024 other
//!   variables each: in Bloom mode their filters collide with the waiter's
//!   (>0 false wake-ups), in precise mode none is delivered at all (only
//!   the flag's commit wakes it: exactly one wake-up, zero false).
//!
//! Assertions are on counts, never on times. The mode and the counters are
//! per process, so the tests here run one at a time (a lock), and this file
//! is its own test binary. Every body runs under a watchdog: a hang fails.

mod common;
use common::TempPool;
use engram::stm::wait::{self, WakeStats, WatchMode};
use engram::stm::{PTVar, StmResult, TVar};
use engram::{CreateOptions, Durability, Pool};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// The process-wide mode and counters: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Watchdog bound of a test body (a hang detector, not a timing claim).
const BOUND: Duration = Duration::from_secs(180);

/// [`common::bounded`] with BOUND.
fn bounded<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    common::bounded(what, BOUND, f)
}

/// Queue capacity (small, so producers block too).
const CAP: usize = 2;

struct Queues {
    /// Volatile queue of item values.
    a: TVar<Vec<u64>>,
    /// Persistent queue: a count of items.
    b: PTVar<u64>,
    /// Items consumed, and the sum of the values taken from `a`.
    taken: TVar<u64>,
    sum_a: TVar<u64>,
}

fn produce(pool: &Pool, q: &Queues, to_a: bool, item: u64) {
    pool.atomically(|tx| {
        if to_a {
            let mut v = tx.read(&q.a)?;
            if v.len() >= CAP {
                return tx.retry();
            }
            v.push(item);
            tx.write(&q.a, v)
        } else {
            let n = tx.read(&q.b)?;
            if n as usize >= CAP {
                return tx.retry();
            }
            tx.write(&q.b, n + 1)
        }
    })
    .unwrap();
}

fn consume(pool: &Pool, q: &Queues) {
    pool.atomically(|tx| {
        let from_a = tx.or_else(
            |tx| -> StmResult<bool> {
                let mut v = tx.read(&q.a)?;
                let Some(x) = v.pop() else { return tx.retry() };
                tx.write(&q.a, v)?;
                let s = tx.read(&q.sum_a)?;
                tx.write(&q.sum_a, s + x)?;
                Ok(true)
            },
            |tx| {
                let n = tx.read(&q.b)?;
                if n == 0 {
                    return tx.retry();
                }
                tx.write(&q.b, n - 1)?;
                Ok(false)
            },
        )?;
        let t = tx.read(&q.taken)?;
        tx.write(&q.taken, t + 1)?;
        Ok(from_a)
    })
    .unwrap();
}

/// `threads` threads, half producers (alternately to the volatile and the
/// persistent queue), half consumers (either queue, by `or_else`).
fn producer_consumer(mode: WatchMode, threads: usize, per_producer: u64) -> WakeStats {
    let t = TempPool::new(&format!("stm-wait-{}-{threads}", mode.name()));
    let pool = Arc::new(Pool::create(&t.0, CreateOptions::new("wait").durability(Durability::Process)).unwrap());
    let b = pool.atomically(|tx| PTVar::new(tx, 0u64)).unwrap();
    let q = Arc::new(Queues { a: TVar::new(Vec::new()), b, taken: TVar::new(0), sum_a: TVar::new(0) });
    wait::set_wakeup_mode(mode);
    let before = wait::wakeup_stats();
    let producers = threads / 2;
    let total = producers as u64 * per_producer;
    let consumed = Arc::new(AtomicU64::new(0));
    let mut hs = Vec::new();
    for p in 0..producers {
        let (pool, q) = (pool.clone(), q.clone());
        hs.push(std::thread::spawn(move || {
            for i in 0..per_producer {
                produce(&pool, &q, p % 2 == 0, 1 + p as u64 * per_producer + i);
            }
        }));
    }
    // Consumers share the work: each takes items until `total` are claimed.
    for _ in producers..threads {
        let (pool, q, consumed) = (pool.clone(), q.clone(), consumed.clone());
        hs.push(std::thread::spawn(move || {
            while consumed.fetch_add(1, SeqCst) < total {
                consume(&pool, &q);
            }
        }));
    }
    hs.into_iter().for_each(|h| h.join().unwrap());
    let (taken, sum_a, left_a, left_b) =
        pool.atomically(|tx| Ok((tx.read(&q.taken)?, tx.read(&q.sum_a)?, tx.read(&q.a)?.len(), tx.read(&q.b)?))).unwrap();
    assert_eq!((taken, left_a, left_b), (total, 0, 0), "every item consumed once");
    // Items sent to the volatile queue: producers 0, 2, 4, ...
    let want: u64 =
        (0..producers).filter(|p| p % 2 == 0).flat_map(|p| (0..per_producer).map(move |i| 1 + p as u64 * per_producer + i)).sum();
    assert_eq!(sum_a, want);
    wait::wakeup_stats().since(&before)
}

#[test]
fn no_lost_wakeup_producers_consumers_4_and_8_threads_both_modes() {
    let _g = SERIAL.lock();
    wait::set_safety_net(Duration::from_secs(60));
    for mode in WatchMode::ALL {
        for threads in [4, 8] {
            let s = bounded("producer/consumer", move || producer_consumer(mode, threads, 400));
            println!("{} x{threads}: {s:?}", mode.name());
            assert_eq!(s.rescued, 0, "{mode:?} x{threads}: a wait ended by the safety net: a lost wake-up");
            // Precise mode may count a few *late* wake-ups here (a waiter that
            // registered between a commit's stores and its scan, having read
            // the new values already): see engram::stm::wait. The workload
            // below has none of those, so it can assert exact counts.
            assert!(s.woken <= s.scans * threads as u64);
        }
    }
    assert_eq!(wait::waiting(), 0);
}

/// Variables each noise commit writes.
const NOISE: u64 = 1024;

/// One waiter blocks on `flag`; `noise` commits write NOISE other variables
/// each (at most `max` commits, stopping early in Bloom mode once a false
/// wake-up was counted); then the flag is set.
fn collide(mode: WatchMode, max: usize) -> WakeStats {
    wait::set_wakeup_mode(mode);
    let flag = Arc::new(TVar::new(0u64));
    // The same variables every commit: 1,024 of them leave a given filter
    // bit unset with probability (63/64)^1024 < 1e-7.
    let noise: Vec<TVar<u64>> = (0..NOISE).map(TVar::new).collect();
    let before = wait::wakeup_stats();
    let f = flag.clone();
    let waiter = std::thread::spawn(move || {
        engram::stm::atomically(|tx| if tx.read(&*f)? == 0 { tx.retry() } else { Ok(()) }).unwrap();
    });
    while wait::waiting() == 0 {
        std::thread::yield_now();
    }
    for _ in 0..max {
        engram::stm::atomically(|tx| noise.iter().try_for_each(|v| tx.write(v, tx.read(v)? + 1))).unwrap();
        std::thread::yield_now();
        if mode == WatchMode::Bloom && wait::wakeup_stats().false_wakeups > before.false_wakeups {
            break;
        }
    }
    engram::stm::atomically(|tx| tx.write(&*flag, 1)).unwrap();
    waiter.join().unwrap();
    wait::wakeup_stats().since(&before)
}

#[test]
fn precise_sets_have_no_false_wakeups_where_bloom_filters_collide() {
    let _g = SERIAL.lock();
    wait::set_safety_net(Duration::from_secs(60));
    let bloom = bounded("bloom collisions", || collide(WatchMode::Bloom, 5000));
    let precise = bounded("precise", || collide(WatchMode::Precise, 50));
    println!("bloom {bloom:?}\nprecise {precise:?}");
    assert!(bloom.false_wakeups > 0, "1,024 writes cover a 64-bit filter: {bloom:?}");
    assert_eq!((precise.false_wakeups, precise.woken, precise.rescued), (0, 1, 0), "only the flag's commit wakes: {precise:?}");
    assert_eq!(bloom.rescued, 0);
}

#[test]
fn mode_names_parse() {
    let _g = SERIAL.lock();
    for m in WatchMode::ALL {
        assert_eq!(WatchMode::parse(m.name()), Some(m));
        wait::set_wakeup_mode(m);
        assert_eq!(wait::wakeup_mode(), m);
    }
    assert_eq!(WatchMode::parse(" PRECISE "), Some(WatchMode::Precise));
    assert_eq!(WatchMode::parse("exact"), None);
}

#[test]
fn env_var_selects_the_mode() {
    if std::env::var_os("ENGRAM_STM_WAIT_CHILD").is_some() {
        // In the child: nothing set the mode, so the variable decides.
        assert_eq!(wait::wakeup_mode(), WatchMode::Precise);
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "env_var_selects_the_mode", "--test-threads=1"])
        .env("ENGRAM_STM_WAIT_CHILD", "1")
        .env("ENGRAM_STM_WAKEUP", "precise")
        .output()
        .unwrap();
    assert!(out.status.success(), "child: {}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}
