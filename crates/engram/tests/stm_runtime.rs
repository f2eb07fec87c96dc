//! The STM's selectable runtimes (`engram::stm::runtime`): Fine (software
//! lock commit), FineHtm (the write set locked and the reads validated in
//! one hardware transaction), Hybrid (level 1 all in hardware) and Coarse
//! (one global commit lock), on the *emulated* HTM backend so every
//! fallback path runs on any machine (RTM or not).
//!
//! - every path of the hardware commit and every Hybrid level, driven by
//!   forced abort statuses (conflict with retry hint, capacity, explicit
//!   LOCKED / VALIDATE, debug, nested) and by a real conflict, each checked
//!   on the per-thread counters;
//! - the retry policies: attempts per thread for the hardware commit, a
//!   fixed count for level 1;
//! - banks of volatile TVars (and of `TWord`s in `TBox`es) under each
//!   runtime and mixes of all four, 4 and 8 threads, with random emulated
//!   conflicts (2 % per access),
//!   checked by auditors (a body that sees a broken total is a zombie: it
//!   must be ended by the runtime and never commit; only lazy level 1 may
//!   see one);
//! - zombie containment, deterministic: a commit stalled between two
//!   in-place stores; lazy level 1 sees the torn state and is ended, early
//!   level 1 never sees it;
//! - `retry` and `or_else`: producers and consumers over two bounded queues
//!   under each runtime, every item consumed exactly once;
//! - PSTM under FineHtm and Coarse: a persistent bank, closed, reopened
//!   and counted.
//!
//! The tests share the process's backend (its queue of forced statuses)
//! and policy, so they run one at a time (`LOCK`). Each body runs under a
//! watchdog.

mod common;
use common::TempPool;
use engram::htm::abort::{code, CAPACITY, CONFLICT, DEBUG, NESTED, RETRY};
use engram::htm::{Abort, Cause, EmuConfig};
use engram::stm::runtime::{self, Attempts, HtmPolicy, Runtime, RuntimeStats, Subscription};
use engram::stm::{self, PTVar, StmResult, TBox, TVar, TWord};
use engram::{CreateOptions, Durability, OpenOptions, Pool};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

static LOCK: Mutex<()> = Mutex::new(());

/// A path case: its name, the statuses forced, and what the counters must show.
type Case = (&'static str, Vec<Abort>, fn(&RuntimeStats, u64) -> bool);

/// Serialises the tests and forces the emulated backend (2 % spurious
/// conflicts per access) before the process's first commit.
fn setup() -> MutexGuard<'static, ()> {
    let g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    runtime::configure_emulated(EmuConfig { conflict_ppm: 20_000, ..EmuConfig::default() });
    assert!(runtime::htm_armed());
    assert_eq!(runtime::backend().name(), "emulated");
    g
}

/// A policy with fixed attempts.
fn policy(commit: u32, hw: u32, subscription: Subscription) -> HtmPolicy {
    HtmPolicy { commit_attempts: Attempts::Fixed(commit), hw_attempts: Attempts::Fixed(hw), subscription, ..HtmPolicy::default() }
}

fn bounded<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (done, wait) = channel();
    let h = std::thread::spawn(move || {
        let r = f();
        let _ = done.send(());
        r
    });
    match wait.recv_timeout(Duration::from_secs(120)) {
        Err(RecvTimeoutError::Timeout) => panic!("{what}: not finished (deadlock or lost wake-up)"),
        _ => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
    }
}

fn delta(a: RuntimeStats, b: RuntimeStats) -> RuntimeStats {
    let mut d = RuntimeStats {
        hw_commits: b.hw_commits - a.hw_commits,
        sw_fallbacks: b.sw_fallbacks - a.sw_fallbacks,
        validate_aborts: b.validate_aborts - a.validate_aborts,
        locked_aborts: b.locked_aborts - a.locked_aborts,
        l1_commits: b.l1_commits - a.l1_commits,
        coarse_commits: b.coarse_commits - a.coarse_commits,
        ..RuntimeStats::default()
    };
    for i in 0..Cause::COUNT {
        d.hw_aborts[i] = b.hw_aborts[i] - a.hw_aborts[i];
        d.l1_aborts[i] = b.l1_aborts[i] - a.l1_aborts[i];
    }
    d
}

/// One update commit with `statuses` forced on the next hardware commits;
/// returns the counters' change and how many times the body ran.
/// `None` when a random abort left a forced status undelivered (drained).
fn commit_with(v: &TVar<u64>, statuses: &[Abort]) -> Option<(RuntimeStats, u64)> {
    let emu = runtime::backend().emu().expect("emulated backend");
    assert_eq!(emu.pending(), 0);
    emu.inject(statuses.iter().copied());
    let before = runtime::stats();
    let mut runs = 0;
    stm::atomically(|tx| {
        runs += 1;
        let x = tx.read(v)?;
        tx.write(v, x + 1)
    })
    .unwrap();
    let d = delta(before, runtime::stats());
    if emu.pending() == 0 {
        return Some((d, runs));
    }
    while emu.pending() > 0 {
        stm::atomically(|tx| tx.write(v, tx.read(v)? + 1)).unwrap();
    }
    None
}

#[test]
fn every_hardware_commit_path() {
    let _g = setup();
    bounded("paths", || {
        // no spurious conflicts on this thread's paths: a fresh backend is
        // not possible, so retry on the rare random abort instead.
        runtime::set_thread_runtime(Some(Runtime::FineHtm)).unwrap();
        runtime::set_policy(policy(4, 2, Subscription::Lazy));
        let v = TVar::new(0u64);
        let conflict = Abort(CONFLICT | RETRY);
        let cap = Abort(CAPACITY);
        let cases: Vec<Case> = vec![
            ("clean", vec![], |d, _| d.hw_commits == 1 && d.sw_fallbacks == 0),
            ("conflict then hardware", vec![conflict], |d, _| d.hw_aborts[Cause::Conflict.index()] >= 1 && d.hw_commits == 1),
            ("capacity: straight to software", vec![cap], |d, _| {
                d.hw_aborts[Cause::Capacity.index()] >= 1 && d.sw_fallbacks == 1 && d.hw_commits == 0
            }),
            ("attempts exhausted", vec![conflict; 4], |d, _| d.sw_fallbacks == 1 && d.hw_commits == 0),
            ("explicit LOCKED", vec![Abort::explicit(code::LOCKED)], |d, _| d.locked_aborts == 1 && d.hw_commits == 1),
            ("explicit VALIDATE: body again", vec![Abort::explicit(code::VALIDATE)], |d, runs| {
                d.validate_aborts == 1 && runs == 2 && d.hw_commits == 1
            }),
            ("debug", vec![Abort(DEBUG)], |d, _| d.hw_aborts[Cause::Debug.index()] >= 1 && d.hw_commits == 1),
            ("nested", vec![Abort(NESTED | CONFLICT | RETRY)], |d, _| d.hw_aborts[Cause::Capacity.index()] == 0 && d.hw_commits == 1),
        ];
        for (name, statuses, ok) in cases {
            // A random 2 % abort can land on any attempt: run each case until
            // an attempt sees only the forced statuses (bounded).
            expect_path(&v, name, &statuses, ok);
        }
        runtime::set_thread_runtime(None).unwrap();
    });
}

/// Runs one update commit with `statuses` forced until an attempt sees
/// only them (a random 2 % abort can land anywhere) and `ok` holds.
fn expect_path(v: &TVar<u64>, name: &str, statuses: &[Abort], ok: fn(&RuntimeStats, u64) -> bool) {
    for _ in 0..50 {
        let Some((d, runs)) = commit_with(v, statuses) else { continue };
        if ok(&d, runs) {
            return;
        }
    }
    panic!("{name}: the expected path was never taken");
}

#[test]
fn every_hybrid_level() {
    let _g = setup();
    bounded("levels", || {
        runtime::set_thread_runtime(Some(Runtime::Hybrid)).unwrap();
        runtime::set_policy(policy(4, 2, Subscription::Lazy));
        let v = TVar::new(0u64);
        let c = Abort(CONFLICT | RETRY);
        let ex = Cause::Explicit(0).index();
        let cases: Vec<Case> = vec![
            ("level 1", vec![], |d, runs| d.l1_commits == 1 && d.hw_commits == 0 && runs == 1),
            ("level 1 after a conflict", vec![c], |d, _| d.l1_aborts[Cause::Conflict.index()] == 1 && d.l1_commits == 1),
            ("level 2 after two conflicts", vec![c, c], |d, _| d.l1_commits == 0 && d.hw_commits == 1),
            ("level 2 at once on capacity", vec![Abort(CAPACITY)], |d, _| d.l1_aborts[Cause::Capacity.index()] == 1 && d.hw_commits == 1),
            ("level 1 meets a held lock", vec![Abort::explicit(code::LOCKED)], |d, _| {
                d.l1_aborts[Cause::Explicit(0).index()] == 1 && d.l1_commits == 1
            }),
            // level 3 is the coarse lock (Yates & Scott), not the fine-grain locks
            ("level 3", vec![c; 6], |d, _| d.l1_commits == 0 && d.hw_commits == 0 && d.sw_fallbacks == 1 && d.coarse_commits == 1),
        ];
        for (name, statuses, ok) in cases {
            expect_path(&v, name, &statuses, ok);
        }
        // a user error leaves level 1 at once, and is returned from software
        let before = runtime::stats();
        let mut runs = 0u64;
        let r: engram::Result<()> = stm::atomically(|tx| {
            runs += 1;
            tx.read(&v)?;
            Err(stm::StmError::Failed(engram::Error::TxTooLarge { needed: 2, limit: 1 }))
        });
        assert!(r.is_err());
        let d = delta(before, runtime::stats());
        // every level-1 run ends in an abort (the user error, or a random
        // 2 % conflict before it, which runs level 1 again), then one
        // software run returns the error
        let l1_runs: u64 = d.l1_aborts.iter().sum();
        assert_eq!(runs, l1_runs + 1, "{d:?}");
        assert!(d.l1_aborts[ex] + d.l1_aborts[Cause::Conflict.index()] >= 1, "{d:?}");
        assert!(d.l1_aborts[ex] == 1 || d.l1_aborts[Cause::Conflict.index()] == 2, "{d:?}");
        // retry leaves level 1 and blocks in software until the read changes
        let flag = TVar::new(false);
        let before = runtime::stats();
        let setter = {
            let flag = flag.clone();
            std::thread::spawn(move || stm::atomically(|tx| tx.write(&flag, true)).unwrap())
        };
        stm::atomically(|tx| if tx.read(&flag)? { Ok(()) } else { tx.retry() }).unwrap();
        setter.join().unwrap();
        let d = delta(before, runtime::stats());
        assert!(d.l1_commits == 1 || d.l1_aborts[ex] >= 1, "{d:?}");
        runtime::set_thread_runtime(None).unwrap();
    });
}

#[test]
fn a_real_conflict_fails_hardware_validation() {
    let _g = setup();
    bounded("validation", || {
        runtime::set_thread_runtime(Some(Runtime::FineHtm)).unwrap();
        let (a, b) = (TVar::new(1u64), TVar::new(0u64));
        let mut seen = Vec::new();
        let before = runtime::stats();
        stm::atomically(|tx| {
            let x = tx.read(&a)?;
            seen.push(x);
            if seen.len() == 1 {
                // another thread commits a new `a` after our read
                let a2 = a.clone();
                std::thread::spawn(move || stm::atomically(|tx| tx.write(&a2, 10)).unwrap()).join().unwrap();
            }
            tx.write(&b, x)
        })
        .unwrap();
        let d = delta(before, runtime::stats());
        // the body ran again and committed with the new value, whether the
        // stale read was caught by the hardware validation or by an earlier
        // software read re-validation (extension)
        assert_eq!(seen.first(), Some(&1));
        assert_eq!(seen.last(), Some(&10));
        assert_eq!(b.load(), 10);
        assert!(d.validate_aborts + d.aborts() >= 1, "the stale read was not caught: {d:?}");
        runtime::set_thread_runtime(None).unwrap();
    });
}

const ACCTS: usize = 8;
const START: u64 = 1000;

/// The accounts of a bank: `TVar`s, or `TWord`s inline in `TBox`es.
trait Accounts: Send + Sync + 'static {
    fn open() -> Self;
    fn get(&self, tx: &stm::STx<'_>, i: usize) -> StmResult<u64>;
    fn set(&self, tx: &stm::STx<'_>, i: usize, v: u64) -> StmResult<()>;
    fn total(&self) -> u64;
}

impl Accounts for Vec<TVar<u64>> {
    fn open() -> Self {
        (0..ACCTS).map(|_| TVar::new(START)).collect()
    }
    fn get(&self, tx: &stm::STx<'_>, i: usize) -> StmResult<u64> {
        tx.read(&self[i])
    }
    fn set(&self, tx: &stm::STx<'_>, i: usize, v: u64) -> StmResult<()> {
        tx.write(&self[i], v)
    }
    fn total(&self) -> u64 {
        self.iter().map(TVar::load).sum()
    }
}

/// Two accounts per box.
type WordPairs = Vec<TBox<[TWord<u64>; 2]>>;

impl Accounts for WordPairs {
    fn open() -> Self {
        (0..ACCTS / 2).map(|_| TBox::new([TWord::new(START), TWord::new(START)])).collect()
    }
    fn get(&self, tx: &stm::STx<'_>, i: usize) -> StmResult<u64> {
        tx.read(&self[i / 2].as_ref().word(|p| &p[i % 2]))
    }
    fn set(&self, tx: &stm::STx<'_>, i: usize, v: u64) -> StmResult<()> {
        tx.write(&self[i / 2].as_ref().word(|p| &p[i % 2]), v)
    }
    fn total(&self) -> u64 {
        self.iter().flat_map(|p| p.iter().map(TWord::load)).sum()
    }
}

/// [`bank_of`] over `TVar`s.
fn bank(rts: Vec<Runtime>, per: u64) -> u64 {
    bank_of::<Vec<TVar<u64>>>(rts, per)
}

/// Transfers on volatile accounts; `rts[i]` is worker i's runtime, the
/// auditor runs under the last one. Returns the auditor's bodies that saw
/// a broken total (zombies: only level 1 with lazy subscription may).
fn bank_of<A: Accounts>(rts: Vec<Runtime>, per: u64) -> u64 {
    let accts: Arc<A> = Arc::new(A::open());
    let done = Arc::new(AtomicBool::new(false));
    let audits = Arc::new(AtomicU64::new(0));
    let zombies = Arc::new(AtomicU64::new(0));
    let auditor = {
        let (accts, done, audits, zombies) = (accts.clone(), done.clone(), audits.clone(), zombies.clone());
        let art = rts.last().copied();
        std::thread::spawn(move || {
            runtime::set_thread_runtime(art).unwrap();
            let total = START * ACCTS as u64;
            while !done.load(Ordering::Acquire) || audits.load(Ordering::Relaxed) == 0 {
                let s = stm::atomically(|tx| {
                    let sum = || (0..ACCTS).map(|i| accts.get(tx, i)).sum::<StmResult<u64>>();
                    let mut s = sum()?;
                    if s != total {
                        // a zombie: it must be ended by the runtime (a read
                        // that validates), never commit, never loop forever
                        zombies.fetch_add(1, Ordering::Relaxed);
                        while s != total {
                            s = sum()?;
                        }
                    }
                    Ok(s)
                })
                .unwrap();
                assert_eq!(s, total, "an auditor committed a broken total");
                audits.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let hs: Vec<_> = rts
        .into_iter()
        .enumerate()
        .map(|(w, rt)| {
            let accts = accts.clone();
            std::thread::spawn(move || {
                runtime::set_thread_runtime(Some(rt)).unwrap();
                let before = runtime::stats();
                let mut r = (w as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                for _ in 0..per {
                    r = r.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let (i, j, amt) = ((r >> 33) as usize % ACCTS, (r >> 40) as usize % ACCTS, (r >> 50) % 50);
                    stm::atomically(|tx| {
                        let x = accts.get(tx, i)?.min(amt);
                        accts.set(tx, i, accts.get(tx, i)? - x)?;
                        accts.set(tx, j, accts.get(tx, j)? + x)
                    })
                    .unwrap();
                }
                (rt, delta(before, runtime::stats()))
            })
        })
        .collect();
    let mut hw = 0;
    for h in hs {
        let (rt, d) = h.join().unwrap();
        match rt {
            Runtime::Fine => assert_eq!(d, RuntimeStats::default(), "a Fine thread used hardware"),
            Runtime::FineHtm => {
                assert!(d.hw_commits + d.sw_fallbacks >= per, "{d:?}");
                hw += d.hw_commits;
            }
            Runtime::Hybrid => {
                assert!(d.l1_commits + d.hw_commits + d.sw_fallbacks >= per, "{d:?}");
                hw += d.l1_commits + d.hw_commits;
            }
            Runtime::Coarse => {
                // every transfer commits under the lock (one from an
                // account to itself writes too)
                assert_eq!(d.coarse_commits, per, "{d:?}");
                assert_eq!(d.hw_commits + d.l1_commits + d.sw_fallbacks, 0, "a Coarse thread used hardware: {d:?}");
            }
        }
    }
    done.store(true, Ordering::Release);
    auditor.join().unwrap();
    assert_eq!(accts.total(), START * ACCTS as u64);
    let z = zombies.load(Ordering::Relaxed);
    println!("bank: {} audits, {hw} hardware commits, {z} zombie bodies", audits.load(Ordering::Relaxed));
    z
}

#[test]
fn bank_under_each_runtime() {
    let _g = setup();
    bounded("bank", || {
        runtime::set_policy(HtmPolicy::default());
        use Runtime::{Fine, FineHtm};
        for rts in [vec![Fine; 4], vec![FineHtm; 4], vec![Fine, FineHtm, Fine, FineHtm]] {
            assert_eq!(bank(rts, 1500), 0, "a software body saw a broken total");
        }
        bank(vec![Runtime::Hybrid; 4], 1500);
        bank(vec![Runtime::Fine, Runtime::FineHtm, Runtime::Hybrid, Runtime::Hybrid], 1500);
        assert_eq!(bank(vec![Runtime::FineHtm; 8], 500), 0);
        bank(vec![Runtime::Hybrid; 8], 500);
        // early subscription: no body ever sees a broken total
        runtime::set_policy(HtmPolicy { subscription: Subscription::Early, ..HtmPolicy::default() });
        assert_eq!(bank(vec![Runtime::Hybrid; 4], 1000), 0, "early subscription let a zombie run");
        assert_eq!(bank(vec![Runtime::Fine, Runtime::Coarse, Runtime::FineHtm, Runtime::Hybrid], 1000), 0);
        runtime::set_policy(HtmPolicy::default());
    });
}

#[test]
fn coarse_bank_and_mixed_runtimes() {
    let _g = setup();
    bounded("coarse bank", || {
        runtime::set_policy(HtmPolicy::default());
        assert_eq!(bank(vec![Runtime::Coarse; 4], 1500), 0);
        assert_eq!(bank(vec![Runtime::Coarse; 8], 500), 0);
        assert_eq!(bank(vec![Runtime::Fine, Runtime::Coarse, Runtime::Fine, Runtime::Coarse], 1500), 0);
        bank(vec![Runtime::Fine, Runtime::FineHtm, Runtime::Hybrid, Runtime::Coarse], 1500);
        use Runtime::{Coarse, Fine, FineHtm, Hybrid};
        bank(vec![Coarse, Hybrid, Coarse, FineHtm, Fine, Hybrid, Coarse, Hybrid], 500);
    });
}

/// The bank over `TWord`s inline in `TBox`es (two accounts per box): every
/// runtime, alone and mixed (level 1 reads them in hardware, `Coarse`
/// validates them by value).
#[test]
fn word_bank_under_each_runtime() {
    let _g = setup();
    bounded("word bank", || {
        runtime::set_policy(HtmPolicy::default());
        use Runtime::{Coarse, Fine, FineHtm, Hybrid};
        for rts in [vec![Fine; 4], vec![FineHtm; 4], vec![Coarse; 4], vec![Fine, Coarse, FineHtm, Fine]] {
            assert_eq!(bank_of::<WordPairs>(rts, 1000), 0, "a software body saw a broken total");
        }
        // level 1 with lazy subscription (the default) may run a zombie body
        // (a hardware attempt that saw a broken total and is then aborted):
        // counted, not asserted, as in `bank_under_each_runtime`
        bank_of::<WordPairs>(vec![Fine, Coarse, FineHtm, Hybrid], 1000);
        bank_of::<WordPairs>(vec![Hybrid; 4], 1000);
        bank_of::<WordPairs>(vec![Coarse, Hybrid, Coarse, FineHtm, Fine, Hybrid, Coarse, Hybrid], 400);
        // early subscription: no body ever sees a broken total
        runtime::set_policy(HtmPolicy { subscription: Subscription::Early, ..HtmPolicy::default() });
        assert_eq!(bank_of::<WordPairs>(vec![Fine, Coarse, FineHtm, Hybrid], 1000), 0, "early subscription let a zombie run");
        runtime::set_policy(HtmPolicy::default());
    });
}

/// Producers push 1..=n into two bounded queues; consumers take from either
/// (`or_else`), blocking with `retry` when both are empty (producers block
/// when their queue is full). Every item is consumed exactly once.
fn queues(rt: Runtime, producers: u64, consumers: u64, n: u64) {
    const CAP: usize = 4;
    let qs: Arc<[TVar<Vec<u64>>; 2]> = Arc::new([TVar::new(Vec::new()), TVar::new(Vec::new())]);
    let got = Arc::new(AtomicU64::new(0));
    let sum = Arc::new(AtomicU64::new(0));
    let total = producers * n;
    let ps: Vec<_> = (0..producers)
        .map(|p| {
            let qs = qs.clone();
            std::thread::spawn(move || {
                runtime::set_thread_runtime(Some(rt)).unwrap();
                for i in 1..=n {
                    let q = &qs[(p % 2) as usize];
                    stm::atomically(|tx| {
                        let mut v = tx.read(q)?;
                        if v.len() >= CAP {
                            return tx.retry();
                        }
                        v.push(i);
                        tx.write(q, v)
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    let cs: Vec<_> = (0..consumers)
        .map(|_| {
            let (qs, got, sum) = (qs.clone(), got.clone(), sum.clone());
            std::thread::spawn(move || {
                runtime::set_thread_runtime(Some(rt)).unwrap();
                let take = |q: &TVar<Vec<u64>>, tx: &stm::STx<'_>| -> StmResult<Option<u64>> {
                    let mut v = tx.read(q)?;
                    match v.pop() {
                        Some(x) => tx.write(q, v).map(|_| Some(x)),
                        None => tx.retry(),
                    }
                };
                loop {
                    // claim one item of the total first, so no consumer
                    // blocks forever once everything is taken
                    if got.fetch_add(1, Ordering::SeqCst) >= total {
                        return;
                    }
                    let x = stm::atomically(|tx| tx.or_else(|tx| take(&qs[0], tx), |tx| take(&qs[1], tx))).unwrap();
                    sum.fetch_add(x.unwrap_or(0), Ordering::SeqCst);
                }
            })
        })
        .collect();
    for h in ps.into_iter().chain(cs) {
        h.join().unwrap();
    }
    assert_eq!(sum.load(Ordering::SeqCst), producers * n * (n + 1) / 2, "an item was lost or taken twice");
    assert!(qs[0].load().is_empty() && qs[1].load().is_empty());
}

#[test]
fn retry_and_or_else_under_each_runtime() {
    let _g = setup();
    bounded("queues", || {
        for &rt in Runtime::ALL {
            queues(rt, 2, 2, 300);
            queues(rt, 4, 4, 150);
        }
    });
}

#[test]
fn persistent_bank_under_fine_htm() {
    persistent_bank(&[Runtime::FineHtm; 4]);
}

#[test]
fn persistent_bank_under_coarse_and_mixed() {
    persistent_bank(&[Runtime::Coarse; 4]);
    persistent_bank(&[Runtime::Coarse, Runtime::Fine, Runtime::FineHtm, Runtime::Hybrid]);
}

/// A persistent bank, worker `w` under `rts[w]`; closed, reopened, counted.
fn persistent_bank(rts: &[Runtime]) {
    let _g = setup();
    let rts = rts.to_vec();
    let t = TempPool::new("stm-runtime");
    let path = t.0.clone();
    bounded("pstm", move || {
        let pool = Pool::create(&path, CreateOptions::new("rt").durability(Durability::Process)).unwrap();
        let accts: Arc<Vec<PTVar<u64>>> = Arc::new((0..ACCTS).map(|i| pool.root(&format!("a{i}"), || START).unwrap()).collect());
        let hs: Vec<_> = (0..rts.len() as u64)
            .map(|w| {
                let (pool, accts, rt) = (pool.clone(), accts.clone(), rts[w as usize]);
                std::thread::spawn(move || {
                    runtime::set_thread_runtime(Some(rt)).unwrap();
                    let before = runtime::stats();
                    for k in 0..300u64 {
                        let (i, j) = (((w * 31 + k * 7) % ACCTS as u64) as usize, ((w * 17 + k * 3 + 1) % ACCTS as u64) as usize);
                        pool.atomically(|tx| {
                            let x = tx.read(&accts[i])?.min(k % 30);
                            tx.write(&accts[i], tx.read(&accts[i])? - x)?;
                            tx.write(&accts[j], tx.read(&accts[j])? + x)
                        })
                        .unwrap();
                    }
                    delta(before, runtime::stats())
                })
            })
            .collect();
        let ds: Vec<RuntimeStats> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        let hw: u64 = ds.iter().map(|d| d.hw_commits).sum();
        let coarse: u64 = ds.iter().map(|d| d.coarse_commits).sum();
        println!("pstm: {hw} hardware commits, {coarse} coarse commits");
        if rts.contains(&Runtime::Coarse) {
            assert!(coarse > 0);
        }
        pool.close().unwrap();
        let pool = Pool::open(&path, OpenOptions::new("rt").durability(Durability::Process)).unwrap();
        let accts: Vec<PTVar<u64>> = (0..ACCTS).map(|i| pool.root(&format!("a{i}"), || 0u64).unwrap()).collect();
        let s: u64 = pool.atomically(|tx| accts.iter().map(|a| tx.read(a)).sum()).unwrap();
        assert_eq!(s, START * ACCTS as u64);
        pool.close().unwrap();
    });
    drop(t);
}

#[test]
fn runtime_names_parse() {
    assert_eq!(Runtime::parse("fine").unwrap(), Runtime::Fine);
    assert_eq!(Runtime::parse("fine-htm").unwrap(), Runtime::FineHtm);
    assert_eq!(Runtime::parse("hybrid").unwrap(), Runtime::Hybrid);
    assert_eq!(Runtime::parse("coarse").unwrap(), Runtime::Coarse);
    assert!(Runtime::parse("coarse-grain").is_err());
    for &rt in Runtime::ALL {
        assert_eq!(Runtime::parse(rt.name()).unwrap(), rt);
    }
    assert_eq!(runtime::parse_subscription("lazy").unwrap(), Subscription::Lazy);
    assert_eq!(runtime::parse_subscription("early").unwrap(), Subscription::Early);
    assert!(runtime::parse_subscription("eager").is_err());
}

thread_local! {
    /// Set on the committer thread whose commit must stall.
    static STALL_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
static STALLED: AtomicBool = AtomicBool::new(false);
static RELEASE: AtomicBool = AtomicBool::new(false);

/// The commit's hook after each volatile install (`failpoint::on_apply_gap`):
/// on the thread with `STALL_HERE`, the first call stalls until `RELEASE`,
/// so the commit stops between two in-place stores (its first write
/// installed, its later ones locked). (Replaced values are released
/// through the epoch scheme, later, so a value's drop cannot stall it.)
fn stall_once() {
    if STALL_HERE.with(|c| c.replace(false)) {
        STALLED.store(true, Ordering::SeqCst);
        wait_for(|| RELEASE.load(Ordering::SeqCst));
    }
}

/// Polls `f` for up to 60 s; returns whether it held.
fn wait_for(f: impl Fn() -> bool) -> bool {
    for _ in 0..60_000 {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// A `committer` commit writes x = 1, s = 1, w = 1 and stalls after
/// installing x; a Hybrid watcher checks x == w and loops re-reading while
/// they differ. Returns the watcher bodies that saw x != w, its counters
/// and its body runs.
fn zombie_run(committer: Runtime, sub: Subscription) -> (u64, RuntimeStats, u64) {
    runtime::set_policy(HtmPolicy { hw_attempts: Attempts::Fixed(8), subscription: sub, zombie_reads: 8, ..HtmPolicy::default() });
    let (x, s, w) = (TVar::new(0u64), TVar::new(0u64), TVar::new(0u64));
    STALLED.store(false, Ordering::SeqCst);
    RELEASE.store(false, Ordering::SeqCst);
    let c = {
        let (x, s, w) = (x.clone(), s.clone(), w.clone());
        std::thread::spawn(move || {
            runtime::set_thread_runtime(Some(committer)).unwrap();
            STALL_HERE.with(|c| c.set(true));
            engram::failpoint::on_apply_gap(Some(stall_once));
            stm::atomically(|tx| {
                tx.write(&x, 1)?;
                tx.write(&s, 1)?;
                tx.write(&w, 1)
            })
            .unwrap();
            engram::failpoint::on_apply_gap(None);
        })
    };
    assert!(wait_for(|| STALLED.load(Ordering::SeqCst)), "the commit never stalled");
    let (runs, zombies) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let watcher = {
        let (runs, zombies) = (runs.clone(), zombies.clone());
        std::thread::spawn(move || {
            runtime::set_thread_runtime(Some(Runtime::Hybrid)).unwrap();
            let before = runtime::stats();
            let r = stm::atomically(|tx| {
                runs.fetch_add(1, Ordering::SeqCst);
                let (mut a, mut b) = (tx.read(&x)?, tx.read(&w)?);
                if a != b {
                    // torn: only the runtime can end this loop (the
                    // committer is stalled until the watcher ran 10 times)
                    zombies.fetch_add(1, Ordering::SeqCst);
                    while a != b {
                        (a, b) = (tx.read(&x)?, tx.read(&w)?);
                    }
                }
                Ok((a, b))
            })
            .unwrap();
            (r, delta(before, runtime::stats()))
        })
    };
    let ran = wait_for(|| runs.load(Ordering::SeqCst) >= 10);
    RELEASE.store(true, Ordering::SeqCst);
    c.join().unwrap();
    let (r, d) = watcher.join().unwrap();
    assert!(ran, "the watcher stopped running while the commit stalled (a zombie looped?)");
    assert_eq!(r, (1, 1), "the watcher committed a torn state");
    runtime::set_policy(HtmPolicy::default());
    (zombies.load(Ordering::SeqCst), d, runs.load(Ordering::SeqCst))
}

#[test]
fn zombies_are_contained_lazy_and_early() {
    let _g = setup();
    bounded("zombies", || {
        let locked = Cause::Explicit(0).index();
        for committer in [Runtime::Fine, Runtime::Coarse] {
            // lazy: the watcher reads x installed and w locked, runs as a
            // zombie, and its re-reads end it (subscription re-checked every
            // 8 reads here: LOCKED); it commits only after the commit finished
            let (z, d, runs) = zombie_run(committer, Subscription::Lazy);
            println!("{committer:?} lazy: {z} zombie bodies, {runs} runs, {d:?}");
            assert!(z >= 1, "{committer:?}: no lazy level-1 attempt saw the torn state: {d:?}");
            assert!(d.l1_aborts[locked] >= 1, "{d:?}");
            // early: the locked word (Fine) or the coarse lock's word read at
            // begin (Coarse) aborts every attempt before it sees anything
            let (z, d, runs) = zombie_run(committer, Subscription::Early);
            println!("{committer:?} early: {z} zombie bodies, {runs} runs, {d:?}");
            assert_eq!(z, 0, "{committer:?}: early subscription let a zombie run");
            assert!(d.l1_aborts[locked] >= 1, "{d:?}");
        }
    });
}

#[test]
fn retry_policies_attempts_per_thread() {
    let _g = setup();
    bounded("policies", || {
        let p = HtmPolicy { commit_attempts: Attempts::PerThread(2), threads: 3, ..HtmPolicy::default() };
        assert_eq!(p.resolve(p.commit_attempts), 6);
        assert_eq!(p.resolve(p.hw_attempts), 2, "the paper's two full-hardware attempts");
        assert_eq!(HtmPolicy::default().commit_attempts, Attempts::PerThread(1));
        assert_eq!(HtmPolicy::default().subscription, Subscription::Lazy);
        runtime::set_policy(p);
        assert_eq!(runtime::policy(), p);
        runtime::set_thread_runtime(Some(Runtime::FineHtm)).unwrap();
        let v = TVar::new(0u64);
        let c = Abort(CONFLICT | RETRY);
        // five conflicts: the sixth hardware attempt commits
        expect_path(&v, "2 per thread x 3 threads, 5 conflicts", &[c; 5], |d, _| d.hw_commits == 1 && d.sw_fallbacks == 0);
        // six: attempts exhausted, the software commit
        expect_path(&v, "2 per thread x 3 threads, 6 conflicts", &[c; 6], |d, _| d.hw_commits == 0 && d.sw_fallbacks == 1);
        // Hybrid: hw_attempts Fixed(3) then level 2
        runtime::set_policy(HtmPolicy { hw_attempts: Attempts::Fixed(3), ..p });
        runtime::set_thread_runtime(Some(Runtime::Hybrid)).unwrap();
        expect_path(&v, "3 level-1 attempts", &[c; 2], |d, _| d.l1_commits == 1);
        expect_path(&v, "3 level-1 attempts exhausted", &[c; 3], |d, _| d.l1_commits == 0 && d.hw_commits == 1);
        runtime::set_thread_runtime(None).unwrap();
        runtime::set_policy(HtmPolicy::default());
    });
}

/// Write skew between a hardware commit and a software one: two variables
/// hold 1 each; a transaction that sees both at 1 zeroes its own, one that
/// sees a single 1 refills the other. Serializable runs never see both at
/// 0. (Found by this session: a software commit skipped its validation when
/// no newer timestamp existed, but a hardware commit locks and validates
/// before taking its timestamp, so the two could each miss the other.)
#[test]
fn no_write_skew_between_hardware_and_software_commits() {
    let _g = setup();
    bounded("write skew", || {
        runtime::set_policy(HtmPolicy::default());
        let xs: Arc<[TVar<u64>; 2]> = Arc::new([TVar::new(1), TVar::new(1)]);
        let rts = [Runtime::FineHtm, Runtime::Fine, Runtime::FineHtm, Runtime::Fine, Runtime::Hybrid, Runtime::Coarse];
        let hs: Vec<_> = rts
            .iter()
            .enumerate()
            .map(|(t, &rt)| {
                let xs = xs.clone();
                std::thread::spawn(move || {
                    runtime::set_thread_runtime(Some(rt)).unwrap();
                    for _ in 0..3000 {
                        // (a lazy level-1 zombie may see both at 0: it must
                        // not commit that)
                        let skew = stm::atomically(|tx| {
                            let (a, b) = (tx.read(&xs[0])?, tx.read(&xs[1])?);
                            match a + b {
                                0 => return Ok(true),
                                2 => tx.write(&xs[t % 2], 0)?,
                                _ => tx.write(&xs[usize::from(a == 1)], 1)?,
                            }
                            Ok(false)
                        })
                        .unwrap();
                        assert!(!skew, "write skew: both variables at 0 ({rt:?})");
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert!(xs[0].load() + xs[1].load() >= 1);
    });
}

/// A persistent treap under hardware and software commits mixed: thread
/// `t` owns the keys `k % 4 == t` below 400 (checked against its own
/// model) and increments four shared keys. (The two serializability fixes
/// of this session were found by `stm_collections`' threaded tests run
/// with `ENGRAM_HTM=emulated ENGRAM_STM_RUNTIME=fine-htm`, which lost or
/// duplicated keys in about one run of three before them; this smaller
/// mix and the write-skew test above did not reproduce them in a few
/// runs, so that command stays the reproduction.)
#[test]
fn persistent_treap_under_mixed_commits() {
    use engram::stm::collections::Treap;
    let _g = setup();
    let t = TempPool::new("stm-treap");
    let path = t.0.clone();
    bounded("persistent treap", move || {
        runtime::set_policy(HtmPolicy::default());
        let pool = Pool::create(&path, CreateOptions::new("treap").durability(Durability::Process)).unwrap();
        let tr: Treap<u64, u64> = Treap::root(&pool, "t").unwrap();
        let rts = [Runtime::FineHtm, Runtime::Fine, Runtime::FineHtm, Runtime::Coarse];
        let hs: Vec<_> = (0..4u64)
            .map(|th| {
                let pool = pool.clone();
                let rt = rts[th as usize];
                std::thread::spawn(move || {
                    runtime::set_thread_runtime(Some(rt)).unwrap();
                    let (mut model, mut incs) = (std::collections::BTreeMap::new(), 0u64);
                    let mut r = (th + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    for _ in 0..1200 {
                        r = r.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let k = ((r >> 33) % 100) * 4 + th;
                        match (r >> 20) % 8 {
                            0 | 1 => {
                                let s = 1000 + (r >> 40) % 4;
                                pool.atomically(|tx| tx_incr(&tr, tx, s)).unwrap();
                                incs += 1;
                            }
                            2..=5 => assert_eq!(pool.atomically(|tx| tr.insert(tx, k, r)).unwrap(), model.insert(k, r)),
                            _ => assert_eq!(pool.atomically(|tx| tr.remove(tx, &k)).unwrap(), model.remove(&k)),
                        }
                    }
                    (model, incs)
                })
            })
            .collect();
        let (mut model, mut incs) = (std::collections::BTreeMap::new(), 0);
        for h in hs {
            let (m, i) = h.join().unwrap();
            model.extend(m);
            incs += i;
        }
        let shared: u64 = pool.atomically(|tx| (1000..1004).map(|k| Ok(tr.get(tx, &k)?.unwrap_or(0))).sum()).unwrap();
        assert_eq!(shared, incs, "an increment was lost");
        for k in 0..400u64 {
            assert_eq!(pool.atomically(|tx| tr.get(tx, &k)).unwrap(), model.get(&k).copied(), "key {k}");
        }
        pool.close().unwrap();
    });
    drop(t);
}

fn tx_incr(tr: &engram::stm::collections::Treap<u64, u64>, tx: &stm::STx<'_>, k: u64) -> StmResult<()> {
    let v = tr.get(tx, &k)?.unwrap_or(0);
    tr.insert(tx, k, v + 1).map(|_| ())
}

/// Coarse threads beside Hybrid threads on the same counters, no
/// escalation involved: every increment must land. A coarse commit locks
/// its words with plain stores; it must see the locks of a level-1 commit
/// that validated before the coarse word was set even while the emulated
/// commit is still publishing them (`runtime::word_load`), or it takes a
/// word that commit owns and one increment is lost. (Before that fix this
/// lost increments here too, not only under Hybrid's level 3.)
#[test]
fn coarse_beside_hybrid_loses_no_update() {
    let _g = setup();
    bounded("coarse beside hybrid", || {
        use Runtime::{Coarse, Hybrid};
        const PER: u64 = 2500;
        let ctrs: Arc<Vec<TVar<u64>>> = Arc::new((0..3).map(|_| TVar::new(0)).collect());
        let hs: Vec<_> = [Coarse, Hybrid, Coarse, Hybrid]
            .into_iter()
            .map(|rt| {
                let ctrs = ctrs.clone();
                std::thread::spawn(move || {
                    runtime::set_thread_runtime(Some(rt)).unwrap();
                    let before = runtime::stats();
                    for k in 0..PER {
                        let c = &ctrs[k as usize % ctrs.len()];
                        stm::atomically(|tx| tx.write(c, tx.read(c)? + 1)).unwrap();
                    }
                    runtime::set_thread_runtime(None).unwrap();
                    delta(before, runtime::stats())
                })
            })
            .collect();
        let ds: Vec<RuntimeStats> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        let total: u64 = ctrs.iter().map(TVar::load).sum();
        let l1: u64 = ds.iter().map(|d| d.l1_commits).sum();
        let l3: u64 = ds.iter().skip(1).step_by(2).map(|d| d.coarse_commits).sum();
        println!("coarse beside hybrid: {l1} level-1 commits, {l3} Hybrid level-3 commits, total {total}");
        assert_eq!(total, 4 * PER, "increments lost or duplicated");
    });
}

/// Runs `body` as one transaction under `rt` on this thread and returns
/// how many times the body ran; on its first run, after the body's reads,
/// `interfere` commits on another thread.
fn runs_with_interference(rt: Runtime, body: impl Fn(&stm::STx<'_>) -> StmResult<()>, interfere: impl Fn() + Sync) -> u32 {
    runtime::set_thread_runtime(Some(rt)).unwrap();
    let runs = std::cell::Cell::new(0u32);
    stm::atomically(|tx| {
        runs.set(runs.get() + 1);
        body(tx)?;
        if runs.get() == 1 {
            std::thread::scope(|s| {
                s.spawn(|| {
                    runtime::set_thread_runtime(Some(Runtime::Fine)).unwrap();
                    interfere();
                });
            });
        }
        Ok(())
    })
    .unwrap();
    runtime::set_thread_runtime(None).unwrap();
    runs.get()
}

/// `Coarse` validates by value (Yates & Scott's coarse level, GHC's STM): a
/// boxed `TVar` read whose variable was rewritten since with the very same
/// `Arc` still validates (one run), one rewritten with another `Arc` of an
/// equal value does not (pointer equality only: two runs); `Fine`
/// validates by version, so the same-`Arc` rewrite makes it run again. An
/// inline `TVar` (a `u64`: its bytes in the value word) rewritten with an
/// equal value validates, as a `PTVar` rewritten with the same bytes does;
/// with other bytes it does not.
#[test]
fn coarse_validates_by_value() {
    let _g = setup();
    bounded("value validation", || {
        let (v, out) = (TVar::new(vec![5u64]), TVar::new(0u64));
        let shared: Arc<Vec<u64>> = stm::atomically(|tx| v.read_arc(tx)).unwrap();
        let body = |tx: &stm::STx<'_>| {
            let a = v.read_arc(tx)?;
            tx.write(&out, a[0] + 1)
        };
        let same_arc = || stm::atomically(|tx| v.write_arc(tx, shared.clone())).unwrap();
        let before = runtime::value_checks();
        assert_eq!(runs_with_interference(Runtime::Coarse, body, same_arc), 1, "same Arc: valid by value");
        let d = runtime::value_checks();
        assert_eq!((d.same_value - before.same_value, d.changed - before.changed), (1, 0));
        assert_eq!(runs_with_interference(Runtime::Fine, body, same_arc), 2, "Fine validates versions");
        let other_arc = || stm::atomically(|tx| v.write_arc(tx, Arc::new(vec![5]))).unwrap();
        assert_eq!(runs_with_interference(Runtime::Coarse, body, other_arc), 2, "another Arc, equal value: invalid");
        assert!(runtime::value_checks().changed > d.changed);
        // tx.read/write under Coarse (a fresh Arc per write) is still correct
        let plain = |tx: &stm::STx<'_>| {
            let x = tx.read(&v)?;
            tx.write(&out, x[0] + 1)
        };
        assert_eq!(runs_with_interference(Runtime::Coarse, plain, || stm::atomically(|tx| tx.write(&v, vec![7])).unwrap()), 2);
        assert_eq!(out.load(), 8);
        // Inline: equal bytes validate, other bytes do not.
        let n = TVar::new(5u64);
        let inline = |tx: &stm::STx<'_>| {
            let x = *n.read_arc(tx)?;
            tx.write(&out, x + 1)
        };
        let equal = || stm::atomically(|tx| n.write_arc(tx, Arc::new(5))).unwrap();
        assert_eq!(runs_with_interference(Runtime::Coarse, inline, equal), 1, "inline, equal value: valid");
        assert_eq!(runs_with_interference(Runtime::Fine, inline, equal), 2, "Fine validates versions");
        let other = || stm::atomically(|tx| tx.write(&n, 9)).unwrap();
        assert_eq!(runs_with_interference(Runtime::Coarse, inline, other), 2, "inline, other value: invalid");
        assert_eq!(out.load(), 10);

        let t = TempPool::new("stm-value-validation");
        let pool = Pool::create(&t.0, CreateOptions::new("vv").durability(Durability::Process)).unwrap();
        let (x, y): (PTVar<u64>, PTVar<u64>) = (pool.root("x", || 5).unwrap(), pool.root("y", || 0).unwrap());
        let pbody = |tx: &stm::STx<'_>| {
            let a = tx.read(&x)?;
            tx.write(&y, a + 1)
        };
        let prun = |val: u64| {
            runtime::set_thread_runtime(Some(Runtime::Coarse)).unwrap();
            let runs = std::cell::Cell::new(0u32);
            pool.atomically(|tx| {
                runs.set(runs.get() + 1);
                pbody(tx)?;
                if runs.get() == 1 {
                    std::thread::scope(|s| {
                        s.spawn(|| {
                            runtime::set_thread_runtime(Some(Runtime::Fine)).unwrap();
                            pool.atomically(|tx| tx.write(&x, val)).unwrap();
                        });
                    });
                }
                Ok(())
            })
            .unwrap();
            runtime::set_thread_runtime(None).unwrap();
            runs.get()
        };
        assert_eq!(prun(5), 1, "PTVar rewritten with the same bytes: valid by value");
        assert_eq!(prun(9), 2, "PTVar rewritten with other bytes: invalid");
        assert_eq!(pool.atomically(|tx| tx.read(&y)).unwrap(), 10);
        pool.close().unwrap();
        drop(t);
    });
}
