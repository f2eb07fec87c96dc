//! A hash trie over the hybrid runtime: the paper's HAMT without the bitmap
//! compression. Each node is 16 [`HVar`] slots in an arena (fields embedded,
//! no variable object per slot); a key's 64-bit hash picks one slot per
//! level, four bits at a time. A slot is empty (0), a leaf (`key << 1 | 1`,
//! so keys are below 2^63) or an inner node (`index << 1`).
//!
//! Insert puts a leaf in the first empty slot on the key's path; meeting
//! another key's leaf, it pushes that leaf one level down into a new node
//! (repeating while the two hashes share the next nibble). Remove clears
//! the leaf and leaves inner nodes in place (no compaction). Inner nodes
//! are taken from a bump index inside the transaction: an aborted attempt
//! leaks its nodes (emulated) or rolls the index back (RTM).
//!
//! Zombie containment: slot values are decoded with bounds checks (a bad
//! index is a conflict), every level calls [`Tx::check`], and depth is at
//! most 16 levels (the hash's nibbles).
//!
//! Crash behaviour: none (volatile).

use super::{HVar, Tx, TxError, TxResult};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

const FANOUT: usize = 16;
const LEVELS: u32 = 16;

/// A set of keys below 2^63 as a hash trie.
#[derive(Debug)]
pub struct HashTrie {
    slots: Box<[HVar<u64>]>,
    next: AtomicU32,
}

fn hash(k: u64) -> u64 {
    let k = (k ^ (k >> 31)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    k ^ (k >> 29)
}

fn nibble(h: u64, level: u32) -> usize {
    ((h >> (4 * level)) & 0xF) as usize
}

impl HashTrie {
    /// An empty trie with room for `nodes` inner nodes (the root included).
    pub fn new(nodes: u32) -> HashTrie {
        HashTrie { slots: (0..nodes as usize * FANOUT).map(|_| HVar::new(0)).collect(), next: AtomicU32::new(1) }
    }

    /// Slot `i` of node `node`, bounds-checked.
    fn slot(&self, node: u32, i: usize) -> TxResult<&HVar<u64>> {
        self.slots.get(node as usize * FANOUT + i).ok_or(TxError::Conflict)
    }

    fn leaf(k: u64) -> u64 {
        k << 1 | 1
    }

    /// Whether `key` is in the set.
    pub fn contains<'v>(&'v self, tx: &mut Tx<'v>, key: u64) -> TxResult<bool> {
        let h = hash(key);
        let mut node = 0;
        for level in 0..LEVELS {
            tx.check()?;
            let s = tx.read(self.slot(node, nibble(h, level))?)?;
            match s {
                0 => return Ok(false),
                s if s & 1 == 1 => return Ok(s >> 1 == key),
                s => node = (s >> 1) as u32,
            }
        }
        Err(TxError::Conflict)
    }

    /// Inserts `key` (below 2^63); false if present.
    pub fn insert<'v>(&'v self, tx: &mut Tx<'v>, key: u64) -> TxResult<bool> {
        if key >> 63 != 0 {
            return Err(TxError::Failed(crate::Error::invalid("hash trie keys are below 2^63")));
        }
        let h = hash(key);
        let mut node = 0;
        for level in 0..LEVELS {
            tx.check()?;
            let slot = self.slot(node, nibble(h, level))?;
            match tx.read(slot)? {
                0 => return tx.write(slot, Self::leaf(key)).map(|()| true),
                s if s & 1 == 1 && s >> 1 == key => return Ok(false),
                s if s & 1 == 1 => return self.push_down(tx, slot, s >> 1, key, level + 1).map(|()| true),
                s => node = (s >> 1) as u32,
            }
        }
        Err(TxError::Conflict)
    }

    /// Replaces the leaf of `other` in `slot` by new nodes holding both.
    fn push_down<'v>(&'v self, tx: &mut Tx<'v>, mut slot: &'v HVar<u64>, other: u64, key: u64, mut level: u32) -> TxResult<()> {
        let (ho, hk) = (hash(other), hash(key));
        while level < LEVELS {
            tx.check()?;
            let n = self.next.fetch_add(1, Relaxed);
            if (n as usize + 1) * FANOUT > self.slots.len() {
                return Err(TxError::Failed(crate::Error::invalid("hash trie arena full")));
            }
            tx.write(slot, u64::from(n) << 1)?;
            let (a, b) = (nibble(ho, level), nibble(hk, level));
            if a != b {
                tx.write(self.slot(n, a)?, Self::leaf(other))?;
                return tx.write(self.slot(n, b)?, Self::leaf(key));
            }
            slot = self.slot(n, a)?;
            level += 1;
        }
        Err(TxError::Conflict)
    }

    /// Removes `key`; false if absent.
    pub fn remove<'v>(&'v self, tx: &mut Tx<'v>, key: u64) -> TxResult<bool> {
        let h = hash(key);
        let mut node = 0;
        for level in 0..LEVELS {
            tx.check()?;
            let slot = self.slot(node, nibble(h, level))?;
            match tx.read(slot)? {
                0 => return Ok(false),
                s if s & 1 == 1 => return if s >> 1 == key { tx.write(slot, 0).map(|()| true) } else { Ok(false) },
                s => node = (s >> 1) as u32,
            }
        }
        Err(TxError::Conflict)
    }

    /// Every key (unordered), in one transaction.
    pub fn keys<'v>(&'v self, tx: &mut Tx<'v>) -> TxResult<Vec<u64>> {
        let mut out = Vec::new();
        let mut stack = vec![(0u32, 0u32)];
        while let Some((node, level)) = stack.pop() {
            tx.check()?;
            if level >= LEVELS {
                return Err(TxError::Conflict);
            }
            for i in 0..FANOUT {
                match tx.read(self.slot(node, i)?)? {
                    0 => {}
                    s if s & 1 == 1 => out.push(s >> 1),
                    s => stack.push(((s >> 1) as u32, level + 1)),
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::htm::hybrid::{Mode, Policy, Runtime};
    use crate::htm::{EmuConfig, Htm};
    use std::collections::BTreeSet;

    #[test]
    fn matches_a_btreeset_at_every_mode_and_concurrently() {
        for mode in [Mode::Hybrid, Mode::HtmCommit, Mode::Coarse] {
            let emu = EmuConfig { seed: 3, conflict_ppm: 20_000, ..EmuConfig::default() };
            let rt = Runtime::new(Htm::emulated(emu), Policy { mode, ..Policy::default() });
            let t = HashTrie::new(5000);
            let mut model = BTreeSet::new();
            let mut x = 4242u64;
            for i in 0..2000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = x % 600;
                let (want, got) = match x % 3 {
                    0 => (model.insert(k), rt.atomically(|tx| t.insert(tx, k)).unwrap()),
                    1 => (model.remove(&k), rt.atomically(|tx| t.remove(tx, k)).unwrap()),
                    _ => (model.contains(&k), rt.atomically(|tx| t.contains(tx, k)).unwrap()),
                };
                assert_eq!(want, got, "{mode:?} op {i} key {k}");
            }
            let mut keys = rt.atomically(|tx| t.keys(tx)).unwrap();
            keys.sort_unstable();
            assert_eq!(keys, model.into_iter().collect::<Vec<_>>());
        }
        let rt = Runtime::new(Htm::emulated(EmuConfig::default()), Policy::default());
        let t = HashTrie::new(4);
        assert!(rt.atomically(|tx| t.insert(tx, u64::MAX)).is_err(), "too big a key is a typed error");
        // Four threads on disjoint keys, hybrid and coarse-grain mixed.
        let rt = Runtime::new(Htm::emulated(EmuConfig::default()), Policy::default());
        let t = HashTrie::new(20_000);
        let finals: Vec<BTreeSet<u64>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4u64)
                .map(|th| {
                    let (rt, t) = (&rt, &t);
                    s.spawn(move || {
                        let mode = if th == 3 { Mode::Coarse } else { Mode::Hybrid };
                        let mut model = BTreeSet::new();
                        let mut x = 11 + th;
                        for _ in 0..1000 {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let k = (x % 400) * 4 + th;
                            if x % 2 == 0 {
                                assert_eq!(rt.atomically_in(mode, |tx| t.insert(tx, k)).unwrap(), model.insert(k));
                            } else {
                                assert_eq!(rt.atomically_in(mode, |tx| t.remove(tx, k)).unwrap(), model.remove(&k));
                            }
                        }
                        model
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut keys = rt.atomically(|tx| t.keys(tx)).unwrap();
        keys.sort_unstable();
        assert_eq!(keys, finals.into_iter().flatten().collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>());
    }
}
