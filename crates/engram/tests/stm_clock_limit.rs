//! The STM version clocks' limit (issue 14, docs/stm.md "Limits"): a lock
//! word carries a 48-bit version, and a pool's clock grows over the whole
//! life of the pool. Past `MAX_VERSION` a version would wrap to a small
//! number (a word stores `version << 16`), and a snapshot taken before
//! such a commit would accept its values: a read-only transaction would
//! see half of a commit. So a commit whose timestamp is past the limit is
//! refused (`Error::StmClockExhausted`) before anything of it is stored.
//!
//! The clocks are moved near the limit with `stm::clock_for_tests`, not by
//! 2^48 commits. The volatile domain's clock is process-wide: only
//! `volatile_commits_past_the_limit_are_refused` writes a `TVar` in this
//! file (a separate test process), so it strands no other test.

mod common;
use common::TempPool;
use engram::stm::{clock_for_tests, PTVar, TVar, MAX_VERSION};
use engram::{CreateOptions, Durability, Error, OpenOptions, Pool};

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("stm-limit").durability(Durability::Process)).unwrap()
}

fn open(t: &TempPool) -> Pool {
    Pool::open(&t.0, OpenOptions::new("stm-limit").durability(Durability::Process)).unwrap()
}

/// The version in the lock word of `v`'s cell.
fn version(pool: &Pool, v: PTVar<u64>) -> u64 {
    pool.txn(|tx| tx.read(v.cell())).unwrap().word >> 16
}

fn exhausted(e: &Error) -> bool {
    matches!(e, Error::StmClockExhausted { .. }) && e.to_string().contains("limit")
}

/// Commits up to the last version succeed; the next is refused with the
/// typed error, writes nothing, and so is every later one, also after a
/// reopen (the persisted reservation keeps the clock at the limit). No
/// word ever carries a wrapped version, and reads keep working.
#[test]
fn a_commit_past_the_limit_is_refused_and_nothing_wraps() {
    let t = TempPool::new("limit-pool");
    let pool = create(&t);
    let (a, b): (PTVar<u64>, PTVar<u64>) = (pool.root("a", || 0).unwrap(), pool.root("b", || 0).unwrap());
    clock_for_tests(Some(&pool), MAX_VERSION - 3).unwrap();
    let mut last = 0;
    let err = loop {
        let i = last + 1;
        match pool.atomically(|tx| tx.write(&a, i).and(tx.write(&b, i))) {
            Ok(()) => last = i,
            Err(e) => break e,
        }
        assert!(i <= 3, "commit {i} got a timestamp past the limit");
    };
    assert!(exhausted(&err), "{err}");
    assert_eq!(last, 3, "every version up to the limit is usable");
    assert_eq!((version(&pool, a), version(&pool, b)), (MAX_VERSION, MAX_VERSION), "a version wrapped");
    assert_eq!(pool.atomically(|tx| Ok((tx.read(&a)?, tx.read(&b)?))).unwrap(), (3, 3));
    assert_eq!(pool.atomically_read(|tx| Ok((tx.read(&a)?, tx.read(&b)?))).unwrap(), (3, 3));
    assert!(exhausted(&pool.atomically(|tx| tx.write(&a, 9)).unwrap_err()));
    pool.close().unwrap();

    let pool = open(&t);
    let (a, b): (PTVar<u64>, PTVar<u64>) = (pool.root("a", || 0).unwrap(), pool.root("b", || 0).unwrap());
    assert_eq!(pool.atomically_read(|tx| Ok((tx.read(&a)?, tx.read(&b)?))).unwrap(), (3, 3));
    assert!(exhausted(&pool.atomically(|tx| tx.write(&a, 9)).unwrap_err()), "the reopened pool wrapped");
    assert_eq!(version(&pool, a), MAX_VERSION);
    pool.close().unwrap();
}

/// A read-only transaction whose snapshot is the last version reads `a`,
/// then another thread commits `a` and `b` together with the next
/// timestamp. Had that commit stored its wrapped version (0), the reader
/// would take the new `b` as older than its snapshot and return half of
/// the commit. Refused, the commit changes nothing: the reader sees both
/// old values.
#[test]
fn a_snapshot_never_sees_half_of_a_commit_across_the_limit() {
    let t = TempPool::new("limit-snapshot");
    let pool = create(&t);
    let (a, b): (PTVar<u64>, PTVar<u64>) = (pool.root("a", || 0).unwrap(), pool.root("b", || 0).unwrap());
    clock_for_tests(Some(&pool), MAX_VERSION).unwrap();
    let mut writer = None;
    let seen = pool
        .atomically_read(|tx| {
            let x = tx.read(&a)?;
            if writer.is_none() {
                writer =
                    Some(std::thread::scope(|s| s.spawn(|| pool.atomically(|tx| tx.write(&a, 1).and(tx.write(&b, 1)))).join().unwrap()));
            }
            Ok((x, tx.read(&b)?))
        })
        .unwrap();
    let w = writer.unwrap();
    assert!(w.as_ref().is_err_and(exhausted), "the writer's commit: {w:?}");
    assert_eq!(seen, (0, 0), "a snapshot saw half of a commit");
    pool.close().unwrap();
}

/// A pool whose clock is past half the range does not lift the clocks of
/// pools opened after it in the same process (`ClockStart::Process`, the
/// default): an old pool must not age every pool its process uses.
#[test]
fn an_old_pool_does_not_age_the_other_pools_of_its_process() {
    let (t, u) = (TempPool::new("limit-old"), TempPool::new("limit-young"));
    let old = create(&t);
    let v: PTVar<u64> = old.root("v", || 0).unwrap();
    clock_for_tests(Some(&old), MAX_VERSION / 2 + 10).unwrap();
    old.atomically(|tx| tx.write(&v, 1)).unwrap(); // persists a reservation above it
    let young = create(&u);
    let clock = clock_for_tests(Some(&young), 0).unwrap();
    assert!(clock < MAX_VERSION / 4, "the young pool's clock starts at {clock:#x}");
    let w: PTVar<u64> = young.root("w", || 0).unwrap();
    young.atomically(|tx| tx.write(&w, 1)).unwrap();
    old.close().unwrap();
    young.close().unwrap();
}

/// The volatile domain's clock has the same limit (per process): a
/// commit past it is refused, the `TVar` keeps its value, and pool
/// transactions (which only sample the volatile clock) are unaffected.
#[test]
fn volatile_commits_past_the_limit_are_refused() {
    let t = TempPool::new("limit-volatile");
    let pool = create(&t);
    let p: PTVar<u64> = pool.root("p", || 0).unwrap();
    let v = TVar::new(0u64);
    clock_for_tests(None, MAX_VERSION - 1).unwrap();
    engram::stm::atomically(|tx| tx.write(&v, 1)).unwrap();
    let e = engram::stm::atomically(|tx| tx.write(&v, 2)).unwrap_err();
    assert!(exhausted(&e) && e.to_string().contains("volatile"), "{e}");
    assert_eq!(engram::stm::atomically(|tx| tx.read(&v)).unwrap(), 1);
    let e = pool.atomically(|tx| tx.write(&p, 5).and(tx.write(&v, 3))).unwrap_err();
    assert!(exhausted(&e), "{e}");
    assert_eq!(pool.atomically(|tx| tx.read(&p)).unwrap(), 0, "a refused commit wrote its pool variable");
    pool.atomically(|tx| tx.modify(&p, |x| x + 1)).unwrap();
    assert_eq!(pool.atomically(|tx| Ok((tx.read(&p)?, tx.read(&v)?))).unwrap(), (1, 1));
    pool.close().unwrap();
}
