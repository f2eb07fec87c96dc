//! Tests of the hybrid runtime on the emulated backend: every level, every
//! abort cause, the retry policies, lazy vs early subscription and zombie
//! containment, `retry`/`or_else`, the no-lost-wake-up stress under 4 and 8
//! threads (Bloom and precise), and an invariant under concurrency.

use super::*;
use crate::htm::abort::{Abort, CONFLICT, DEBUG, NESTED, RETRY};
use crate::htm::{EmuConfig, Htm};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[repr(align(64))]
struct Line<T>(T);

fn runtime(policy: Policy, cfg: EmuConfig) -> Runtime {
    Runtime::new(Htm::emulated(cfg), policy)
}

fn transfer<'v>(rt: &'v Runtime, a: &'v HVar<i64>, b: &'v HVar<i64>, n: i64) -> i64 {
    rt.atomically(|tx| {
        let (x, y) = (tx.read(a)?, tx.read(b)?);
        tx.write(a, x - n)?;
        tx.write(b, y + n)?;
        Ok(x - n)
    })
    .unwrap()
}

fn inject(rt: &Runtime, s: Abort, n: usize) {
    rt.htm().emu().unwrap().inject(std::iter::repeat_n(s, n));
}

#[test]
fn each_mode_commits_at_its_level() {
    for (mode, level) in [(Mode::Hybrid, Level::Hardware), (Mode::HtmCommit, Level::HtmCommit), (Mode::Coarse, Level::Lock)] {
        let rt = runtime(Policy { mode, ..Policy::default() }, EmuConfig::default());
        let (a, b) = (HVar::new(10i64), HVar::new(0i64));
        assert_eq!(transfer(&rt, &a, &b, 3), 7);
        assert_eq!((a.get(), b.get()), (7, 3));
        let ro = rt.atomically(|tx| tx.read(&b)).unwrap();
        assert_eq!(ro, 3);
        let mut want = [0; 3];
        want[level as usize] = 2;
        assert_eq!(rt.stats().commits, want, "{mode:?}");
    }
}

#[test]
fn level1_aborts_by_cause_fall_back() {
    let policy = Policy { hw_attempts: Attempts::Fixed(2), commit_attempts: Attempts::Fixed(1), ..Policy::default() };
    // Retryable causes: two level-1 aborts, then a level-2 commit.
    for (status, cause) in
        [(Abort(CONFLICT | RETRY), Cause::Conflict), (Abort(DEBUG), Cause::Debug), (Abort(NESTED), Cause::Nested), (Abort(0), Cause::Other)]
    {
        let rt = runtime(policy.clone(), EmuConfig::default());
        let (a, b) = (HVar::new(10i64), HVar::new(0i64));
        inject(&rt, status, 2);
        transfer(&rt, &a, &b, 1);
        let s = rt.stats();
        assert_eq!(s.hw_aborts[cause.index()], 2, "{cause:?}");
        assert_eq!(s.commits, [0, 1, 0], "{cause:?}");
        assert_eq!((a.get(), b.get()), (9, 1));
    }
    // A conflict then a commit: the second hardware attempt wins.
    let rt = runtime(policy.clone(), EmuConfig::default());
    let (a, b) = (HVar::new(10i64), HVar::new(0i64));
    inject(&rt, Abort(CONFLICT | RETRY), 1);
    transfer(&rt, &a, &b, 1);
    assert_eq!(rt.stats().commits, [1, 0, 0]);
}

#[test]
fn capacity_skips_hardware_retries_and_reaches_the_lock() {
    // 40 variables on at least 5 lines; 2 lines fit: level 1 and the
    // level-2 commit both overflow, without the retry hint.
    let rt = runtime(Policy::default(), EmuConfig { read_lines: 2, write_lines: 2, ..EmuConfig::default() });
    let vars: Vec<HVar<u64>> = (0..40).map(HVar::new).collect();
    let sum = rt
        .atomically(|tx| {
            let mut s = 0;
            for v in &vars {
                s += tx.read(v)?;
            }
            tx.write(&vars[0], s)?;
            Ok(s)
        })
        .unwrap();
    assert_eq!((sum, vars[0].get()), (780, 780));
    let s = rt.stats();
    assert_eq!(s.hw_aborts[Cause::Capacity.index()], 1, "no second hardware attempt");
    assert_eq!(s.commit_aborts[Cause::Capacity.index()], 1);
    assert_eq!(s.commits, [0, 0, 1]);
}

#[test]
fn commit_attempts_scale_with_threads() {
    for (threads, level) in [(4, 1usize), (2, 2usize)] {
        let policy = Policy { mode: Mode::HtmCommit, commit_attempts: Attempts::PerThread(1), threads, ..Policy::default() };
        let rt = runtime(policy, EmuConfig::default());
        let (a, b) = (HVar::new(10i64), HVar::new(0i64));
        inject(&rt, Abort(CONFLICT | RETRY), 3);
        transfer(&rt, &a, &b, 1);
        let s = rt.stats();
        assert_eq!(s.commits[level], 1, "threads {threads}");
        assert_eq!(s.commit_aborts[Cause::Conflict.index()], 3.min(u64::from(threads)));
    }
    // Hardware attempts per thread too.
    let policy = Policy { hw_attempts: Attempts::PerThread(1), threads: 3, ..Policy::default() };
    let rt = runtime(policy, EmuConfig::default());
    let (a, b) = (HVar::new(10i64), HVar::new(0i64));
    inject(&rt, Abort(CONFLICT | RETRY), 2);
    transfer(&rt, &a, &b, 1);
    assert_eq!(rt.stats().commits, [1, 0, 0]);
}

/// A transaction whose first run sees a variable it read overwritten by a
/// (simulated) concurrent writer that is not a transaction of this runtime.
fn stale_read(mode: Mode) -> HybridStats {
    let rt = runtime(Policy { mode, hw_attempts: Attempts::Fixed(0), ..Policy::default() }, EmuConfig::default());
    let (a, b) = (HVar::new(10i64), HVar::new(0i64));
    let runs = AtomicU32::new(0);
    rt.atomically(|tx| {
        let x = tx.read(&a)?;
        if runs.fetch_add(1, SeqCst) == 0 {
            rt.htm().nt_store(&a.word, 20);
        }
        tx.write(&b, x)
    })
    .unwrap();
    assert_eq!((runs.load(SeqCst), b.get()), (2, 20));
    rt.stats()
}

#[test]
fn value_validation_at_levels_2_and_3() {
    let s = stale_read(Mode::HtmCommit);
    assert_eq!((s.explicit[usize::from(code::VALIDATE)], s.sw_conflicts, s.commits), (1, 1, [0, 1, 0]));
    let s = stale_read(Mode::Coarse);
    assert_eq!((s.sw_conflicts, s.commits), (1, [0, 0, 1]));
}

#[test]
fn explicit_user_error_goes_down_and_is_returned() {
    let rt = runtime(Policy::default(), EmuConfig::default());
    let a = HVar::new(1u64);
    let r: Result<(), _> = rt.atomically(|tx| {
        tx.write(&a, 2)?;
        Err(TxError::Failed(crate::Error::TxnInAtomically))
    });
    assert!(r.is_err());
    assert_eq!(a.get(), 1);
    assert_eq!(rt.stats().explicit[usize::from(code::USER)], 1);
}

#[test]
fn serial_after_runs_the_body_under_the_lock() {
    let rt = runtime(Policy { mode: Mode::Coarse, serial_after: 0, ..Policy::default() }, EmuConfig::default());
    let (a, b) = (HVar::new(10i64), HVar::new(0i64));
    transfer(&rt, &a, &b, 4);
    let s = rt.stats();
    assert_eq!((s.serial, s.commits, a.get()), (1, [0, 0, 1], 6));
    assert_eq!(rt.htm().nt_load(&rt.lock.0), 0, "lock released");
}

#[test]
fn or_else_in_hardware_and_software() {
    let rt = runtime(Policy::default(), EmuConfig::default());
    let (a, b, c) = (HVar::new(0u64), HVar::new(0u64), HVar::new(0u64));
    // The first branch retries without writing: the second runs in hardware.
    let r = rt.atomically(|tx| tx.or_else(|t| if t.read(&a)? == 0 { t.retry() } else { Ok(1) }, |t| t.write(&b, 5).map(|()| 2))).unwrap();
    assert_eq!((r, b.get(), rt.stats().commits), (2, 5, [1, 0, 0]));
    // It wrote first: the hardware transaction goes to software, where the
    // first branch's write is dropped.
    let r = rt
        .atomically(|tx| {
            tx.or_else(
                |t| {
                    t.write(&c, 9)?;
                    if t.read(&a)? == 0 {
                        t.retry()
                    } else {
                        Ok(1)
                    }
                },
                |t| t.write(&b, 6).map(|()| 2),
            )
        })
        .unwrap();
    let s = rt.stats();
    assert_eq!((r, b.get(), c.get()), (2, 6, 0));
    assert_eq!((s.explicit[usize::from(code::RETRY)], s.commits), (1, [1, 1, 0]));
}

/// A level-1 transaction reads `a`, then a lock holder (another thread)
/// writes `b` and stalls; the transaction reads `b`, sees a broken
/// invariant and loops on `check()`. Lazy: the check subscribes and aborts
/// it (`LOCKED`). Early: the lock acquisition itself aborts it (conflict).
///
/// With `reads_only`, the zombie loop never calls `check()`: it re-reads
/// the two variables until they agree, and the read-count subscription
/// (`zombie_reads`) must end it.
fn zombie_case(subscription: Subscription, reads_only: bool) -> (HybridStats, u32) {
    let policy = Policy { subscription, zombie_checks: 8, zombie_reads: 64, ..Policy::default() };
    let rt = runtime(policy, EmuConfig::default());
    // On two cache lines: one line would make any write a conflict.
    let (la, lb) = (Line(HVar::new(50i64)), Line(HVar::new(50i64)));
    let (a, b) = (&la.0, &lb.0);
    let (stage, zombies, runs) = (AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0));
    let sum = std::thread::scope(|s| {
        s.spawn(|| {
            while stage.load(SeqCst) != 1 {
                std::thread::yield_now();
            }
            rt.lock_commit();
            rt.htm().nt_store(&b.word, 60);
            stage.store(2, SeqCst);
            while rt.stats().hw_aborts.iter().sum::<u64>() == 0 {
                std::thread::yield_now();
            }
            rt.htm().nt_store(&a.word, 40i64 as u64);
            rt.htm().nt_store(&rt.commits.0, rt.htm().nt_load(&rt.commits.0) + 1);
            rt.unlock_commit();
        });
        rt.atomically(|tx| {
            let x = tx.read(a)?;
            if runs.fetch_add(1, SeqCst) == 0 {
                stage.store(1, SeqCst);
                while stage.load(SeqCst) != 2 {
                    std::thread::yield_now();
                }
            }
            let y = tx.read(b)?;
            if x + y != 100 {
                zombies.fetch_add(1, SeqCst);
                loop {
                    if reads_only {
                        if tx.read(a)? + tx.read(b)? == 100 {
                            break;
                        }
                    } else {
                        tx.check()?;
                    }
                }
            }
            Ok(x + y)
        })
        .unwrap()
    });
    assert_eq!(sum, 100);
    (rt.stats(), zombies.load(SeqCst))
}

#[test]
fn lazy_subscription_zombie_is_contained() {
    for reads_only in [false, true] {
        let (s, zombies) = zombie_case(Subscription::Lazy, reads_only);
        assert_eq!(zombies, 1);
        assert_eq!(s.explicit[usize::from(code::LOCKED)], 1);
        assert_eq!(s.commits, [1, 0, 0]);
    }
    let (s, zombies) = zombie_case(Subscription::Early, false);
    assert_eq!(zombies, 0, "early subscription never sees the broken invariant");
    assert_eq!(s.hw_aborts[Cause::Conflict.index()], 1);
    assert_eq!(s.commits, [1, 0, 0]);
}

#[test]
fn zombies_under_concurrent_lock_commits_never_commit() {
    let rt = runtime(Policy { zombie_checks: 16, ..Policy::default() }, EmuConfig::default());
    let (a, b) = (HVar::new(50i64), HVar::new(50i64));
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..1500 {
                rt.atomically_in(Mode::Coarse, |tx| {
                    let (x, y) = (tx.read(&a)?, tx.read(&b)?);
                    tx.write(&a, x - 1)?;
                    tx.write(&b, y + 1)
                })
                .unwrap();
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..1500 {
                    let (x, y) = rt
                        .atomically(|tx| {
                            let (x, y) = (tx.read(&a)?, tx.read(&b)?);
                            if x + y != 100 {
                                loop {
                                    tx.check()?;
                                }
                            }
                            Ok((x, y))
                        })
                        .unwrap();
                    assert_eq!(x + y, 100);
                }
            });
        }
    });
    assert_eq!((a.get(), b.get()), (-1450, 1550));
}

/// Takes the token from `f`, or retries.
fn take<'v>(tx: &mut Tx<'v>, f: &'v HVar<u64>) -> TxResult<()> {
    if tx.read(f)? == 0 {
        return tx.retry();
    }
    tx.write(f, 0)
}

/// `n` threads pass a token around a ring `rounds` times; each blocks
/// (`retry`) until its flag is set. Every thread must run every round: a
/// lost wake-up stops the ring, which the watchdog reports. With `or_else`,
/// each thread has two flags and the token lands on either (alternating by
/// round): the thread waits on both through `or_else`, whose first branch's
/// reads are kept when both retry.
fn ring(n: usize, rounds: u64, watch: WatchMode, or_else: bool) -> HybridStats {
    let rt = Arc::new(runtime(Policy { watch, threads: n as u32, ..Policy::default() }, EmuConfig::default()));
    let flags: Arc<Vec<HVar<u64>>> = Arc::new((0..2 * n).map(|i| HVar::new(u64::from(i == 0))).collect());
    let count = Arc::new(HVar::new(0u64));
    let progress = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (rt, flags, count, progress) = (rt.clone(), flags.clone(), count.clone(), progress.clone());
            std::thread::spawn(move || {
                for r in 0..rounds {
                    rt.atomically(|tx| {
                        if or_else {
                            tx.or_else(|tx| take(tx, &flags[i]), |tx| take(tx, &flags[n + i]))?;
                        } else {
                            take(tx, &flags[i])?;
                        }
                        let next = (i + 1) % n;
                        let alt = or_else && (r + i as u64) % 2 == 1;
                        tx.write(&flags[if alt { n + next } else { next }], 1)?;
                        let c = tx.read(&count)?;
                        tx.write(&count, c + 1)
                    })
                    .unwrap();
                    progress.fetch_add(1, SeqCst);
                }
            })
        })
        .collect();
    let total = n as u64 * rounds;
    let (mut last, mut since) = (0, Instant::now());
    while progress.load(SeqCst) < total {
        std::thread::sleep(Duration::from_millis(20));
        let p = progress.load(SeqCst);
        if p != last {
            (last, since) = (p, Instant::now());
        }
        // A hang detector, not a timing assertion: a minute without any
        // progress on a token ring is a lost wake-up.
        assert!(since.elapsed() < Duration::from_secs(60), "lost wake-up: ring of {n} stuck at {p}/{total}");
    }
    handles.into_iter().for_each(|h| h.join().unwrap());
    assert_eq!(count.get(), total);
    rt.stats()
}

#[test]
fn retry_wakes_every_waiter_4_and_8_threads() {
    for n in [4, 8] {
        for (watch, or_else) in [(WatchMode::Bloom, false), (WatchMode::Precise, false), (WatchMode::Bloom, true)] {
            let s = ring(n, 150, watch, or_else);
            println!(
                "ring {n} {watch:?} or_else {or_else}: blocked {} woken {} false {} commits {:?}",
                s.wake.registered, s.wake.woken, s.wake.false_wakeups, s.commits
            );
            // No zero-false-wake-up assertion for precise sets here: a
            // committer scans after its stores, so a waiter that already
            // read its new value and registered in between is woken "late"
            // (a real, rare false wake-up on a preempted machine). Precise
            // matching itself is checked deterministically in
            // htm::wakeup's tests and in tests/stm_wait.rs.
        }
    }
}

#[test]
fn bank_invariant_mixed_levels_under_random_aborts() {
    let policy = Policy { threads: 4, ..Policy::default() };
    let rt = runtime(policy, EmuConfig { seed: 7, conflict_ppm: 50_000, ..EmuConfig::default() });
    let accts: Vec<HVar<i64>> = (0..16).map(|_| HVar::new(100)).collect();
    std::thread::scope(|s| {
        for t in 0..4usize {
            let (rt, accts) = (&rt, &accts);
            s.spawn(move || {
                let mode = [Mode::Hybrid, Mode::Hybrid, Mode::HtmCommit, Mode::Coarse][t];
                for i in 0..400usize {
                    let (from, to) = ((i * 7 + t) % 16, (i * 3 + t + 1) % 16);
                    rt.atomically_in(mode, |tx| {
                        let (x, y) = (tx.read(&accts[from])?, tx.read(&accts[to])?);
                        tx.write(&accts[from], x - 1)?;
                        let y = if from == to { x - 1 } else { y };
                        tx.write(&accts[to], y + 1)
                    })
                    .unwrap();
                    let total: i64 = rt.atomically(|tx| accts.iter().try_fold(0, |s, a| Ok(s + tx.read(a)?))).unwrap();
                    assert_eq!(total, 1600);
                }
            });
        }
    });
    assert_eq!(accts.iter().map(HVar::get).sum::<i64>(), 1600);
    let s = rt.stats();
    assert_eq!(s.commits.iter().sum::<u64>(), 3200);
    println!("bank: commits {:?} hw aborts {:?} commit aborts {:?}", s.commits, s.hw_aborts, s.commit_aborts);
}

#[test]
fn auto_backend_runs_the_bank() {
    // Real RTM where the CPU has it, else emulated: the same semantics.
    let rt = Runtime::new(Htm::auto(EmuConfig::default()), Policy::default());
    println!("backend: {}", rt.htm().name());
    let (a, b) = (HVar::new(1000i64), HVar::new(0i64));
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                (0..500).for_each(|_| {
                    transfer(&rt, &a, &b, 1);
                })
            });
        }
    });
    assert_eq!((a.get(), b.get()), (0, 1000));
}
