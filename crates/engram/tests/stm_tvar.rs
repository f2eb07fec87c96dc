//! The volatile `TVar` on the versioned-lock design (`stm/vars.rs`): its
//! value is an `Arc` behind the lock word, read without a lock (word,
//! value, word again) and replaced at commit, the old one released through
//! crossbeam-epoch.
//!
//! - `transfers_keep_the_total_*`: threads move amounts between `TVar`s
//!   of a non-`Copy` type (a `Vec` whose every element is the balance)
//!   while readers check, in one transaction each, that the balances sum to
//!   the total and that every value is whole. A read that skipped the
//!   re-check of the lock word would see one variable before a transfer
//!   and another after it (the readers widen the gap between a read's
//!   word and value loads: `failpoint::stretch_reads`).
//! - `every_value_is_dropped_exactly_once`: values count their clones and
//!   drops; once the variables are gone and the epoch has moved on, every
//!   value made has been dropped once (a leak or a double release fails).
//!
//! - `read_only_audits_*`: the same transfers audited by volatile
//!   read-only transactions (`stm::atomically_read`: no read set, the
//!   volatile clock's snapshot, each read a seqlock read), which must
//!   always see the total; with the read-only re-check or snapshot check
//!   planted out (`stm.ro_no_recheck`, `stm.ro_no_rv_check`), or the
//!   one-compare test of a lock word made to ignore its lock bits
//!   (`stm.ro_fast_check_ignores_lock`), they must see a torn total.
//!
//! - `vcollection_lookups_*`: the `vcollections` maps (both layouts)
//!   looked up by volatile read-only transactions while writers move a key
//!   between two maps and churn others: the key is always in exactly one;
//!   with `stm.ro_no_recheck` / `stm.ro_no_rv_check` planted on the
//!   readers, lookups see it in both or neither (run in a child process:
//!   without those checks a reader may also follow a released node).
//!
//! (That volatile-only transactions touch no pool is a unit test:
//! `stm/engine/pool_state.rs`, `volatile_transactions_touch_no_pool`.)
//!
//! Counts and invariants only, no timing (a watchdog bounds each body).

mod common;
use engram::stm::vcollections::{Boxed, Embedded, Hamt, RbTree, Treap, VMap};
use engram::stm::{atomically, atomically_read, RTx, ReadTx, STx, StmResult, TVar};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const BOUND: Duration = Duration::from_secs(120);
/// The hang bound of the planted-bug tests: each runs six child processes
/// of up to five tries, and a try ends when a torn lookup is seen, which
/// on a machine at load 20 can take many times longer than when it is
/// quiet (two runs at that load passed 120 s). Still a hang detector,
/// not a timing assertion.
const PLANTED_BOUND: Duration = Duration::from_secs(900);
const ACCOUNTS: usize = 6;
const WIDTH: usize = 4;
const START: u64 = 1000;

/// A balance as a `TVar` holds it: a `Vec` of `WIDTH` equal elements
/// (boxed behind the lock word) or a bare `u64` (inline in it).
trait Balance: Clone + Send + Sync + 'static {
    fn of(x: u64) -> Self;
    fn get(&self) -> u64;
}

impl Balance for Vec<u64> {
    fn of(x: u64) -> Self {
        vec![x; WIDTH]
    }
    fn get(&self) -> u64 {
        assert!(self.iter().all(|&x| x == self[0]), "a torn value: {self:?}");
        self[0]
    }
}

impl Balance for u64 {
    fn of(x: u64) -> Self {
        x
    }
    fn get(&self) -> u64 {
        *self
    }
}

fn transfer<B: Balance>(tx: &STx<'_>, a: &TVar<B>, b: &TVar<B>, amount: u64) -> StmResult<()> {
    let (x, y) = (tx.read(a)?.get(), tx.read(b)?.get());
    let m = amount.min(x);
    tx.write(a, B::of(x - m))?;
    tx.write(b, B::of(y + m))
}

/// One writer step: the xorshift `x` moves on and picks two accounts and
/// an amount; a transfer between two different accounts commits.
fn random_transfer<B: Balance>(x: &mut u64, vars: &[TVar<B>]) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    let (i, j) = ((*x % ACCOUNTS as u64) as usize, ((*x >> 8) % ACCOUNTS as u64) as usize);
    if i != j {
        atomically(|tx| transfer(tx, &vars[i], &vars[j], *x % 50)).unwrap();
    }
}

fn total<B: Balance, T: ReadTx>(tx: &T, vars: &[TVar<B>]) -> StmResult<u64> {
    let mut s = 0;
    for v in vars {
        s += tx.get(v)?.get();
    }
    Ok(s)
}

fn transfers_keep_the_total<B: Balance>(writers: u64, readers: u64, per_writer: u64) {
    common::bounded("tvar transfers", BOUND, move || {
        let vars: Arc<Vec<TVar<B>>> = Arc::new((0..ACCOUNTS).map(|_| TVar::new(B::of(START))).collect());
        let want = START * ACCOUNTS as u64;
        let stop = AtomicBool::new(false);
        let audits = AtomicU64::new(0);
        std::thread::scope(|s| {
            let mut ws = Vec::new();
            for t in 0..writers {
                let vars = vars.clone();
                ws.push(s.spawn(move || {
                    let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    for _ in 0..per_writer {
                        random_transfer(&mut x, &vars);
                    }
                }));
            }
            for _ in 0..readers {
                let vars = vars.clone();
                let (stop, audits) = (&stop, &audits);
                s.spawn(move || {
                    // Commits land between a read's word and value loads.
                    engram::failpoint::stretch_reads(true);
                    while !stop.load(Ordering::Acquire) {
                        let got = atomically(|tx| total(tx, &vars)).unwrap();
                        assert_eq!(got, want, "a transaction saw an inconsistent state");
                        audits.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            for w in ws {
                w.join().unwrap();
            }
            stop.store(true, Ordering::Release);
        });
        assert_eq!(atomically(|tx| total(tx, &vars)).unwrap(), want);
        assert!(audits.load(Ordering::Relaxed) > 0);
    });
}

#[test]
fn transfers_keep_the_total_two_writers_two_readers() {
    transfers_keep_the_total::<Vec<u64>>(2, 2, 60_000);
}

#[test]
fn transfers_keep_the_total_oversubscribed() {
    transfers_keep_the_total::<Vec<u64>>(4, 4, 15_000);
}

#[test]
fn inline_transfers_keep_the_total() {
    transfers_keep_the_total::<u64>(2, 2, 60_000);
}

/// Two writers transfer among the accounts; two readers audit the total
/// with volatile read-only transactions (`bugs` planted on their threads,
/// the gap between a read's word and value widened). Returns the torn
/// totals seen, the audits and how many attempts ran on the lean path;
/// with `until_torn` the readers stop at the first torn total.
fn read_only_audits<B: Balance>(bugs: &'static [&'static str], per_writer: u64, until_torn: bool) -> (u64, u64, u64) {
    let vars: Arc<Vec<TVar<B>>> = Arc::new((0..ACCOUNTS).map(|_| TVar::new(B::of(START))).collect());
    let want = START * ACCOUNTS as u64;
    let (stop, torn, audits, lean) = (AtomicBool::new(false), AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        let mut ws = Vec::new();
        for t in 0..2u64 {
            let (vars, stop) = (vars.clone(), &stop);
            ws.push(s.spawn(move || {
                let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                for _ in 0..per_writer {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    random_transfer(&mut x, &vars);
                }
            }));
        }
        let rs: Vec<_> = (0..2)
            .map(|_| {
                let vars = vars.clone();
                let (stop, torn, audits, lean) = (&stop, &torn, &audits, &lean);
                s.spawn(move || {
                    common::Audit { stop, seen: audits, torn, until_torn }.run(bugs, want, || {
                        atomically_read(|tx| {
                            lean.fetch_add(tx.is_lean() as u64, Ordering::Relaxed);
                            total(tx, &vars)
                        })
                        .unwrap()
                    })
                })
            })
            .collect();
        common::join_writers_then_readers(ws, &stop, rs);
    });
    assert_eq!(atomically(|tx| total(tx, &vars)).unwrap(), want, "the writers lost money");
    (torn.into_inner(), audits.into_inner(), lean.into_inner())
}

#[test]
fn read_only_audits_see_the_total() {
    common::bounded("tvar read-only audits", BOUND, || {
        for (torn, audits, lean) in [read_only_audits::<u64>(&[], 30_000, false), read_only_audits::<Vec<u64>>(&[], 30_000, false)] {
            assert_eq!(torn, 0, "a read-only transaction saw a torn total ({audits} audits)");
            assert!(audits > 0 && lean > 0, "no audit ran on the lean path ({audits} audits)");
        }
    });
}

#[test]
fn read_only_audits_catch_a_missing_recheck() {
    common::bounded("tvar read-only audits, no re-check", BOUND, || {
        assert!(read_only_audits::<u64>(&["stm.ro_no_recheck"], 2_000_000, true).0 > 0, "no torn total without the re-check");
    });
}

#[test]
fn read_only_audits_catch_a_missing_snapshot_check() {
    common::bounded("tvar read-only audits, no rv check", BOUND, || {
        assert!(read_only_audits::<u64>(&["stm.ro_no_rv_check"], 2_000_000, true).0 > 0, "no torn total without the rv check");
    });
}

#[test]
fn read_only_audits_catch_a_fast_check_that_ignores_locks() {
    common::bounded("tvar read-only audits, fast check ignores locks", BOUND, || {
        // The torn read needs a reader between a writer's lock and its
        // release: on a busy 2-core machine one run of 2,000,000 operations
        // has missed it (one fresh-clone `make test` in three), so up to five
        // runs, each of which must end with the writers' money intact.
        let torn: u64 =
            (0..5).map(|_| read_only_audits::<u64>(&["stm.ro_fast_check_ignores_lock"], 2_000_000, true).0).find(|&t| t > 0).unwrap_or(0);
        assert!(torn > 0, "no torn total with locked words accepted in five runs");
    });
}

#[test]
fn read_only_transactions_nest_refused_and_retry_on_the_full_path() {
    let a = TVar::new(0u64);
    let e = atomically_read(|_| Ok(atomically(|tx| tx.read(&a)))).unwrap();
    assert!(matches!(e, Err(engram::Error::NestedTransaction { .. })), "{e:?}");
    let e = atomically(|_| Ok(atomically_read(|tx| tx.read(&a)))).unwrap();
    assert!(matches!(e, Err(engram::Error::NestedTransaction { .. })), "{e:?}");
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            atomically(|tx| tx.write(&a, 5)).unwrap()
        });
        let v = atomically_read(|tx| match tx.read(&a)? {
            0 => tx.retry(),
            v => Ok(v),
        })
        .unwrap();
        w.join().unwrap();
        assert_eq!(v, 5);
    });
}

static MADE: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// A value that counts its copies and drops.
struct Counted(Vec<u64>);

impl Counted {
    fn new(x: u64) -> Counted {
        MADE.fetch_add(1, Ordering::SeqCst);
        Counted(vec![x; WIDTH])
    }
}

impl Clone for Counted {
    fn clone(&self) -> Counted {
        MADE.fetch_add(1, Ordering::SeqCst);
        Counted(self.0.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let d = DROPPED.fetch_add(1, Ordering::SeqCst) + 1;
        assert!(d <= MADE.load(Ordering::SeqCst), "more drops than values made: a value was released twice");
    }
}

#[test]
fn every_value_is_dropped_exactly_once() {
    common::bounded("tvar reclamation", BOUND, || {
        {
            let vars: Arc<Vec<TVar<Counted>>> = Arc::new((0..ACCOUNTS).map(|_| TVar::new(Counted::new(START))).collect());
            std::thread::scope(|s| {
                for t in 0..3u64 {
                    let vars = vars.clone();
                    s.spawn(move || {
                        for k in 0..3000u64 {
                            let (i, j) = (((t + k) % ACCOUNTS as u64) as usize, ((t + 2 * k + 1) % ACCOUNTS as u64) as usize);
                            atomically(|tx| {
                                let (a, b) = (tx.read(&vars[i])?, tx.read(&vars[j])?);
                                if k % 3 == 0 {
                                    // or_else: the first branch's writes are dropped unused.
                                    return tx.or_else(
                                        |tx| tx.write(&vars[i], Counted::new(1)).and_then(|_| tx.retry()),
                                        |tx| tx.write(&vars[j], a.clone()),
                                    );
                                }
                                tx.write(&vars[i], b)?;
                                tx.write(&vars[j], a)
                            })
                            .unwrap();
                            let _ = vars[i].load();
                        }
                    });
                }
            });
        }
        // The variables are gone; values they replaced wait for the epoch.
        let mut rounds = 0u64;
        while DROPPED.load(Ordering::SeqCst) < MADE.load(Ordering::SeqCst) && rounds < 200_000 {
            crossbeam_epoch::pin().flush();
            rounds += 1;
            if rounds % 64 == 0 {
                std::thread::yield_now();
            }
        }
        assert_eq!(DROPPED.load(Ordering::SeqCst), MADE.load(Ordering::SeqCst), "values made and dropped (after {rounds} flushes)");
    });
}

static GONE: AtomicU64 = AtomicU64::new(0);

/// A value that counts the drops of the original (not of its clones,
/// which reads hand out) in `GONE`.
struct Witness {
    original: bool,
}

impl Clone for Witness {
    fn clone(&self) -> Witness {
        Witness { original: false }
    }
}

impl Drop for Witness {
    fn drop(&mut self) {
        if self.original {
            GONE.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A transaction reads a variable, lets go of its own handle, and another
/// thread drops the last one: the variable (its lock word, which the read
/// set still names, and its value) must outlive the attempt, so its value
/// is not dropped while the body runs, and the commit validates the read.
/// Once the attempt is over and the epoch moves on, it is dropped (once).
#[test]
fn a_variable_outlives_the_attempts_that_read_it() {
    common::bounded("tvar lifetime", BOUND, || {
        let x = TVar::new(Witness { original: true });
        let other = x.clone();
        let y = TVar::new(0u64);
        let (to_b, at_b) = std::sync::mpsc::channel::<TVar<Witness>>();
        let (done_b, b_done) = std::sync::mpsc::channel::<()>();
        let b = std::thread::spawn(move || {
            let last = at_b.recv().unwrap();
            drop(last);
            done_b.send(()).unwrap();
        });
        let mut mine = Some(x);
        let mut theirs = Some(other);
        let mut runs = 0;
        atomically(|tx| {
            runs += 1;
            if let Some(x) = mine.take() {
                tx.read(&x)?;
                drop(x);
                to_b.send(theirs.take().unwrap()).unwrap();
                b_done.recv().unwrap();
                assert_eq!(GONE.load(Ordering::SeqCst), 0, "the variable was freed under an attempt that read it");
            }
            tx.write(&y, 1)
        })
        .unwrap();
        b.join().unwrap();
        // (A commit may fail and run the body again, which then only
        // writes: the check above ran in the attempt that read `x`.)
        assert!(runs >= 1);
        let mut rounds = 0u64;
        while GONE.load(Ordering::SeqCst) == 0 && rounds < 200_000 {
            crossbeam_epoch::pin().flush();
            rounds += 1;
        }
        assert_eq!(GONE.load(Ordering::SeqCst), 1, "the variable's value was not dropped exactly once");
    });
}

/// The key two writers move between two maps.
const MOVED: u64 = 1_000_003;

/// Two writers move `MOVED` between maps `a` and `b` in one transaction
/// each, and in the same transaction insert or remove one of 64 other keys
/// in both (so nodes are linked, unlinked and rotated under the readers);
/// two readers look `MOVED` up in both maps in one volatile read-only
/// transaction (`stm::atomically_read`, `bugs` planted on their threads,
/// each read widened) and must see it in exactly one. Returns the torn
/// lookups, the lookups and the attempts on the lean path.
fn moved_key_lookups(a: &dyn VMap, b: &dyn VMap, bugs: &'static [&'static str], per_writer: u64, until_torn: bool) -> (u64, u64, u64) {
    atomically(|tx| a.insert(tx, MOVED, 0).map(drop)).unwrap();
    let (stop, torn, lookups, lean) = (AtomicBool::new(false), AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        let ws: Vec<_> = (0..2u64)
            .map(|t| {
                let stop = &stop;
                s.spawn(move || {
                    let mut x = (t + 7).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    for i in 0..per_writer {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        atomically(|tx| move_and_churn(tx, a, b, x % 64, i)).unwrap();
                    }
                })
            })
            .collect();
        let rs: Vec<_> = (0..2)
            .map(|_| {
                let (stop, torn, lookups, lean) = (&stop, &torn, &lookups, &lean);
                s.spawn(move || {
                    for bug in bugs {
                        engram::failpoint::plant(bug);
                    }
                    engram::failpoint::plant("stm.ro_slow_read");
                    while !stop.load(Ordering::Acquire) {
                        let (in_a, in_b) = atomically_read(|tx| {
                            lean.fetch_add(tx.is_lean() as u64, Ordering::Relaxed);
                            Ok((a.get(tx, MOVED)?.is_some(), b.get(tx, MOVED)?.is_some()))
                        })
                        .unwrap();
                        lookups.fetch_add(1, Ordering::Relaxed);
                        if in_a == in_b {
                            torn.fetch_add(1, Ordering::Relaxed);
                            if until_torn {
                                stop.store(true, Ordering::Release);
                            }
                        }
                    }
                    engram::failpoint::disarm_all();
                })
            })
            .collect();
        common::join_writers_then_readers(ws, &stop, rs);
    });
    let (in_a, in_b) = atomically(|tx| Ok((a.get(&RTx::over(tx), MOVED)?.is_some(), b.get(&RTx::over(tx), MOVED)?.is_some()))).unwrap();
    assert!(in_a != in_b, "the writers lost or doubled the moved key");
    (torn.into_inner(), lookups.into_inner(), lean.into_inner())
}

/// One writer step: `MOVED` from the map that holds it to the other, and
/// key `k` inserted into both maps or removed from both.
fn move_and_churn(tx: &STx<'_>, a: &dyn VMap, b: &dyn VMap, k: u64, i: u64) -> StmResult<()> {
    let (from, to) = if a.get(&RTx::over(tx), MOVED)?.is_some() { (a, b) } else { (b, a) };
    from.remove(tx, MOVED)?;
    to.insert(tx, MOVED, i)?;
    if i % 2 == 0 {
        a.insert(tx, k, i)?;
        b.insert(tx, k, i).map(drop)
    } else {
        a.remove(tx, k)?;
        b.remove(tx, k).map(drop)
    }
}

/// A named pair of maps of one structure and layout.
type MapPair = (&'static str, Box<dyn VMap>, Box<dyn VMap>);

/// Each structure in both layouts (`TVar` and `TField` cells): a fresh pair.
fn vmap_pairs() -> Vec<MapPair> {
    vec![
        ("rbtree/tvar", Box::new(RbTree::<Boxed>::new()), Box::new(RbTree::<Boxed>::new())),
        ("rbtree/embedded", Box::new(RbTree::<Embedded>::new()), Box::new(RbTree::<Embedded>::new())),
        ("treap/tvar", Box::new(Treap::<Boxed>::new()), Box::new(Treap::<Boxed>::new())),
        ("treap/embedded", Box::new(Treap::<Embedded>::new()), Box::new(Treap::<Embedded>::new())),
        ("hamt/tvar", Box::new(Hamt::<Boxed>::new()), Box::new(Hamt::<Boxed>::new())),
        ("hamt/embedded", Box::new(Hamt::<Embedded>::new()), Box::new(Hamt::<Embedded>::new())),
    ]
}

#[test]
fn vcollection_lookups_see_a_moved_key_in_one_map() {
    common::bounded("vcollections read-only lookups", BOUND, || {
        for (name, a, b) in vmap_pairs() {
            let (torn, lookups, lean) = moved_key_lookups(&*a, &*b, &[], 4_000, false);
            assert_eq!(torn, 0, "{name}: a read-only lookup saw the moved key in both maps or neither ({lookups} lookups)");
            assert!(lookups > 0 && lean > 0, "{name}: no lookup ran on the lean path ({lookups} lookups)");
        }
    });
}

/// Whether the read-only lookups of `vmap_pairs()[pair]` with `bug`
/// planted see the moved key torn, in a child process (this binary,
/// running `planted_lookups_child`), up to five tries on fresh maps: on a
/// loaded machine a run can end before readers and writers interleave.
/// Without the re-check or the snapshot check a reader may also follow a
/// link whose node was already released (the check is what makes the
/// epoch pin, taken after the link's load, cover it): the child may then
/// die of that, which counts as caught too; it would take every other
/// test of this binary with it if run in process.
fn planted_lookups_caught(bug: &str, pair: usize) -> bool {
    let exe = std::env::current_exe().expect("the test binary");
    let st = std::process::Command::new(exe)
        .args(["planted_lookups_child", "--exact", "--ignored", "--quiet", "--test-threads", "1"])
        .env("ENGRAM_TEST_PLANT", bug)
        .env("ENGRAM_TEST_PAIR", pair.to_string())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("the child test ran");
    st.success() || st.code().is_none()
}

#[test]
#[ignore = "run in a child process by the vcollection_lookups_catch_* tests"]
fn planted_lookups_child() {
    let bug: &'static [&'static str] = match std::env::var("ENGRAM_TEST_PLANT").as_deref() {
        Ok("stm.ro_no_recheck") => &["stm.ro_no_recheck"],
        Ok("stm.ro_no_rv_check") => &["stm.ro_no_rv_check"],
        other => panic!("ENGRAM_TEST_PLANT: {other:?}"),
    };
    let pair: usize = std::env::var("ENGRAM_TEST_PAIR").expect("ENGRAM_TEST_PAIR").parse().expect("a pair index");
    let caught = (0..5).any(|_| {
        let (_, a, b) = vmap_pairs().swap_remove(pair);
        moved_key_lookups(&*a, &*b, bug, 400_000, true).0 > 0
    });
    assert!(caught);
}

#[test]
fn vcollection_lookups_catch_a_missing_recheck() {
    common::bounded("vcollections read-only lookups, no re-check", PLANTED_BOUND, || {
        for (i, (name, ..)) in vmap_pairs().into_iter().enumerate() {
            assert!(planted_lookups_caught("stm.ro_no_recheck", i), "{name}: no torn lookup without the re-check in five runs");
        }
    });
}

#[test]
fn vcollection_lookups_catch_a_missing_snapshot_check() {
    common::bounded("vcollections read-only lookups, no rv check", PLANTED_BOUND, || {
        for (i, (name, ..)) in vmap_pairs().into_iter().enumerate() {
            assert!(planted_lookups_caught("stm.ro_no_rv_check", i), "{name}: no torn lookup without the rv check in five runs");
        }
    });
}
