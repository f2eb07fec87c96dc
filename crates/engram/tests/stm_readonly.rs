//! Read-only transactions (`Pool::atomically_read`, `stm/engine/rtx.rs`):
//! what they read, that they never flush or fence, that they fall back to
//! the full path, and a stress test whose invariants (money moved between
//! accounts keeps its sum; a key moved between two hash tables is in
//! exactly one) concurrent read-only transactions must always see. The
//! stress test is run with the seqlock's re-check and the snapshot check
//! planted out (`failpoint::plant`), and must then see a torn snapshot.
//! The HAMT's lookups (slot arrays read through `RTx::slice_of`) have a
//! stress test of their own: a key moved between two maps whose tries
//! other keys keep splitting and merging.

mod common;
use common::TempPool;
use engram::failpoint::{disarm_all, plant};
use engram::stm::collections::{HashTable, PMap, RbTree, Treap};
use engram::stm::{stats, PTVar, ReadTx, STx, StmResult};
use engram::{CreateOptions, Durability, Pool};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

fn create(t: &TempPool, d: Durability) -> Pool {
    Pool::create(&t.0, CreateOptions::new("stm-ro").durability(d)).unwrap()
}

type Wide = [u64; 5]; // 40 bytes: in the cell
type Boxed = [u64; 7]; // 56 bytes: boxed

#[test]
fn reads_see_committed_values_of_every_kind() {
    let t = TempPool::new("ro-kinds");
    let pool = create(&t, Durability::Process);
    let small: PTVar<u64> = pool.root("small", || 7).unwrap();
    let wide: PTVar<Wide> = pool.root("wide", || [1, 2, 3, 4, 5]).unwrap();
    let boxed: PTVar<Boxed> = pool.root("boxed", || [1, 2, 3, 4, 5, 6, 7]).unwrap();
    let ht = HashTable::<u64, u64>::root(&pool, "ht", 64).unwrap();
    let rb = RbTree::<u64, u64>::root(&pool, "rb").unwrap();
    let tr = Treap::<u64, u64>::root(&pool, "tr").unwrap();
    pool.atomically(|tx| {
        for k in 0..200 {
            ht.insert(tx, k, k * 10)?;
            rb.insert(tx, k, k * 10)?;
            tr.insert(tx, k, k * 10)?;
        }
        tx.write(&small, 8)?;
        tx.write(&boxed, [9, 2, 3, 4, 5, 6, 9])
    })
    .unwrap();
    let (s, w, b, lean) = pool.atomically_read(|tx| Ok((tx.read(&small)?, tx.read(&wide)?, tx.read(&boxed)?, tx.is_lean()))).unwrap();
    assert_eq!((s, w, b), (8, [1, 2, 3, 4, 5], [9, 2, 3, 4, 5, 6, 9]));
    assert!(lean, "no conflict, no Coarse: the lean path");
    for k in 0..220 {
        let want = (k < 200).then_some(k * 10);
        let got = pool.atomically_read(|tx| Ok((ht.get(tx, &k)?, rb.get(tx, &k)?, tr.get(tx, &k)?, rb.contains_key(tx, &k)?))).unwrap();
        assert_eq!(got, (want, want, want, want.is_some()), "key {k}");
    }
    pool.close().unwrap();
}

#[test]
fn a_read_only_transaction_never_flushes_or_fences() {
    let t = TempPool::new("ro-fences");
    let pool = create(&t, Durability::Pmem);
    let ht = HashTable::<u64, u64>::root(&pool, "ht", 1024).unwrap();
    let rb = RbTree::<u64, u64>::root(&pool, "rb").unwrap();
    pool.atomically(|tx| (0..500).try_for_each(|k| ht.insert(tx, k, k).and(rb.insert(tx, k, k)).map(drop))).unwrap();
    // (an update counts: the check is not vacuous)
    let c0 = engram::pmem::counters();
    pool.atomically(|tx| ht.insert(tx, 1, 2).map(drop)).unwrap();
    let c1 = engram::pmem::counters();
    assert!(c1.fences > c0.fences, "an update commit fences");
    for k in 0..1000u64 {
        let v = pool.atomically_read(|tx| Ok(ht.get(tx, &k)?.zip(rb.get(tx, &k)?))).unwrap();
        assert_eq!(v.is_some(), k < 500);
    }
    let c2 = engram::pmem::counters();
    assert_eq!((c2.flushes - c1.flushes, c2.fences - c1.fences), (0, 0), "read-only transactions flushed or fenced");
    pool.close().unwrap();
}

#[test]
fn nesting_and_regions_inside_are_refused_and_retry_takes_the_full_path() {
    let t = TempPool::new("ro-nest");
    let pool = create(&t, Durability::Process);
    let a: PTVar<u64> = pool.root("a", || 0).unwrap();
    let e = pool.atomically_read(|_| Ok(pool.atomically(|tx| tx.read(&a)))).unwrap();
    assert!(matches!(e, Err(engram::Error::NestedTransaction { .. })), "{e:?}");
    let e = pool.atomically_read(|_| Ok(pool.atomically_read(|tx| tx.read(&a)))).unwrap();
    assert!(matches!(e, Err(engram::Error::NestedTransaction { .. })), "{e:?}");
    let e = pool.atomically_read(|_| Ok(pool.txn(|_| Ok(())))).unwrap();
    assert!(matches!(e, Err(engram::Error::TxnInAtomically)), "{e:?}");
    // retry: the full path waits until `a` changes.
    let mut lean_runs = 0;
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(20));
            pool.atomically(|tx| tx.write(&a, 5)).unwrap()
        });
        let v = pool
            .atomically_read(|tx| {
                lean_runs += tx.is_lean() as u32;
                match tx.read(&a)? {
                    0 => tx.retry(),
                    v => Ok(v),
                }
            })
            .unwrap();
        w.join().unwrap();
        assert_eq!(v, 5);
    });
    assert!(lean_runs <= 1, "a retry leaves the lean path");
    pool.close().unwrap();
}

#[test]
fn a_volatile_variable_read_takes_the_full_path() {
    let t = TempPool::new("ro-tvar");
    let pool = create(&t, Durability::Process);
    let a: PTVar<u64> = pool.root("a", || 3).unwrap();
    let v = engram::stm::TVar::new(4u64);
    let got = pool.atomically_read(|tx| Ok((tx.read(&a)?, tx.read(&v)?, tx.is_lean()))).unwrap();
    assert_eq!(got, (3, 4, false), "a pool's lean attempt has no volatile snapshot");
    // A pool variable in a volatile-only read-only transaction is an error.
    assert!(engram::stm::atomically_read(|tx| tx.read(&a)).is_err());
    pool.close().unwrap();
}

#[test]
fn a_cell_of_another_pool_is_refused() {
    let (t1, t2) = (TempPool::new("ro-x1"), TempPool::new("ro-x2"));
    let (p1, p2) = (create(&t1, Durability::Process), create(&t2, Durability::Process));
    let other: PTVar<u64> = p2.root("v", || 1).unwrap();
    let _: PTVar<u64> = p1.root("v", || 1).unwrap();
    let e = p1.atomically_read(|tx| tx.read(&other)).unwrap_err();
    assert!(matches!(e, engram::Error::CrossPool { .. }), "{e}");
    p1.close().unwrap();
    p2.close().unwrap();
}

const ACCOUNTS: u64 = 6;
const TOTAL: u64 = 600;

/// The stress workload: writers move money between accounts and a key
/// between two tables; readers (read-only transactions, with `bugs`
/// planted on their threads) check both invariants. Returns the torn
/// snapshots the readers saw; stops early once one is seen if `until_torn`.
fn stress(bugs: &[&str], reads: u64, until_torn: bool) -> u64 {
    let t = TempPool::new("ro-stress");
    let pool = create(&t, Durability::Process);
    let accts: Vec<PTVar<u64>> = (0..ACCOUNTS).map(|i| pool.root(&format!("acct{i}"), || TOTAL / ACCOUNTS).unwrap()).collect();
    let (h1, h2) = (HashTable::<u64, u64>::root(&pool, "h1", 16).unwrap(), HashTable::<u64, u64>::root(&pool, "h2", 16).unwrap());
    pool.atomically(|tx| h1.insert(tx, 42, 1).map(drop)).unwrap();
    let (stop, torn) = (AtomicBool::new(false), AtomicU64::new(0));
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (pool, accts, stop) = (&pool, &accts, &stop);
            s.spawn(move || {
                let mut i = w;
                while !stop.load(Ordering::Relaxed) {
                    i = i.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let (from, to) = ((i >> 33) % ACCOUNTS, (i >> 45) % ACCOUNTS);
                    pool.atomically(|tx| {
                        let x = tx.read(&accts[from as usize])?;
                        let amt = x.min(1 + (i >> 20) % 7);
                        tx.write(&accts[from as usize], x - amt)?;
                        let y = tx.read(&accts[to as usize])?;
                        tx.write(&accts[to as usize], y + amt)?;
                        // the key changes table
                        match h1.remove(tx, &42)? {
                            Some(v) => h2.insert(tx, 42, v + 1).map(drop),
                            None => {
                                let v = h2.remove(tx, &42)?.unwrap_or(0);
                                h1.insert(tx, 42, v + 1).map(drop)
                            }
                        }
                    })
                    .unwrap();
                }
            });
        }
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (pool, accts, torn) = (&pool, &accts, &torn);
                s.spawn(move || {
                    for b in bugs {
                        plant(b);
                    }
                    for _ in 0..reads {
                        let (sum, one) = pool
                            .atomically_read(|tx| {
                                let mut sum = 0;
                                for a in accts {
                                    sum += tx.read(a)?;
                                }
                                let one = h1.get(tx, &42)?.is_some() as u32 + h2.get(tx, &42)?.is_some() as u32;
                                Ok((sum, one))
                            })
                            .unwrap();
                        if sum != TOTAL || one != 1 {
                            torn.fetch_add(1, Ordering::Relaxed);
                            if until_torn {
                                break;
                            }
                        }
                        if until_torn && torn.load(Ordering::Relaxed) > 0 {
                            break;
                        }
                    }
                    disarm_all();
                })
            })
            .collect();
        for r in readers {
            r.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let sum: u64 = pool.atomically(|tx| accts.iter().map(|a| tx.read(a)).sum()).unwrap();
    assert_eq!(sum, TOTAL, "the writers lost money");
    pool.close().unwrap();
    torn.into_inner()
}

#[test]
fn concurrent_read_only_transactions_always_see_a_consistent_snapshot() {
    assert_eq!(stress(&[], 5_000, false), 0, "a read-only transaction saw a torn snapshot");
    // With the read widened (a yield between lock word and value), still none.
    assert_eq!(stress(&["stm.ro_slow_read"], 1_000, false), 0, "a widened read-only transaction saw a torn snapshot");
}

#[test]
fn the_stress_test_catches_a_missing_recheck() {
    assert!(stress(&["stm.ro_no_recheck", "stm.ro_slow_read"], 200_000, true) > 0, "no torn snapshot without the re-check");
}

#[test]
fn the_stress_test_catches_a_missing_snapshot_check() {
    assert!(stress(&["stm.ro_no_rv_check", "stm.ro_slow_read"], 200_000, true) > 0, "no torn snapshot without the rv check");
}

#[test]
fn the_stress_test_catches_a_snapshot_the_clock_has_not_reached() {
    assert!(stress(&["stm.ro_snapshot_ahead", "stm.ro_slow_read"], 200_000, true) > 0, "no torn snapshot with an rv ahead of the clock");
}

/// Read-only transactions reuse their thread's snapshot (`snapshot.rs`):
/// a variable another thread wrote since is still read at its new value
/// (the attempt with the old snapshot refuses it and runs again at once
/// with a fresh one, counted in `stats().stale`, not as a conflict); the
/// next few read-only transactions sample afresh; after them the snapshot
/// is reused again; and the thread's own commit moves it, so reading what
/// the thread just wrote wastes no attempt.
#[test]
fn a_reused_snapshot_never_hides_a_newer_value() {
    let t = TempPool::new("ro-reuse");
    let pool = create(&t, Durability::Process);
    let x: PTVar<u64> = pool.root("x", || 1).unwrap();
    let read = || pool.atomically_read(|tx| tx.read(&x)).unwrap();
    let other_writes = |v: u64| std::thread::scope(|s| s.spawn(|| pool.atomically(|tx| tx.write(&x, v)).unwrap()).join().unwrap());
    assert_eq!(read(), 1);
    let s0 = stats();
    other_writes(2);
    assert_eq!(read(), 2, "a reused snapshot hid another thread's commit");
    let s1 = stats();
    assert_eq!((s1.stale - s0.stale, s1.conflicts - s0.conflicts), (1, 0), "one stale attempt, no conflict");
    // Fresh samples for a while (FRESH_AFTER_STALE, 16): no stale attempt.
    for v in 3..6 {
        other_writes(v);
        assert_eq!(read(), v);
    }
    assert_eq!(stats().stale, s1.stale, "read-only transactions right after a stale one sample afresh");
    for _ in 0..20 {
        assert_eq!(read(), 5);
    }
    // Reused again: another thread's write costs one stale attempt.
    other_writes(6);
    assert_eq!(read(), 6);
    let s2 = stats();
    assert_eq!(s2.stale, s1.stale + 1, "the snapshot is reused once the fresh samples are spent");
    for _ in 0..20 {
        assert_eq!(read(), 6);
    }
    // This thread's own commit moves the snapshot: no stale attempt.
    pool.atomically(|tx| tx.write(&x, 7)).unwrap();
    assert_eq!(read(), 7);
    assert_eq!(stats().stale, s2.stale, "reading the thread's own write wasted an attempt");
    pool.close().unwrap();
}

/// The key the map stress test moves between its two maps.
const MOVED: u64 = 1_000;

/// What the map stress test needs of a collection (the HAMT's `PMap`, the
/// red-black tree).
trait StressMap: Copy + Send + Sync {
    fn make(pool: &Pool, name: &str) -> Self;
    fn get<T: ReadTx>(&self, tx: &T, k: u64) -> StmResult<Option<u64>>;
    fn insert(&self, tx: &STx<'_>, k: u64, v: u64) -> StmResult<Option<u64>>;
    fn remove(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>>;
    fn check(&self, tx: &STx<'_>) -> StmResult<()>;
}

macro_rules! stress_map {
    ($t:ty) => {
        stress_map!($t, |pool, name| <$t>::root(pool, name).unwrap());
    };
    ($t:ty, $make:expr) => {
        impl StressMap for $t {
            fn make(pool: &Pool, name: &str) -> Self {
                let make: fn(&Pool, &str) -> Self = $make;
                make(pool, name)
            }
            fn get<T: ReadTx>(&self, tx: &T, k: u64) -> StmResult<Option<u64>> {
                <$t>::get(self, tx, &k)
            }
            fn insert(&self, tx: &STx<'_>, k: u64, v: u64) -> StmResult<Option<u64>> {
                <$t>::insert(self, tx, k, v)
            }
            fn remove(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>> {
                <$t>::remove(self, tx, &k)
            }
            fn check(&self, tx: &STx<'_>) -> StmResult<()> {
                <$t>::check(self, tx).map(drop)
            }
        }
    };
}
stress_map!(PMap<u64, u64>);
stress_map!(RbTree<u64, u64>);
// (8 buckets: chains of 8 to 32 keys, so removals of a bucket's inline
// entry move an overflow node's entry into the bucket under the readers)
stress_map!(HashTable<u64, u64>, |pool, name| HashTable::root(pool, name, 8).unwrap());

/// The map stress workload: writers move key [`MOVED`] between two maps
/// `M` and, in the same transaction, insert or remove one of 192 other
/// keys in both maps (so HAMT nodes split and merge and their slot arrays
/// are replaced, and tree nodes rotate, under the readers); readers
/// (read-only transactions, with `bugs` planted on their threads) must see
/// `MOVED` in exactly one map and any other key in both or neither.
/// Returns the torn snapshots seen and how many reads ran on the lean path.
fn map_stress<M: StressMap>(bugs: &[&str], reads: u64, until_torn: bool) -> (u64, u64) {
    map_stress_in::<M>(bugs, reads, until_torn, false)
}

/// [`map_stress`] whose readers run their lookups in full transactions
/// (`Pool::atomically`, the `STx` read path) when `full`.
fn map_stress_in<M: StressMap>(bugs: &[&str], reads: u64, until_torn: bool, full: bool) -> (u64, u64) {
    let t = TempPool::new("ro-map-stress");
    let pool = create(&t, Durability::Process);
    let (m1, m2) = (M::make(&pool, "m1"), M::make(&pool, "m2"));
    pool.atomically(|tx| {
        for k in 0..64 {
            m1.insert(tx, k, k)?;
            m2.insert(tx, k, k)?;
        }
        m1.insert(tx, MOVED, 0).map(drop)
    })
    .unwrap();
    let (stop, torn, lean) = (AtomicBool::new(false), AtomicU64::new(0), AtomicU64::new(0));
    let churn = |i: u64| 64 + (i >> 33) % 192;
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (pool, stop) = (&pool, &stop);
            s.spawn(move || {
                let mut i = w;
                while !stop.load(Ordering::Relaxed) {
                    i = i.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    pool.atomically(|tx| {
                        match m1.remove(tx, MOVED)? {
                            Some(v) => m2.insert(tx, MOVED, v + 1)?,
                            None => {
                                let v = m2.remove(tx, MOVED)?.unwrap_or(0);
                                m1.insert(tx, MOVED, v + 1)?
                            }
                        };
                        let k = churn(i);
                        if m1.remove(tx, k)?.is_some() {
                            m2.remove(tx, k).map(drop)
                        } else {
                            m1.insert(tx, k, k)?;
                            m2.insert(tx, k, k).map(drop)
                        }
                    })
                    .unwrap();
                }
            });
        }
        let readers: Vec<_> = (0..3u64)
            .map(|r| {
                let (pool, torn, lean) = (&pool, &torn, &lean);
                s.spawn(move || {
                    for b in bugs {
                        plant(b);
                    }
                    let mut i = r + 7;
                    for _ in 0..reads {
                        i = i.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let k = churn(i);
                        fn look<M: StressMap, T: ReadTx>(tx: &T, m1: M, m2: M, k: u64) -> StmResult<(u32, bool)> {
                            let one = m1.get(tx, MOVED)?.is_some() as u32 + m2.get(tx, MOVED)?.is_some() as u32;
                            Ok((one, m1.get(tx, k)?.is_some() == m2.get(tx, k)?.is_some()))
                        }
                        let (one, same) = if full {
                            pool.atomically(|tx| look(tx, m1, m2, k)).unwrap()
                        } else {
                            pool.atomically_read(|tx| {
                                lean.fetch_add(tx.is_lean() as u64, Ordering::Relaxed);
                                look(tx, m1, m2, k)
                            })
                            .unwrap()
                        };
                        if one != 1 || !same {
                            torn.fetch_add(1, Ordering::Relaxed);
                        }
                        if until_torn && torn.load(Ordering::Relaxed) > 0 {
                            break;
                        }
                    }
                    disarm_all();
                })
            })
            .collect();
        for r in readers {
            r.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    pool.atomically(|tx| m1.check(tx).and(m2.check(tx))).unwrap();
    pool.close().unwrap();
    (torn.into_inner(), lean.into_inner())
}

#[test]
fn concurrent_map_lookups_always_see_a_consistent_snapshot() {
    let (torn, lean) = map_stress::<PMap<u64, u64>>(&[], 5_000, false);
    assert_eq!(torn, 0, "a read-only map lookup saw a torn snapshot");
    assert!(lean > 0, "no map lookup ran on the lean path");
    let (torn, _) = map_stress::<PMap<u64, u64>>(&["stm.ro_slow_read"], 1_000, false);
    assert_eq!(torn, 0, "a widened read-only map lookup saw a torn snapshot");
}

#[test]
fn the_map_stress_test_catches_a_missing_recheck() {
    assert!(
        map_stress::<PMap<u64, u64>>(&["stm.ro_no_recheck", "stm.ro_slow_read"], 200_000, true).0 > 0,
        "no torn map snapshot without the re-check"
    );
}

#[test]
fn the_map_stress_test_catches_a_missing_snapshot_check() {
    assert!(
        map_stress::<PMap<u64, u64>>(&["stm.ro_no_rv_check", "stm.ro_slow_read"], 200_000, true).0 > 0,
        "no torn map snapshot without the rv check"
    );
}

#[test]
fn concurrent_tree_lookups_always_see_a_consistent_snapshot() {
    let (torn, lean) = map_stress::<RbTree<u64, u64>>(&[], 5_000, false);
    assert_eq!(torn, 0, "a read-only tree lookup saw a torn snapshot");
    assert!(lean > 0, "no tree lookup ran on the lean path");
    let (torn, _) = map_stress::<RbTree<u64, u64>>(&["stm.ro_slow_read"], 1_000, false);
    assert_eq!(torn, 0, "a widened read-only tree lookup saw a torn snapshot");
}

#[test]
fn the_tree_stress_test_catches_a_missing_recheck() {
    assert!(
        map_stress::<RbTree<u64, u64>>(&["stm.ro_no_recheck", "stm.ro_slow_read"], 200_000, true).0 > 0,
        "no torn tree snapshot without the re-check"
    );
}

#[test]
fn the_tree_stress_test_catches_a_missing_snapshot_check() {
    assert!(
        map_stress::<RbTree<u64, u64>>(&["stm.ro_no_rv_check", "stm.ro_slow_read"], 200_000, true).0 > 0,
        "no torn tree snapshot without the rv check"
    );
}

/// The map stress over a hash table of 8 buckets (inline entries replaced
/// by their chain's next entry, new nodes linked after them, while the
/// readers look up), in read-only and in full transactions; the planted
/// missing re-check is caught there too.
#[test]
fn concurrent_hash_lookups_always_see_a_consistent_snapshot() {
    let (torn, lean) = map_stress::<HashTable<u64, u64>>(&[], 5_000, false);
    assert_eq!(torn, 0, "a read-only hash lookup saw a torn snapshot");
    assert!(lean > 0, "no hash lookup ran on the lean path");
    let (torn, _) = map_stress::<HashTable<u64, u64>>(&["stm.ro_slow_read"], 1_000, false);
    assert_eq!(torn, 0, "a widened read-only hash lookup saw a torn snapshot");
    let (torn, _) = map_stress_in::<HashTable<u64, u64>>(&["stm.fast_read_slow"], 1_000, false, true);
    assert_eq!(torn, 0, "a widened full-transaction hash lookup saw a torn snapshot");
}

#[test]
fn the_hash_stress_test_catches_a_missing_recheck() {
    assert!(
        map_stress::<HashTable<u64, u64>>(&["stm.ro_no_recheck", "stm.ro_slow_read"], 200_000, true).0 > 0,
        "no torn hash snapshot without the re-check"
    );
}

/// The same with the readers' lookups in full transactions: the inline
/// read of a tree node (`STx::stable_words`, the node's five words in one
/// pass) sees no torn snapshot, and its planted missing re-check is caught.
#[test]
fn full_transaction_tree_lookups_see_a_consistent_snapshot() {
    let (torn, _) = map_stress_in::<RbTree<u64, u64>>(&[], 3_000, false, true);
    assert_eq!(torn, 0, "a full-transaction tree lookup saw a torn snapshot");
    let (torn, _) = map_stress_in::<RbTree<u64, u64>>(&["stm.fast_read_slow"], 1_000, false, true);
    assert_eq!(torn, 0, "a widened full-transaction tree lookup saw a torn snapshot");
}

#[test]
fn the_tree_stress_test_catches_a_missing_recheck_in_full_transactions() {
    assert!(
        map_stress_in::<RbTree<u64, u64>>(&["stm.fast_read_no_recheck", "stm.fast_read_slow"], 200_000, true, true).0 > 0,
        "no torn tree snapshot without the full read's re-check"
    );
}
