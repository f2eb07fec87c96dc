//! Array views (`Tx::array`, issue 13's sps fast path): a view checks the
//! array once and answers "already logged?" from a cached page of the
//! region's logged-word bitmap. These tests pin what must hold: every
//! element a view changes is undone by a rollback (whether it was logged
//! first by the view, by `Tx::set`, or not at all, and across bitmap pages
//! and pool regions), what a committed region wrote through a view is there
//! after reopening, no cached page outlives its region (the next region's
//! first write to the same element is logged again), fresh arrays need no
//! log, and bad indices are typed errors; `swap` logs what is not logged
//! under one fence (counted), is `slice::swap`, and rolls back. Crash
//! behaviour is the same as `Tx::set` (covered by the crash explorer's
//! region workloads; a swap's one fence by its `swap` workload).

mod common;
use common::TempPool;
use engram::{CreateOptions, Durability, Error, OpenOptions, PArray, Pool};

fn create(t: &TempPool, bytes: u64) -> Pool {
    Pool::create(&t.0, CreateOptions::new("test").durability(Durability::Process).initial_size(bytes)).unwrap()
}

/// An array of `n` u64 with a[i] = i, committed and linked from "a".
fn setup(pool: &Pool, n: u64) -> PArray<u64> {
    pool.txn(|tx| {
        let a = tx.alloc_array::<u64>(n)?;
        let v = tx.array(a)?;
        for i in 0..n {
            v.set(i, i)?;
        }
        tx.set_root_array("a", a)?;
        Ok::<_, Error>(a)
    })
    .unwrap()
}

fn contents(pool: &Pool, a: PArray<u64>) -> Vec<u64> {
    pool.txn(|tx| {
        let n = tx.len(a)?;
        let mut out = vec![0; n as usize];
        tx.read_slice(a, 0, &mut out)?;
        Ok::<_, Error>(out)
    })
    .unwrap()
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Random swaps through a view, some elements logged first by `Tx::set`,
/// then `Err`: the array must be exactly as before.
fn swaps_then_fail(pool: &Pool, a: PArray<u64>, n: u64, swaps: u64, seed: u64) {
    let r: Result<(), Error> = pool.txn(|tx| {
        // Some elements are logged by the generic path first.
        for i in (0..n).step_by(7) {
            tx.set(a, i, tx.get(a, i)? + 1000)?;
        }
        let v = tx.array(a)?;
        let mut x = seed;
        for _ in 0..swaps {
            let (i, j) = (xorshift(&mut x) % n, xorshift(&mut x) % n);
            let (vi, vj) = (v.get(i)?, v.get(j)?);
            v.set(i, vj)?;
            v.set(j, vi)?;
        }
        Err(Error::Aborted)
    });
    assert!(matches!(r, Err(Error::Aborted)));
}

#[test]
fn a_rollback_undoes_every_swap() {
    let t = TempPool::new("view-rollback");
    let pool = create(&t, 16 << 20);
    let n = 1000;
    let a = setup(&pool, n);
    let want: Vec<u64> = (0..n).collect();
    swaps_then_fail(&pool, a, n, 20_000, 0x9E37_79B9_7F4A_7C15);
    assert_eq!(contents(&pool, a), want);
}

#[test]
fn a_rollback_undoes_swaps_across_bitmap_pages() {
    // One bitmap page covers 2 MiB of pool: 600k u64 (4.8 MB) span three.
    let t = TempPool::new("view-pages");
    let pool = create(&t, 64 << 20);
    let n = 600_000;
    let a = setup(&pool, n);
    let want: Vec<u64> = (0..n).collect();
    swaps_then_fail(&pool, a, n, 30_000, 0x2545_F491_4F6C_DD1D);
    assert_eq!(contents(&pool, a), want);
}

#[test]
fn committed_swaps_survive_reopen_and_the_next_region_logs_again() {
    let t = TempPool::new("view-commit");
    let n = 512;
    let mut model: Vec<u64>;
    {
        let pool = create(&t, 16 << 20);
        let a = setup(&pool, n);
        model = (0..n).collect();
        let mut x = 77u64;
        pool.txn(|tx| {
            let v = tx.array(a)?;
            for _ in 0..5000 {
                let (i, j) = (xorshift(&mut x) % n, xorshift(&mut x) % n);
                let (vi, vj) = (v.get(i)?, v.get(j)?);
                v.set(i, vj)?;
                v.set(j, vi)?;
                model.swap(i as usize, j as usize);
            }
            Ok::<_, Error>(())
        })
        .unwrap();
        // Every element was logged (and cached) in the region above; a
        // new region must log again, so its rollback restores `model`.
        let r: Result<(), Error> = pool.txn(|tx| {
            let v = tx.array(a)?;
            for i in 0..n {
                v.set(i, u64::MAX - i)?;
            }
            Err(Error::Aborted)
        });
        assert!(r.is_err());
        assert_eq!(contents(&pool, a), model);
        pool.close().unwrap();
    }
    let pool = Pool::open(&t.0, OpenOptions::new("test").durability(Durability::Process)).unwrap();
    let a = pool.txn(|tx| tx.root_array::<u64>("a")).unwrap().unwrap();
    assert_eq!(contents(&pool, a), model);
}

#[test]
fn a_fresh_array_needs_no_log_and_a_rollback_frees_it() {
    let t = TempPool::new("view-fresh");
    let pool = create(&t, 16 << 20);
    let before = pool.info().live_objects;
    let r: Result<(), Error> = pool.txn(|tx| {
        let a = tx.alloc_array::<u64>(4096)?;
        let v = tx.array(a)?;
        for i in 0..4096 {
            v.set(i, i * 3)?;
        }
        for i in 0..4096 {
            assert_eq!(v.get(i)?, i * 3);
        }
        Err(Error::Aborted)
    });
    assert!(r.is_err());
    assert_eq!(pool.info().live_objects, before);
}

#[test]
fn bad_indices_are_typed_errors() {
    let t = TempPool::new("view-bounds");
    let pool = create(&t, 16 << 20);
    let a = setup(&pool, 10);
    pool.txn(|tx| {
        let v = tx.array(a)?;
        assert_eq!(v.len(), 10);
        assert!(matches!(v.get(10), Err(Error::OutOfBounds { index: 10, len: 10, .. })));
        assert!(matches!(v.set(u64::MAX, 1), Err(Error::OutOfBounds { .. })));
        assert!(matches!(tx.array(PArray::<u64>::from_addr(a.addr() + 8)), Err(Error::BadPointer { .. })));
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(contents(&pool, a), (0..10).collect::<Vec<_>>());
}

// ----- ArrayView::swap ---------------------------------------------------------

fn create_pmem(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("test").durability(Durability::Pmem).initial_size(16 << 20)).unwrap()
}

/// Fences the calling thread issued while `f` ran.
fn fences_in(f: impl FnOnce()) -> u64 {
    let before = engram::pmem::counters().fences;
    f();
    engram::pmem::counters().fences - before
}

/// A swap logs whichever of its two elements the region has not logged,
/// under ONE fence, and fences nothing when both are logged or `i == j`;
/// each swap is `slice::swap` (checked against a model), and the region's
/// rollback restores every element, whoever logged it first (a swap, a
/// view's `set`, `Tx::set`).
#[test]
fn a_swap_logs_what_is_not_logged_under_one_fence_and_rolls_back() {
    let t = TempPool::new("view-swap");
    let pool = create_pmem(&t);
    let n = 64;
    let a = setup(&pool, n);
    let r: Result<(), Error> = pool.txn(|tx| {
        tx.set(a, 40, 1040)?; // logged by the generic path
        let v = tx.array(a)?;
        v.set(41, 1041)?; // logged by the view
        let mut model: Vec<u64> = (0..n).collect();
        (model[40], model[41]) = (1040, 1041);
        let mut swap = |i: u64, j: u64| {
            model.swap(i as usize, j as usize);
            fences_in(|| v.swap(i, j).unwrap())
        };
        assert_eq!(swap(1, 2), 1, "neither logged: one fence for both");
        assert_eq!(swap(2, 3), 1, "one logged (2), one not: one fence");
        assert_eq!(swap(3, 1), 0, "both logged");
        assert_eq!(swap(5, 5), 0, "an element with itself: nothing logged");
        assert_eq!(swap(40, 41), 0, "logged by Tx::set and by the view's set");
        assert_eq!(swap(40, 50), 1, "logged by Tx::set, and one not");
        assert_eq!(swap(63, 0), 1, "the ends");
        for i in 0..n {
            assert_eq!(v.get(i)?, model[i as usize], "element {i}");
        }
        Err(Error::Aborted)
    });
    assert!(matches!(r, Err(Error::Aborted)), "{r:?}");
    assert_eq!(contents(&pool, a), (0..n).collect::<Vec<_>>(), "the rollback restored every element");
}

/// `i == j` changes nothing and is never logged: a rollback after it (and
/// after swaps that did log) leaves the element as it was.
#[test]
fn a_swap_of_an_element_with_itself_changes_nothing() {
    let t = TempPool::new("view-swap-self");
    let pool = create_pmem(&t);
    let a = setup(&pool, 8);
    let fences = fences_in(|| {
        pool.txn(|tx| {
            let v = tx.array(a)?;
            v.swap(3, 3)?;
            assert_eq!(v.get(3)?, 3);
            Ok::<_, Error>(())
        })
        .unwrap()
    });
    assert_eq!(fences, 0, "a region that swapped an element with itself wrote nothing");
    assert_eq!(contents(&pool, a), (0..8).collect::<Vec<_>>());
}

/// Committed swaps are there after reopening; random swaps (many of them
/// with one or both elements logged) then rolled back leave them so.
#[test]
fn committed_swaps_survive_reopen_and_random_ones_roll_back() {
    let t = TempPool::new("view-swap-commit");
    let n = 300;
    let mut model: Vec<u64> = (0..n).collect();
    {
        let pool = create_pmem(&t);
        let a = setup(&pool, n);
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        pool.txn(|tx| {
            let v = tx.array(a)?;
            for _ in 0..3000 {
                let (i, j) = (xorshift(&mut x) % n, xorshift(&mut x) % n);
                v.swap(i, j)?;
                model.swap(i as usize, j as usize);
            }
            Ok::<_, Error>(())
        })
        .unwrap();
        assert_eq!(contents(&pool, a), model);
        let r: Result<(), Error> = pool.txn(|tx| {
            let v = tx.array(a)?;
            for _ in 0..3000 {
                let (i, j) = (xorshift(&mut x) % n, xorshift(&mut x) % n);
                v.swap(i, j)?;
            }
            Err(Error::Aborted)
        });
        assert!(r.is_err());
        assert_eq!(contents(&pool, a), model);
        pool.close().unwrap();
    }
    let pool = Pool::open(&t.0, OpenOptions::new("test").durability(Durability::Pmem)).unwrap();
    let a = pool.txn(|tx| tx.root_array::<u64>("a")).unwrap().unwrap();
    assert_eq!(contents(&pool, a), model);
}

/// An index out of bounds (either one, or both) is `OutOfBounds` and
/// changes neither element, logged or not; the region goes on and commits
/// what it did swap.
#[test]
fn a_swap_out_of_bounds_changes_nothing() {
    let t = TempPool::new("view-swap-bounds");
    let pool = create_pmem(&t);
    let a = setup(&pool, 10);
    pool.txn(|tx| {
        let v = tx.array(a)?;
        v.swap(0, 1)?;
        for (i, j) in [(0, 10), (10, 0), (2, 10), (10, 10), (u64::MAX, 1)] {
            let r = v.swap(i, j);
            assert!(matches!(r, Err(Error::OutOfBounds { index: 10 | u64::MAX, len: 10, .. })), "({i}, {j}): {r:?}");
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    let mut want: Vec<u64> = (0..10).collect();
    want.swap(0, 1);
    assert_eq!(contents(&pool, a), want);
}
