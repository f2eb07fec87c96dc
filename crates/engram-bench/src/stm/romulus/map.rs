//! The benchmark's side of the RomulusLog peer: a red-black tree or a
//! hash set in a fresh RomulusLog file, each operation one transaction —
//! a lookup a read-only one ([`Romulus::read`]), an insert or a delete an
//! update one ([`Romulus::update`]; a delete of an absent key stores
//! nothing, so it issues no fence and counts as read-only, as PSTM's does).
//!
//! Keeps true: the file is created fresh (overwriting an old one) and
//! unmapped when the map is dropped; the file itself is the caller's.
//!
//! Crash behaviour: a throw-away file; every operation is an ordinary
//! RomulusLog transaction.

use std::path::Path;

use super::{RomError, Romulus};
use crate::stm::wordheap::hashset::HashSet;
use crate::stm::wordheap::rbtree::RbTree;
use crate::stm::wordheap::Coll;
use crate::stm::workload::{BenchError, Contents, Op, Structure, TxMap, HASH_BUCKETS};

/// Bytes of each half of the benchmark's files (tmpfs pages are allocated
/// only where touched; 100,000 tree nodes take 4.8 MB).
pub const HALF_BYTES: u64 = 64 << 20;

/// One structure in its own RomulusLog file.
pub struct RomulusMap {
    rom: Romulus,
    coll: Coll,
}

impl RomulusMap {
    /// A fresh file at `path` (halves of `half` bytes) holding an empty
    /// `structure` (a red-black tree or a hash table).
    pub fn create(path: &Path, structure: Structure, half: u64) -> Result<Self, BenchError> {
        Self::with(Romulus::create(path, half)?, structure)
    }

    /// The `structure` of the file at `path`, recovered.
    pub fn open(path: &Path, structure: Structure) -> Result<Self, BenchError> {
        Self::with(Romulus::open(path)?, structure)
    }

    /// `structure` in root word 0 of `rom`, made if absent.
    fn with(rom: Romulus, structure: Structure) -> Result<Self, BenchError> {
        let coll = match structure {
            Structure::Rbtree => Coll::Tree(RbTree::at_root(0)),
            Structure::Hashtable => Coll::Hash(rom.update(|tx| HashSet::at_root(tx, 0, HASH_BUCKETS))?),
            s => return Err(BenchError::Invalid(format!("the RomulusLog peer has no {}", s.label()))),
        };
        Ok(RomulusMap { rom, coll })
    }

    /// The file.
    pub fn rom(&self) -> &Romulus {
        &self.rom
    }

    /// The file, to arm a planted bug.
    #[cfg(test)]
    pub fn rom_mut(&mut self) -> &mut Romulus {
        &mut self.rom
    }

    /// The structure.
    #[cfg(test)]
    pub fn coll(&self) -> Coll {
        self.coll
    }
}

impl TxMap for RomulusMap {
    type Local = ();

    fn apply(&self, _: &mut (), op: Op) -> Result<bool, BenchError> {
        let c = self.coll;
        Ok(match op {
            Op::Lookup(k) => {
                std::hint::black_box(self.rom.read(|v| c.get(v, k)));
                false
            }
            Op::Insert(k, v) => self.rom.update(|tx| c.insert(tx, k, v)).map(|_| true)?,
            Op::Delete(k) => self.rom.update(|tx| c.remove(tx, k))?.is_some(),
        })
    }

    fn insert_batch(&self, pairs: &[(u64, u64)]) -> Result<(), BenchError> {
        let c = self.coll;
        self.rom.update(|tx| pairs.iter().try_for_each(|&(k, v)| c.insert(tx, k, v).map(drop)))?;
        Ok(())
    }

    fn contents(&self) -> Result<Contents, BenchError> {
        let c = self.coll;
        Ok(self.rom.read(|v| c.check(v)).map_err(RomError::from)?)
    }
}
