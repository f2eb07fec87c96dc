//! The PSTM side of the STM benchmarks: Engram's transactional collections
//! (`RbTree`, `Treap`, `HashTable`, `PMap` from `engram::stm::collections`)
//! in a fresh pool, each operation one transaction: a lookup a read-only
//! `Pool::atomically_read` one, an update a `Pool::atomically` one.
//!
//! The durability mode is the only difference between the PSTM and the
//! "no flush" runs: `Durability::Pmem` flushes with CLWB/CLFLUSHOPT and
//! fences with SFENCE; `Durability::Process` turns both into no-ops in the
//! persistence seam (`engram::pmem::Persister`) and changes nothing else.
//!
//! Keeps true: the pool is created fresh (overwriting an old file) and
//! closed when the [`PstmMap`] is dropped; the file itself is the caller's.
//! Removed nodes are garbage for Engram's GC, which the benchmark runs once
//! after the prefill (untimed) and never during the measured phase, as the
//! pool has room for everything a run allocates.
//!
//! Crash behaviour: a throw-away pool; every operation is an ordinary STM
//! transaction.

use std::path::Path;

use engram::stm::collections::{HashTable, PMap, RbTree, Shape, Treap};
use engram::stm::{STx, StmResult};
use engram::{CreateOptions, Durability, Pool};

use super::workload::{BenchError, Contents, Op, Structure, TxMap, HASH_BUCKETS};

/// Layout name of the benchmark pools.
const LAYOUT: &str = "engram_bench_stm";
/// Initial pool size (it grows on demand).
const POOL_BYTES: u64 = 256 << 20;

/// The operations the four collections share, on u64 keys and values.
pub trait Coll: Copy + Send + Sync + 'static {
    /// The collection in root `name` of `pool`, made if absent.
    fn make(pool: &Pool, name: &str) -> engram::Result<Self>;
    /// The key's value.
    fn get(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>>;
    /// The key's value, as one transaction of its own: a read-only one
    /// (`Pool::atomically_read`) where the collection's lookup has a
    /// read-only form, else a full one.
    fn lookup(&self, pool: &Pool, k: u64) -> engram::Result<Option<u64>> {
        pool.atomically(|tx| self.get(tx, k))
    }
    /// Sets the key's value; the value it replaced.
    fn insert(&self, tx: &STx<'_>, k: u64, v: u64) -> StmResult<Option<u64>>;
    /// Removes the key; its value.
    fn remove(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>>;
    /// Checks the invariants.
    fn check(&self, tx: &STx<'_>) -> StmResult<Shape>;
    /// Calls `f` on every entry.
    fn for_each(&self, tx: &STx<'_>, f: &mut dyn FnMut(u64, u64)) -> StmResult<()>;
}

macro_rules! coll {
    ($t:ty, |$p:ident, $n:ident| $make:expr $(, $ro:ident)?) => {
        impl Coll for $t {
            fn make($p: &Pool, $n: &str) -> engram::Result<Self> {
                $make
            }
            $(
                fn lookup(&self, pool: &Pool, k: u64) -> engram::Result<Option<u64>> {
                    pool.$ro(|tx| <$t>::get(self, tx, &k))
                }
            )?
            fn get(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>> {
                <$t>::get(self, tx, &k)
            }
            fn insert(&self, tx: &STx<'_>, k: u64, v: u64) -> StmResult<Option<u64>> {
                <$t>::insert(self, tx, k, v)
            }
            fn remove(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>> {
                <$t>::remove(self, tx, &k)
            }
            fn check(&self, tx: &STx<'_>) -> StmResult<Shape> {
                <$t>::check(self, tx)
            }
            fn for_each(&self, tx: &STx<'_>, f: &mut dyn FnMut(u64, u64)) -> StmResult<()> {
                <$t>::for_each(self, tx, |k, v| f(k, v))
            }
        }
    };
}

coll!(RbTree<u64, u64>, |p, n| RbTree::root(p, n), atomically_read);
coll!(Treap<u64, u64>, |p, n| Treap::root(p, n), atomically_read);
coll!(HashTable<u64, u64>, |p, n| HashTable::root(p, n, HASH_BUCKETS), atomically_read);
coll!(PMap<u64, u64>, |p, n| PMap::root(p, n), atomically_read);

/// One collection in its own pool.
pub struct PstmMap<C: Coll> {
    pool: Option<Pool>,
    coll: C,
}

impl<C: Coll> PstmMap<C> {
    /// A fresh pool at `path` in `durability` mode, holding an empty `C`.
    pub fn create(path: &Path, durability: Durability) -> Result<Self, BenchError> {
        let opts = CreateOptions::new(LAYOUT).durability(durability).initial_size(POOL_BYTES).overwrite();
        let pool = Pool::create(path, opts)?;
        let coll = C::make(&pool, "map")?;
        Ok(PstmMap { pool: Some(pool), coll })
    }

    fn pool(&self) -> &Pool {
        // The pool is taken only by `drop`.
        self.pool.as_ref().expect("pool open until drop")
    }

    /// Collects garbage (the prefill's old values), untimed.
    pub fn collect(&self) -> Result<(), BenchError> {
        self.pool().collect()?;
        Ok(())
    }

    /// Bytes the pool file has grown to.
    pub fn pool_bytes(&self) -> u64 {
        self.pool().info().size
    }
}

impl<C: Coll> Drop for PstmMap<C> {
    fn drop(&mut self) {
        if let Some(p) = self.pool.take() {
            let _ = p.close();
        }
    }
}

impl<C: Coll> TxMap for PstmMap<C> {
    type Local = ();

    fn apply(&self, _: &mut (), op: Op) -> Result<bool, BenchError> {
        let c = self.coll;
        if let Op::Lookup(k) = op {
            std::hint::black_box(c.lookup(self.pool(), k)?);
            return Ok(false);
        }
        let changed = self.pool().atomically(|tx| match op {
            Op::Lookup(k) => c.get(tx, k).map(|v| {
                std::hint::black_box(v);
                false
            }),
            Op::Insert(k, v) => c.insert(tx, k, v).map(|_| true),
            Op::Delete(k) => c.remove(tx, k).map(|old| old.is_some()),
        })?;
        Ok(changed)
    }

    fn insert_batch(&self, pairs: &[(u64, u64)]) -> Result<(), BenchError> {
        let c = self.coll;
        self.pool().atomically(|tx| pairs.iter().try_for_each(|&(k, v)| c.insert(tx, k, v).map(drop)))?;
        Ok(())
    }

    fn contents(&self) -> Result<Contents, BenchError> {
        let c = self.coll;
        let (shape, contents) = self.pool().atomically(|tx| {
            let shape = c.check(tx)?;
            let mut contents = Contents::default();
            c.for_each(tx, &mut |k, v| contents.add(k, v))?;
            Ok((shape, contents))
        })?;
        if shape.len != contents.len {
            return Err(BenchError::Broken(format!("check counted {} entries, iteration {}", shape.len, contents.len)));
        }
        Ok(contents)
    }
}

/// Runs `f` on a fresh PSTM map of `structure` at `path`.
pub fn with_map<R>(
    structure: Structure,
    path: &Path,
    durability: Durability,
    f: &mut dyn FnMut(&dyn PstmRun) -> Result<R, BenchError>,
) -> Result<R, BenchError> {
    match structure {
        Structure::Rbtree => f(&PstmMap::<RbTree<u64, u64>>::create(path, durability)?),
        Structure::Treap => f(&PstmMap::<Treap<u64, u64>>::create(path, durability)?),
        Structure::Hashtable => f(&PstmMap::<HashTable<u64, u64>>::create(path, durability)?),
        Structure::Hamt => f(&PstmMap::<PMap<u64, u64>>::create(path, durability)?),
    }
}

/// A PSTM map whose collection type is erased: what a job needs of it.
pub trait PstmRun {
    /// Prefills, collects garbage, then runs the measured phase.
    fn run(&self, pairs: &[(u64, u64)], phase: &super::workload::Phase) -> Result<super::workload::Tally, BenchError>;
    /// Checks the invariants and reports the contents.
    fn final_contents(&self) -> Result<Contents, BenchError>;
    /// Bytes of the pool file.
    fn bytes(&self) -> u64;
}

impl<C: Coll> PstmRun for PstmMap<C> {
    fn run(&self, pairs: &[(u64, u64)], phase: &super::workload::Phase) -> Result<super::workload::Tally, BenchError> {
        super::workload::prefill(self, pairs)?;
        self.collect()?;
        super::workload::drive(self, phase)
    }
    fn final_contents(&self) -> Result<Contents, BenchError> {
        self.contents()
    }
    fn bytes(&self) -> u64 {
        self.pool_bytes()
    }
}
