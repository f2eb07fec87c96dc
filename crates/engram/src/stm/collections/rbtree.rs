//! [`RbTree`]: a red-black tree whose nodes carry their transactional
//! fields inline (the Yates & Scott benchmark tree).
//!
//! Layout: the handle points at the root variable (a `PTVar` holding the
//! top node, null when empty). A node is one pool object of six
//! [`PTField`]s: `key` (written once, when the node is made), `value`,
//! `left`, `right`, `parent` and `red` (1 red, 0 black; a null link is
//! black). The algorithms are the textbook ones (CLRS) without a sentinel
//! node, which would be a write hot spot: a removal tracks the parent of
//! the (possibly null) node that carries the extra black instead.
//!
//! What it keeps true (verified by [`RbTree::check`]):
//! - keys are in binary-search order and distinct;
//! - every node's `parent` is the node that links to it (null for the top);
//! - the top is black, a red node has no red child, and every path from
//!   a node down to a null link passes the same number of black nodes, so
//!   the height is at most `2 log2(n + 1)`.
//!
//! Conflicts: a lookup reads the fields on one path; an update also writes
//! the fields its recolouring and rotations change (at most three
//! rotations), and the top's colour only when it was red.
//!
//! Removed nodes are unlinked, never freed: garbage for the engine's GC.
//! On a crash: inherits the STM's (see the module docs).

use super::{broken, fld, handle, in_order, Dir, Handle, Plain, Shape};
use crate::stm::{PTField, PTVar, ReadTx, STx, StmResult, VarCell};
use crate::{PPtr, Persistent, Pool, Result};

/// One node.
#[repr(C)]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::RbTree.Node")]
struct RbNode<K, V> {
    /// Set when the node is made, never written (`#[immutable]`: read
    /// without a read-set entry, no write handle).
    #[immutable]
    key: PTField<K>,
    // What a lookup reads (key, left, right) comes first: with the object
    // header, the three share the slot's first 64-byte line.
    left: PTField<Link<K, V>>,
    right: PTField<Link<K, V>>,
    value: PTField<V>,
    /// The node linking to this one; null for the top.
    parent: PTField<Link<K, V>>,
    /// 1 red, 0 black.
    red: PTField<u64>,
    /// Pads the node to 112 bytes: with its 16-byte header it fills a
    /// 128-byte slot, which starts on a line.
    _pad: [u64; 2],
}

type Link<K, V> = PPtr<RbNode<K, V>>;

/// A transactional red-black tree from `K` to `V` in a pool, with its
/// transactional fields embedded in the nodes.
///
/// A handle (one pool pointer, `Copy` and [`Persistent`]); every method works
/// inside the caller's transaction. Keys are ordered by `Ord`; keys and
/// values are [`Plain`] values of at most 8 bytes. [`RbTree::len`] walks the
/// tree (there is no count to become a hot spot).
#[repr(transparent)]
#[derive(Persistent)]
#[engram(name = "engram::stm::RbTree")]
pub struct RbTree<K, V> {
    /// The root variable's cell.
    root: PPtr<VarCell<Link<K, V>>>,
}

handle!(RbTree[K, V], "RbTree");

impl<K: Persistent, V: Persistent> Handle for RbTree<K, V> {
    fn from_addr(addr: u64) -> Self {
        RbTree { root: PPtr::from_addr(addr) }
    }
    fn addr(&self) -> u64 {
        self.root.addr()
    }
}

/// The tree as one transaction works on it.
struct Rb<'a, 'p, K: Persistent, V: Persistent> {
    tx: &'a STx<'p>,
    top: PTVar<Link<K, V>>,
}

impl<K: Plain + Ord, V: Plain> RbTree<K, V> {
    /// A new, empty tree (private to `tx` until it commits).
    pub fn new(tx: &STx<'_>) -> StmResult<Self> {
        Ok(RbTree { root: PTVar::new(tx, Link::<K, V>::null())?.cell() })
    }

    /// The tree in the named root `name` (a `PTVar<RbTree<K, V>>`),
    /// created empty in its own transaction if the root does not exist yet.
    pub fn root(pool: &Pool, name: &str) -> Result<Self> {
        super::root_handle(pool, name, Self::new)
    }

    /// The address of the root variable's cell (lock word, then the top
    /// node's address; a node's fields are 16-byte cells: key, left,
    /// right, value, parent, red), for tools that inspect the layout (the
    /// benchmark's `tree_floor` example).
    pub fn addr(&self) -> u64 {
        self.root.addr()
    }

    fn in_tx<'a, 'p>(&self, tx: &'a STx<'p>) -> Rb<'a, 'p, K, V> {
        Rb { tx, top: PTVar::from_cell(self.root) }
    }

    /// The value of `key`, in a full ([`STx`]) or read-only
    /// ([`crate::stm::RTx`]) transaction.
    pub fn get<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<Option<V>> {
        let n = find_in(tx, PTVar::from_cell(self.root), key)?;
        if n.is_null() {
            return Ok(None);
        }
        tx.get(&fld!(n, RbNode<K, V>, value)).map(Some)
    }

    /// Whether `key` is in the tree (in either kind of transaction).
    pub fn contains_key<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<bool> {
        Ok(!find_in(tx, PTVar::from_cell(self.root), key)?.is_null())
    }

    /// Sets `key` to `value`; returns the value it replaced.
    pub fn insert(&self, tx: &STx<'_>, key: K, value: V) -> StmResult<Option<V>> {
        self.in_tx(tx).insert(key, value)
    }

    /// Removes `key`; returns its value.
    pub fn remove(&self, tx: &STx<'_>, key: &K) -> StmResult<Option<V>> {
        self.in_tx(tx).remove(key)
    }

    /// Calls `f` on every entry in key order.
    pub fn for_each(&self, tx: &STx<'_>, mut f: impl FnMut(K, V)) -> StmResult<()> {
        let t = self.in_tx(tx);
        in_order(
            t.tx.read(&t.top)?,
            |n, d| t.child(n, d),
            |n| {
                f(t.key(n)?, t.value(n)?);
                Ok(())
            },
        )
    }

    /// Every entry in key order.
    pub fn to_vec(&self, tx: &STx<'_>) -> StmResult<Vec<(K, V)>> {
        let mut out = Vec::new();
        self.for_each(tx, |k, v| out.push((k, v)))?;
        Ok(out)
    }

    /// The number of entries (walks the tree: O(n) reads).
    pub fn len(&self, tx: &STx<'_>) -> StmResult<u64> {
        let mut n = 0;
        self.for_each(tx, |_, _| n += 1)?;
        Ok(n)
    }

    /// Whether the tree is empty (one read).
    pub fn is_empty(&self, tx: &STx<'_>) -> StmResult<bool> {
        let t = self.in_tx(tx);
        Ok(t.tx.read(&t.top)?.is_null())
    }

    /// Verifies the red-black invariants (module docs); an error names the
    /// first one broken. Reads the whole tree.
    pub fn check(&self, tx: &STx<'_>) -> StmResult<Shape> {
        let t = self.in_tx(tx);
        let top = t.tx.read(&t.top)?;
        if t.is_red(top)? {
            return Err(broken(format!("red-black tree {:#x}: the top is red", self.root.addr())));
        }
        let mut shape = Shape { objects: 1, ..Shape::default() };
        t.check_node(top, PPtr::null(), (None, None), 1, &mut shape)?;
        Ok(shape)
    }
}

/// The node of `key` in the tree whose top is in `top` (null if absent),
/// in either kind of transaction: the lookup of `get` and of updates.
#[inline]
fn find_in<T: ReadTx, K: Plain + Ord, V: Plain>(tx: &T, top: PTVar<Link<K, V>>, key: &K) -> StmResult<Link<K, V>> {
    let mut cur = tx.get(&top)?;
    while !cur.is_null() {
        cur = match key.cmp(&tx.get(&fld!(cur, RbNode<K, V>, key))?) {
            std::cmp::Ordering::Less => tx.get(&fld!(cur, RbNode<K, V>, left))?,
            std::cmp::Ordering::Greater => tx.get(&fld!(cur, RbNode<K, V>, right))?,
            std::cmp::Ordering::Equal => return Ok(cur),
        };
    }
    Ok(cur)
}

impl<K: Plain + Ord, V: Plain> Rb<'_, '_, K, V> {
    fn key(&self, n: Link<K, V>) -> StmResult<K> {
        self.tx.read(&fld!(n, RbNode<K, V>, key))
    }

    fn value(&self, n: Link<K, V>) -> StmResult<V> {
        self.tx.read(&fld!(n, RbNode<K, V>, value))
    }

    fn child(&self, n: Link<K, V>, d: Dir) -> StmResult<Link<K, V>> {
        match d {
            Dir::Left => self.tx.read(&fld!(n, RbNode<K, V>, left)),
            Dir::Right => self.tx.read(&fld!(n, RbNode<K, V>, right)),
        }
    }

    fn set_child(&self, n: Link<K, V>, d: Dir, c: Link<K, V>) -> StmResult<()> {
        match d {
            Dir::Left => self.tx.write(&fld!(n, RbNode<K, V>, left), c),
            Dir::Right => self.tx.write(&fld!(n, RbNode<K, V>, right), c),
        }
    }

    fn parent(&self, n: Link<K, V>) -> StmResult<Link<K, V>> {
        self.tx.read(&fld!(n, RbNode<K, V>, parent))
    }

    fn set_parent(&self, n: Link<K, V>, p: Link<K, V>) -> StmResult<()> {
        self.tx.write(&fld!(n, RbNode<K, V>, parent), p)
    }

    /// Whether `n` is red (a null link is black).
    fn is_red(&self, n: Link<K, V>) -> StmResult<bool> {
        Ok(!n.is_null() && self.tx.read(&fld!(n, RbNode<K, V>, red))? != 0)
    }

    fn set_red(&self, n: Link<K, V>, red: bool) -> StmResult<()> {
        self.tx.write(&fld!(n, RbNode<K, V>, red), red as u64)
    }

    /// The side of `p` that `n` hangs on (`n` may be null: then the side
    /// whose link is null, which is `n`'s in a valid tree).
    fn side(&self, p: Link<K, V>, n: Link<K, V>) -> StmResult<Dir> {
        Ok(if self.child(p, Dir::Left)? == n { Dir::Left } else { Dir::Right })
    }

    /// Links `new` where `old` hung from `parent` (the top if null).
    fn relink(&self, parent: Link<K, V>, old: Link<K, V>, new: Link<K, V>) -> StmResult<()> {
        if parent.is_null() {
            return self.tx.write(&self.top, new);
        }
        let d = self.side(parent, old)?;
        self.set_child(parent, d, new)
    }

    /// Rotates `x` down towards `d`; its child on the other side rises.
    fn rotate(&self, x: Link<K, V>, d: Dir) -> StmResult<()> {
        let y = self.child(x, d.flip())?;
        let b = self.child(y, d)?;
        self.set_child(x, d.flip(), b)?;
        if !b.is_null() {
            self.set_parent(b, x)?;
        }
        let p = self.parent(x)?;
        self.set_parent(y, p)?;
        self.relink(p, x, y)?;
        self.set_child(y, d, x)?;
        self.set_parent(x, y)
    }

    fn find(&self, key: &K) -> StmResult<Link<K, V>> {
        find_in(self.tx, self.top, key)
    }

    fn insert(&self, key: K, value: V) -> StmResult<Option<V>> {
        let (mut parent, mut cur, mut d) = (PPtr::null(), self.tx.read(&self.top)?, Dir::Left);
        while !cur.is_null() {
            d = match key.cmp(&self.key(cur)?) {
                std::cmp::Ordering::Less => Dir::Left,
                std::cmp::Ordering::Greater => Dir::Right,
                std::cmp::Ordering::Equal => {
                    let old = self.value(cur)?;
                    self.tx.write(&fld!(cur, RbNode<K, V>, value), value)?;
                    return Ok(Some(old));
                }
            };
            parent = cur;
            cur = self.child(cur, d)?;
        }
        let z = self.tx.alloc(RbNode {
            key: PTField::new(key),
            value: PTField::new(value),
            left: PTField::new(PPtr::null()),
            right: PTField::new(PPtr::null()),
            parent: PTField::new(parent),
            red: PTField::new(1),
            _pad: [0; 2],
        })?;
        if parent.is_null() {
            self.tx.write(&self.top, z)?;
        } else {
            self.set_child(parent, d, z)?;
        }
        self.fix_insert(z)?;
        Ok(None)
    }

    /// Restores the colour rules after red `z` was linked.
    fn fix_insert(&self, mut z: Link<K, V>) -> StmResult<()> {
        loop {
            let mut p = self.parent(z)?;
            if p.is_null() || !self.is_red(p)? {
                break;
            }
            // p is red, so it is not the top: g exists.
            let g = self.parent(p)?;
            let d = self.side(g, p)?;
            let uncle = self.child(g, d.flip())?;
            if self.is_red(uncle)? {
                self.set_red(p, false)?;
                self.set_red(uncle, false)?;
                self.set_red(g, true)?;
                z = g;
                continue;
            }
            if self.child(p, d.flip())? == z {
                self.rotate(p, d)?;
                z = p;
                p = self.parent(z)?;
            }
            self.set_red(p, false)?;
            self.set_red(g, true)?;
            self.rotate(g, d.flip())?;
            break;
        }
        let top = self.tx.read(&self.top)?;
        if self.is_red(top)? {
            self.set_red(top, false)?;
        }
        Ok(())
    }

    fn remove(&self, key: &K) -> StmResult<Option<V>> {
        let z = self.find(key)?;
        if z.is_null() {
            return Ok(None);
        }
        let old = self.value(z)?;
        let (zl, zr) = (self.child(z, Dir::Left)?, self.child(z, Dir::Right)?);
        let (x, xp, removed_black);
        if zl.is_null() || zr.is_null() {
            x = if zl.is_null() { zr } else { zl };
            xp = self.parent(z)?;
            removed_black = !self.is_red(z)?;
            self.replace(z, xp, x)?;
        } else {
            let y = self.leftmost(zr)?;
            removed_black = !self.is_red(y)?;
            x = self.child(y, Dir::Right)?;
            if y == zr {
                xp = y;
            } else {
                xp = self.parent(y)?;
                self.replace(y, xp, x)?;
                self.set_child(y, Dir::Right, zr)?;
                self.set_parent(zr, y)?;
            }
            let zp = self.parent(z)?;
            self.replace(z, zp, y)?;
            self.set_child(y, Dir::Left, zl)?;
            self.set_parent(zl, y)?;
            self.set_red(y, self.is_red(z)?)?;
        }
        if removed_black {
            self.fix_remove(x, xp)?;
        }
        Ok(Some(old))
    }

    /// Hangs `v` (may be null) where `u` hung from its parent `up`.
    fn replace(&self, u: Link<K, V>, up: Link<K, V>, v: Link<K, V>) -> StmResult<()> {
        self.relink(up, u, v)?;
        if !v.is_null() {
            self.set_parent(v, up)?;
        }
        Ok(())
    }

    fn leftmost(&self, mut n: Link<K, V>) -> StmResult<Link<K, V>> {
        loop {
            let l = self.child(n, Dir::Left)?;
            if l.is_null() {
                return Ok(n);
            }
            n = l;
        }
    }

    /// Restores the black heights after a black node was removed above
    /// `x` (may be null), whose parent is `xp`.
    fn fix_remove(&self, mut x: Link<K, V>, mut xp: Link<K, V>) -> StmResult<()> {
        while !xp.is_null() && !self.is_red(x)? {
            let d = self.side(xp, x)?;
            let mut w = self.child(xp, d.flip())?;
            if self.is_red(w)? {
                self.set_red(w, false)?;
                self.set_red(xp, true)?;
                self.rotate(xp, d)?;
                w = self.child(xp, d.flip())?;
            }
            let (near, far) = (self.child(w, d)?, self.child(w, d.flip())?);
            if !self.is_red(near)? && !self.is_red(far)? {
                self.set_red(w, true)?;
                x = xp;
                xp = self.parent(x)?;
                continue;
            }
            if !self.is_red(far)? {
                self.set_red(near, false)?;
                self.set_red(w, true)?;
                self.rotate(w, d.flip())?;
                w = self.child(xp, d.flip())?;
            }
            self.set_red(w, self.is_red(xp)?)?;
            self.set_red(xp, false)?;
            self.set_red(self.child(w, d.flip())?, false)?;
            self.rotate(xp, d)?;
            return Ok(());
        }
        if self.is_red(x)? {
            self.set_red(x, false)?;
        }
        Ok(())
    }

    /// Checks the subtree at `n` (linked from `parent`, keys strictly
    /// between `bounds`); returns its black height.
    fn check_node(
        &self,
        n: Link<K, V>,
        parent: Link<K, V>,
        bounds: (Option<K>, Option<K>),
        depth: u64,
        shape: &mut Shape,
    ) -> StmResult<u64> {
        if n.is_null() {
            return Ok(1);
        }
        let (k, at) = (self.key(n)?, n.addr());
        let ordered = bounds.0.is_none_or(|lo| lo < k) && bounds.1.is_none_or(|hi| k < hi);
        if !ordered || self.parent(n)? != parent || depth > 128 {
            return Err(broken(format!("red-black node {at:#x}: out of order, wrong parent, or too deep")));
        }
        let red = self.tx.read(&fld!(n, RbNode<K, V>, red))?;
        let (l, r) = (self.child(n, Dir::Left)?, self.child(n, Dir::Right)?);
        if red > 1 || (red == 1 && (self.is_red(l)? || self.is_red(r)?)) {
            return Err(broken(format!("red-black node {at:#x}: colour {red}, or a red node with a red child")));
        }
        shape.len += 1;
        shape.objects += 1;
        shape.height = shape.height.max(depth);
        let bl = self.check_node(l, n, (bounds.0, Some(k)), depth + 1, shape)?;
        let br = self.check_node(r, n, (Some(k), bounds.1), depth + 1, shape)?;
        if bl != br {
            return Err(broken(format!("red-black node {at:#x}: black heights {bl} and {br}")));
        }
        Ok(bl + (red == 0) as u64)
    }
}
