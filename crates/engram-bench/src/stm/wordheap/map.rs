//! The benchmark's side of a word-heap peer (RomulusLog's, OneFile-LF's):
//! a red-black tree or a hash set ([`Coll`]) in a fresh file of the peer,
//! each operation one transaction — a lookup a read-only one
//! ([`Peer::read`]), an insert or a delete an update one
//! ([`Peer::update`]; a delete of an absent key stores nothing, so it
//! issues no fence and counts as read-only, as PSTM's does).
//!
//! Keeps true: the file is created fresh (overwriting an old one) and
//! unmapped when the map is dropped; the file itself is the caller's.
//!
//! Crash behaviour: a throw-away file; every operation is an ordinary
//! transaction of the peer.

use std::path::Path;

use super::hashset::HashSet;
use super::rbtree::RbTree;
use super::{Coll, Peer};
use crate::stm::workload::{BenchError, Contents, Op, Structure, TxMap, HASH_BUCKETS};

/// Bytes of the heap of the benchmark's files (RomulusLog's half; the
/// file holds twice this, allocated by tmpfs only where touched; 100,000
/// tree nodes take 4.8 MB).
pub const HEAP_BYTES: u64 = 64 << 20;

/// One structure in its own file of peer `P`.
pub struct WordMap<P: Peer> {
    peer: P,
    coll: Coll,
}

impl<P: Peer> WordMap<P> {
    /// A fresh file at `path` (a heap of `heap` bytes) holding an empty
    /// `structure` (a red-black tree or a hash table).
    pub fn create(path: &Path, structure: Structure, heap: u64) -> Result<Self, BenchError> {
        Self::with(bench(P::create(path, heap))?, structure)
    }

    /// The `structure` of the file at `path`, recovered.
    pub fn open(path: &Path, structure: Structure) -> Result<Self, BenchError> {
        Self::with(bench(P::open(path))?, structure)
    }

    /// `structure` in root word 0 of `peer`, made if absent.
    fn with(peer: P, structure: Structure) -> Result<Self, BenchError> {
        let coll = match structure {
            Structure::Rbtree => Coll::Tree(RbTree::at_root(0)),
            Structure::Hashtable => Coll::Hash(bench(peer.update(|tx| HashSet::at_root(tx, 0, HASH_BUCKETS)))?),
            s => return Err(BenchError::Invalid(format!("the {} peer has no {}", P::NAME, s.label()))),
        };
        Ok(WordMap { peer, coll })
    }

    /// The file.
    pub fn peer(&self) -> &P {
        &self.peer
    }

    /// The file, to arm a planted bug.
    #[cfg(test)]
    pub fn peer_mut(&mut self) -> &mut P {
        &mut self.peer
    }

    /// The structure.
    #[cfg(test)]
    pub fn coll(&self) -> Coll {
        self.coll
    }
}

impl<P: Peer> TxMap for WordMap<P> {
    type Local = ();

    fn apply(&self, _: &mut (), op: Op) -> Result<bool, BenchError> {
        let c = self.coll;
        Ok(match op {
            Op::Lookup(k) => {
                std::hint::black_box(bench(self.peer.read(|v| c.get(v, k)))?);
                false
            }
            Op::Insert(k, v) => bench(self.peer.update(|tx| c.insert(tx, k, v))).map(|_| true)?,
            Op::Delete(k) => bench(self.peer.update(|tx| c.remove(tx, k)))?.is_some(),
        })
    }

    fn insert_batch(&self, pairs: &[(u64, u64)]) -> Result<(), BenchError> {
        let c = self.coll;
        bench(self.peer.update(|tx| pairs.iter().try_for_each(|&(k, v)| c.insert(tx, k, v).map(drop))))
    }

    fn contents(&self) -> Result<Contents, BenchError> {
        let c = self.coll;
        let checked = bench(self.peer.read(|v| c.check(v)))?;
        bench(checked.map_err(P::Error::from))
    }
}

/// A peer's result as the benchmark's.
#[inline(always)]
fn bench<T, E: Into<BenchError>>(r: Result<T, E>) -> Result<T, BenchError> {
    r.map_err(Into::into)
}
