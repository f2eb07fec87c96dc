//! [`RbTree`]: a red-black tree whose nodes are one transactional cell
//! each (the Yates & Scott benchmark tree, in a dense layout).
//!
//! Layout: the handle points at the root variable (a `PTVar` holding the
//! top node, null when empty). A node is one `PTVar` cell object: one
//! versioned lock word and a [`Node`] of five words under it: `key`
//! (set when the node is made, never changed), `left`, `right`, `value`
//! and `up`, the parent's address minus the node's own (0 for the top)
//! with the colour in its low bit (1 red, 0 black; a null link is black).
//! Lock word and words take 48 bytes; with the allocator's 16-byte
//! header the node fills one 64-byte slot, one cache line (until pool
//! layout `engram::stm::RbTree.v2`: six 16-byte `PTField`s in a 128-byte
//! slot; a pool holding such a tree is refused by the root type check).
//! `up` is self-relative, so the pool's relocation rewrites nothing in it
//! (it is no pointer for the GC, which reaches every node through `left`
//! and `right`). The algorithms are the textbook ones (CLRS) without a
//! sentinel node, which would be a write hot spot: a removal tracks the
//! parent of the (possibly null) node that carries the extra black
//! instead.
//!
//! What it keeps true (verified by [`RbTree::check`]):
//! - keys are in binary-search order and distinct;
//! - every node's `up` names the node that links to it (0 for the top);
//! - the top is black, a red node has no red child, and every path from
//!   a node down to a null link passes the same number of black nodes, so
//!   the height is at most `2 log2(n + 1)`.
//!
//! Conflicts: a lookup reads one cell per level (key and both links in
//! one seqlock pass) and the root variable; an update reads the same and
//! rewrites whole nodes: each node its recolouring, relinking and (at
//! most three) rotations change, and the top's colour only when it was
//! red. A lookup so conflicts with any change to a node it passed,
//! colour and parent included (one lock word per node).
//!
//! Removed nodes are unlinked, never freed: garbage for the engine's GC.
//! On a crash: inherits the STM's (see the module docs).

use super::{broken, handle, in_order, Dir, Handle, Plain, Shape};
use crate::stm::{PTVar, ReadTx, STx, StmResult, VarCell};
use crate::{PPtr, Persistent, Pool, Result};

/// One node's words, all under its cell's lock word (module docs).
#[repr(C)]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::RbTree.Node.v2")]
struct Node<K, V> {
    /// Set when the node is made, never changed.
    key: K,
    left: Link<K, V>,
    right: Link<K, V>,
    value: V,
    /// The parent's address minus this node's, wrapping (0: none), with
    /// the colour in bit 0 ([`RED`]). Nodes are 16-aligned, so the
    /// distance's low four bits are 0.
    up: u64,
}

/// `Node::up`'s colour bit.
const RED: u64 = 1;

crate::stm::persist::plain_persist!([K: Plain, V: Plain] Node<K, V>);

/// A node: its cell object's address (null for none).
type Link<K, V> = PPtr<VarCell<Node<K, V>>>;

/// A node found: its address and its words as read.
type Found<K, V> = Option<(Link<K, V>, Node<K, V>)>;

impl<K: Plain, V: Plain> Node<K, V> {
    /// The node `n`'s parent, from its `up` word.
    fn parent(&self, n: Link<K, V>) -> Link<K, V> {
        match self.up & !RED {
            0 => PPtr::null(),
            d => PPtr::from_addr(n.addr().wrapping_add(d)),
        }
    }

    /// Sets node `n`'s parent to `p` (null for none), keeping its colour.
    fn set_parent(&mut self, n: Link<K, V>, p: Link<K, V>) {
        let d = if p.is_null() { 0 } else { p.addr().wrapping_sub(n.addr()) };
        self.up = d | (self.up & RED);
    }

    fn red(&self) -> bool {
        self.up & RED != 0
    }

    fn set_red(&mut self, red: bool) {
        self.up = (self.up & !RED) | red as u64;
    }

    fn child(&self, d: Dir) -> Link<K, V> {
        match d {
            Dir::Left => self.left,
            Dir::Right => self.right,
        }
    }

    /// Starts loading both children's lines: a walk knows both links as
    /// soon as it has read this node, but which it follows only after the
    /// key compare, a branch a random key mispredicts half the time.
    #[inline(always)]
    fn prefetch_children(&self) {
        crate::hint::prefetch(self.left.addr());
        crate::hint::prefetch(self.right.addr());
    }

    fn set_child(&mut self, d: Dir, c: Link<K, V>) {
        match d {
            Dir::Left => self.left = c,
            Dir::Right => self.right = c,
        }
    }
}

/// The variable of node `n`.
fn var<K: Plain, V: Plain>(n: Link<K, V>) -> PTVar<Node<K, V>> {
    PTVar::from_cell(n)
}

/// A transactional red-black tree from `K` to `V` in a pool, one
/// transactional cell per node.
///
/// A handle (one pool pointer, `Copy` and [`Persistent`]); every method works
/// inside the caller's transaction. Keys are ordered by `Ord`; keys and
/// values are [`Plain`] values of at most 8 bytes. [`RbTree::len`] walks the
/// tree (there is no count to become a hot spot).
#[repr(transparent)]
#[derive(Persistent)]
#[engram(name = "engram::stm::RbTree.v2")]
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
        const { assert!(std::mem::size_of::<Node<K, V>>() <= crate::stm::PTVAR_MAX_VALUE) };
        Ok(RbTree { root: PTVar::new(tx, Link::<K, V>::null())?.cell() })
    }

    /// The tree in the named root `name` (a `PTVar<RbTree<K, V>>`),
    /// created empty in its own transaction if the root does not exist yet.
    /// A root holding a tree of the layout before `RbTree.v2` is refused
    /// with [`crate::Error::RootType`].
    pub fn root(pool: &Pool, name: &str) -> Result<Self> {
        super::root_handle(pool, name, Self::new)
    }

    /// The address of the root variable's cell (lock word, then the top
    /// node's address; a node is a cell: lock word, then key, left, right,
    /// value and `up`, 8 bytes each), for tools that inspect the layout
    /// (the benchmark's `tree_floor` example).
    pub fn addr(&self) -> u64 {
        self.root.addr()
    }

    fn in_tx<'a, 'p>(&self, tx: &'a STx<'p>) -> Rb<'a, 'p, K, V> {
        Rb { tx, top: PTVar::from_cell(self.root) }
    }

    /// The value of `key`, in a full ([`STx`]) or read-only
    /// ([`crate::stm::RTx`]) transaction.
    pub fn get<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<Option<V>> {
        Ok(find_in(tx, PTVar::from_cell(self.root), key)?.map(|(_, n)| n.value))
    }

    /// Whether `key` is in the tree (in either kind of transaction).
    pub fn contains_key<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<bool> {
        Ok(find_in(tx, PTVar::from_cell(self.root), key)?.is_some())
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
                let x = t.node(n)?;
                f(x.key, x.value);
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

/// The node of `key` and its words in the tree whose top is in `top`
/// (None if absent), in either kind of transaction: the lookup of `get`
/// and of updates. One cell read per level: key and both links in one
/// seqlock pass.
#[inline]
fn find_in<T: ReadTx, K: Plain + Ord, V: Plain>(tx: &T, top: PTVar<Link<K, V>>, key: &K) -> StmResult<Found<K, V>> {
    let mut cur = tx.get(&top)?;
    while !cur.is_null() {
        let n = tx.get(&var(cur))?;
        n.prefetch_children();
        // (two tests, not `Ord::cmp`'s three-way value matched: one
        // compare and two branches per level instead of eight instructions)
        cur = if *key < n.key {
            n.left
        } else if *key > n.key {
            n.right
        } else {
            return Ok(Some((cur, n)));
        };
    }
    Ok(None)
}

impl<K: Plain + Ord, V: Plain> Rb<'_, '_, K, V> {
    /// Node `n`'s words (the attempt's own write if it wrote `n`).
    fn node(&self, n: Link<K, V>) -> StmResult<Node<K, V>> {
        self.tx.read(&var(n))
    }

    /// Rewrites node `n`'s words with `f` (one whole-cell write).
    fn edit(&self, n: Link<K, V>, f: impl FnOnce(&mut Node<K, V>)) -> StmResult<()> {
        let mut x = self.node(n)?;
        f(&mut x);
        self.tx.write(&var(n), x)
    }

    fn child(&self, n: Link<K, V>, d: Dir) -> StmResult<Link<K, V>> {
        Ok(self.node(n)?.child(d))
    }

    fn set_child(&self, n: Link<K, V>, d: Dir, c: Link<K, V>) -> StmResult<()> {
        self.edit(n, |x| x.set_child(d, c))
    }

    fn parent(&self, n: Link<K, V>) -> StmResult<Link<K, V>> {
        Ok(self.node(n)?.parent(n))
    }

    fn set_parent(&self, n: Link<K, V>, p: Link<K, V>) -> StmResult<()> {
        self.edit(n, |x| x.set_parent(n, p))
    }

    /// Whether `n` is red (a null link is black).
    fn is_red(&self, n: Link<K, V>) -> StmResult<bool> {
        Ok(!n.is_null() && self.node(n)?.red())
    }

    fn set_red(&self, n: Link<K, V>, red: bool) -> StmResult<()> {
        self.edit(n, |x| x.set_red(red))
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
    /// Rewrites `x`, the riser `y`, the moved subtree's top `b` (its
    /// parent) and `x`'s old parent (its link), each once.
    fn rotate(&self, x: Link<K, V>, d: Dir) -> StmResult<()> {
        let mut xn = self.node(x)?;
        let y = xn.child(d.flip());
        let mut yn = self.node(y)?;
        let b = yn.child(d);
        let p = xn.parent(x);
        if !b.is_null() {
            self.set_parent(b, x)?;
        }
        self.relink(p, x, y)?;
        xn.set_child(d.flip(), b);
        xn.set_parent(x, y);
        yn.set_child(d, x);
        yn.set_parent(y, p);
        self.tx.write(&var(x), xn)?;
        self.tx.write(&var(y), yn)
    }

    fn find(&self, key: &K) -> StmResult<Found<K, V>> {
        find_in(self.tx, self.top, key)
    }

    fn insert(&self, key: K, value: V) -> StmResult<Option<V>> {
        let (mut parent, mut cur, mut d) = (PPtr::null(), self.tx.read(&self.top)?, Dir::Left);
        while !cur.is_null() {
            let mut n = self.node(cur)?;
            n.prefetch_children();
            d = match key.cmp(&n.key) {
                std::cmp::Ordering::Less => Dir::Left,
                std::cmp::Ordering::Greater => Dir::Right,
                std::cmp::Ordering::Equal => {
                    let old = n.value;
                    n.value = value;
                    self.tx.write(&var(cur), n)?;
                    return Ok(Some(old));
                }
            };
            parent = cur;
            cur = n.child(d);
        }
        let mut z = Node { key, value, left: PPtr::null(), right: PPtr::null(), up: RED };
        let zv = PTVar::new(self.tx, z)?;
        let zl = zv.cell();
        if parent.is_null() {
            self.tx.write(&self.top, zl)?;
        } else {
            // (the parent's distance is known only now, with the address)
            z.set_parent(zl, parent);
            self.tx.write(&zv, z)?;
            self.set_child(parent, d, zl)?;
        }
        self.fix_insert(zl)?;
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
        let Some((z, zn)) = self.find(key)? else {
            return Ok(None);
        };
        let old = zn.value;
        let (zl, zr) = (zn.left, zn.right);
        let (x, xp, removed_black);
        if zl.is_null() || zr.is_null() {
            x = if zl.is_null() { zr } else { zl };
            xp = zn.parent(z);
            removed_black = !zn.red();
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
        let (x, at) = (self.node(n)?, n.addr());
        let k = x.key;
        let ordered = bounds.0.is_none_or(|lo| lo < k) && bounds.1.is_none_or(|hi| k < hi);
        if !ordered || x.parent(n) != parent || depth > 128 {
            return Err(broken(format!("red-black node {at:#x}: out of order, wrong parent, or too deep")));
        }
        let (l, r) = (x.left, x.right);
        if x.red() && (self.is_red(l)? || self.is_red(r)?) {
            return Err(broken(format!("red-black node {at:#x}: a red node with a red child")));
        }
        shape.len += 1;
        shape.objects += 1;
        shape.height = shape.height.max(depth);
        let bl = self.check_node(l, n, (bounds.0, Some(k)), depth + 1, shape)?;
        let br = self.check_node(r, n, (Some(k), bounds.1), depth + 1, shape)?;
        if bl != br {
            return Err(broken(format!("red-black node {at:#x}: black heights {bl} and {br}")));
        }
        Ok(bl + !x.red() as u64)
    }
}
