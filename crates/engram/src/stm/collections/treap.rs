//! [`Treap`]: a randomized binary search tree (a tree that is a heap on
//! priorities) whose nodes carry their transactional fields inline.
//!
//! Layout: the handle points at the root variable (a `PTVar` holding the
//! top node). A node is one pool object of four [`PTField`]s: `key`
//! (written once, when the node is made), `value`, `left` and `right`. A
//! node's priority is not stored: it is the key's deterministic hash, with
//! the key breaking ties, so a set of keys has exactly one treap shape
//! whatever the order of updates (and the same shape after a restart).
//!
//! Updates are split and merge along one path: an insert walks down until
//! the new node outranks the node in its place, then splits that subtree
//! around the key into the new node's children; a removal merges the
//! removed node's children into its place. Only links that change are
//! written, so an update writes O(1) expected links, near the key.
//!
//! What it keeps true (verified by [`Treap::check`]):
//! - keys are in binary-search order and distinct;
//! - every node outranks its children: its (priority, key) is greater.
//!
//! Removed nodes are unlinked, never freed: garbage for the engine's GC.
//! On a crash: inherits the STM's (see the module docs).

use super::{broken, fld, handle, in_order, Dir, Handle, Plain, Shape};
use crate::stm::{PTField, PTVar, ReadTx, STx, StmResult, VarCell};
use crate::{PPtr, Persistent, Pool, Result};
use std::hash::Hash;

/// One node.
#[repr(C)]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::Treap.Node")]
struct TreapNode<K, V> {
    /// Set when the node is made, never written (`#[immutable]`).
    #[immutable]
    key: PTField<K>,
    // What a lookup reads (key, left, right) first.
    left: PTField<Link<K, V>>,
    right: PTField<Link<K, V>>,
    value: PTField<V>,
}

type Link<K, V> = PPtr<TreapNode<K, V>>;

/// Where a link lives: the root variable, or a side of a node.
#[derive(Clone, Copy)]
enum Hook<K, V> {
    Top,
    Side(Link<K, V>, Dir),
}

/// A transactional treap from `K` to `V` in a pool, with its transactional
/// fields embedded in the nodes.
///
/// A handle (one pool pointer, `Copy` and [`Persistent`]); every method works
/// inside the caller's transaction. Keys are ordered by `Ord` and ranked by
/// their deterministic hash (`Hash` must be deterministic); keys and values
/// are [`Plain`] values of at most 8 bytes. [`Treap::len`] walks the tree.
#[repr(transparent)]
#[derive(Persistent)]
#[engram(name = "engram::stm::Treap")]
pub struct Treap<K, V> {
    /// The root variable's cell.
    root: PPtr<VarCell<Link<K, V>>>,
}

handle!(Treap[K, V], "Treap");

impl<K: Persistent, V: Persistent> Handle for Treap<K, V> {
    fn from_addr(addr: u64) -> Self {
        Treap { root: PPtr::from_addr(addr) }
    }
    fn addr(&self) -> u64 {
        self.root.addr()
    }
}

/// The treap as one transaction works on it.
struct Tr<'a, 'p, K: Persistent, V: Persistent> {
    tx: &'a STx<'p>,
    top: PTVar<Link<K, V>>,
}

/// A node's rank: higher ranks sit nearer the top.
fn rank<K: Hash + Ord + Copy>(key: K) -> (u64, K) {
    (crate::hash::stable_hash(&key), key)
}

impl<K: Plain + Ord + Hash, V: Plain> Treap<K, V> {
    /// A new, empty treap (private to `tx` until it commits).
    pub fn new(tx: &STx<'_>) -> StmResult<Self> {
        Ok(Treap { root: PTVar::new(tx, Link::<K, V>::null())?.cell() })
    }

    /// The treap in the named root `name` (a `PTVar<Treap<K, V>>`), created
    /// empty in its own transaction if the root does not exist yet.
    pub fn root(pool: &Pool, name: &str) -> Result<Self> {
        super::root_handle(pool, name, Self::new)
    }

    fn in_tx<'a, 'p>(&self, tx: &'a STx<'p>) -> Tr<'a, 'p, K, V> {
        Tr { tx, top: PTVar::from_cell(self.root) }
    }

    /// The value of `key`, in a full ([`STx`]) or read-only
    /// ([`crate::stm::RTx`]) transaction.
    pub fn get<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<Option<V>> {
        let mut cur = tx.get(&PTVar::<Link<K, V>>::from_cell(self.root))?;
        while !cur.is_null() {
            let k = tx.get(&fld!(cur, TreapNode<K, V>, key))?;
            if k == *key {
                return tx.get(&fld!(cur, TreapNode<K, V>, value)).map(Some);
            }
            cur = if *key < k { tx.get(&fld!(cur, TreapNode<K, V>, left))? } else { tx.get(&fld!(cur, TreapNode<K, V>, right))? };
        }
        Ok(None)
    }

    /// Whether `key` is in the treap (in either kind of transaction).
    pub fn contains_key<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<bool> {
        Ok(self.get(tx, key)?.is_some())
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
            t.get(Hook::Top)?,
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

    /// The number of entries (walks the treap: O(n) reads).
    pub fn len(&self, tx: &STx<'_>) -> StmResult<u64> {
        let mut n = 0;
        self.for_each(tx, |_, _| n += 1)?;
        Ok(n)
    }

    /// Whether the treap is empty (one read).
    pub fn is_empty(&self, tx: &STx<'_>) -> StmResult<bool> {
        Ok(self.in_tx(tx).get(Hook::Top)?.is_null())
    }

    /// Verifies the treap's invariants (module docs); an error names the
    /// first one broken. Reads the whole treap.
    pub fn check(&self, tx: &STx<'_>) -> StmResult<Shape> {
        let t = self.in_tx(tx);
        let mut shape = Shape { objects: 1, ..Shape::default() };
        // (node, lower bound, upper bound, the parent's rank, depth)
        let mut stack = vec![(t.get(Hook::Top)?, None, None, None, 1u64)];
        while let Some((n, lo, hi, above, depth)) = stack.pop() {
            if n.is_null() {
                continue;
            }
            let k = t.key(n)?;
            let ordered = lo.is_none_or(|lo| lo < k) && hi.is_none_or(|hi| k < hi);
            if !ordered || above.is_some_and(|a| a < rank(k)) {
                return Err(broken(format!("treap node {:#x}: out of key order or of heap order", n.addr())));
            }
            shape.len += 1;
            shape.objects += 1;
            shape.height = shape.height.max(depth);
            stack.push((t.child(n, Dir::Left)?, lo, Some(k), Some(rank(k)), depth + 1));
            stack.push((t.child(n, Dir::Right)?, Some(k), hi, Some(rank(k)), depth + 1));
        }
        Ok(shape)
    }
}

/// A step of a search: the node, its key, the side taken, and the link
/// found on that side.
struct Step<K, V> {
    node: Link<K, V>,
    key: K,
    dir: Dir,
    next: Link<K, V>,
}

impl<K: Plain + Ord + Hash, V: Plain> Tr<'_, '_, K, V> {
    fn key(&self, n: Link<K, V>) -> StmResult<K> {
        self.tx.read(&fld!(n, TreapNode<K, V>, key))
    }

    fn value(&self, n: Link<K, V>) -> StmResult<V> {
        self.tx.read(&fld!(n, TreapNode<K, V>, value))
    }

    fn child(&self, n: Link<K, V>, d: Dir) -> StmResult<Link<K, V>> {
        self.get(Hook::Side(n, d))
    }

    fn get(&self, h: Hook<K, V>) -> StmResult<Link<K, V>> {
        match h {
            Hook::Top => self.tx.read(&self.top),
            Hook::Side(n, Dir::Left) => self.tx.read(&fld!(n, TreapNode<K, V>, left)),
            Hook::Side(n, Dir::Right) => self.tx.read(&fld!(n, TreapNode<K, V>, right)),
        }
    }

    /// Sets link `h`, which now holds `was`, to `to` (no write if equal).
    fn set(&self, h: Hook<K, V>, was: Link<K, V>, to: Link<K, V>) -> StmResult<()> {
        if was == to {
            return Ok(());
        }
        match h {
            Hook::Top => self.tx.write(&self.top, to),
            Hook::Side(n, Dir::Left) => self.tx.write(&fld!(n, TreapNode<K, V>, left), to),
            Hook::Side(n, Dir::Right) => self.tx.write(&fld!(n, TreapNode<K, V>, right), to),
        }
    }

    fn insert(&self, key: K, value: V) -> StmResult<Option<V>> {
        // 1. search, remembering the path: the key may be anywhere on it.
        let mut path: Vec<Step<K, V>> = Vec::new();
        let mut cur = self.get(Hook::Top)?;
        while !cur.is_null() {
            let k = self.key(cur)?;
            if k == key {
                let old = self.value(cur)?;
                self.tx.write(&fld!(cur, TreapNode<K, V>, value), value)?;
                return Ok(Some(old));
            }
            let dir = if key < k { Dir::Left } else { Dir::Right };
            let next = self.child(cur, dir)?;
            path.push(Step { node: cur, key: k, dir, next });
            cur = next;
        }
        // 2. the new node goes where it first outranks the path.
        let at = path.iter().position(|s| rank(s.key) < rank(key)).unwrap_or(path.len());
        let (hook, was) = match at.checked_sub(1).map(|i| &path[i]) {
            Some(s) => (Hook::Side(s.node, s.dir), s.next),
            None => (Hook::Top, path.first().map_or(PPtr::null(), |s| s.node)),
        };
        let n = self.tx.alloc(TreapNode {
            key: PTField::new(key),
            value: PTField::new(value),
            left: PTField::new(PPtr::null()),
            right: PTField::new(PPtr::null()),
        })?;
        // 3. the subtree it replaces splits into its children, along the
        //    rest of the path; 4. it is linked in.
        self.split(&path[at..], n)?;
        self.set(hook, was, n)?;
        Ok(None)
    }

    /// Splits the subtree whose search path for the new node's key is
    /// `path` into the new node `n`'s left (smaller keys) and right.
    fn split(&self, path: &[Step<K, V>], n: Link<K, V>) -> StmResult<()> {
        // Each hook and the link it holds now.
        let mut lo = (Hook::Side(n, Dir::Left), PPtr::null());
        let mut hi = (Hook::Side(n, Dir::Right), PPtr::null());
        for s in path {
            // Going right means the node's key is smaller: it joins the
            // left part, and the left part continues on its right side.
            let part = if s.dir == Dir::Right { &mut lo } else { &mut hi };
            self.set(part.0, part.1, s.node)?;
            *part = (Hook::Side(s.node, s.dir), s.next);
        }
        self.set(lo.0, lo.1, PPtr::null())?;
        self.set(hi.0, hi.1, PPtr::null())
    }

    fn remove(&self, key: &K) -> StmResult<Option<V>> {
        let (mut hook, mut cur) = (Hook::Top, self.get(Hook::Top)?);
        while !cur.is_null() {
            let k = self.key(cur)?;
            if k == *key {
                let old = self.value(cur)?;
                let (l, r) = (self.child(cur, Dir::Left)?, self.child(cur, Dir::Right)?);
                self.merge(hook, cur, l, r)?;
                return Ok(Some(old));
            }
            let d = if *key < k { Dir::Left } else { Dir::Right };
            (hook, cur) = (Hook::Side(cur, d), self.child(cur, d)?);
        }
        Ok(None)
    }

    /// Links the merge of `a` and `b` (every key of `a` below every key of
    /// `b`) at `hook`, which holds `was`.
    fn merge(&self, mut hook: Hook<K, V>, mut was: Link<K, V>, mut a: Link<K, V>, mut b: Link<K, V>) -> StmResult<()> {
        let mut ka = if a.is_null() { None } else { Some(self.key(a)?) };
        let mut kb = if b.is_null() { None } else { Some(self.key(b)?) };
        loop {
            let (Some(x), Some(y)) = (ka, kb) else {
                return self.set(hook, was, if a.is_null() { b } else { a });
            };
            if rank(x) > rank(y) {
                // a stays on top; its right side takes the rest.
                self.set(hook, was, a)?;
                hook = Hook::Side(a, Dir::Right);
                a = self.child(a, Dir::Right)?;
                (was, ka) = (a, if a.is_null() { None } else { Some(self.key(a)?) });
            } else {
                self.set(hook, was, b)?;
                hook = Hook::Side(b, Dir::Left);
                b = self.child(b, Dir::Left)?;
                (was, kb) = (b, if b.is_null() { None } else { Some(self.key(b)?) });
            }
        }
    }
}
