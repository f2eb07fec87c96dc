//! The benchmark's side of the OneFile-LF peer: a red-black tree or a
//! hash set ([`Coll`]) in a fresh OneFile file, each operation one
//! transaction — a lookup a read-only one ([`OneFile::read`]), an insert
//! or a delete an update one ([`OneFile::update`]; a delete of an absent
//! key stores nothing, so it issues no fence and counts as read-only, as
//! PSTM's does).
//!
//! Keeps true: the file is created fresh (overwriting an old one) and
//! unmapped when the map is dropped; the file itself is the caller's.
//!
//! Crash behaviour: a throw-away file; every operation is an ordinary
//! OneFile transaction.

use std::path::Path;

use super::{OfError, OneFile};
use crate::stm::wordheap::hashset::HashSet;
use crate::stm::wordheap::rbtree::RbTree;
use crate::stm::wordheap::Coll;
use crate::stm::workload::{BenchError, Contents, Op, Structure, TxMap, HASH_BUCKETS};

/// Bytes of the benchmark's heaps (as RomulusLog's halves; the file holds
/// twice this in tmtypes, allocated by tmpfs only where touched).
pub const HEAP_BYTES: u64 = 64 << 20;

/// One structure in its own OneFile file.
pub struct OneFileMap {
    of: OneFile,
    coll: Coll,
}

impl OneFileMap {
    /// A fresh file at `path` (a heap of `heap` bytes) holding an empty
    /// `structure` (a red-black tree or a hash table).
    pub fn create(path: &Path, structure: Structure, heap: u64) -> Result<Self, BenchError> {
        Self::with(OneFile::create(path, heap)?, structure)
    }

    /// The `structure` of the file at `path`, recovered.
    pub fn open(path: &Path, structure: Structure) -> Result<Self, BenchError> {
        Self::with(OneFile::open(path)?, structure)
    }

    /// `structure` in root word 0 of `of`, made if absent.
    fn with(of: OneFile, structure: Structure) -> Result<Self, BenchError> {
        let coll = match structure {
            Structure::Rbtree => Coll::Tree(RbTree::at_root(0)),
            Structure::Hashtable => Coll::Hash(of.update(|tx| HashSet::at_root(tx, 0, HASH_BUCKETS))?),
            s => return Err(BenchError::Invalid(format!("the OneFile peer has no {}", s.label()))),
        };
        Ok(OneFileMap { of, coll })
    }

    /// The file.
    pub fn of(&self) -> &OneFile {
        &self.of
    }

    /// The file, to arm a planted bug.
    #[cfg(test)]
    pub fn of_mut(&mut self) -> &mut OneFile {
        &mut self.of
    }

    /// The structure.
    #[cfg(test)]
    pub fn coll(&self) -> Coll {
        self.coll
    }
}

impl TxMap for OneFileMap {
    type Local = ();

    fn apply(&self, _: &mut (), op: Op) -> Result<bool, BenchError> {
        let c = self.coll;
        Ok(match op {
            Op::Lookup(k) => {
                std::hint::black_box(self.of.read(|v| c.get(v, k))?);
                false
            }
            Op::Insert(k, v) => self.of.update(|tx| c.insert(tx, k, v)).map(|_| true)?,
            Op::Delete(k) => self.of.update(|tx| c.remove(tx, k))?.is_some(),
        })
    }

    fn insert_batch(&self, pairs: &[(u64, u64)]) -> Result<(), BenchError> {
        let c = self.coll;
        self.of.update(|tx| pairs.iter().try_for_each(|&(k, v)| c.insert(tx, k, v).map(drop)))?;
        Ok(())
    }

    fn contents(&self) -> Result<Contents, BenchError> {
        let c = self.coll;
        Ok(self.of.read(|v| c.check(v))?.map_err(OfError::from)?)
    }
}
