//! A treap (the paper's third benchmark structure) over the hybrid runtime,
//! with its transactional fields embedded in the nodes (Yates & Scott's
//! mutable constructor fields): a node is four [`HVar`] words in an arena,
//! children are arena indices (0 = none), so a step down the tree is one
//! transactional read, no indirection through a separate variable object.
//!
//! Zombie containment, concretely: a level-1 transaction with lazy
//! subscription may read a child index written by a half-finished lock
//! holder. So every index is bounds-checked (`Treap::node` turns a bad
//! one into a conflict, never a panic), every loop and recursion step calls
//! [`Tx::check`], and depth is bounded ([`MAX_DEPTH`]): a cycle read from an
//! inconsistent state ends in an abort, never in an endless loop or a stack
//! overflow.
//!
//! Nodes are allocated outside transactions ([`Treap::alloc`]: a bump index,
//! fields set before the node is reachable) and never reused, so a removed
//! node stays valid memory for any zombie still reading it. An insert of a
//! present key leaves its node unused.
//!
//! Crash behaviour: none (volatile).

use super::{HVar, Tx, TxError, TxResult};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// Deeper than this is treated as an inconsistent read (a cycle): the
/// expected depth of a treap of n keys is about 2 ln n (~25 for 10^5).
pub const MAX_DEPTH: u32 = 200;

/// One node: key, priority (heap order: a parent's is larger), children.
#[derive(Debug, Default)]
pub struct Node {
    key: HVar<u64>,
    prio: HVar<u64>,
    left: HVar<u32>,
    right: HVar<u32>,
}

/// A set of `u64` keys as a treap.
#[derive(Debug)]
pub struct Treap {
    nodes: Box<[Node]>,
    root: HVar<u32>,
    next: AtomicU32,
}

impl Treap {
    /// An empty treap with room for `capacity` nodes in all.
    pub fn new(capacity: u32) -> Treap {
        let nodes = (0..=capacity).map(|_| Node::default()).collect();
        Treap { nodes, root: HVar::new(0), next: AtomicU32::new(1) }
    }

    /// A fresh node for `key` with priority `prio`, not yet in the tree
    /// (`None` when the arena is full).
    pub fn alloc(&self, key: u64, prio: u64) -> Option<u32> {
        let i = self.next.fetch_add(1, Relaxed);
        let n = self.nodes.get(i as usize)?;
        // Not reachable yet: plain stores; the inserting commit publishes it.
        n.key.word.store(key, std::sync::atomic::Ordering::SeqCst);
        n.prio.word.store(prio, std::sync::atomic::Ordering::SeqCst);
        Some(i)
    }

    /// Node `i`, bounds-checked: a bad index is an inconsistent read.
    fn node(&self, i: u32) -> TxResult<&Node> {
        self.nodes.get(i as usize).filter(|_| i != 0).ok_or(TxError::Conflict)
    }

    fn step(tx: &mut Tx<'_>, depth: u32) -> TxResult<()> {
        tx.check()?;
        if depth > MAX_DEPTH {
            return Err(TxError::Conflict);
        }
        Ok(())
    }

    /// Whether `key` is in the set.
    pub fn contains<'v>(&'v self, tx: &mut Tx<'v>, key: u64) -> TxResult<bool> {
        let mut n = tx.read(&self.root)?;
        let mut depth = 0;
        while n != 0 {
            Self::step(tx, depth)?;
            depth += 1;
            let node = self.node(n)?;
            let k = tx.read(&node.key)?;
            if k == key {
                return Ok(true);
            }
            n = tx.read(if key < k { &node.left } else { &node.right })?;
        }
        Ok(false)
    }

    /// Inserts the key of node `new` (from [`Treap::alloc`]); false if the
    /// key was present (the node stays unused).
    pub fn insert<'v>(&'v self, tx: &mut Tx<'v>, new: u32) -> TxResult<bool> {
        let key = tx.read(&self.node(new)?.key)?;
        if self.contains(tx, key)? {
            return Ok(false);
        }
        let root = tx.read(&self.root)?;
        let r = self.insert_at(tx, root, new, key, 0)?;
        self.set(tx, &self.root, root, r)?;
        Ok(true)
    }

    fn set<'v>(&'v self, tx: &mut Tx<'v>, v: &'v HVar<u32>, old: u32, new: u32) -> TxResult<()> {
        if old != new {
            tx.write(v, new)?;
        }
        Ok(())
    }

    fn insert_at<'v>(&'v self, tx: &mut Tx<'v>, n: u32, new: u32, key: u64, depth: u32) -> TxResult<u32> {
        Self::step(tx, depth)?;
        if n == 0 {
            return Ok(new);
        }
        let (node, nn) = (self.node(n)?, self.node(new)?);
        if tx.read(&nn.prio)? > tx.read(&node.prio)? {
            let (l, r) = self.split(tx, n, key, depth + 1)?;
            tx.write(&nn.left, l)?;
            tx.write(&nn.right, r)?;
            return Ok(new);
        }
        let child = if key < tx.read(&node.key)? { &node.left } else { &node.right };
        let c = tx.read(child)?;
        let c2 = self.insert_at(tx, c, new, key, depth + 1)?;
        self.set(tx, child, c, c2)?;
        Ok(n)
    }

    /// Splits subtree `n` into keys < `key` and keys > `key`.
    fn split<'v>(&'v self, tx: &mut Tx<'v>, n: u32, key: u64, depth: u32) -> TxResult<(u32, u32)> {
        Self::step(tx, depth)?;
        if n == 0 {
            return Ok((0, 0));
        }
        let node = self.node(n)?;
        if tx.read(&node.key)? < key {
            let r = tx.read(&node.right)?;
            let (l, rest) = self.split(tx, r, key, depth + 1)?;
            self.set(tx, &node.right, r, l)?;
            Ok((n, rest))
        } else {
            let l = tx.read(&node.left)?;
            let (rest, r) = self.split(tx, l, key, depth + 1)?;
            self.set(tx, &node.left, l, r)?;
            Ok((rest, n))
        }
    }

    /// Removes `key`; false if it was absent.
    pub fn remove<'v>(&'v self, tx: &mut Tx<'v>, key: u64) -> TxResult<bool> {
        let root = tx.read(&self.root)?;
        let (r, found) = self.remove_at(tx, root, key, 0)?;
        self.set(tx, &self.root, root, r)?;
        Ok(found)
    }

    fn remove_at<'v>(&'v self, tx: &mut Tx<'v>, n: u32, key: u64, depth: u32) -> TxResult<(u32, bool)> {
        Self::step(tx, depth)?;
        if n == 0 {
            return Ok((0, false));
        }
        let node = self.node(n)?;
        let k = tx.read(&node.key)?;
        if k == key {
            let (l, r) = (tx.read(&node.left)?, tx.read(&node.right)?);
            return Ok((self.merge(tx, l, r, depth + 1)?, true));
        }
        let child = if key < k { &node.left } else { &node.right };
        let c = tx.read(child)?;
        let (c2, found) = self.remove_at(tx, c, key, depth + 1)?;
        self.set(tx, child, c, c2)?;
        Ok((n, found))
    }

    /// Joins `a` and `b` (every key of `a` below every key of `b`).
    fn merge<'v>(&'v self, tx: &mut Tx<'v>, a: u32, b: u32, depth: u32) -> TxResult<u32> {
        Self::step(tx, depth)?;
        if a == 0 || b == 0 {
            return Ok(a.max(b));
        }
        let (na, nb) = (self.node(a)?, self.node(b)?);
        if tx.read(&na.prio)? > tx.read(&nb.prio)? {
            let r = tx.read(&na.right)?;
            let m = self.merge(tx, r, b, depth + 1)?;
            self.set(tx, &na.right, r, m)?;
            Ok(a)
        } else {
            let l = tx.read(&nb.left)?;
            let m = self.merge(tx, a, l, depth + 1)?;
            self.set(tx, &nb.left, l, m)?;
            Ok(b)
        }
    }

    /// The keys in order, checking the search-tree and heap orders (a
    /// broken order is reported as a conflict).
    pub fn keys<'v>(&'v self, tx: &mut Tx<'v>) -> TxResult<Vec<u64>> {
        let mut out = Vec::new();
        let root = tx.read(&self.root)?;
        self.walk(tx, root, u64::MAX, 0, &mut out)?;
        if out.windows(2).any(|w| w[0] >= w[1]) {
            return Err(TxError::Conflict);
        }
        Ok(out)
    }

    fn walk<'v>(&'v self, tx: &mut Tx<'v>, n: u32, parent_prio: u64, depth: u32, out: &mut Vec<u64>) -> TxResult<()> {
        Self::step(tx, depth)?;
        if n == 0 {
            return Ok(());
        }
        let node = self.node(n)?;
        let prio = tx.read(&node.prio)?;
        if prio > parent_prio {
            return Err(TxError::Conflict);
        }
        let l = tx.read(&node.left)?;
        self.walk(tx, l, prio, depth + 1, out)?;
        out.push(tx.read(&node.key)?);
        let r = tx.read(&node.right)?;
        self.walk(tx, r, prio, depth + 1, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::htm::hybrid::{Mode, Policy, Runtime};
    use crate::htm::{EmuConfig, Htm};
    use std::collections::BTreeSet;

    fn prio(k: u64) -> u64 {
        k.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ 0x5555
    }

    #[test]
    fn matches_a_btreeset_at_every_mode() {
        for mode in [Mode::Hybrid, Mode::HtmCommit, Mode::Coarse] {
            let rt = Runtime::new(
                Htm::emulated(EmuConfig { seed: 5, conflict_ppm: 20_000, ..EmuConfig::default() }),
                Policy { mode, ..Policy::default() },
            );
            let t = Treap::new(4000);
            let mut model = BTreeSet::new();
            let mut x = 12345u64;
            for _ in 0..1500 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = x % 500;
                let (want, got) = match x % 3 {
                    0 => (model.insert(k), {
                        let n = t.alloc(k, prio(k)).unwrap();
                        rt.atomically(|tx| t.insert(tx, n)).unwrap()
                    }),
                    1 => (model.remove(&k), rt.atomically(|tx| t.remove(tx, k)).unwrap()),
                    _ => (model.contains(&k), rt.atomically(|tx| t.contains(tx, k)).unwrap()),
                };
                assert_eq!(want, got, "{mode:?} op {} key {k}", x % 3);
            }
            let keys = rt.atomically(|tx| t.keys(tx)).unwrap();
            assert_eq!(keys, model.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn concurrent_updates_with_lock_commits_and_zombies() {
        // Hybrid threads and a coarse-grain thread on disjoint key ranges;
        // lazy-subscription readers may see half-made lock commits and must
        // contain them. At the end: exactly the model's keys, orders intact.
        let rt = Runtime::new(Htm::emulated(EmuConfig::default()), Policy { zombie_checks: 8, ..Policy::default() });
        let t = Treap::new(20_000);
        let finals: Vec<BTreeSet<u64>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4u64)
                .map(|th| {
                    let (rt, t) = (&rt, &t);
                    s.spawn(move || {
                        let mode = if th == 3 { Mode::Coarse } else { Mode::Hybrid };
                        let mut model = BTreeSet::new();
                        let mut x = 99 + th;
                        for _ in 0..1200 {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let k = (x % 300) * 4 + th;
                            if x % 2 == 0 {
                                let n = t.alloc(k, prio(k)).unwrap();
                                assert_eq!(rt.atomically_in(mode, |tx| t.insert(tx, n)).unwrap(), model.insert(k));
                            } else {
                                assert_eq!(rt.atomically_in(mode, |tx| t.remove(tx, k)).unwrap(), model.remove(&k));
                            }
                            rt.atomically(|tx| t.contains(tx, k)).unwrap();
                        }
                        model
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let want: Vec<u64> = finals.into_iter().flatten().collect::<BTreeSet<_>>().into_iter().collect();
        assert_eq!(rt.atomically(|tx| t.keys(tx)).unwrap(), want);
        let s = rt.stats();
        assert!(s.commits[0] > 0 && s.commits[2] > 0, "{:?}", s.commits);
    }

    #[test]
    fn a_cycle_read_by_a_zombie_aborts() {
        // Plant a cycle (1 -> 2 -> 1) directly, as a torn state would look:
        // a hardware lookup must end in an abort, then the software run
        // finds the same cycle, the depth bound says conflict, and the test
        // repairs the tree from another thread once a conflict was counted.
        let rt = Runtime::new(Htm::emulated(EmuConfig::default()), Policy { serial_after: u32::MAX, ..Policy::default() });
        let t = Treap::new(8);
        let (a, b) = (t.alloc(10, 5).unwrap(), t.alloc(20, 4).unwrap());
        rt.htm().nt_store(&t.root.word, u64::from(a));
        rt.htm().nt_store(&t.nodes[a as usize].right.word, u64::from(b));
        rt.htm().nt_store(&t.nodes[b as usize].left.word, u64::from(a));
        let found = std::thread::scope(|s| {
            s.spawn(|| {
                while rt.stats().sw_conflicts == 0 {
                    std::thread::yield_now();
                }
                rt.htm().nt_store(&t.nodes[b as usize].left.word, 0);
                rt.htm().nt_store(&rt.commits.0, rt.htm().nt_load(&rt.commits.0) + 1);
            });
            rt.atomically(|tx| t.contains(tx, 15)).unwrap()
        });
        assert!(!found);
        assert!(rt.stats().hw_aborts.iter().sum::<u64>() + rt.stats().sw_conflicts >= 1);
    }
}
