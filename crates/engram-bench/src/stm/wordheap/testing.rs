//! What the peers' tests share: temporary files, a fresh map of a peer,
//! a prefilled and driven structure (agreement with the model, threads),
//! a model of a filled structure, one transaction of many stores applied
//! to both, and a crash of it followed by a reopen.

use std::collections::BTreeMap;

use super::map::WordMap;
use super::{Coll, Peer, Tx};
use crate::stm::workload::{drive, model_contents, prefill, prefill_pairs, Contents, Phase, RunFor, Structure, Tally, TxMap};

/// The structures the peers have.
pub const BOTH: [Structure; 2] = [Structure::Rbtree, Structure::Hashtable];

/// Bytes of the heap of the tests' files.
pub const HEAP: u64 = 4 << 20;

/// A file name of a test in the temporary directory, removed on drop.
pub(crate) struct TestFile(pub std::path::PathBuf);

impl TestFile {
    /// `engram-<peer>-<pid>-<name>` in the temporary directory, for peer `P`.
    pub fn new<P: Peer>(name: &str) -> Self {
        TestFile(std::env::temp_dir().join(format!("engram-{}-{}-{name}", P::NAME, std::process::id())))
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A fresh `s` of peer `P` in a test file named with `tag`.
pub fn made<P: Peer>(tag: &str, s: Structure) -> (WordMap<P>, TestFile) {
    let f = TestFile::new::<P>(&format!("{tag}-{}", s.name()));
    (WordMap::create(&f.0, s, HEAP).unwrap(), f)
}

/// Runs `phase` on `m` prefilled with half of its key range.
fn driven<M: TxMap>(m: M, phase: &Phase) -> (M, Tally) {
    prefill(&m, &prefill_pairs(phase.key_range, phase.key_range / 2, phase.seed)).unwrap();
    let tally = drive(&m, phase).unwrap();
    (m, tally)
}

/// Each structure of peer `P` agrees with the model after 5,000
/// operations of one thread, with `fences` fences per update commit and
/// none (and no flush) per read-only one.
pub fn agrees_with_the_model<P: Peer>(fences: u64) {
    for s in BOTH {
        let phase = Phase { threads: 1, lookup_pct: 20, key_range: 2000, seed: 3, run: RunFor::Ops(5000) };
        let (m, _f) = made::<P>("agree", s);
        let (m, tally) = driven(m, &phase);
        assert_eq!(tally.commits(), 5000);
        assert_eq!(m.contents().unwrap(), model_contents(2000, 1000, 20, 3, 5000), "{}", s.name());
        assert_eq!(tally.upd_fences, fences * tally.updates, "{}", s.name());
        assert_eq!((tally.ro_fences, tally.ro_flushes), (0, 0), "{}", s.name());
    }
}

/// Each structure of peer `P` stays valid under 4 threads.
pub fn threads_keep_it_valid<P: Peer>() {
    for s in BOTH {
        let phase = Phase { threads: 4, lookup_pct: 30, key_range: 500, seed: 4, run: RunFor::Time(std::time::Duration::from_millis(200)) };
        let (m, _f) = made::<P>("threads", s);
        driven(m, &phase).0.contents().unwrap();
    }
}

/// The entries of a model map.
pub fn of(model: &BTreeMap<u64, u64>) -> Contents {
    let mut c = Contents::default();
    model.iter().for_each(|(&k, &v)| c.add(k, v));
    c
}

/// A structure of `s` of peer `P` in `f` with keys 0..400 step 2; the
/// model of it.
pub fn filled<P: Peer>(f: &TestFile, s: Structure) -> (WordMap<P>, BTreeMap<u64, u64>) {
    let m = WordMap::create(&f.0, s, HEAP).unwrap();
    let pairs: Vec<(u64, u64)> = (0..400).step_by(2).map(|k| (k, k)).collect();
    m.insert_batch(&pairs).unwrap();
    (m, pairs.into_iter().collect())
}

/// A crash test of peer `P`: a fresh `s` in a file named with `name`,
/// filled ([`filled`]), `arm`ed (a planted bug, or nothing), its big
/// change ([`big_change`]) stopped by `crash` (the peer's
/// `update_then_crash` at some point); the file reopened, `check`ed, and
/// given one more insert (so it also takes new transactions). What the
/// file then holds, and the models before and after the big change (both
/// with that insert).
pub fn crash_and_reopen<P: Peer>(
    name: &str,
    s: Structure,
    arm: impl FnOnce(&mut P),
    crash: impl FnOnce(&WordMap<P>, &mut BTreeMap<u64, u64>) -> Result<(), P::Error>,
    check: impl FnOnce(&P),
) -> (Result<Contents, String>, Contents, Contents) {
    let f = TestFile::new::<P>(&format!("{name}-{}", s.name()));
    let (mut m, mut model) = filled::<P>(&f, s);
    let mut before = model.clone();
    arm(m.peer_mut());
    crash(&m, &mut model).unwrap();
    drop(m);
    let got = WordMap::<P>::open(&f.0, s).map_err(|e| e.to_string()).and_then(|m| {
        check(m.peer());
        m.insert_batch(&[(1001, 1)]).map_err(|e| e.to_string())?;
        m.contents().map_err(|e| e.to_string())
    });
    before.insert(1001, 1);
    model.insert(1001, 1);
    (got, of(&before), of(&model))
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
