//! Persistent collections: each type's operations, survival across close and
//! reopen and across a simulated crash, all-or-nothing regions (a failed
//! region leaves every collection exactly as it was, resizes included),
//! model-checked random op sequences, GC of dropped collections, and
//! isolation between threads.

mod common;
use common::TempPool;
use engram::collections::{PBox, PBytes, PHashMap, PString, PVec};
use engram::failpoint::{arm, disarm_all, is_crash, Failpoint};
use engram::{CreateOptions, Durability, Error, OpenOptions, PPtr, Persistent, Pool, Tx};
use proptest::prelude::*;
use std::collections::HashMap;

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("coll").durability(Durability::Process)).unwrap()
}

fn open(t: &TempPool) -> Pool {
    Pool::open(&t.0, OpenOptions::new("coll").durability(Durability::Process)).unwrap()
}

/// Runs `f` in a region that must commit.
fn run<R>(pool: &Pool, f: impl FnOnce(&Tx<'_>) -> Result<R, Error>) -> R {
    pool.txn(f).unwrap()
}

fn sorted<K: Ord + Copy, V: Copy>(mut e: Vec<(K, V)>) -> Vec<(K, V)> {
    e.sort_by_key(|&(k, _)| k);
    e
}

// ----- each type's operations -------------------------------------------------

#[test]
fn pbox_operations() {
    let t = TempPool::new("pbox");
    let pool = create(&t);
    let b = run(&pool, |tx| {
        let b = PBox::new(tx, 7u64)?;
        assert_eq!(b.get(tx)?, 7);
        assert_eq!(b.set(tx, 8)?, 7);
        assert_eq!(b.update(tx, |v| std::mem::replace(v, *v * 10))?, 8);
        b.set_root(tx, "box")?;
        Ok(b)
    });
    run(&pool, |tx| {
        let again = PBox::<u64>::from_root(tx, "box")?.unwrap();
        assert_eq!(again, b);
        assert_eq!(again.as_ptr(), b.as_ptr());
        assert_eq!(PBox::from_ptr(b.as_ptr()).get(tx)?, 80);
        assert!(matches!(PVec::<u64>::from_root(tx, "box"), Err(Error::RootType { .. })));
        assert_eq!(PBox::<u64>::from_root(tx, "nothing")?, None);
        Ok(())
    });
    assert_eq!(pool.info().live_objects, 1);
    run(&pool, |tx| {
        b.free(tx)?;
        tx.remove_root("box").map(drop)
    });
    assert_eq!(pool.info().live_objects, 0);
}

#[test]
fn pvec_operations() {
    let t = TempPool::new("pvec");
    let pool = create(&t);
    run(&pool, |tx| {
        let v = PVec::<u64>::new(tx)?;
        assert!(v.is_empty(tx)?);
        assert_eq!(v.capacity(tx)?, 0);
        assert_eq!(v.pop(tx)?, None);
        for i in 0..100 {
            v.push(tx, i)?;
        }
        assert_eq!(v.len(tx)?, 100);
        assert!(v.capacity(tx)? >= 100);
        assert_eq!(v.get(tx, 42)?, Some(42));
        assert_eq!(v.get(tx, 100)?, None);
        assert_eq!(v.set(tx, 3, 333)?, 3);
        assert!(matches!(v.set(tx, 100, 0), Err(Error::OutOfBounds { .. })));
        assert_eq!(v.pop(tx)?, Some(99));
        v.extend_from_slice(tx, &[1000, 1001])?;
        let mut model: Vec<u64> = (0..99).collect();
        model[3] = 333;
        model.extend_from_slice(&[1000, 1001]);
        assert_eq!(v.to_vec(tx)?, model);
        let cap = v.capacity(tx)?;
        v.truncate(tx, 10)?;
        v.truncate(tx, 50)?; // no-op
        assert_eq!(v.to_vec(tx)?, model[..10]);
        v.clear(tx)?;
        assert!(v.is_empty(tx)?);
        assert_eq!(v.capacity(tx)?, cap, "clear keeps the buffer");

        let w = PVec::<u64>::with_capacity(tx, 10)?;
        assert_eq!(w.capacity(tx)?, 10);
        w.extend_from_slice(tx, &[1; 10])?;
        assert_eq!(w.capacity(tx)?, 10, "exactly full: no growth");
        w.push(tx, 2)?;
        assert_eq!(w.capacity(tx)?, 20, "growth doubles");
        Ok(())
    });
}

/// Elements smaller than, or not a multiple of, a word sit at unaligned
/// addresses: every operation must still work at every index.
#[test]
fn pvec_of_small_and_odd_sized_elements() {
    fn exercise<T: Persistent + PartialEq + std::fmt::Debug>(pool: &Pool, make: impl Fn(u64) -> T) {
        run(pool, |tx| {
            let v = PVec::<T>::new(tx)?;
            let mut model = Vec::new();
            for i in 0..37 {
                v.push(tx, make(i))?;
                model.push(make(i));
            }
            for i in (1..37).step_by(3) {
                v.set(tx, i, make(i * 100))?;
                model[i as usize] = make(i * 100);
            }
            for i in 0..37 {
                assert_eq!(v.get(tx, i)?, Some(model[i as usize]));
            }
            let extra: Vec<T> = (0..11).map(&make).collect();
            v.extend_from_slice(tx, &extra)?;
            model.extend_from_slice(&extra);
            assert_eq!(v.pop(tx)?, model.pop());
            v.truncate(tx, 29)?;
            model.truncate(29);
            assert_eq!(v.to_vec(tx)?, model);
            Ok(())
        });
    }
    let t = TempPool::new("odd");
    let pool = create(&t);
    exercise(&pool, |i| i as u8);
    exercise(&pool, |i| i as u16);
    exercise(&pool, |i| i as u32);
    exercise(&pool, |i| [i as u8, 1, 2]);
    exercise(&pool, |i| [i as u32, 7, 9]);
    exercise(&pool, |i| i as u128);
}

#[test]
fn pvec_of_pointers_drops_vacated_slots() {
    let t = TempPool::new("vecptr");
    let pool = create(&t);
    run(&pool, |tx| {
        let v = PVec::<PBox<u64>>::new(tx)?;
        for i in 0..20 {
            v.push(tx, PBox::new(tx, i)?)?;
        }
        v.set_root(tx, "boxes")
    });
    run(&pool, |tx| {
        let v = PVec::<PBox<u64>>::from_root(tx, "boxes")?.unwrap();
        v.pop(tx)?.unwrap().free(tx)?;
        let rest = v.to_vec(tx)?;
        v.truncate(tx, 10)?;
        for b in &rest[10..] {
            b.free(tx)?;
        }
        assert_eq!(v.get(tx, 9)?.unwrap().get(tx)?, 9);
        Ok(())
    });
    // Freed boxes are no longer reachable through the buffer's spare slots.
    pool.check().unwrap();
    assert_eq!(pool.collect().unwrap().objects, 2 + 10);
}

#[test]
fn pstring_and_pbytes_operations() {
    let t = TempPool::new("str");
    let pool = create(&t);
    run(&pool, |tx| {
        let s = PString::new(tx, "")?;
        assert!(s.is_empty(tx)?);
        s.push_str(tx, "héllo")?;
        s.push_str(tx, ", wörld ✓")?;
        assert_eq!(s.get(tx)?, "héllo, wörld ✓");
        assert_eq!(s.len(tx)?, "héllo, wörld ✓".len() as u64);
        assert!(matches!(s.truncate(tx, 2), Err(Error::InvalidArgument { .. })), "inside 'é'");
        s.truncate(tx, 3)?;
        assert_eq!(s.get(tx)?, "hé");
        s.set(tx, &"long ".repeat(50))?;
        assert_eq!(s.get(tx)?, "long ".repeat(50));
        s.set(tx, "short")?;
        assert_eq!(s.get(tx)?, "short");
        s.clear(tx)?;
        assert_eq!(s.get(tx)?, "");

        let b = PBytes::new(tx, &[0xff, 0, 0xfe])?;
        b.push(tx, 1)?;
        b.extend_from_slice(tx, &[9; 30])?;
        let mut model = vec![0xff, 0, 0xfe, 1];
        model.extend_from_slice(&[9; 30]);
        assert_eq!(b.get(tx)?, model);
        assert_eq!(b.len(tx)?, 34);
        b.truncate(tx, 5)?;
        assert_eq!(b.get(tx)?, model[..5]);
        b.set(tx, b"xyz")?;
        assert_eq!(b.get(tx)?, b"xyz");
        b.clear(tx)?;
        assert!(b.is_empty(tx)?);
        s.free(tx)?;
        b.free(tx)
    });
    assert_eq!(pool.info().live_objects, 0);
}

#[test]
fn phashmap_operations() {
    let t = TempPool::new("map");
    let pool = create(&t);
    run(&pool, |tx| {
        let m = PHashMap::<u64, u64>::new(tx)?;
        assert!(m.is_empty(tx)?);
        assert_eq!(m.get(tx, &1)?, None);
        assert_eq!(m.remove(tx, &1)?, None);
        for k in 0..1000 {
            assert_eq!(m.insert(tx, k * 7919, k)?, None);
        }
        assert_eq!(m.len(tx)?, 1000);
        for k in 0..1000 {
            assert_eq!(m.get(tx, &(k * 7919))?, Some(k));
        }
        assert!(!m.contains_key(tx, &1)?);
        assert_eq!(m.insert(tx, 7919, 5)?, Some(1));
        for k in (0..1000).step_by(2) {
            assert_eq!(m.remove(tx, &(k * 7919))?, Some(k), "key {k}");
        }
        assert_eq!(m.len(tx)?, 500);
        let model: Vec<(u64, u64)> = (1..1000).step_by(2).map(|k| (k * 7919, if k == 1 { 5 } else { k })).collect();
        assert_eq!(sorted(m.entries(tx)?), model);
        m.clear(tx)?;
        assert_eq!(m.len(tx)?, 0);
        assert_eq!(m.entries(tx)?, vec![]);
        m.insert(tx, 3, 4)?;
        assert_eq!(m.entries(tx)?, vec![(3, 4)]);
        m.free(tx)
    });
    assert_eq!(pool.info().live_objects, 0, "free released header, buckets and nodes");
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Persistent)]
struct Key {
    tenant: u32,
    code: [u8; 12],
}

#[test]
fn phashmap_with_struct_keys_and_collection_values() {
    let t = TempPool::new("mapstruct");
    let pool = create(&t);
    let key = |i: u32| Key { tenant: i % 3, code: [i as u8; 12] };
    run(&pool, |tx| {
        let m = PHashMap::<Key, PString>::new(tx)?;
        for i in 0..50 {
            m.insert(tx, key(i), PString::new(tx, &format!("value {i}"))?)?;
        }
        let old = m.insert(tx, key(7), PString::new(tx, "seven")?)?.unwrap();
        assert_eq!(old.get(tx)?, "value 7");
        old.free(tx)?;
        m.remove(tx, &key(8))?.unwrap().free(tx)?;
        m.set_root(tx, "names")
    });
    pool.close().unwrap();
    let pool = open(&t);
    run(&pool, |tx| {
        let m = PHashMap::<Key, PString>::from_root(tx, "names")?.unwrap();
        assert_eq!(m.len(tx)?, 49);
        assert_eq!(m.get(tx, &key(7))?.unwrap().get(tx)?, "seven");
        assert_eq!(m.get(tx, &key(8))?, None);
        assert_eq!(m.get(tx, &key(49))?.unwrap().get(tx)?, "value 49");
        Ok(())
    });
    // header + 128 buckets + 49 nodes + 49 strings of (header + buffer)
    assert_eq!(pool.collect().unwrap().objects, 2 + 49 + 49 * 2);
}

// ----- survival ---------------------------------------------------------------

#[derive(Clone, Copy, Persistent)]
struct Account {
    id: u64,
    name: PString,
    history: PVec<u64>,
    tags: PHashMap<u64, PBytes>,
    owner: PBox<u64>,
}

fn build_everything(pool: &Pool) {
    run(pool, |tx| {
        PBox::new(tx, 12345u64)?.set_root(tx, "box")?;
        let v = PVec::<u64>::new(tx)?;
        v.extend_from_slice(tx, &(0..300).collect::<Vec<_>>())?;
        v.set_root(tx, "vec")?;
        PString::new(tx, "persistent ✓")?.set_root(tx, "str")?;
        PBytes::new(tx, &[1, 2, 3, 255])?.set_root(tx, "bytes")?;
        let m = PHashMap::<u64, u64>::new(tx)?;
        for k in 0..200 {
            m.insert(tx, k, k + 1)?;
        }
        m.set_root(tx, "map")?;
        let tags = PHashMap::new(tx)?;
        tags.insert(tx, 1, PBytes::new(tx, b"one")?)?;
        let acct = Account { id: 9, name: PString::new(tx, "ada")?, history: PVec::new(tx)?, tags, owner: PBox::new(tx, 77)? };
        acct.history.push(tx, 100)?;
        PBox::new(tx, acct)?.set_root(tx, "account")?;
        let nested = PVec::<PVec<u64>>::new(tx)?;
        for i in 0..5 {
            let inner = PVec::new(tx)?;
            inner.extend_from_slice(tx, &vec![i; i as usize])?;
            nested.push(tx, inner)?;
        }
        nested.set_root(tx, "nested")
    });
}

fn verify_everything(pool: &Pool) {
    run(pool, |tx| {
        assert_eq!(PBox::<u64>::from_root(tx, "box")?.unwrap().get(tx)?, 12345);
        assert_eq!(PVec::<u64>::from_root(tx, "vec")?.unwrap().to_vec(tx)?, (0..300).collect::<Vec<_>>());
        assert_eq!(PString::from_root(tx, "str")?.unwrap().get(tx)?, "persistent ✓");
        assert_eq!(PBytes::from_root(tx, "bytes")?.unwrap().get(tx)?, vec![1, 2, 3, 255]);
        let m = PHashMap::<u64, u64>::from_root(tx, "map")?.unwrap();
        assert_eq!(sorted(m.entries(tx)?), (0..200).map(|k| (k, k + 1)).collect::<Vec<_>>());
        for k in 0..200 {
            assert_eq!(m.get(tx, &k)?, Some(k + 1), "key {k} found after reopen");
        }
        let acct = PBox::<Account>::from_root(tx, "account")?.unwrap().get(tx)?;
        assert_eq!(acct.id, 9);
        assert_eq!(acct.name.get(tx)?, "ada");
        assert_eq!(acct.history.to_vec(tx)?, vec![100]);
        assert_eq!(acct.tags.get(tx, &1)?.unwrap().get(tx)?, b"one");
        assert_eq!(acct.owner.get(tx)?, 77);
        let nested = PVec::<PVec<u64>>::from_root(tx, "nested")?.unwrap();
        for (i, inner) in nested.to_vec(tx)?.into_iter().enumerate() {
            assert_eq!(inner.to_vec(tx)?, vec![i as u64; i]);
        }
        Ok(())
    });
}

/// Objects `build_everything` leaves live.
const EVERYTHING: u64 = 1 // box
    + 2 // vec: header, buffer
    + 2 + 2 // string, bytes
    + 2 + 200 // map: header, buckets, nodes
    + 1 + 2 + 2 + (2 + 1 + 2) + 1 // account box, name, history, tags (+ node + bytes), owner
    + 2 + 5 + 4; // nested: header, buffer, 5 headers, 4 non-empty buffers

#[test]
fn everything_survives_close_and_reopen() {
    let t = TempPool::new("reopen");
    let pool = create(&t);
    build_everything(&pool);
    verify_everything(&pool);
    pool.close().unwrap();
    let pool = open(&t);
    assert!(pool.open_report().was_clean);
    verify_everything(&pool);
    pool.check().unwrap();
    assert_eq!(pool.collect().unwrap().objects, EVERYTHING, "GC reaches everything through the handles");
    verify_everything(&pool);
    pool.close().unwrap();
}

// ----- all or nothing ---------------------------------------------------------

/// Everything observable about the collections of `build_everything`.
#[derive(Debug, PartialEq)]
struct Snapshot {
    boxed: u64,
    vec: Vec<u64>,
    vec_cap: u64,
    string: String,
    bytes: Vec<u8>,
    map: Vec<(u64, u64)>,
    name: String,
    history: Vec<u64>,
    tags: Vec<(u64, Vec<u8>)>,
    nested: Vec<Vec<u64>>,
    live: u64,
}

fn snapshot(pool: &Pool) -> Snapshot {
    let mut s = run(pool, |tx| {
        let vec = PVec::<u64>::from_root(tx, "vec")?.unwrap();
        let acct = PBox::<Account>::from_root(tx, "account")?.unwrap().get(tx)?;
        let mut tags = Vec::new();
        for (k, b) in acct.tags.entries(tx)? {
            tags.push((k, b.get(tx)?));
        }
        let mut nested = Vec::new();
        for inner in PVec::<PVec<u64>>::from_root(tx, "nested")?.unwrap().to_vec(tx)? {
            nested.push(inner.to_vec(tx)?);
        }
        Ok(Snapshot {
            boxed: PBox::<u64>::from_root(tx, "box")?.unwrap().get(tx)?,
            vec: vec.to_vec(tx)?,
            vec_cap: vec.capacity(tx)?,
            string: PString::from_root(tx, "str")?.unwrap().get(tx)?,
            bytes: PBytes::from_root(tx, "bytes")?.unwrap().get(tx)?,
            // in chain order: a rollback must restore every link, not just the set
            map: PHashMap::<u64, u64>::from_root(tx, "map")?.unwrap().entries(tx)?,
            name: acct.name.get(tx)?,
            history: acct.history.to_vec(tx)?,
            tags,
            nested,
            live: 0,
        })
    });
    s.live = pool.info().live_objects;
    s
}

/// Changes every collection of `build_everything`, resizing the vector, the
/// strings and the map, allocating and freeing.
fn mutate_everything(tx: &Tx<'_>) -> Result<(), Error> {
    let b = PBox::<u64>::from_root(tx, "box")?.unwrap();
    b.set(tx, 0)?;
    let v = PVec::<u64>::from_root(tx, "vec")?.unwrap();
    v.set(tx, 0, 999)?;
    v.extend_from_slice(tx, &[5; 1000])?;
    v.truncate(tx, 700)?;
    v.pop(tx)?;
    let s = PString::from_root(tx, "str")?.unwrap();
    s.push_str(tx, &"x".repeat(500))?;
    PBytes::from_root(tx, "bytes")?.unwrap().set(tx, &[0; 100])?;
    let m = PHashMap::<u64, u64>::from_root(tx, "map")?.unwrap();
    for k in 0..50 {
        m.remove(tx, &(k * 3))?;
    }
    for k in 1000..1400 {
        m.insert(tx, k, 0)?;
    }
    m.insert(tx, 1, 0)?;
    let acct = PBox::<Account>::from_root(tx, "account")?.unwrap();
    let a = acct.get(tx)?;
    a.name.set(tx, "grace")?;
    a.history.clear(tx)?;
    a.tags.remove(tx, &1)?.unwrap().free(tx)?;
    a.tags.insert(tx, 2, PBytes::new(tx, b"two")?)?;
    a.owner.free(tx)?;
    acct.update(tx, |a| a.owner = PBox::from_ptr(PPtr::null()))?;
    let nested = PVec::<PVec<u64>>::from_root(tx, "nested")?.unwrap();
    nested.pop(tx)?.unwrap().free(tx)?;
    nested.get(tx, 1)?.unwrap().push(tx, 11)?;
    nested.push(tx, PVec::with_capacity(tx, 3)?)?;
    PHashMap::<u64, u64>::new(tx)?.set_root(tx, "fresh")?;
    tx.remove_root("str").map(drop)
}

#[test]
fn failed_region_leaves_collections_exactly_as_before() {
    let t = TempPool::new("rollback");
    let pool = create(&t);
    build_everything(&pool);
    let before = snapshot(&pool);
    let r: Result<(), Error> = pool.txn(|tx| {
        mutate_everything(tx)?;
        Err(Error::Aborted)
    });
    assert!(matches!(r, Err(Error::Aborted)));
    assert_eq!(snapshot(&pool), before);
    assert!(run(&pool, |tx| PHashMap::<u64, u64>::from_root(tx, "fresh")).is_none());
    pool.check().unwrap();
    // and the same changes commit when the region succeeds
    run(&pool, mutate_everything);
    run(&pool, |tx| {
        assert_eq!(PString::from_root(tx, "str")?, None);
        assert_eq!(PVec::<u64>::from_root(tx, "vec")?.unwrap().len(tx)?, 699);
        assert_eq!(PHashMap::<u64, u64>::from_root(tx, "map")?.unwrap().len(tx)?, 200 - 50 + 400);
        let acct = PBox::<Account>::from_root(tx, "account")?.unwrap().get(tx)?;
        assert_eq!(acct.name.get(tx)?, "grace");
        assert_eq!(acct.tags.entries(tx)?.len(), 1);
        assert!(acct.owner.as_ptr().is_null());
        Ok(())
    });
    pool.check().unwrap();
}

#[test]
fn panicking_region_leaves_collections_as_before() {
    let t = TempPool::new("panic");
    let pool = create(&t);
    build_everything(&pool);
    let before = snapshot(&pool);
    let p = pool.clone();
    let caught = std::panic::catch_unwind(move || {
        p.txn(|tx| {
            mutate_everything(tx)?;
            panic!("boom");
            #[allow(unreachable_code)]
            Ok::<_, Error>(())
        })
    });
    assert!(caught.is_err());
    assert_eq!(snapshot(&pool), before);
}

#[test]
fn crash_before_commit_restores_collections_on_reopen() {
    let t = TempPool::new("crash");
    let pool = create(&t);
    build_everything(&pool);
    let before = snapshot(&pool);
    arm(Failpoint::TxBeforeCommit, 0);
    let r = std::panic::catch_unwind(|| pool.txn(mutate_everything));
    disarm_all();
    assert!(is_crash(&*r.expect_err("the failpoint fired")));
    drop(pool);
    let pool = open(&t);
    let rep = pool.open_report().clone();
    assert!(!rep.was_clean);
    assert_eq!(rep.undone_regions, 1);
    assert_eq!(rep.recovered.expect("recovery GC ran").objects, EVERYTHING);
    assert_eq!(snapshot(&pool), before);
    verify_everything(&pool);
    pool.check().unwrap();
    // the recovered collections keep working
    run(&pool, mutate_everything);
    pool.close().unwrap();
}

// ----- garbage collection -----------------------------------------------------

#[test]
fn collect_keeps_only_live_collections() {
    let t = TempPool::new("gc");
    let pool = create(&t);
    run(&pool, |tx| {
        PBox::new(tx, 1u64)?.set_root(tx, "box")?; // 1
        let v = PVec::<u64>::new(tx)?;
        v.extend_from_slice(tx, &[1, 2, 3])?;
        v.set_root(tx, "vec")?; // 2
        PString::new(tx, "kept")?.set_root(tx, "str")?; // 2
        let m = PHashMap::<u64, u64>::new(tx)?;
        for k in 0..5 {
            m.insert(tx, k, k)?;
        }
        m.set_root(tx, "map") // 1 + 1 + 5
    });
    // garbage: never rooted, rooted then unrooted, replaced buffers
    run(&pool, |tx| {
        let lost = PVec::<u64>::new(tx)?;
        lost.extend_from_slice(tx, &[0; 100])?;
        PString::new(tx, "lost")?;
        let m = PHashMap::<u64, PString>::new(tx)?;
        m.insert(tx, 1, PString::new(tx, "also lost")?)?;
        m.set_root(tx, "doomed")?;
        PBytes::new(tx, b"lost too")?;
        PBox::new(tx, 2u64).map(drop)
    });
    run(&pool, |tx| tx.remove_root("doomed").map(drop));
    let expected = 1 + 2 + 2 + 7;
    assert!(pool.info().live_objects > expected);
    assert_eq!(pool.collect().unwrap().objects, expected);
    assert_eq!(pool.info().live_objects, expected);
    run(&pool, |tx| {
        assert_eq!(PVec::<u64>::from_root(tx, "vec")?.unwrap().to_vec(tx)?, vec![1, 2, 3]);
        assert_eq!(PHashMap::<u64, u64>::from_root(tx, "map")?.unwrap().len(tx)?, 5);
        Ok(())
    });
}

// ----- isolation --------------------------------------------------------------

#[test]
fn concurrent_regions_see_each_other_whole() {
    let t = TempPool::new("threads");
    let pool = create(&t);
    run(&pool, |tx| {
        PHashMap::<u64, u64>::new(tx)?.set_root(tx, "counts")?;
        PVec::<u64>::new(tx)?.set_root(tx, "log")
    });
    let threads: Vec<_> = (0..4u64)
        .map(|id| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                for _ in 0..25 {
                    run(&pool, |tx| {
                        let m = PHashMap::<u64, u64>::from_root(tx, "counts")?.unwrap();
                        let log = PVec::<u64>::from_root(tx, "log")?.unwrap();
                        let n = m.get(tx, &0)?.unwrap_or(0);
                        assert_eq!(log.len(tx)?, n, "map and vector change together");
                        m.insert(tx, 0, n + 1)?;
                        m.insert(tx, 1 + id, m.get(tx, &(1 + id))?.unwrap_or(0) + 1)?;
                        log.push(tx, id)
                    });
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    run(&pool, |tx| {
        let m = PHashMap::<u64, u64>::from_root(tx, "counts")?.unwrap();
        assert_eq!(m.get(tx, &0)?, Some(100));
        for id in 0..4 {
            assert_eq!(m.get(tx, &(1 + id))?, Some(25));
        }
        let log = PVec::<u64>::from_root(tx, "log")?.unwrap().to_vec(tx)?;
        assert_eq!(log.len(), 100);
        Ok(())
    });
}

// ----- model-checked random op sequences ----------------------------------------

#[derive(Clone, Debug)]
enum VecOp {
    Push(u64),
    Pop,
    Get(u16),
    Set(u16, u64),
    Extend(Vec<u64>),
    Truncate(u16),
    Clear,
}

#[derive(Clone, Debug)]
enum MapOp {
    Insert(u8, u64),
    Remove(u8),
    Get(u8),
    Clear,
}

#[derive(Clone, Debug)]
struct Batch {
    vec: Vec<VecOp>,
    map: Vec<MapOp>,
    commit: bool,
}

fn vec_op() -> impl Strategy<Value = VecOp> {
    prop_oneof![
        6 => any::<u64>().prop_map(VecOp::Push),
        2 => Just(VecOp::Pop),
        2 => any::<u16>().prop_map(VecOp::Get),
        2 => (any::<u16>(), any::<u64>()).prop_map(|(i, v)| VecOp::Set(i, v)),
        1 => prop::collection::vec(any::<u64>(), 0..24).prop_map(VecOp::Extend),
        1 => any::<u16>().prop_map(VecOp::Truncate),
        1 => Just(VecOp::Clear),
    ]
}

fn map_op() -> impl Strategy<Value = MapOp> {
    prop_oneof![
        8 => (any::<u8>(), any::<u64>()).prop_map(|(k, v)| MapOp::Insert(k, v)),
        3 => any::<u8>().prop_map(MapOp::Remove),
        2 => any::<u8>().prop_map(MapOp::Get),
        1 => Just(MapOp::Clear),
    ]
}

fn batch() -> impl Strategy<Value = Batch> {
    (prop::collection::vec(vec_op(), 0..40), prop::collection::vec(map_op(), 0..60), prop::bool::weighted(0.6))
        .prop_map(|(vec, map, commit)| Batch { vec, map, commit })
}

/// Applies `ops` to the pool vector and to `model`, checking every result.
fn apply_vec(tx: &Tx<'_>, v: PVec<u64>, ops: &[VecOp], model: &mut Vec<u64>) -> Result<(), Error> {
    for op in ops {
        let len = model.len() as u64;
        match op {
            VecOp::Push(x) => {
                v.push(tx, *x)?;
                model.push(*x);
            }
            VecOp::Pop => assert_eq!(v.pop(tx)?, model.pop()),
            VecOp::Get(i) => {
                let i = *i as u64 % (len + 2);
                assert_eq!(v.get(tx, i)?, model.get(i as usize).copied());
            }
            VecOp::Set(i, x) => {
                let i = *i as u64 % (len + 1);
                match model.get_mut(i as usize) {
                    Some(slot) => assert_eq!(v.set(tx, i, *x)?, std::mem::replace(slot, *x)),
                    None => assert!(matches!(v.set(tx, i, *x), Err(Error::OutOfBounds { .. }))),
                }
            }
            VecOp::Extend(xs) => {
                v.extend_from_slice(tx, xs)?;
                model.extend_from_slice(xs);
            }
            VecOp::Truncate(n) => {
                let n = *n as u64 % (len + 4);
                v.truncate(tx, n)?;
                model.truncate(n as usize);
            }
            VecOp::Clear => {
                v.clear(tx)?;
                model.clear();
            }
        }
        assert_eq!(v.len(tx)?, model.len() as u64);
    }
    Ok(())
}

/// Applies `ops` to the pool map and to `model`, checking every result.
fn apply_map(tx: &Tx<'_>, m: PHashMap<u64, u64>, ops: &[MapOp], model: &mut HashMap<u64, u64>) -> Result<(), Error> {
    for op in ops {
        match *op {
            MapOp::Insert(k, x) => assert_eq!(m.insert(tx, k as u64 * 0x1_0001, x)?, model.insert(k as u64 * 0x1_0001, x)),
            MapOp::Remove(k) => assert_eq!(m.remove(tx, &(k as u64 * 0x1_0001))?, model.remove(&(k as u64 * 0x1_0001))),
            MapOp::Get(k) => assert_eq!(m.get(tx, &(k as u64 * 0x1_0001))?, model.get(&(k as u64 * 0x1_0001)).copied()),
            MapOp::Clear => {
                m.clear(tx)?;
                model.clear();
            }
        }
        assert_eq!(m.len(tx)?, model.len() as u64);
    }
    Ok(())
}

fn assert_matches(pool: &Pool, vec: &[u64], map: &HashMap<u64, u64>) {
    let (v, m) = run(pool, |tx| {
        let v = PVec::<u64>::from_root(tx, "v")?.unwrap();
        let m = PHashMap::<u64, u64>::from_root(tx, "m")?.unwrap();
        for (k, x) in map {
            assert_eq!(m.get(tx, k)?, Some(*x));
        }
        Ok((v.to_vec(tx)?, m.entries(tx)?))
    });
    assert_eq!(v, vec);
    assert_eq!(sorted(m), sorted(map.iter().map(|(&k, &x)| (k, x)).collect()));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_batches_match_std_models(batches in prop::collection::vec(batch(), 1..8)) {
        let t = TempPool::new("prop");
        let pool = create(&t);
        run(&pool, |tx| {
            PVec::<u64>::new(tx)?.set_root(tx, "v")?;
            PHashMap::<u64, u64>::new(tx)?.set_root(tx, "m")
        });
        let (mut vec, mut map) = (Vec::new(), HashMap::new());
        for b in &batches {
            let (mut v2, mut m2) = (vec.clone(), map.clone());
            let r = pool.txn(|tx| {
                let v = PVec::<u64>::from_root(tx, "v")?.unwrap();
                let m = PHashMap::<u64, u64>::from_root(tx, "m")?.unwrap();
                apply_vec(tx, v, &b.vec, &mut v2)?;
                apply_map(tx, m, &b.map, &mut m2)?;
                if b.commit { Ok(()) } else { Err(Error::Aborted) }
            });
            if b.commit {
                r.unwrap();
                (vec, map) = (v2, m2);
            } else {
                prop_assert!(matches!(r, Err(Error::Aborted)));
            }
            assert_matches(&pool, &vec, &map);
        }
        pool.close().unwrap();
        let pool = open(&t);
        assert_matches(&pool, &vec, &map);
        pool.check().unwrap();
        pool.close().unwrap();
    }
}
