//! What the peers' tests share: temporary files, a prefilled and driven
//! structure, a model of a filled structure, and one transaction of many
//! stores applied to both.

use std::collections::BTreeMap;

use super::{Coll, Tx};
use crate::stm::workload::{drive, prefill, prefill_pairs, Contents, Phase, Structure, Tally, TxMap};

/// The structures the peers have.
pub const BOTH: [Structure; 2] = [Structure::Rbtree, Structure::Hashtable];

/// A file name of a test in the temporary directory, removed on drop.
pub(crate) struct TestFile(pub std::path::PathBuf);

impl TestFile {
    /// `engram-<peer>-<pid>-<name>` in the temporary directory.
    pub fn new(peer: &str, name: &str) -> Self {
        TestFile(std::env::temp_dir().join(format!("engram-{peer}-{}-{name}", std::process::id())))
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `phase` on `m` prefilled with half of its key range.
pub fn driven<M: TxMap>(m: M, phase: &Phase) -> (M, Tally) {
    prefill(&m, &prefill_pairs(phase.key_range, phase.key_range / 2, phase.seed)).unwrap();
    let tally = drive(&m, phase).unwrap();
    (m, tally)
}

/// The entries of a model map.
pub fn of(model: &BTreeMap<u64, u64>) -> Contents {
    let mut c = Contents::default();
    model.iter().for_each(|(&k, &v)| c.add(k, v));
    c
}

/// `m` (empty) given keys 0..400 step 2; the model of it.
pub fn filled<M: TxMap>(m: M) -> (M, BTreeMap<u64, u64>) {
    let pairs: Vec<(u64, u64)> = (0..400).step_by(2).map(|k| (k, k)).collect();
    m.insert_batch(&pairs).unwrap();
    (m, pairs.into_iter().collect())
}

/// One transaction of many stores on `c`: inserts of odd keys, deletes of
/// multiples of 4, new values for multiples of 6; applied to `model` too.
pub fn big_change<T: Tx>(tx: &mut T, c: Coll, model: &mut BTreeMap<u64, u64>) -> Result<(), T::Error> {
    for k in 0..400u64 {
        if k % 2 == 1 {
            c.insert(tx, k, k * 10)?;
            model.insert(k, k * 10);
        } else if k % 4 == 0 {
            c.remove(tx, k)?;
            model.remove(&k);
        } else if k % 6 == 0 {
            c.insert(tx, k, 7)?;
            model.insert(k, 7);
        }
    }
    Ok(())
}
