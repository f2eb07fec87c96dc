//! STM state per pool (issue 14): each pool has its own clock, serial lock
//! and `retry` wait list, volatile variables a process-wide domain of their
//! own (`stm/engine/domain.rs`).
//!
//! - two pools used at once by transactions on several threads: each
//!   pool's invariant holds;
//! - a `retry` on one pool is woken by a commit on that pool, and commits
//!   on another pool do not even scan its wait list;
//! - a transaction over a pool and volatile `TVar`s is atomic across both
//!   domains while volatile-only and pool-only transactions run beside it
//!   (a sum over both domains never changes), and a `retry` over both
//!   wakes on a commit in either;
//! - a pool closed and reopened (and collected) while another pool's
//!   transactions run keeps its values;
//! - one transaction uses one pool: `tests/stm.rs`
//!   (`a_variable_of_another_pool_is_refused`, `Error::CrossPool`).
//!
//! Assertions are on counts and values, never on times. The wait-list
//! counters are process-wide, so the tests that wait run one at a time (a
//! lock); every body runs under a watchdog (a hang fails).

mod common;
use common::TempPool;
use engram::stm::wait;
use engram::stm::{atomically, PTVar, TVar};
use engram::{CreateOptions, Durability, OpenOptions, Pool};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

/// Tests that block in `retry` (the counters are per process).
static WAITS: Mutex<()> = Mutex::new(());

const BOUND: Duration = Duration::from_secs(300);

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("stm-dom").durability(Durability::Process)).unwrap()
}

fn reopen(t: &TempPool) -> Pool {
    Pool::open(&t.0, OpenOptions::new("stm-dom").durability(Durability::Process)).unwrap()
}

/// A small xorshift generator (deterministic per thread).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

const ACCOUNTS: usize = 6;
const TOTAL: u64 = 600;

fn accounts(pool: &Pool) -> Vec<PTVar<u64>> {
    (0..ACCOUNTS).map(|i| pool.root(&format!("acct{i}"), || TOTAL / ACCOUNTS as u64).unwrap()).collect()
}

/// `n` transfers between random accounts of `pool`, each followed every
/// few steps by a read-only check of the sum.
fn transfers(pool: &Pool, acct: &[PTVar<u64>], seed: u64, n: usize) {
    let mut rng = Rng(seed);
    for k in 0..n {
        let (i, j) = (rng.below(ACCOUNTS as u64) as usize, rng.below(ACCOUNTS as u64) as usize);
        let amount = rng.below(20);
        pool.atomically(|tx| {
            let a = tx.read(&acct[i])?;
            let m = amount.min(a);
            tx.write(&acct[i], a - m)?;
            let b = tx.read(&acct[j])?;
            tx.write(&acct[j], b + m)
        })
        .unwrap();
        if k % 4 == 0 {
            let sum = pool.atomically(|tx| acct.iter().try_fold(0, |s, v| Ok(s + tx.read(v)?))).unwrap();
            assert_eq!(sum, TOTAL, "a snapshot of one pool saw a partial transfer");
        }
    }
}

#[test]
fn two_pools_on_several_threads_keep_their_invariants() {
    common::bounded("two pools", BOUND, || {
        let (ta, tb) = (TempPool::new("dom-a"), TempPool::new("dom-b"));
        let pools = [Arc::new(create(&ta)), Arc::new(create(&tb))];
        let accts: Vec<_> = pools.iter().map(|p| accounts(p)).collect();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (pool, acct) = (&pools[t as usize % 2], &accts[t as usize % 2]);
                s.spawn(move || transfers(pool, acct, 0x9E37_79B9 + t * 7919, 400));
            }
        });
        for (p, a) in pools.iter().zip(&accts) {
            assert_eq!(p.atomically(|tx| a.iter().try_fold(0, |s, v| Ok(s + tx.read(v)?))).unwrap(), TOTAL);
        }
        drop(accts);
        for p in pools {
            Arc::into_inner(p).unwrap().close().unwrap();
        }
    });
}

/// Waits until `n` transactions are blocked in `retry`.
fn until_waiting(n: usize) {
    while wait::waiting() < n {
        std::thread::yield_now();
    }
}

#[test]
fn a_retry_on_one_pool_is_woken_by_that_pool_and_not_scanned_by_another() {
    let _g = WAITS.lock();
    wait::set_safety_net(Duration::from_secs(60));
    common::bounded("retry per pool", BOUND, || {
        let (ta, tb) = (TempPool::new("dom-wa"), TempPool::new("dom-wb"));
        let (a, b) = (Arc::new(create(&ta)), create(&tb));
        let flag: PTVar<u64> = a.root("flag", || 0).unwrap();
        let other: PTVar<u64> = b.root("other", || 0).unwrap();
        let before = wait::wakeup_stats();
        let waiter = {
            let a = a.clone();
            std::thread::spawn(move || a.atomically(|tx| if tx.read(&flag)? == 0 { tx.retry() } else { tx.read(&flag) }).unwrap())
        };
        until_waiting(1);
        // Pool b's commits look only at b's (empty) list.
        let mid = wait::wakeup_stats();
        for i in 0..200 {
            b.atomically(|tx| tx.write(&other, i)).unwrap();
        }
        let s = wait::wakeup_stats().since(&mid);
        assert_eq!((s.scans, s.woken), (0, 0), "another pool's commits scanned this pool's waiters: {s:?}");
        assert_eq!(wait::waiting(), 1);
        a.atomically(|tx| tx.write(&flag, 7)).unwrap();
        assert_eq!(waiter.join().unwrap(), 7);
        let s = wait::wakeup_stats().since(&before);
        assert!(s.woken >= 1 && s.rescued == 0, "{s:?}");
        Arc::into_inner(a).unwrap().close().unwrap();
        b.close().unwrap();
    });
}

/// `n` random moves: `one(amount, up)` with amount below 30.
fn moves(seed: u64, n: usize, mut one: impl FnMut(u64, bool)) {
    let mut rng = Rng(seed);
    for _ in 0..n {
        let (amount, up) = (rng.below(30), rng.below(2) == 0);
        one(amount, up);
    }
}

/// `(x, y)` after moving up to `amount` units from x to y (`up`) or back,
/// never below 0.
fn shift(x: u64, y: u64, amount: u64, up: bool) -> (u64, u64) {
    if up {
        let m = amount.min(x);
        (x - m, y + m)
    } else {
        let m = amount.min(y);
        (x + m, y - m)
    }
}

/// One unit spread over two volatile and two persistent variables: pool
/// transactions move it between a `TVar` and a `PTVar`, volatile-only
/// ones between the two `TVar`s, pool-only ones between the two `PTVar`s;
/// every read-only snapshot over all four must see the same sum.
#[test]
fn a_transaction_over_a_pool_and_tvars_is_atomic_across_both_domains() {
    common::bounded("mixed domains", BOUND, || {
        let t = TempPool::new("dom-mixed");
        let pool = create(&t);
        let (tv, tw) = (TVar::new(TOTAL), TVar::new(0u64));
        let pv: PTVar<u64> = pool.root("pv", || 0).unwrap();
        let pw: PTVar<u64> = pool.root("pw", || 0).unwrap();
        let n = 1500;
        std::thread::scope(|s| {
            // Each mover reads its pair, yields (widening the window in which
            // the other domains' commits land), then moves some units.
            // pool + volatile: tv <-> pv
            s.spawn(|| {
                moves(11, n, |amount, up| {
                    pool.atomically(|tx| {
                        let (x, y) = (tx.read(&tv)?, tx.read(&pv)?);
                        std::thread::yield_now();
                        let (x, y) = shift(x, y, amount, up);
                        tx.write(&tv, x)?;
                        tx.write(&pv, y)
                    })
                    .unwrap()
                })
            });
            // volatile only: tv <-> tw
            s.spawn(|| {
                moves(13, n, |amount, up| {
                    atomically(|tx| {
                        let (x, y) = (tx.read(&tv)?, tx.read(&tw)?);
                        std::thread::yield_now();
                        let (x, y) = shift(x, y, amount, up);
                        tx.write(&tv, x)?;
                        tx.write(&tw, y)
                    })
                    .unwrap()
                })
            });
            // pool only: pv <-> pw
            s.spawn(|| {
                moves(17, n, |amount, up| {
                    pool.atomically(|tx| {
                        let (x, y) = shift(tx.read(&pv)?, tx.read(&pw)?, amount, up);
                        tx.write(&pv, x)?;
                        tx.write(&pw, y)
                    })
                    .unwrap()
                })
            });
            // read-only snapshots over both domains
            s.spawn(|| {
                for _ in 0..n {
                    let sum = pool
                        .atomically(|tx| {
                            let (a, b) = (tx.read(&tv)?, tx.read(&pv)?);
                            std::thread::yield_now();
                            Ok(a + b + tx.read(&tw)? + tx.read(&pw)?)
                        })
                        .unwrap();
                    assert_eq!(sum, TOTAL, "a snapshot over a pool and TVars saw a partial commit");
                }
            });
        });
        let sum = pool.atomically(|tx| Ok(tx.read(&tv)? + tx.read(&tw)? + tx.read(&pv)? + tx.read(&pw)?)).unwrap();
        assert_eq!(sum, TOTAL);
        pool.close().unwrap();
        let pool = reopen(&t);
        let (pv, pw): (PTVar<u64>, PTVar<u64>) = (pool.root("pv", || 0).unwrap(), pool.root("pw", || 0).unwrap());
        let persisted = pool.atomically(|tx| Ok(tx.read(&pv)? + tx.read(&pw)?)).unwrap();
        assert_eq!(persisted + atomically(|tx| Ok(tx.read(&tv)? + tx.read(&tw)?)).unwrap(), TOTAL);
        pool.close().unwrap();
    });
}

/// A retry that read a `TVar` and a `PTVar` waits on both domains' lists:
/// a volatile-only commit wakes it, and so does a pool commit.
#[test]
fn a_retry_over_a_pool_and_a_tvar_wakes_on_either() {
    let _g = WAITS.lock();
    wait::set_safety_net(Duration::from_secs(60));
    common::bounded("retry over both domains", BOUND, || {
        let t = TempPool::new("dom-wboth");
        let pool = Arc::new(create(&t));
        let before = wait::wakeup_stats();
        for by_pool in [false, true] {
            let tv = TVar::new(0u64);
            let pv: PTVar<u64> = pool.root(&format!("pv{by_pool}"), || 0).unwrap();
            let waiter = {
                let (pool, tv) = (pool.clone(), tv.clone());
                std::thread::spawn(move || {
                    pool.atomically(|tx| {
                        let s = tx.read(&tv)? + tx.read(&pv)?;
                        if s == 0 {
                            tx.retry()
                        } else {
                            Ok(s)
                        }
                    })
                    .unwrap()
                })
            };
            until_waiting(1);
            if by_pool {
                pool.atomically(|tx| tx.write(&pv, 5)).unwrap();
            } else {
                atomically(|tx| tx.write(&tv, 3)).unwrap();
            }
            assert_eq!(waiter.join().unwrap(), if by_pool { 5 } else { 3 });
            assert_eq!(wait::waiting(), 0);
        }
        let s = wait::wakeup_stats().since(&before);
        assert!(s.woken >= 2 && s.rescued == 0, "{s:?}");
        Arc::into_inner(pool).unwrap().close().unwrap();
    });
}

/// Pool `a` is closed, reopened and collected again and again while
/// another thread's transactions run on pool `b`: `a`'s values persist,
/// its new clock starts above its persisted versions (commits after a
/// reopen are seen), and `b`'s count is exact.
#[test]
fn a_pool_reopened_and_collected_while_another_pool_runs() {
    common::bounded("reopen beside another pool", BOUND, || {
        let (ta, tb) = (TempPool::new("dom-ra"), TempPool::new("dom-rb"));
        let b = create(&tb);
        let cb: PTVar<u64> = b.root("c", || 0).unwrap();
        let rounds = 8;
        let per_round = 25;
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                for _ in 0..rounds * per_round * 2 {
                    b.atomically(|tx| tx.modify(&cb, |x| x + 1)).unwrap();
                }
            });
            let mut a = create(&ta);
            for r in 0..rounds {
                let ca: PTVar<u64> = a.root("c", || 0).unwrap();
                for _ in 0..per_round {
                    a.atomically(|tx| tx.modify(&ca, |x| x + 1)).unwrap();
                }
                a.collect().unwrap();
                assert_eq!(a.atomically(|tx| tx.read(&ca)).unwrap(), (r + 1) * per_round);
                a.close().unwrap();
                a = reopen(&ta);
            }
            let ca: PTVar<u64> = a.root("c", || 0).unwrap();
            assert_eq!(a.atomically(|tx| tx.read(&ca)).unwrap(), rounds * per_round);
            a.close().unwrap();
            h.join().unwrap();
        });
        assert_eq!(b.atomically(|tx| tx.read(&cb)).unwrap(), rounds * per_round * 2);
        b.close().unwrap();
    });
}
