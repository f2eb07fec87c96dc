//! Transactional persistent collections (`engram::stm::collections`): each
//! structure against a `BTreeMap` model under random multi-operation
//! transactions (with its invariants checked along the way), dropped
//! `or_else` branches, hash collisions in the trie, values across close and
//! reopen, threads on one structure (owned keys plus contended shared
//! counters, with a concurrent reader checking invariants; all threads on
//! a few hot keys), crashes around the commit fence, and GC of removed
//! nodes.

mod common;
use common::TempPool;
use engram::failpoint::{self, Failpoint};
use engram::stm::collections::{HashTable, PMap, PSet, RbTree, Shape, Treap};
use engram::stm::{STx, StmError, StmResult};
use engram::{CreateOptions, Durability, Error, OpenOptions, Persistent, Pool};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("stmc").durability(Durability::Process)).unwrap()
}

fn reopen(t: &TempPool) -> Pool {
    Pool::open(&t.0, OpenOptions::new("stmc").durability(Durability::Process)).unwrap()
}

/// The operations every structure shares, on u64 keys and values.
trait Coll: Copy + Send + Sync + 'static {
    fn make(pool: &Pool, name: &str) -> Self;
    fn insert(&self, tx: &STx<'_>, k: u64, v: u64) -> StmResult<Option<u64>>;
    fn get(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>>;
    fn remove(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>>;
    fn check(&self, tx: &STx<'_>) -> StmResult<Shape>;
    fn entries(&self, tx: &STx<'_>) -> StmResult<Vec<(u64, u64)>>;
    fn len(&self, tx: &STx<'_>) -> StmResult<u64>;
    /// Pool objects of a structure of `n` entries, where that is fixed.
    fn objects(n: u64) -> Option<u64>;
}

macro_rules! coll {
    ($t:ty, |$p:ident, $n:ident| $make:expr, $objects:expr) => {
        impl Coll for $t {
            fn make($p: &Pool, $n: &str) -> Self {
                $make.unwrap()
            }
            fn insert(&self, tx: &STx<'_>, k: u64, v: u64) -> StmResult<Option<u64>> {
                <$t>::insert(self, tx, k, v)
            }
            fn get(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>> {
                <$t>::get(self, tx, &k)
            }
            fn remove(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>> {
                <$t>::remove(self, tx, &k)
            }
            fn check(&self, tx: &STx<'_>) -> StmResult<Shape> {
                <$t>::check(self, tx)
            }
            fn entries(&self, tx: &STx<'_>) -> StmResult<Vec<(u64, u64)>> {
                let mut v = <$t>::to_vec(self, tx)?;
                v.sort();
                Ok(v)
            }
            fn len(&self, tx: &STx<'_>) -> StmResult<u64> {
                <$t>::len(self, tx)
            }
            fn objects(n: u64) -> Option<u64> {
                let f: fn(u64) -> Option<u64> = $objects;
                f(n)
            }
        }
    };
}

coll!(PMap<u64, u64>, |p, n| PMap::root(p, n), |_| None);
coll!(RbTree<u64, u64>, |p, n| RbTree::root(p, n), |n| Some(n + 1));
coll!(Treap<u64, u64>, |p, n| Treap::root(p, n), |n| Some(n + 1));
// (a hash table's objects: the array and the overflow nodes, which depend
// on how the keys spread)
coll!(HashTable<u64, u64>, |p, n| HashTable::root(p, n, 61), |_| None);

/// Checks the structure and compares it with the model.
fn agree<C: Coll>(pool: &Pool, c: C, model: &BTreeMap<u64, u64>) -> Shape {
    let (shape, entries, len) = pool.atomically(|tx| Ok((c.check(tx)?, c.entries(tx)?, c.len(tx)?))).unwrap();
    let want: Vec<(u64, u64)> = model.iter().map(|(&k, &v)| (k, v)).collect();
    assert_eq!(entries, want);
    assert_eq!((shape.len, len), (model.len() as u64, model.len() as u64));
    shape
}

/// Random transactions of 1..=6 operations on keys below `keys`, each
/// result compared with the model's.
fn random_ops<C: Coll>(pool: &Pool, c: C, seed: u64, txs: usize, keys: u64, model: &mut BTreeMap<u64, u64>) {
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..txs {
        let ops: Vec<(u8, u64, u64)> =
            (0..rng.gen_range(1..=6)).map(|_| (rng.gen_range(0..3), rng.gen_range(0..keys), rng.gen())).collect();
        let got = pool
            .atomically(|tx| {
                ops.iter()
                    .map(|&(op, k, v)| match op {
                        0 => c.insert(tx, k, v),
                        1 => c.remove(tx, k),
                        _ => c.get(tx, k),
                    })
                    .collect::<StmResult<Vec<_>>>()
            })
            .unwrap();
        for (&(op, k, v), got) in ops.iter().zip(got) {
            let want = match op {
                0 => model.insert(k, v),
                1 => model.remove(&k),
                _ => model.get(&k).copied(),
            };
            assert_eq!(got, want, "tx {i}: op {op} on key {k}");
        }
        if i % 50 == 49 {
            agree(pool, c, model);
        }
    }
}

fn model_test<C: Coll>(tag: &str, keys: u64) {
    let t = TempPool::new(tag);
    let pool = create(&t);
    let c = C::make(&pool, "c");
    let mut model = BTreeMap::new();
    random_ops(&pool, c, 7, 2000, keys, &mut model);
    let shape = agree(&pool, c, &model);
    if let Some(n) = C::objects(model.len() as u64) {
        assert_eq!(shape.objects, n);
    }
    // A dropped or_else branch leaves no trace.
    let before = pool.atomically(|tx| c.entries(tx)).unwrap();
    let took = pool
        .atomically(|tx| {
            tx.or_else(
                |tx| {
                    for k in 0..keys {
                        c.insert(tx, k + 1000, k)?;
                        c.remove(tx, k)?;
                    }
                    tx.retry()
                },
                |_| Ok("second"),
            )
        })
        .unwrap();
    assert_eq!(took, "second");
    assert_eq!(pool.atomically(|tx| c.entries(tx)).unwrap(), before);
    agree(&pool, c, &model);
    pool.close().unwrap();
}

#[test]
fn pmap_matches_a_model() {
    model_test::<PMap<u64, u64>>("pmap-model", 400);
}

#[test]
fn rbtree_matches_a_model() {
    model_test::<RbTree<u64, u64>>("rb-model", 300);
}

#[test]
fn treap_matches_a_model() {
    model_test::<Treap<u64, u64>>("treap-model", 300);
}

#[test]
fn hashtable_matches_a_model() {
    model_test::<HashTable<u64, u64>>("ht-model", 300);
}

/// A key whose hash takes three values: full 64-bit collisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Persistent)]
struct Clash(u64);

impl Hash for Clash {
    fn hash<H: Hasher>(&self, h: &mut H) {
        (self.0 % 3).hash(h);
    }
}

#[test]
fn pmap_handles_full_hash_collisions() {
    let t = TempPool::new("pmap-clash");
    let pool = create(&t);
    let m = PMap::<Clash, u64>::root(&pool, "clash").unwrap();
    let mut model = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(11);
    for _ in 0..300 {
        let (k, v) = (Clash(rng.gen_range(0..15)), rng.gen::<u64>());
        let (got, want) = if rng.gen_bool(0.6) {
            (pool.atomically(|tx| m.insert(tx, k, v)).unwrap(), model.insert(k, v))
        } else {
            (pool.atomically(|tx| m.remove(tx, &k)).unwrap(), model.remove(&k))
        };
        assert_eq!(got, want);
        let shape = pool.atomically(|tx| m.check(tx)).unwrap();
        assert_eq!(shape.len, model.len() as u64);
        // three chains of single-branch nodes down to collision nodes
        assert!(model.len() < 4 || shape.height == 14, "{shape:?}");
    }
    let mut got = pool.atomically(|tx| m.to_vec(tx)).unwrap();
    got.sort();
    assert_eq!(got, model.into_iter().collect::<Vec<_>>());
    // Emptied, the trie shrinks back to its root.
    let keys: Vec<Clash> = got.iter().map(|e| e.0).collect();
    pool.atomically(|tx| keys.iter().try_for_each(|k| m.remove(tx, k).map(drop))).unwrap();
    let shape = pool.atomically(|tx| m.check(tx)).unwrap();
    assert_eq!(shape, Shape { len: 0, objects: 2, height: 1 });
}

#[test]
fn pset_is_a_set() {
    let t = TempPool::new("pset");
    let pool = create(&t);
    let s = PSet::<u64>::root(&pool, "s").unwrap();
    let n = pool
        .atomically(|tx| {
            let mut fresh = 0;
            for k in 0..500u64 {
                fresh += s.insert(tx, k % 200)? as u64;
            }
            Ok(fresh)
        })
        .unwrap();
    assert_eq!(n, 200);
    let removed = pool.atomically(|tx| (0..300u64).try_fold(0, |n, k| Ok(n + s.remove(tx, &k)? as u64))).unwrap();
    assert_eq!(removed, 200);
    assert!(pool.atomically(|tx| s.is_empty(tx)).unwrap());
    pool.atomically(|tx| (0..50u64).try_for_each(|k| s.insert(tx, k * 7).map(drop))).unwrap();
    let mut keys = pool.atomically(|tx| s.to_vec(tx)).unwrap();
    keys.sort();
    assert_eq!(keys, (0..50).map(|k| k * 7).collect::<Vec<_>>());
    assert!(pool.atomically(|tx| Ok(s.contains(tx, &49)? && !s.contains(tx, &50)?)).unwrap());
    assert_eq!(pool.atomically(|tx| s.check(tx)).unwrap().len, 50);
}

fn fill<C: Coll>(pool: &Pool, name: &str, seed: u64) -> (C, BTreeMap<u64, u64>) {
    let c = C::make(pool, name);
    let mut model = BTreeMap::new();
    random_ops(pool, c, seed, 150, 500, &mut model);
    (c, model)
}

#[test]
fn values_survive_close_and_reopen() {
    let t = TempPool::new("stmc-reopen");
    let pool = create(&t);
    let (_, m1) = fill::<PMap<u64, u64>>(&pool, "pmap", 1);
    let (_, m2) = fill::<RbTree<u64, u64>>(&pool, "rb", 2);
    let (_, m3) = fill::<Treap<u64, u64>>(&pool, "treap", 3);
    let (_, m4) = fill::<HashTable<u64, u64>>(&pool, "ht", 4);
    let set = PSet::<u64>::root(&pool, "set").unwrap();
    pool.atomically(|tx| set.insert(tx, 42)).unwrap();
    pool.close().unwrap();
    let pool = reopen(&t);
    pool.check().unwrap();
    agree(&pool, PMap::<u64, u64>::make(&pool, "pmap"), &m1);
    agree(&pool, RbTree::<u64, u64>::make(&pool, "rb"), &m2);
    agree(&pool, Treap::<u64, u64>::make(&pool, "treap"), &m3);
    let ht = HashTable::<u64, u64>::root(&pool, "ht", 7).unwrap();
    assert_eq!(pool.atomically(|tx| ht.buckets(tx)).unwrap(), 61, "an existing table keeps its size");
    agree(&pool, ht, &m4);
    let set = PSet::<u64>::root(&pool, "set").unwrap();
    assert_eq!(pool.atomically(|tx| set.to_vec(tx)).unwrap(), vec![42]);
    pool.close().unwrap();
}

/// A power-of-two bucket count takes the masked index (`HashTable::bucket_of`):
/// every key must still sit in chain `hash % buckets`, which `check` verifies.
#[test]
fn a_power_of_two_hash_table_places_keys_as_modulo_does() {
    let t = TempPool::new("stmc-ht-pow2");
    let pool = create(&t);
    let ht = HashTable::<u64, u64>::root(&pool, "ht", 64).unwrap();
    for k in 0..500u64 {
        pool.atomically(|tx| ht.insert(tx, k * 7919, k)).unwrap();
    }
    let shape = pool.atomically(|tx| ht.check(tx)).unwrap();
    assert_eq!(shape.len, 500);
    for k in 0..500u64 {
        assert_eq!(pool.atomically(|tx| ht.get(tx, &(k * 7919))).unwrap(), Some(k));
    }
    assert_eq!(pool.atomically(|tx| ht.get(tx, &1)).unwrap(), None);
    pool.close().unwrap();
}

/// `Persist` as itself (a plain value) for a test's pool type.
macro_rules! plain_persist {
    ($t:ty) => {
        impl engram::stm::Persist for $t {
            type P = Self;
            fn persist(&self, _: &mut engram::stm::CopyCx<'_>) -> engram::Result<Self> {
                Ok(*self)
            }
            fn plain(&self) -> Option<Self> {
                Some(*self)
            }
        }
    };
}

/// A pool whose root holds a table of an earlier layout (before round 23:
/// three `PTField`s per node, handle `engram::stm::HashTable<u64,u64>`;
/// rounds 23-24: 16-byte bucket heads and every entry in a node, handle
/// `engram::stm::HashTable.v2<u64,u64>`; rounds 25-27: today's cells,
/// keys placed by the FNV-1a hash, `engram::stm::HashTable.v3<u64,u64>`)
/// is refused by the root's type check, not read as the current layout.
/// The old handles are made by hand: a struct under each old name.
#[test]
fn a_hash_table_of_an_old_layout_is_refused() {
    macro_rules! refused {
        ($old:literal) => {{
            #[repr(C)]
            #[derive(Clone, Copy, Persistent)]
            #[engram(name = $old)]
            struct OldHandle {
                buckets: u64,
            }
            plain_persist!(OldHandle);
            let t = TempPool::new("stmc-ht-old");
            let pool = create(&t);
            pool.root::<OldHandle>("ht", || OldHandle { buckets: 0 }).unwrap();
            match HashTable::<u64, u64>::root(&pool, "ht", 64) {
                Err(Error::RootType { name, found, expected }) => {
                    assert_eq!(name, "ht");
                    assert!(found.contains($old), "found {found}");
                    assert!(expected.contains("engram::stm::HashTable.v4<u64,u64>"), "expected {expected}");
                }
                other => panic!("an old-layout table ({}) was not refused: {other:?}", $old),
            }
            pool.close().unwrap();
        }};
    }
    refused!("engram::stm::HashTable<u64,u64>");
    refused!("engram::stm::HashTable.v2<u64,u64>");
    refused!("engram::stm::HashTable.v3<u64,u64>");
}

/// A key that every table puts in one bucket (its hash is constant).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Persistent)]
struct OneBucket(u64);

plain_persist!(OneBucket);

impl Hash for OneBucket {
    fn hash<H: Hasher>(&self, h: &mut H) {
        0u64.hash(h);
    }
}

/// A table whose 40 keys share one chain (the first inline in the
/// bucket, then overflow nodes 39, 38, ..., 1, each new one linked right
/// after the inline entry); `plant`: a bug planted for the removals.
fn one_chain(pool: &Pool, plant: Option<&str>) -> (HashTable<OneBucket, u64>, BTreeMap<OneBucket, u64>) {
    let ht = HashTable::<OneBucket, u64>::root(pool, "ht", 1).unwrap();
    assert_eq!(pool.atomically(|tx| ht.buckets(tx)).unwrap(), 3, "a table of 1 bucket is made with 3");
    let mut model = BTreeMap::new();
    for k in 0..40u64 {
        pool.atomically(|tx| ht.insert(tx, OneBucket(k), k * 10)).unwrap();
        model.insert(OneBucket(k), k * 10);
    }
    if let Some(b) = plant {
        failpoint::plant(b);
    }
    (ht, model)
}

/// Removals from every position of one long chain (the bucket's inline
/// entry with overflow nodes behind it, whose first node's entry moves
/// in; the first node, the middle, the end: the link before the node is
/// the bucket's or a node's whole cell, rewritten with its key and value
/// kept; the inline entry alone, which empties the bucket), checked
/// against a model.
#[test]
fn hash_table_removes_from_every_position_of_a_chain() {
    let t = TempPool::new("stmc-ht-chain");
    let pool = create(&t);
    let (ht, mut model) = one_chain(&pool, None);
    let order = [0u64, 39, 37, 20, 21, 1, 38, 7];
    for k in order.into_iter().chain((0..40).filter(|k| !order.contains(k))) {
        let k = OneBucket(k);
        assert_eq!(pool.atomically(|tx| ht.remove(tx, &k)).unwrap(), model.remove(&k));
        let shape = pool.atomically(|tx| ht.check(tx)).unwrap();
        assert_eq!((shape.len, shape.height, shape.objects), (model.len() as u64, model.len() as u64, model.len().max(1) as u64));
        let mut got = pool.atomically(|tx| ht.to_vec(tx)).unwrap();
        got.sort();
        assert_eq!(got, model.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
        if let Some(&k) = model.keys().nth(2) {
            // (an update of a value in the chain keeps its key and links)
            assert_eq!(pool.atomically(|tx| ht.insert(tx, k, 55)).unwrap(), model.insert(k, 55));
            assert_eq!(pool.atomically_read(|tx| ht.get(tx, &k)).unwrap(), Some(55));
        }
    }
    assert!(pool.atomically(|tx| ht.is_empty(tx)).unwrap());
    assert_eq!(pool.atomically(|tx| ht.remove(tx, &OneBucket(100))).unwrap(), None);
    assert_eq!(pool.atomically(|tx| ht.insert(tx, OneBucket(3), 1)).unwrap(), None);
    assert_eq!(pool.atomically(|tx| ht.to_vec(tx)).unwrap(), vec![(OneBucket(3), 1)]);
    pool.close().unwrap();
}

/// With the planted `stm.ht_remove_drops_overflow` (removing the inline
/// entry empties the bucket, its overflow nodes' keys lost) the table no
/// longer agrees with the model: the removal test's comparison catches it.
#[test]
fn a_removal_that_drops_the_overflow_nodes_is_caught() {
    let t = TempPool::new("stmc-ht-plant");
    let pool = create(&t);
    let (ht, mut model) = one_chain(&pool, Some("stm.ht_remove_drops_overflow"));
    assert_eq!(pool.atomically(|tx| ht.remove(tx, &OneBucket(0))).unwrap(), model.remove(&OneBucket(0)));
    failpoint::disarm_all();
    let got = pool.atomically(|tx| ht.to_vec(tx)).unwrap();
    assert!(got.is_empty() && model.len() == 39, "the planted bug was not caught: {} entries left", got.len());
    pool.close().unwrap();
}

/// Threads on one structure: thread `t` owns the keys `k % 4 == t` below
/// 400 (checked against its own model at the end) and increments shared
/// counters (keys 1000..1004) read-modify-write; a reader checks the
/// invariants in read-only transactions while they run.
fn threads_test<C: Coll>(tag: &str) {
    const THREADS: u64 = 4;
    const TXS: usize = 1500;
    let t = TempPool::new(tag);
    let pool = create(&t);
    let c = C::make(&pool, "c");
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (pool, done) = (pool.clone(), done.clone());
        std::thread::spawn(move || {
            let mut checks = 0;
            while !done.load(Ordering::Acquire) || checks == 0 {
                pool.atomically(|tx| c.check(tx)).unwrap();
                checks += 1;
            }
            checks
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|th| {
            let pool = pool.clone();
            std::thread::spawn(move || worker(&pool, c, th, THREADS, TXS))
        })
        .collect();
    let mut model = BTreeMap::new();
    let mut increments = 0;
    for w in workers {
        let (m, inc) = w.join().unwrap();
        model.extend(m);
        increments += inc;
    }
    done.store(true, Ordering::Release);
    assert!(reader.join().unwrap() > 0);
    let shared: u64 = pool.atomically(|tx| (1000..1004).map(|k| Ok(c.get(tx, k)?.unwrap_or(0))).sum()).unwrap();
    assert_eq!(shared, increments, "no lost increment on the shared keys");
    let owned: Vec<(u64, u64)> = pool.atomically(|tx| c.entries(tx)).unwrap().into_iter().filter(|e| e.0 < 1000).collect();
    assert_eq!(owned, model.into_iter().collect::<Vec<_>>());
    pool.atomically(|tx| c.check(tx)).unwrap();
    pool.close().unwrap();
}

fn worker<C: Coll>(pool: &Pool, c: C, th: u64, threads: u64, txs: usize) -> (BTreeMap<u64, u64>, u64) {
    let mut rng = StdRng::seed_from_u64(100 + th);
    let (mut model, mut increments) = (BTreeMap::new(), 0);
    for _ in 0..txs {
        if rng.gen_ratio(1, 4) {
            let k = 1000 + rng.gen_range(0..4);
            pool.atomically(|tx| {
                let v = c.get(tx, k)?.unwrap_or(0);
                c.insert(tx, k, v + 1)
            })
            .unwrap();
            increments += 1;
            continue;
        }
        let k = rng.gen_range(0..100) * threads + th;
        let v = rng.gen::<u64>();
        if rng.gen_bool(0.6) {
            assert_eq!(pool.atomically(|tx| c.insert(tx, k, v)).unwrap(), model.insert(k, v));
        } else {
            assert_eq!(pool.atomically(|tx| c.remove(tx, k)).unwrap(), model.remove(&k));
        }
    }
    (model, increments)
}

/// Threads all on one small key range: each transaction moves a token
/// (a key) to a free key, so structural updates collide all the time; the
/// number of keys is conserved, and readers never see it change.
fn hot_keys_test<C: Coll>(tag: &str) {
    const TOKENS: u64 = 24;
    const KEYS: u64 = 64;
    let t = TempPool::new(tag);
    let pool = create(&t);
    let c = C::make(&pool, "hot");
    pool.atomically(|tx| (0..TOKENS).try_for_each(|k| c.insert(tx, k * 2, k).map(drop))).unwrap();
    let moves: Vec<_> = (0..4u64)
        .map(|th| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(200 + th);
                for _ in 0..800 {
                    let (a, b) = (rng.gen_range(0..KEYS), rng.gen_range(0..KEYS));
                    pool.atomically(|tx| {
                        if a == b || c.get(tx, b)?.is_some() {
                            return Ok(());
                        }
                        if let Some(v) = c.remove(tx, a)? {
                            c.insert(tx, b, v)?;
                        }
                        Ok(())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    let pool2 = pool.clone();
    let reader = std::thread::spawn(move || {
        for _ in 0..200 {
            let shape = pool2.atomically(|tx| c.check(tx)).unwrap();
            assert_eq!(shape.len, TOKENS, "a reader saw a half-done move");
        }
    });
    for m in moves {
        m.join().unwrap();
    }
    reader.join().unwrap();
    let mut values: Vec<u64> = pool.atomically(|tx| c.entries(tx)).unwrap().into_iter().map(|e| e.1).collect();
    values.sort();
    assert_eq!(values, (0..TOKENS).collect::<Vec<_>>(), "every token is still there, once");
    pool.close().unwrap();
}

#[test]
fn pmap_under_threads() {
    threads_test::<PMap<u64, u64>>("pmap-threads");
    hot_keys_test::<PMap<u64, u64>>("pmap-hot");
}

#[test]
fn rbtree_under_threads() {
    threads_test::<RbTree<u64, u64>>("rb-threads");
    hot_keys_test::<RbTree<u64, u64>>("rb-hot");
}

#[test]
fn treap_under_threads() {
    threads_test::<Treap<u64, u64>>("treap-threads");
    hot_keys_test::<Treap<u64, u64>>("treap-hot");
}

#[test]
fn hashtable_under_threads() {
    threads_test::<HashTable<u64, u64>>("ht-threads");
    hot_keys_test::<HashTable<u64, u64>>("ht-hot");
}

/// A transaction cut short by a crash after its commit fence is replayed
/// whole on reopen; one that failed before committing leaves nothing. The
/// structure checks out either way.
fn crash_test<C: Coll>(tag: &str) {
    for (point, committed) in [(Some(Failpoint::StmAfterFence), true), (Some(Failpoint::StmAfterApply), true), (None, false)] {
        let t = TempPool::new(tag);
        let pool = create(&t);
        let c = C::make(&pool, "c");
        let mut model = BTreeMap::new();
        random_ops(&pool, c, 5, 100, 200, &mut model);
        if let Some(point) = point {
            failpoint::arm(point, 0);
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.atomically(|tx| {
                for k in 0..20 {
                    c.insert(tx, k + 500, k)?;
                    c.remove(tx, k * 3)?;
                }
                match point {
                    None => Err(StmError::Failed(Error::InvalidArgument { what: "the caller gives up".into() })),
                    _ => Ok(()),
                }
            })
        }));
        failpoint::disarm_all();
        assert!(r.is_err() || r.is_ok_and(|r| r.is_err()), "{point:?}: the transaction did not commit normally");
        pool.simulate_crash();
        let pool = reopen(&t);
        if committed {
            for k in 0..20 {
                model.insert(k + 500, k);
                model.remove(&(k * 3));
            }
        }
        agree(&pool, C::make(&pool, "c"), &model);
        pool.check().unwrap();
        pool.close().unwrap();
    }
}

#[test]
fn crashes_replay_or_drop_whole_transactions() {
    crash_test::<PMap<u64, u64>>("pmap-crash");
    crash_test::<RbTree<u64, u64>>("rb-crash");
    crash_test::<Treap<u64, u64>>("treap-crash");
    crash_test::<HashTable<u64, u64>>("ht-crash");
}

/// After removals, `collect` leaves exactly the structure's live objects.
fn gc_test<C: Coll>(tag: &str) {
    let t = TempPool::new(tag);
    let pool = create(&t);
    let c = C::make(&pool, "c");
    pool.collect().unwrap();
    let empty = pool.atomically(|tx| c.check(tx)).unwrap();
    let base = pool.info().live_objects - empty.objects;
    pool.atomically(|tx| (0..150u64).try_for_each(|k| c.insert(tx, k, k).map(drop))).unwrap();
    pool.atomically(|tx| (150..300u64).try_for_each(|k| c.insert(tx, k, k).map(drop))).unwrap();
    for chunk in (0..300u64).filter(|k| k % 3 != 0).collect::<Vec<_>>().chunks(25) {
        pool.atomically(|tx| chunk.iter().try_for_each(|&k| c.remove(tx, k).map(drop))).unwrap();
    }
    let shape = pool.atomically(|tx| c.check(tx)).unwrap();
    assert_eq!(shape.len, 100);
    let before = pool.info().live_objects;
    pool.collect().unwrap();
    let after = pool.info().live_objects;
    assert_eq!(after, base + shape.objects, "live: {before} before collect, {after} after; {shape:?}");
    if let Some(n) = C::objects(100) {
        assert_eq!(shape.objects, n);
    }
    let model: BTreeMap<u64, u64> = (0..300).filter(|k| k % 3 == 0).map(|k| (k, k)).collect();
    agree(&pool, c, &model);
}

#[test]
fn removed_pmap_nodes_are_garbage() {
    gc_test::<PMap<u64, u64>>("pmap-gc");
}

#[test]
fn removed_rbtree_nodes_are_garbage() {
    gc_test::<RbTree<u64, u64>>("rb-gc");
}

#[test]
fn removed_treap_nodes_are_garbage() {
    gc_test::<Treap<u64, u64>>("treap-gc");
}

#[test]
fn removed_hashtable_nodes_are_garbage() {
    gc_test::<HashTable<u64, u64>>("ht-gc");
}

/// A pool whose root holds a red-black tree of the layout before
/// `RbTree.v2` (one `PTField` per node field) is refused with the root
/// type error naming both types, not read as dense nodes.
#[test]
fn a_tree_of_the_old_node_layout_is_refused() {
    /// The old tree's handle: the same pool pointer under the old name.
    #[derive(Clone, Copy)]
    #[repr(transparent)]
    struct OldRbTree(engram::PPtr<u64>);
    // SAFETY: one pool pointer at offset 0, as the old handle.
    unsafe impl Persistent for OldRbTree {
        fn type_name() -> String {
            format!("engram::stm::RbTree<{},{}>", u64::type_name(), u64::type_name())
        }
        fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
            out.push(at);
        }
    }
    plain_persist!(OldRbTree);
    let t = TempPool::new("stmc-rb-old");
    let pool = create(&t);
    pool.root::<OldRbTree>("rb", || OldRbTree(engram::PPtr::null())).unwrap();
    pool.close().unwrap();
    let pool = reopen(&t);
    match RbTree::<u64, u64>::root(&pool, "rb") {
        Err(Error::RootType { name, expected, found }) => {
            assert_eq!(name, "rb");
            assert!(expected.contains("RbTree.v2") && found.contains("engram::stm::RbTree<"), "{expected} / {found}");
        }
        other => panic!("an old-layout tree was not refused: {other:?}"),
    }
    pool.close().unwrap();
}
