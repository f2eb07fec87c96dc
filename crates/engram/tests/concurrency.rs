//! Regions from many threads at once, checked against invariants.
//!
//! - Bank: transfers between 32 accounts under per-account locks taken in a
//!   consistent order, some rolled back on purpose (an error or a panic); a fifth thread audits the
//!   total in locked regions while they run; the total and every balance hold
//!   at the end and after a clean reopen.
//! - Allocator: threads push and pop objects of 16 B to 100 KiB (small size
//!   classes and multi-span objects) on lists of their own; every list matches
//!   its thread's volatile mirror, and `collect` and `info().live_objects`
//!   count exactly the reachable objects.
//! - Locks: two regions taking two locks in opposite order do not hang: one
//!   gets `LockTimeout` (after `OpenOptions::lock_timeout`), rolls back, and a
//!   retry succeeds.
//! - Collection: `collect` from one thread while others run regions waits for
//!   them and leaves everything intact; inside a region it is `Busy`.
//! - Log slots: 80 threads (more than the 64 log slots) all finish, with never
//!   more than 64 regions running at once.
//!
//! Anything that could hang runs under a watchdog, so a deadlock fails the
//! test instead of stalling the suite.

mod common;
use common::TempPool;
use engram::format::LOG_SLOTS;
use engram::{CreateOptions, Durability, Error, OpenOptions, PArray, PPtr, Persistent, Pool};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

const LAYOUT: &str = "concurrency";

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new(LAYOUT).durability(Durability::Process).max_size(1 << 30)).unwrap()
}

fn open(t: &TempPool) -> Pool {
    Pool::open(&t.0, OpenOptions::new(LAYOUT).durability(Durability::Process)).unwrap()
}

/// A fresh pool whose `Tx::lock` gives up after `timeout`.
fn create_with_lock_timeout(t: &TempPool, timeout: Duration) -> Pool {
    create(t).close().unwrap();
    let mut o = OpenOptions::new(LAYOUT).durability(Durability::Process);
    o.lock_timeout = timeout;
    Pool::open(&t.0, o).unwrap()
}

/// Runs `f` on its own thread and fails if it does not finish within `limit`
/// (the hung thread is left behind; the test process ends anyway).
fn within<T: Send + 'static>(limit: Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => {
            h.join().unwrap();
            v
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what}: still running after {limit:?} (deadlock?)"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!(),
        },
    }
}

/// The lock stripe an earlier `Tx::lock` mapped a key to (1024 shared
/// stripes). Locks are per key now; the tests keep this hash to build key
/// sets that collided under striping, as a regression check.
fn stripe(key: u64) -> u64 {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) % 1024
}

/// `n` lock keys, in ascending order, on pairwise different stripes (and not
/// on the root table's stripe, key 1).
fn distinct_stripe_keys(n: usize) -> Vec<u64> {
    let mut used: HashSet<u64> = [stripe(1)].into();
    let mut keys = Vec::new();
    let mut k = 0x1000u64;
    while keys.len() < n {
        if used.insert(stripe(k)) {
            keys.push(k);
        }
        k += 1;
    }
    keys
}

// ----- bank ---------------------------------------------------------------------

const ACCOUNTS: usize = 32;
const OPENING: u64 = 1000;
const TRANSFER_THREADS: u64 = 4;
const TRANSFERS: u64 = 5000;

fn bank_total(pool: &Pool, accts: &[PPtr<u64>], keys: &[u64]) -> Result<(u64, Vec<u64>), Error> {
    pool.txn(|tx| {
        for &k in keys {
            tx.lock(k)?;
        }
        let mut each = Vec::with_capacity(accts.len());
        for &a in accts {
            each.push(tx.read(a)?);
        }
        Ok((each.iter().sum(), each))
    })
}

fn load_accounts(pool: &Pool) -> Vec<PPtr<u64>> {
    pool.txn(|tx| {
        let arr = tx.root_array::<PPtr<u64>>("accounts")?.expect("accounts root");
        let mut v = vec![PPtr::null(); ACCOUNTS];
        tx.read_slice(arr, 0, &mut v)?;
        Ok::<_, Error>(v)
    })
    .unwrap()
}

#[test]
fn bank_transfers_keep_the_total() {
    let t = TempPool::new("bank");
    let pool = create(&t);
    pool.txn(|tx| {
        let arr = tx.alloc_array::<PPtr<u64>>(ACCOUNTS as u64)?;
        for i in 0..ACCOUNTS as u64 {
            let a = tx.alloc(OPENING)?;
            tx.set(arr, i, a)?;
        }
        tx.set_root_array("accounts", arr)
    })
    .unwrap();
    let accts = Arc::new(load_accounts(&pool));
    let keys = Arc::new(distinct_stripe_keys(ACCOUNTS));
    let done = Arc::new(AtomicBool::new(false));
    let timeouts = Arc::new(AtomicU64::new(0));
    let started = Instant::now();

    let auditor = {
        let (pool, accts, keys, done) = (pool.clone(), accts.clone(), keys.clone(), done.clone());
        thread::spawn(move || {
            let mut audits = 0u64;
            while !done.load(Ordering::Acquire) {
                match bank_total(&pool, &accts, &keys) {
                    Ok((total, each)) => assert_eq!(total, OPENING * ACCOUNTS as u64, "audit {audits}: {each:?}"),
                    Err(Error::LockTimeout) => continue,
                    Err(e) => panic!("audit: {e}"),
                }
                let _ = pool.info();
                audits += 1;
            }
            audits
        })
    };
    let workers: Vec<_> = (0..TRANSFER_THREADS)
        .map(|w| {
            let (pool, accts, keys, timeouts) = (pool.clone(), accts.clone(), keys.clone(), timeouts.clone());
            thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(w);
                // Net change per account from this thread's committed transfers.
                let mut delta = vec![0i64; ACCOUNTS];
                let (mut committed, mut rolled_back) = (0u64, 0u64);
                for n in 0..TRANSFERS {
                    let from = rng.gen_range(0..ACCOUNTS);
                    let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                    let amount = rng.gen_range(1..=100u64);
                    let abort = n % 37 == 5;
                    let panics = n % 53 == 7;
                    loop {
                        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            pool.txn(|tx| {
                                tx.lock(keys[from.min(to)])?;
                                tx.lock(keys[from.max(to)])?;
                                let f = tx.read(accts[from])?;
                                if f < amount {
                                    return Ok(false);
                                }
                                tx.write(accts[from], f - amount)?;
                                tx.update(accts[to], |v| *v += amount)?;
                                if abort {
                                    return Err(Error::Aborted); // undone: the audit must never see it
                                }
                                if panics {
                                    // Undone too (resume_unwind skips the panic hook's message).
                                    std::panic::resume_unwind(Box::new("planned panic in a region"));
                                }
                                Ok(true)
                            })
                        }));
                        let r = match r {
                            Ok(r) => r,
                            Err(_) if panics => {
                                rolled_back += 1;
                                break;
                            }
                            Err(p) => std::panic::resume_unwind(p),
                        };
                        match r {
                            Ok(moved) => {
                                if moved {
                                    delta[from] -= amount as i64;
                                    delta[to] += amount as i64;
                                    committed += 1;
                                }
                                break;
                            }
                            Err(Error::Aborted) if abort => {
                                rolled_back += 1;
                                break;
                            }
                            Err(Error::LockTimeout) => {
                                timeouts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("transfer {n}: {e}"),
                        }
                    }
                }
                (delta, committed, rolled_back)
            })
        })
        .collect();
    let mut delta = vec![0i64; ACCOUNTS];
    let (mut committed, mut rolled_back) = (0, 0);
    for w in workers {
        let (d, c, r) = w.join().unwrap();
        for i in 0..ACCOUNTS {
            delta[i] += d[i];
        }
        committed += c;
        rolled_back += r;
    }
    done.store(true, Ordering::Release);
    let audits = auditor.join().unwrap();
    let expect: Vec<u64> = delta.iter().map(|&d| (OPENING as i64 + d) as u64).collect();
    println!(
        "bank: {committed} transfers committed, {rolled_back} rolled back, {audits} audits, {} lock timeouts, {:?}",
        timeouts.load(Ordering::Relaxed),
        started.elapsed()
    );
    assert!(audits > 0);
    assert_eq!(bank_total(&pool, &accts, &keys).unwrap(), (OPENING * ACCOUNTS as u64, expect.clone()));
    assert_eq!(pool.collect().unwrap().objects, ACCOUNTS as u64 + 1);
    assert_eq!(pool.info().live_objects, ACCOUNTS as u64 + 1);
    drop((accts, keys));
    pool.close().unwrap();

    let pool = open(&t);
    let accts = load_accounts(&pool);
    let keys = distinct_stripe_keys(ACCOUNTS);
    assert_eq!(bank_total(&pool, &accts, &keys).unwrap(), (OPENING * ACCOUNTS as u64, expect));
    assert_eq!(pool.check().unwrap().objects, ACCOUNTS as u64 + 1);
    assert_eq!(pool.info().live_objects, ACCOUNTS as u64 + 1);
}

// ----- allocator stress -------------------------------------------------------------

/// One list element: a header object and a data array of its own size.
#[derive(Clone, Copy, Persistent)]
struct Cell {
    next: PPtr<Cell>,
    data: PArray<u64>,
    tag: u64,
}

/// A thread's list head, rooted once so regions need not take the root lock.
#[derive(Clone, Copy, Persistent)]
struct Anchor {
    head: PPtr<Cell>,
    len: u64,
}

/// Element count of a data array: log-uniform words, 16 B to 100 KiB.
fn random_words(rng: &mut StdRng, max_words: u64) -> u64 {
    let bits = rng.gen_range(1.0..(max_words as f64).log2());
    (2f64.powf(bits) as u64).clamp(2, max_words)
}

/// The thread's mirror of its list: (tag, words), head last.
type Mirror = Vec<(u64, u64)>;

/// One region of the stress: push or pop up to three elements, sometimes
/// leave an unlinked (garbage) object behind, sometimes roll back.
fn churn_region(pool: &Pool, anchor: PPtr<Anchor>, rng: &mut StdRng, mirror: &mut Mirror, next_tag: &mut u64, max_words: u64) {
    let push = mirror.len() < 8 || (mirror.len() < 120 && rng.gen_bool(0.55));
    let k = rng.gen_range(1..=3usize).min(if push { 3 } else { mirror.len() });
    let abort = rng.gen_bool(0.05);
    let garbage = rng.gen_bool(0.1);
    let words: Vec<u64> = (0..k).map(|_| random_words(rng, max_words)).collect();
    let first_tag = *next_tag;
    let r = pool.txn(|tx| {
        let mut a = tx.read(anchor)?;
        for (i, &w) in words.iter().enumerate() {
            if push {
                let tag = first_tag + i as u64;
                let data = tx.alloc_array::<u64>(w)?;
                tx.set(data, 0, tag)?;
                tx.set(data, w - 1, !tag)?;
                a.head = tx.alloc(Cell { next: a.head, data, tag })?;
                a.len += 1;
            } else {
                let c = tx.read(a.head)?;
                tx.free_array(c.data)?;
                tx.free(a.head)?;
                a.head = c.next;
                a.len -= 1;
            }
        }
        if garbage {
            tx.alloc_array::<u64>(random_words(&mut StdRng::seed_from_u64(first_tag), max_words))?;
        }
        tx.write(anchor, a)?;
        if abort {
            return Err(Error::Aborted);
        }
        Ok(())
    });
    match r {
        Ok(()) if push => {
            mirror.extend(words.iter().enumerate().map(|(i, &w)| (first_tag + i as u64, w)));
            *next_tag += k as u64;
        }
        Ok(()) => mirror.truncate(mirror.len() - k),
        Err(Error::Aborted) if abort => {}
        Err(e) => panic!("churn region: {e}"),
    }
}

/// Walks a thread's list and compares it with the mirror.
fn verify_list(pool: &Pool, anchor: PPtr<Anchor>, mirror: &Mirror, who: &str) {
    pool.txn(|tx| {
        let a = tx.read(anchor)?;
        assert_eq!(a.len, mirror.len() as u64, "{who}: length");
        let mut p = a.head;
        for (i, &(tag, words)) in mirror.iter().rev().enumerate() {
            assert!(!p.is_null(), "{who}: list ends after {i} of {}", mirror.len());
            let c = tx.read(p)?;
            assert_eq!(c.tag, tag, "{who}: element {i}");
            assert_eq!(tx.len(c.data)?, words, "{who}: element {i} size");
            assert_eq!(tx.get(c.data, 0)?, tag, "{who}: element {i} first word");
            assert_eq!(tx.get(c.data, words - 1)?, !tag, "{who}: element {i} last word");
            p = c.next;
        }
        assert!(p.is_null(), "{who}: list longer than its mirror");
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn make_anchors(pool: &Pool, n: usize) -> Vec<PPtr<Anchor>> {
    pool.txn(|tx| {
        (0..n)
            .map(|i| {
                let a = tx.alloc(Anchor { head: PPtr::null(), len: 0 })?;
                tx.set_root(&format!("list-{i}"), a)?;
                Ok(a)
            })
            .collect::<Result<Vec<_>, Error>>()
    })
    .unwrap()
}

/// Runs `threads` churn threads of `regions` regions each; `during` runs on
/// the calling thread meanwhile, until they finish. Returns the mirrors.
fn churn(pool: &Pool, anchors: &[PPtr<Anchor>], regions: u64, max_words: u64, during: impl FnOnce(&AtomicBool)) -> Vec<Mirror> {
    churn_paced(pool, anchors, regions, max_words, |_| {}, during)
}

/// [`churn`], with `gate(r)` called by each worker before its region `r`.
fn churn_paced(
    pool: &Pool,
    anchors: &[PPtr<Anchor>],
    regions: u64,
    max_words: u64,
    gate: impl Fn(u64) + Clone + Send + 'static,
    during: impl FnOnce(&AtomicBool),
) -> Vec<Mirror> {
    let done = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = anchors
        .iter()
        .enumerate()
        .map(|(i, &anchor)| {
            let pool = pool.clone();
            let gate = gate.clone();
            thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + i as u64);
                let mut mirror = Mirror::new();
                let mut next_tag = (i as u64) << 40;
                for r in 0..regions {
                    gate(r);
                    churn_region(&pool, anchor, &mut rng, &mut mirror, &mut next_tag, max_words);
                }
                mirror
            })
        })
        .collect();
    let finished = {
        let done = done.clone();
        let n = workers.len();
        move |ws: Vec<thread::JoinHandle<Mirror>>| {
            let m: Vec<Mirror> = ws.into_iter().map(|w| w.join().unwrap()).collect();
            assert_eq!(m.len(), n);
            done.store(true, Ordering::Release);
            m
        }
    };
    let joiner = thread::spawn(move || finished(workers));
    during(&done);
    joiner.join().unwrap()
}

fn expected_objects(anchors: usize, mirrors: &[Mirror]) -> u64 {
    anchors as u64 + 2 * mirrors.iter().map(|m| m.len() as u64).sum::<u64>()
}

#[test]
fn mixed_size_alloc_and_free_from_four_threads() {
    let t = TempPool::new("alloc");
    let pool = create(&t);
    let anchors = make_anchors(&pool, 4);
    let started = Instant::now();
    let mirrors = churn(&pool, &anchors, 3000, 100 * 1024 / 8, |_| {});
    for (i, m) in mirrors.iter().enumerate() {
        verify_list(&pool, anchors[i], m, &format!("thread {i}"));
    }
    let expect = expected_objects(anchors.len(), &mirrors);
    let st = pool.collect().unwrap();
    println!(
        "alloc: lists of {:?} elements, {} objects reachable, pool {} MiB, {:?}",
        mirrors.iter().map(Vec::len).collect::<Vec<_>>(),
        st.objects,
        pool.info().size >> 20,
        started.elapsed()
    );
    assert_eq!(st.objects, expect);
    assert_eq!(pool.info().live_objects, expect);
    pool.close().unwrap();
    let pool = open(&t);
    for (i, m) in mirrors.iter().enumerate() {
        verify_list(&pool, anchors[i], m, &format!("thread {i} after reopen"));
    }
    assert_eq!(pool.info().live_objects, expect);
    assert_eq!(pool.check().unwrap().objects, expect);
}

/// `info()` (what `engram info` and monitoring call) may run while other
/// threads allocate: it must neither panic nor report nonsense. The heap is
/// kept nearly empty (every region rolls back) and a collector keeps draining
/// the thread caches, so allocations keep refilling them.
#[test]
fn info_while_regions_allocate() {
    let t = TempPool::new("info");
    let pool = create(&t);
    pool.txn(|tx| {
        let p = tx.alloc(1u64)?;
        tx.set_root("one", p)
    })
    .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for w in 0..2u64 {
        let pool = pool.clone();
        threads.push(thread::spawn(move || {
            for n in 0..3000u64 {
                let r: Result<(), Error> = pool.txn(|tx| {
                    for c in 0..8 {
                        tx.alloc_array::<u8>(16 << ((n + c + w) % 11))?;
                    }
                    Err(Error::Aborted)
                });
                assert!(matches!(r, Err(Error::Aborted)), "{r:?}");
            }
        }));
    }
    let allocators: Vec<_> = std::mem::take(&mut threads);
    let stopper = {
        let done = done.clone();
        thread::spawn(move || {
            for h in allocators {
                h.join().unwrap();
            }
            done.store(true, Ordering::Release);
        })
    };
    threads.push(stopper);
    {
        let (pool, done) = (pool.clone(), done.clone());
        threads.push(thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                assert_eq!(pool.collect().unwrap().objects, 1);
            }
        }));
    }
    let (mut samples, mut bad) = (0u64, Vec::new());
    while !done.load(Ordering::Acquire) {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.info().live_objects)) {
            Ok(n) if n < 1 << 40 => {}
            Ok(n) => bad.push(format!("live_objects = {n}")),
            Err(p) => {
                bad.push(format!("panicked: {:?}", p.downcast_ref::<&str>().copied().or(p.downcast_ref::<String>().map(|s| s.as_str()))))
            }
        }
        samples += 1;
    }
    for h in threads {
        h.join().unwrap();
    }
    assert_eq!(pool.collect().unwrap().objects, 1);
    assert_eq!(pool.info().live_objects, 1);
    let wrong = bad.len();
    bad.dedup();
    assert!(bad.is_empty(), "{wrong} of {samples} info() calls went wrong while regions ran: {bad:?}");
}

// ----- lock conflicts ------------------------------------------------------------------

#[test]
fn opposite_lock_order_times_out_and_retry_succeeds() {
    let t = TempPool::new("deadlock");
    let pool = create_with_lock_timeout(&t, Duration::from_millis(300));
    let keys = distinct_stripe_keys(2);
    let counters = pool
        .txn(|tx| {
            let a = tx.alloc_array::<u64>(2)?;
            tx.set_root_array("counters", a)?;
            Ok::<_, Error>(a)
        })
        .unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let started = Instant::now();
    let outcome = within(Duration::from_secs(20), "two regions locking in opposite order", move || {
        let handles: Vec<_> = (0..2usize)
            .map(|me| {
                let (pool, barrier, keys) = (pool.clone(), barrier.clone(), keys.clone());
                thread::spawn(move || {
                    let mut attempts = Vec::new();
                    loop {
                        let first = attempts.is_empty();
                        let t0 = Instant::now();
                        let r = pool.txn(|tx| {
                            tx.lock(keys[me])?;
                            // Written before the conflict: undone if this region loses.
                            tx.set(counters, me as u64, tx.get(counters, me as u64)? + 1)?;
                            if first {
                                barrier.wait(); // both hold their first lock
                            }
                            tx.lock(keys[1 - me])?;
                            tx.set(counters, 1 - me as u64, tx.get(counters, 1 - me as u64)? + 10)?;
                            Ok::<_, Error>(())
                        });
                        attempts.push((r.as_ref().err().map(|e| e.to_string()), t0.elapsed()));
                        match r {
                            Ok(()) => return attempts,
                            // Back off unevenly so the retries do not collide again.
                            Err(Error::LockTimeout) => thread::sleep(Duration::from_millis(20 + 80 * me as u64)),
                            Err(e) => panic!("thread {me}: {e}"),
                        }
                    }
                })
            })
            .collect();
        let attempts: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        (attempts, pool.txn(|tx| Ok::<_, Error>([tx.get(counters, 0)?, tx.get(counters, 1)?])).unwrap())
    });
    let (attempts, values) = outcome;
    println!("lock conflict: attempts {attempts:?}, {:?}", started.elapsed());
    let timeouts: Vec<Duration> = attempts.iter().flatten().filter(|(e, _)| e.is_some()).map(|&(_, d)| d).collect();
    assert!(!timeouts.is_empty(), "neither region timed out: {attempts:?}");
    for d in &timeouts {
        assert!(*d >= Duration::from_millis(250), "a timeout after only {d:?}");
    }
    // Each region committed exactly once; the losers' writes were undone.
    assert_eq!(values, [11, 11]);
}

/// `OpenOptions::lock_timeout` is how long `Tx::lock` waits.
#[test]
fn open_options_lock_timeout_is_honoured() {
    let t = TempPool::new("locktimeout");
    let pool = create_with_lock_timeout(&t, Duration::from_millis(200));
    let holding = Arc::new(Barrier::new(2));
    let holder = {
        let (pool, holding) = (pool.clone(), holding.clone());
        thread::spawn(move || {
            pool.txn(|tx| {
                tx.lock(7)?;
                holding.wait();
                thread::sleep(Duration::from_millis(1500));
                Ok::<_, Error>(())
            })
            .unwrap()
        })
    };
    holding.wait();
    let t0 = Instant::now();
    let r = pool.txn(|tx| tx.lock(7));
    let waited = t0.elapsed();
    holder.join().unwrap();
    assert!(
        matches!(r, Err(Error::LockTimeout)) && waited < Duration::from_millis(1000),
        "lock_timeout 200 ms, but lock() returned {r:?} after {waited:?}"
    );
}

/// Two key pairs, each taken in ascending order, that deadlock if keys are
/// striped: A's second key shares a stripe with B's first, and B's second
/// with A's first.
fn crossing_keys() -> ((u64, u64), (u64, u64)) {
    let mut first_of = std::collections::HashMap::new();
    let mut pairs: Vec<(u64, u64)> = Vec::new();
    for k in 0x10_000u64.. {
        let Some(&p) = first_of.get(&stripe(k)) else {
            first_of.insert(stripe(k), k);
            continue;
        };
        for &(x, y) in pairs.iter().filter(|&&(x, _)| stripe(x) != stripe(p)) {
            for (a, b) in [(x, y), (y, x)] {
                for (c, d) in [(p, k), (k, p)] {
                    // A takes a then c, B takes d then b.
                    if a < c && d < b {
                        return ((a, c), (d, b));
                    }
                }
            }
        }
        pairs.push((p, k));
    }
    unreachable!()
}

/// Taking locks in one global key order must not deadlock, even when two
/// keys happen to share a lock stripe.
#[test]
fn consistent_key_order_never_times_out() {
    let ((first_a, second_a), (first_b, second_b)) = crossing_keys();
    let t = TempPool::new("stripes");
    let pool = create_with_lock_timeout(&t, Duration::from_millis(500));
    let barrier = Arc::new(Barrier::new(2));
    let r = within(Duration::from_secs(20), "regions locking in one key order", move || {
        let hs: Vec<_> = [(first_a, second_a), (first_b, second_b)]
            .into_iter()
            .map(|(x, y)| {
                let (pool, barrier) = (pool.clone(), barrier.clone());
                thread::spawn(move || {
                    pool.txn(|tx| {
                        tx.lock(x)?;
                        barrier.wait();
                        tx.lock(y)
                    })
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
    });
    assert!(
        r.iter().all(Result::is_ok),
        "locks {first_a:#x} < {second_a:#x} and {first_b:#x} < {second_b:#x}, each taken in ascending order: {r:?}"
    );
}

// ----- collection while regions run ----------------------------------------------------------

#[test]
fn collect_while_regions_run() {
    // Progress, not time: each worker waits before every `PACE`-th region
    // until the collector has finished that many collections, and the
    // collector runs until the workers are done *and* it has done at least
    // `REGIONS / PACE` collections. So collections interleave with regions
    // however busy the machine is, and the count never depends on timing.
    const REGIONS: u64 = 3000;
    const PACE: u64 = 300;
    let t = TempPool::new("gc");
    let pool = create(&t);
    let anchors = make_anchors(&pool, 3);
    let p2 = pool.clone();
    let anchors2 = anchors.clone();
    let mut collections = Vec::new();
    let started = Instant::now();
    let done_collections = Arc::new(AtomicU64::new(0));
    let gate = {
        let d = done_collections.clone();
        move |region: u64| {
            if region > 0 && region % PACE == 0 {
                while d.load(Ordering::Acquire) < region / PACE {
                    thread::yield_now();
                }
            }
        }
    };
    let mirrors = churn_paced(&pool, &anchors, REGIONS, 512, gate, |done| {
        while !done.load(Ordering::Acquire) || (collections.len() as u64) < REGIONS / PACE {
            let st = p2.collect().unwrap();
            assert!(st.objects >= anchors2.len() as u64);
            // Between collections the heap must also pass the checker.
            let ck = p2.check().unwrap();
            assert!(ck.objects >= anchors2.len() as u64);
            collections.push(st.objects);
            done_collections.fetch_add(1, Ordering::Release);
        }
    });
    drop(p2);
    println!(
        "collect: {} collections during the churn ({:?}), objects {:?}..",
        collections.len(),
        started.elapsed(),
        &collections[..collections.len().min(8)]
    );
    assert!(collections.len() as u64 >= REGIONS / PACE, "only {} collections ran", collections.len());
    for (i, m) in mirrors.iter().enumerate() {
        verify_list(&pool, anchors[i], m, &format!("thread {i}"));
    }
    let expect = expected_objects(anchors.len(), &mirrors);
    assert_eq!(pool.collect().unwrap().objects, expect);
    assert_eq!(pool.info().live_objects, expect);
    pool.close().unwrap();
    let pool = open(&t);
    assert_eq!(pool.check().unwrap().objects, expect);
    for (i, m) in mirrors.iter().enumerate() {
        verify_list(&pool, anchors[i], m, &format!("thread {i} after reopen"));
    }
}

#[test]
fn collect_waits_for_running_regions() {
    let t = TempPool::new("gcwait");
    let pool = create(&t);
    let inside = Arc::new(Barrier::new(2));
    let body_done = Arc::new(AtomicBool::new(false));
    let region = {
        let (pool, inside, body_done) = (pool.clone(), inside.clone(), body_done.clone());
        thread::spawn(move || {
            pool.txn(|tx| {
                // Allocated and linked in a region that is still running when
                // collect is called: collect must not free it.
                let p = tx.alloc(42u64)?;
                tx.set_root("late", p)?;
                inside.wait();
                thread::sleep(Duration::from_millis(300));
                body_done.store(true, Ordering::Release);
                Ok::<_, Error>(())
            })
            .unwrap()
        })
    };
    inside.wait();
    let p2 = pool.clone();
    let st = within(Duration::from_secs(10), "collect while a region runs", move || p2.collect().unwrap());
    assert!(body_done.load(Ordering::Acquire), "collect ran while a region was still running");
    region.join().unwrap();
    assert_eq!(st.objects, 1);
    assert_eq!(pool.txn(|tx| tx.read(tx.root::<u64>("late")?.unwrap())).unwrap(), 42);
}

#[test]
fn collect_inside_a_region_is_busy() {
    let t = TempPool::new("gcbusy");
    let pool = create(&t);
    let r = pool.txn(|tx| {
        let p = tx.alloc(1u64)?;
        tx.set_root("x", p)?;
        Ok::<_, Error>(pool.collect())
    });
    assert!(matches!(r, Ok(Err(Error::Busy { .. }))), "{:?}", r.map(|c| c.map(|_| ())));
    // and the region that asked still committed
    assert_eq!(pool.txn(|tx| tx.read(tx.root::<u64>("x")?.unwrap())).unwrap(), 1);
}

/// `check` takes the pool exclusively like `collect`; from inside a region it
/// must fail with `Busy` instead of waiting for its own region to end.
#[test]
fn check_inside_a_region_is_busy() {
    let t = TempPool::new("checkbusy");
    let pool = create(&t);
    let r = within(Duration::from_secs(5), "check() called inside a region", move || {
        pool.txn(|_| Ok::<_, Error>(pool.check().map(|_| ()))).map_err(|e| e.to_string())
    });
    assert!(matches!(r, Ok(Err(Error::Busy { .. }))), "{r:?}");
}

/// Pool methods that take the GC gate shared (`roots`) must not deadlock when
/// called inside a region while a collection is waiting for that region.
#[test]
fn roots_inside_a_region_while_collect_waits() {
    let t = TempPool::new("rootsgc");
    let pool = create(&t);
    pool.txn(|tx| {
        let p = tx.alloc(5u64)?;
        tx.set_root("five", p)
    })
    .unwrap();
    let r = within(Duration::from_secs(10), "roots() inside a region while collect() waits", move || {
        let inside = Arc::new(Barrier::new(2));
        let collector = {
            let (pool, inside) = (pool.clone(), inside.clone());
            thread::spawn(move || {
                inside.wait();
                pool.collect().map(|s| s.objects)
            })
        };
        let roots = pool.txn(|_| {
            inside.wait();
            thread::sleep(Duration::from_millis(200)); // collect is now waiting for this region
            Ok::<_, Error>(pool.roots()?.len())
        });
        (roots.map_err(|e| e.to_string()), collector.join().unwrap().map_err(|e| e.to_string()))
    });
    assert_eq!(r, (Ok(1), Ok(1)));
}

// ----- more threads than log slots -------------------------------------------------------------

#[test]
fn more_threads_than_log_slots() {
    const THREADS: usize = 80;
    const REGIONS: u64 = 5;
    let t = TempPool::new("slots");
    let pool = create(&t);
    let (counters, shared) = pool
        .txn(|tx| {
            let c = tx.alloc_array::<u64>(THREADS as u64)?;
            let s = tx.alloc(0u64)?;
            tx.set_root_array("counters", c)?;
            tx.set_root("shared", s)?;
            Ok::<_, Error>((c, s))
        })
        .unwrap();
    let shared_key = distinct_stripe_keys(1)[0];
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let timeouts = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let (p2, inside2, most2, timeouts2) = (pool.clone(), inside.clone(), most.clone(), timeouts.clone());
    within(Duration::from_secs(30), "80 threads sharing 64 log slots", move || {
        let barrier = Arc::new(Barrier::new(THREADS));
        let hs: Vec<_> = (0..THREADS)
            .map(|i| {
                let (pool, barrier, inside, most, timeouts) =
                    (p2.clone(), barrier.clone(), inside2.clone(), most2.clone(), timeouts2.clone());
                thread::spawn(move || {
                    barrier.wait();
                    let mut n = 0;
                    while n < REGIONS {
                        let r = pool.txn(|tx| {
                            let now = inside.fetch_add(1, Ordering::AcqRel) + 1;
                            most.fetch_max(now, Ordering::AcqRel);
                            thread::sleep(Duration::from_millis(10)); // hold the slot a while
                            inside.fetch_sub(1, Ordering::AcqRel);
                            tx.set(counters, i as u64, tx.get(counters, i as u64)? + 1)?;
                            tx.lock(shared_key)?;
                            tx.update(shared, |v| *v += 1)
                        });
                        match r {
                            Ok(()) => n += 1,
                            Err(Error::LockTimeout) => {
                                timeouts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("thread {i}: {e}"),
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
    let most = most.load(Ordering::Acquire);
    println!(
        "slots: {THREADS} threads x {REGIONS} regions in {:?}, at most {most} regions at once, {} lock timeouts",
        started.elapsed(),
        timeouts.load(Ordering::Relaxed)
    );
    assert!(most <= LOG_SLOTS as usize, "{most} regions ran at once with {LOG_SLOTS} log slots");
    assert!(most >= 16, "only {most} regions ever ran at once");
    let (each, total) = pool
        .txn(|tx| {
            let mut v = vec![0u64; THREADS];
            tx.read_slice(counters, 0, &mut v)?;
            Ok::<_, Error>((v, tx.read(shared)?))
        })
        .unwrap();
    assert!(each.iter().all(|&c| c == REGIONS), "{each:?}");
    assert_eq!(total, THREADS as u64 * REGIONS);
    assert_eq!(pool.collect().unwrap().objects, 2);
}
