//! The red-black tree of the RomulusLog suite, on a peer's word heap
//! ([`super`]): nodes of six 8-byte fields (key, value, colour, left,
//! right, parent), links as offsets into the heap (0: null), the
//! tree's top in a root word. The algorithm is CLRS without a sentinel,
//! the same steps as the benchmark's other trees (`tvar_rbtree.rs`).
//!
//! Keeps true: order, parent links, colours and equal black heights
//! ([`RbTree::check`]); a node a delete unlinks goes back to the
//! allocator in the same transaction.

use std::cmp::Ordering;

use super::alloc;
use super::{HeapError, Mem, Tx};
use crate::stm::workload::Contents;

const KEY: u64 = 0;
const VALUE: u64 = 8;
const RED: u64 = 16;
const LEFT: u64 = 24;
const RIGHT: u64 = 32;
const PARENT: u64 = 40;
/// Words of a node.
const NODE_WORDS: u64 = 6;
const NIL: u64 = 0;

/// A child direction: the offset of its link field.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Dir(u64);

impl Dir {
    const L: Dir = Dir(LEFT);
    const R: Dir = Dir(RIGHT);
    fn flip(self) -> Dir {
        if self == Dir::L {
            Dir::R
        } else {
            Dir::L
        }
    }
}

/// A red-black tree from u64 to u64 whose top is root word `top`.
#[derive(Clone, Copy, Debug)]
pub struct RbTree {
    top: u64,
}

impl RbTree {
    /// The tree in root word `i` (an empty tree is a 0 there).
    pub fn at_root(i: u64) -> Self {
        RbTree { top: alloc::root(i) }
    }

    fn child<M: Mem>(m: &M, n: u64, d: Dir) -> u64 {
        m.load(n + d.0)
    }

    fn is_red<M: Mem>(m: &M, n: u64) -> bool {
        n != NIL && m.load(n + RED) != 0
    }

    fn side<T: Tx>(tx: &T, p: u64, n: u64) -> Dir {
        if tx.load(p + LEFT) == n {
            Dir::L
        } else {
            Dir::R
        }
    }

    fn relink<T: Tx>(&self, tx: &mut T, parent: u64, old: u64, new: u64) -> Result<(), T::Error> {
        if parent == NIL {
            return tx.store(self.top, new);
        }
        let d = Self::side(tx, parent, old);
        tx.store(parent + d.0, new)
    }

    fn rotate<T: Tx>(&self, tx: &mut T, x: u64, d: Dir) -> Result<(), T::Error> {
        let y = Self::child(tx, x, d.flip());
        let b = Self::child(tx, y, d);
        tx.store(x + d.flip().0, b)?;
        if b != NIL {
            tx.store(b + PARENT, x)?;
        }
        let p = tx.load(x + PARENT);
        tx.store(y + PARENT, p)?;
        self.relink(tx, p, x, y)?;
        tx.store(y + d.0, x)?;
        tx.store(x + PARENT, y)
    }

    fn find<M: Mem>(&self, m: &M, key: u64) -> u64 {
        let mut cur = m.load(self.top);
        while cur != NIL {
            cur = match key.cmp(&m.load(cur + KEY)) {
                Ordering::Less => m.load(cur + LEFT),
                Ordering::Greater => m.load(cur + RIGHT),
                Ordering::Equal => return cur,
            };
        }
        NIL
    }

    /// The key's value.
    pub fn get<M: Mem>(&self, m: &M, key: u64) -> Option<u64> {
        let n = self.find(m, key);
        (n != NIL).then(|| m.load(n + VALUE))
    }

    /// Sets the key's value; the value it replaced.
    pub fn insert<T: Tx>(&self, tx: &mut T, key: u64, value: u64) -> Result<Option<u64>, T::Error> {
        let (mut parent, mut cur, mut d) = (NIL, tx.load(self.top), Dir::L);
        while cur != NIL {
            d = match key.cmp(&tx.load(cur + KEY)) {
                Ordering::Less => Dir::L,
                Ordering::Greater => Dir::R,
                Ordering::Equal => {
                    let old = tx.load(cur + VALUE);
                    tx.store(cur + VALUE, value)?;
                    return Ok(Some(old));
                }
            };
            parent = cur;
            cur = Self::child(tx, cur, d);
        }
        let z = alloc::alloc(tx, NODE_WORDS)?;
        for (f, v) in [(KEY, key), (VALUE, value), (RED, 1), (LEFT, NIL), (RIGHT, NIL), (PARENT, parent)] {
            tx.store(z + f, v)?;
        }
        if parent == NIL {
            tx.store(self.top, z)?;
        } else {
            tx.store(parent + d.0, z)?;
        }
        self.fix_insert(tx, z)?;
        Ok(None)
    }

    fn fix_insert<T: Tx>(&self, tx: &mut T, mut z: u64) -> Result<(), T::Error> {
        loop {
            let mut p = tx.load(z + PARENT);
            if p == NIL || !Self::is_red(tx, p) {
                break;
            }
            let g = tx.load(p + PARENT);
            let d = Self::side(tx, g, p);
            let uncle = Self::child(tx, g, d.flip());
            if Self::is_red(tx, uncle) {
                tx.store(p + RED, 0)?;
                tx.store(uncle + RED, 0)?;
                tx.store(g + RED, 1)?;
                z = g;
                continue;
            }
            if Self::child(tx, p, d.flip()) == z {
                self.rotate(tx, p, d)?;
                z = p;
                p = tx.load(z + PARENT);
            }
            tx.store(p + RED, 0)?;
            tx.store(g + RED, 1)?;
            self.rotate(tx, g, d.flip())?;
            break;
        }
        let top = tx.load(self.top);
        if Self::is_red(tx, top) {
            tx.store(top + RED, 0)?;
        }
        Ok(())
    }

    /// Removes the key; its value.
    pub fn remove<T: Tx>(&self, tx: &mut T, key: u64) -> Result<Option<u64>, T::Error> {
        let z = self.find(tx, key);
        if z == NIL {
            return Ok(None);
        }
        let old = tx.load(z + VALUE);
        let (zl, zr) = (tx.load(z + LEFT), tx.load(z + RIGHT));
        let (x, xp, removed_black);
        if zl == NIL || zr == NIL {
            x = if zl == NIL { zr } else { zl };
            xp = tx.load(z + PARENT);
            removed_black = !Self::is_red(tx, z);
            self.replace(tx, z, xp, x)?;
        } else {
            let mut y = zr;
            while tx.load(y + LEFT) != NIL {
                y = tx.load(y + LEFT);
            }
            removed_black = !Self::is_red(tx, y);
            x = tx.load(y + RIGHT);
            if y == zr {
                xp = y;
            } else {
                xp = tx.load(y + PARENT);
                self.replace(tx, y, xp, x)?;
                tx.store(y + RIGHT, zr)?;
                tx.store(zr + PARENT, y)?;
            }
            let zp = tx.load(z + PARENT);
            self.replace(tx, z, zp, y)?;
            tx.store(y + LEFT, zl)?;
            tx.store(zl + PARENT, y)?;
            tx.store(y + RED, Self::is_red(tx, z) as u64)?;
        }
        if removed_black {
            self.fix_remove(tx, x, xp)?;
        }
        alloc::free(tx, z, NODE_WORDS)?;
        Ok(Some(old))
    }

    fn replace<T: Tx>(&self, tx: &mut T, u: u64, up: u64, v: u64) -> Result<(), T::Error> {
        self.relink(tx, up, u, v)?;
        if v != NIL {
            tx.store(v + PARENT, up)?;
        }
        Ok(())
    }

    fn fix_remove<T: Tx>(&self, tx: &mut T, mut x: u64, mut xp: u64) -> Result<(), T::Error> {
        while xp != NIL && !Self::is_red(tx, x) {
            let d = Self::side(tx, xp, x);
            let mut w = Self::child(tx, xp, d.flip());
            if Self::is_red(tx, w) {
                tx.store(w + RED, 0)?;
                tx.store(xp + RED, 1)?;
                self.rotate(tx, xp, d)?;
                w = Self::child(tx, xp, d.flip());
            }
            let (near, far) = (Self::child(tx, w, d), Self::child(tx, w, d.flip()));
            if !Self::is_red(tx, near) && !Self::is_red(tx, far) {
                tx.store(w + RED, 1)?;
                x = xp;
                xp = tx.load(x + PARENT);
                continue;
            }
            if !Self::is_red(tx, far) {
                tx.store(near + RED, 0)?;
                tx.store(w + RED, 1)?;
                self.rotate(tx, w, d.flip())?;
                w = Self::child(tx, xp, d.flip());
            }
            tx.store(w + RED, Self::is_red(tx, xp) as u64)?;
            tx.store(xp + RED, 0)?;
            let far = Self::child(tx, w, d.flip());
            tx.store(far + RED, 0)?;
            return self.rotate(tx, xp, d);
        }
        if Self::is_red(tx, x) {
            tx.store(x + RED, 0)?;
        }
        Ok(())
    }

    /// Checks the invariants; what the tree holds.
    pub fn check<M: Mem>(&self, m: &M) -> Result<Contents, HeapError> {
        let top = m.load(self.top);
        if Self::is_red(m, top) {
            return Err(HeapError::Broken("word-heap tree: the top is red".into()));
        }
        let mut c = Contents::default();
        self.check_node(m, top, NIL, (None, None), 1, &mut c)?;
        Ok(c)
    }

    /// Checks the subtree at `n`; its black height.
    fn check_node<M: Mem>(
        &self,
        m: &M,
        n: u64,
        parent: u64,
        bounds: (Option<u64>, Option<u64>),
        depth: u32,
        c: &mut Contents,
    ) -> Result<u64, HeapError> {
        if n == NIL {
            return Ok(1);
        }
        let k = m.load(n + KEY);
        let ordered = bounds.0.is_none_or(|lo| lo < k) && bounds.1.is_none_or(|hi| k < hi);
        if !ordered || m.load(n + PARENT) != parent || depth > 128 {
            return Err(HeapError::Broken(format!("word-heap tree node {n}: out of order, wrong parent, or too deep")));
        }
        let red = m.load(n + RED);
        let (l, r) = (m.load(n + LEFT), m.load(n + RIGHT));
        if red > 1 || (red == 1 && (Self::is_red(m, l) || Self::is_red(m, r))) {
            return Err(HeapError::Broken(format!("word-heap tree node {n}: colour {red}, or a red node with a red child")));
        }
        c.add(k, m.load(n + VALUE));
        let bl = self.check_node(m, l, n, (bounds.0, Some(k)), depth + 1, c)?;
        let br = self.check_node(m, r, n, (Some(k), bounds.1), depth + 1, c)?;
        if bl != br {
            return Err(HeapError::Broken(format!("word-heap tree node {n}: black heights {bl} and {br}")));
        }
        Ok(bl + (red == 0) as u64)
    }
}
