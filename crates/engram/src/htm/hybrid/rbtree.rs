//! A red-black tree (left-leaning, Sedgewick's LLRB: the paper's first
//! benchmark structure) over the hybrid runtime, fields embedded in arena
//! nodes as in [`super::treap`]: key, colour, left, right — four [`HVar`]
//! words per node, children as indices (0 = none).
//!
//! The same zombie containment as the treap: bounds-checked indices
//! (`RbTree::node` turns a bad index into a conflict), [`Tx::check`] on
//! every recursion step, depth bounded by [`MAX_DEPTH`]. Nodes are allocated
//! outside transactions and never reused. Deleting a key with two children
//! copies its successor's key into the node (keys are transactional too).
//!
//! Crash behaviour: none (volatile).

use super::{HVar, Tx, TxError, TxResult};
use std::sync::atomic::{AtomicU32, Ordering::*};

/// Deeper than this is an inconsistent read: an LLRB of n keys has depth at
/// most 2 log2 n (~34 for 10^5).
pub const MAX_DEPTH: u32 = 100;

/// One node.
#[derive(Debug, Default)]
pub struct Node {
    key: HVar<u64>,
    red: HVar<bool>,
    left: HVar<u32>,
    right: HVar<u32>,
}

/// A set of `u64` keys as a left-leaning red-black tree.
#[derive(Debug)]
pub struct RbTree {
    nodes: Box<[Node]>,
    root: HVar<u32>,
    next: AtomicU32,
}

type T<'a, 'v> = &'a mut Tx<'v>;

impl RbTree {
    /// An empty tree with room for `capacity` nodes in all.
    pub fn new(capacity: u32) -> RbTree {
        RbTree { nodes: (0..=capacity).map(|_| Node::default()).collect(), root: HVar::new(0), next: AtomicU32::new(1) }
    }

    /// A fresh red node for `key`, not yet in the tree (`None`: arena full).
    pub fn alloc(&self, key: u64) -> Option<u32> {
        let i = self.next.fetch_add(1, Relaxed);
        let n = self.nodes.get(i as usize)?;
        // Not reachable yet: plain stores; the inserting commit publishes it.
        n.key.word.store(key, SeqCst);
        n.red.word.store(1, SeqCst);
        Some(i)
    }

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

    fn red<'v>(&'v self, tx: T<'_, 'v>, n: u32) -> TxResult<bool> {
        if n == 0 {
            return Ok(false);
        }
        tx.read(&self.node(n)?.red)
    }

    /// Whether `n`'s left (or right) child is red (false for no node).
    fn red_child<'v>(&'v self, tx: T<'_, 'v>, n: u32, left: bool) -> TxResult<bool> {
        if n == 0 {
            return Ok(false);
        }
        let c = if left { self.left(tx, n)? } else { self.right(tx, n)? };
        self.red(tx, c)
    }

    fn set<'v, W: super::Word + PartialEq>(tx: T<'_, 'v>, v: &'v HVar<W>, x: W) -> TxResult<()> {
        if tx.read(v)? != x {
            tx.write(v, x)?;
        }
        Ok(())
    }

    fn left<'v>(&'v self, tx: T<'_, 'v>, n: u32) -> TxResult<u32> {
        tx.read(&self.node(n)?.left)
    }

    fn right<'v>(&'v self, tx: T<'_, 'v>, n: u32) -> TxResult<u32> {
        tx.read(&self.node(n)?.right)
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

    /// Inserts the key of node `new` (from [`RbTree::alloc`]); false if
    /// present (the node stays unused).
    pub fn insert<'v>(&'v self, tx: &mut Tx<'v>, new: u32) -> TxResult<bool> {
        let key = tx.read(&self.node(new)?.key)?;
        if self.contains(tx, key)? {
            return Ok(false);
        }
        let root = tx.read(&self.root)?;
        let r = self.insert_at(tx, root, new, key, 0)?;
        Self::set(tx, &self.root, r)?;
        Self::set(tx, &self.node(r)?.red, false)?;
        Ok(true)
    }

    fn insert_at<'v>(&'v self, tx: T<'_, 'v>, h: u32, new: u32, key: u64, depth: u32) -> TxResult<u32> {
        Self::step(tx, depth)?;
        if h == 0 {
            return Ok(new);
        }
        let node = self.node(h)?;
        let child = if key < tx.read(&node.key)? { &node.left } else { &node.right };
        let c = tx.read(child)?;
        let c2 = self.insert_at(tx, c, new, key, depth + 1)?;
        Self::set(tx, child, c2)?;
        self.balance(tx, h)
    }

    fn rotate_left<'v>(&'v self, tx: T<'_, 'v>, h: u32) -> TxResult<u32> {
        let x = self.right(tx, h)?;
        let (nh, nx) = (self.node(h)?, self.node(x)?);
        let xl = tx.read(&nx.left)?;
        Self::set(tx, &nh.right, xl)?;
        Self::set(tx, &nx.left, h)?;
        let hr = tx.read(&nh.red)?;
        Self::set(tx, &nx.red, hr)?;
        Self::set(tx, &nh.red, true)?;
        Ok(x)
    }

    fn rotate_right<'v>(&'v self, tx: T<'_, 'v>, h: u32) -> TxResult<u32> {
        let x = self.left(tx, h)?;
        let (nh, nx) = (self.node(h)?, self.node(x)?);
        let xr = tx.read(&nx.right)?;
        Self::set(tx, &nh.left, xr)?;
        Self::set(tx, &nx.right, h)?;
        let hr = tx.read(&nh.red)?;
        Self::set(tx, &nx.red, hr)?;
        Self::set(tx, &nh.red, true)?;
        Ok(x)
    }

    fn flip<'v>(&'v self, tx: T<'_, 'v>, h: u32) -> TxResult<()> {
        let (l, r) = (self.left(tx, h)?, self.right(tx, h)?);
        for n in [h, l, r] {
            let v = &self.node(n)?.red;
            let red = tx.read(v)?;
            tx.write(v, !red)?;
        }
        Ok(())
    }

    /// Restores the left-leaning invariants at `h` on the way up.
    fn balance<'v>(&'v self, tx: T<'_, 'v>, mut h: u32) -> TxResult<u32> {
        if self.red_child(tx, h, false)? && !self.red_child(tx, h, true)? {
            h = self.rotate_left(tx, h)?;
        }
        let l = self.left(tx, h)?;
        if self.red(tx, l)? && l != 0 && self.red_child(tx, l, true)? {
            h = self.rotate_right(tx, h)?;
        }
        if self.red_child(tx, h, true)? && self.red_child(tx, h, false)? {
            self.flip(tx, h)?;
        }
        Ok(h)
    }

    fn move_red_left<'v>(&'v self, tx: T<'_, 'v>, mut h: u32) -> TxResult<u32> {
        self.flip(tx, h)?;
        let r = self.right(tx, h)?;
        if r != 0 && self.red_child(tx, r, true)? {
            let r2 = self.rotate_right(tx, r)?;
            Self::set(tx, &self.node(h)?.right, r2)?;
            h = self.rotate_left(tx, h)?;
            self.flip(tx, h)?;
        }
        Ok(h)
    }

    fn move_red_right<'v>(&'v self, tx: T<'_, 'v>, mut h: u32) -> TxResult<u32> {
        self.flip(tx, h)?;
        let l = self.left(tx, h)?;
        if l != 0 && self.red_child(tx, l, true)? {
            h = self.rotate_right(tx, h)?;
            self.flip(tx, h)?;
        }
        Ok(h)
    }

    /// Removes `key`; false if it was absent.
    pub fn remove<'v>(&'v self, tx: &mut Tx<'v>, key: u64) -> TxResult<bool> {
        if !self.contains(tx, key)? {
            return Ok(false);
        }
        let root = tx.read(&self.root)?;
        if !self.red_child(tx, root, true)? && !self.red_child(tx, root, false)? {
            Self::set(tx, &self.node(root)?.red, true)?;
        }
        let r = self.remove_at(tx, root, key, 0)?;
        Self::set(tx, &self.root, r)?;
        if r != 0 {
            Self::set(tx, &self.node(r)?.red, false)?;
        }
        Ok(true)
    }

    fn remove_at<'v>(&'v self, tx: T<'_, 'v>, mut h: u32, key: u64, depth: u32) -> TxResult<u32> {
        Self::step(tx, depth)?;
        if key < tx.read(&self.node(h)?.key)? {
            let l = self.left(tx, h)?;
            if !self.red(tx, l)? && l != 0 && !self.red_child(tx, l, true)? {
                h = self.move_red_left(tx, h)?;
            }
            let l = self.left(tx, h)?;
            let l2 = self.remove_at(tx, l, key, depth + 1)?;
            Self::set(tx, &self.node(h)?.left, l2)?;
        } else {
            if self.red_child(tx, h, true)? {
                h = self.rotate_right(tx, h)?;
            }
            if key == tx.read(&self.node(h)?.key)? && self.right(tx, h)? == 0 {
                return Ok(0);
            }
            let r = self.right(tx, h)?;
            if !self.red(tx, r)? && r != 0 && !self.red_child(tx, r, true)? {
                h = self.move_red_right(tx, h)?;
            }
            let r = self.right(tx, h)?;
            let r2 = if key == tx.read(&self.node(h)?.key)? {
                let m = self.min_key(tx, r, depth + 1)?;
                Self::set(tx, &self.node(h)?.key, m)?;
                self.remove_min(tx, r, depth + 1)?
            } else {
                self.remove_at(tx, r, key, depth + 1)?
            };
            Self::set(tx, &self.node(h)?.right, r2)?;
        }
        self.balance(tx, h)
    }

    fn min_key<'v>(&'v self, tx: T<'_, 'v>, mut h: u32, mut depth: u32) -> TxResult<u64> {
        loop {
            Self::step(tx, depth)?;
            depth += 1;
            let l = self.left(tx, h)?;
            if l == 0 {
                return tx.read(&self.node(h)?.key);
            }
            h = l;
        }
    }

    fn remove_min<'v>(&'v self, tx: T<'_, 'v>, mut h: u32, depth: u32) -> TxResult<u32> {
        Self::step(tx, depth)?;
        let l = self.left(tx, h)?;
        if l == 0 {
            return Ok(0);
        }
        if !self.red(tx, l)? && !self.red_child(tx, l, true)? {
            h = self.move_red_left(tx, h)?;
        }
        let l = self.left(tx, h)?;
        let l2 = self.remove_min(tx, l, depth + 1)?;
        Self::set(tx, &self.node(h)?.left, l2)?;
        self.balance(tx, h)
    }

    /// The keys in order, checking the red-black invariants (ordered keys,
    /// no red right link, no two reds in a row, equal black height); a
    /// broken invariant is reported as a conflict.
    pub fn keys<'v>(&'v self, tx: &mut Tx<'v>) -> TxResult<Vec<u64>> {
        let mut out = Vec::new();
        let root = tx.read(&self.root)?;
        self.walk(tx, root, 0, &mut out)?;
        if out.windows(2).any(|w| w[0] >= w[1]) {
            return Err(TxError::Conflict);
        }
        Ok(out)
    }

    /// Black height of `n`.
    fn walk<'v>(&'v self, tx: T<'_, 'v>, n: u32, depth: u32, out: &mut Vec<u64>) -> TxResult<u32> {
        Self::step(tx, depth)?;
        if n == 0 {
            return Ok(1);
        }
        let (l, r) = (self.left(tx, n)?, self.right(tx, n)?);
        let red = self.red(tx, n)?;
        if self.red(tx, r)? || (red && self.red(tx, l)?) {
            return Err(TxError::Conflict);
        }
        let bl = self.walk(tx, l, depth + 1, out)?;
        out.push(tx.read(&self.node(n)?.key)?);
        let br = self.walk(tx, r, depth + 1, out)?;
        if bl != br {
            return Err(TxError::Conflict);
        }
        Ok(bl + u32::from(!red))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::htm::hybrid::{Mode, Policy, Runtime};
    use crate::htm::{EmuConfig, Htm};
    use std::collections::BTreeSet;

    #[test]
    fn matches_a_btreeset_at_every_mode() {
        for mode in [Mode::Hybrid, Mode::HtmCommit, Mode::Coarse] {
            let emu = EmuConfig { seed: 9, conflict_ppm: 20_000, ..EmuConfig::default() };
            let rt = Runtime::new(Htm::emulated(emu), Policy { mode, serial_after: u32::MAX, ..Policy::default() });
            let t = RbTree::new(4000);
            let mut model = BTreeSet::new();
            let mut x = 777u64;
            for i in 0..1500 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = x % 400;
                let (want, got) = match x % 3 {
                    0 => (model.insert(k), {
                        let n = t.alloc(k).unwrap();
                        rt.atomically(|tx| t.insert(tx, n)).unwrap()
                    }),
                    1 => (model.remove(&k), rt.atomically(|tx| t.remove(tx, k)).unwrap()),
                    _ => (model.contains(&k), rt.atomically(|tx| t.contains(tx, k)).unwrap()),
                };
                assert_eq!(want, got, "{mode:?} op {i} key {k}");
                if i % 100 == 0 {
                    // The invariants hold (a violation would retry forever:
                    // check with a read-only walk that reports it instead).
                    let mut tx_keys = None;
                    rt.atomically(|tx| {
                        tx_keys = Some(t.keys(tx).map_err(|e| format!("{e:?}")));
                        Ok(())
                    })
                    .unwrap();
                    assert_eq!(tx_keys.unwrap().unwrap(), model.iter().copied().collect::<Vec<_>>(), "{mode:?} op {i}");
                }
            }
        }
    }

    #[test]
    fn concurrent_updates_keep_the_invariants() {
        let rt = Runtime::new(Htm::emulated(EmuConfig::default()), Policy { zombie_checks: 8, ..Policy::default() });
        let t = RbTree::new(20_000);
        let finals: Vec<BTreeSet<u64>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4u64)
                .map(|th| {
                    let (rt, t) = (&rt, &t);
                    s.spawn(move || {
                        let mode = if th == 3 { Mode::Coarse } else { Mode::Hybrid };
                        let mut model = BTreeSet::new();
                        let mut x = 5 + th;
                        for _ in 0..1000 {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let k = (x % 250) * 4 + th;
                            if x % 2 == 0 {
                                let n = t.alloc(k).unwrap();
                                assert_eq!(rt.atomically_in(mode, |tx| t.insert(tx, n)).unwrap(), model.insert(k));
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
        let want: Vec<u64> = finals.into_iter().flatten().collect::<BTreeSet<_>>().into_iter().collect();
        let mut got = None;
        rt.atomically(|tx| {
            got = Some(t.keys(tx).map_err(|e| format!("{e:?}")));
            Ok(())
        })
        .unwrap();
        assert_eq!(got.unwrap().unwrap(), want);
    }
}
