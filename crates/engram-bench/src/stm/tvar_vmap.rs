//! The volatile peers of the treap and the HAMT: Engram's
//! [`engram::stm::vcollections`] `Treap` and `Hamt` in their one-`TVar`-
//! per-node-field layout ([`Boxed`]), run by [`engram::stm::atomically`]
//! with no pool, as the `tvar` implementation of those structures (the
//! red-black tree's is [`super::tvar_rbtree`]); lookups by
//! [`engram::stm::atomically_read`], the read-only path. Their links are
//! `TVar<Option<Arc<Node>>>` (boxed values behind the lock word), their
//! values `TVar<u64>` (inline).
//!
//! Keeps true: every operation is one transaction; `contents` runs the
//! structure's own shape check (`VMap::check`) and sums what it holds.

use engram::stm::vcollections::{Boxed, Hamt, Treap, VMap};
use engram::stm::{atomically, atomically_read};

use super::workload::{BenchError, Contents, Op, Structure, TxMap};

/// A vcollections map behind the benchmark's interface.
pub struct TVarVMap(Box<dyn VMap>);

impl TVarVMap {
    /// An empty `structure` (treap or HAMT; None for the others).
    pub fn new(structure: Structure) -> Option<Self> {
        match structure {
            Structure::Treap => Some(TVarVMap(Box::new(Treap::<Boxed>::new()))),
            Structure::Hamt => Some(TVarVMap(Box::new(Hamt::<Boxed>::new()))),
            _ => None,
        }
    }
}

impl TxMap for TVarVMap {
    type Local = ();

    fn apply(&self, _: &mut (), op: Op) -> Result<bool, BenchError> {
        let m = &*self.0;
        Ok(match op {
            Op::Lookup(k) => {
                std::hint::black_box(atomically_read(|tx| m.get(tx, k))?);
                false
            }
            Op::Insert(k, v) => {
                atomically(|tx| m.insert(tx, k, v))?;
                true
            }
            Op::Delete(k) => atomically(|tx| m.remove(tx, k))?,
        })
    }

    fn insert_batch(&self, pairs: &[(u64, u64)]) -> Result<(), BenchError> {
        let m = &*self.0;
        atomically(|tx| pairs.iter().try_for_each(|&(k, v)| m.insert(tx, k, v).map(drop)))?;
        Ok(())
    }

    fn contents(&self) -> Result<Contents, BenchError> {
        let mut c = Contents::default();
        for (k, v) in self.0.check()? {
            c.add(k, v);
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stm::workload::{drive, model_contents, prefill, prefill_pairs, Phase, RunFor};

    #[test]
    fn agree_with_the_model() {
        for s in [Structure::Treap, Structure::Hamt] {
            let t = TVarVMap::new(s).unwrap();
            prefill(&t, &prefill_pairs(2000, 1000, 3)).unwrap();
            let phase = Phase { threads: 1, lookup_pct: 20, key_range: 2000, seed: 3, run: RunFor::Ops(5000) };
            assert_eq!(drive(&t, &phase).unwrap().commits(), 5000);
            assert_eq!(t.contents().unwrap(), model_contents(2000, 1000, 20, 3, 5000), "{s:?}");
        }
    }
}
