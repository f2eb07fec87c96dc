//! Treap on the volatile STM: a binary search tree by key that is a
//! max-heap by priority (`mix(key)`, fixed when the node is made, so the
//! shape is a function of the key set). Insert descends, links a leaf and
//! rotates it up past lower priorities; remove replaces the node by the
//! merge of its children. A link is written only where it changes, so a
//! transaction writes only the nodes the algorithm restructures.
//!
//! Keeps true: search order, heap order (checked by [`Treap`]'s `check`).

use super::{broken, mix, same, Dir, Form, VMap};
use crate::error::Result;
use crate::stm::{atomically, RTx, STx, StmResult, TCell, TStruct};
use std::sync::Arc;

type Link<F> = Option<Arc<Node<F>>>;

/// A treap node: key and priority plain, value and links transactional.
#[derive(TStruct)]
pub(crate) struct Node<F: Form> {
    #[immutable]
    key: u64,
    #[immutable]
    prio: u64,
    value: F::Cell<u64>,
    left: F::Cell<Link<F>>,
    right: F::Cell<Link<F>>,
}

/// The root's holder.
#[derive(TStruct)]
struct Head<F: Form> {
    top: F::Cell<Link<F>>,
}

/// A treap from `u64` to `u64` over layout `F`.
pub struct Treap<F: Form> {
    head: Arc<Head<F>>,
}

impl<F: Form> Default for Treap<F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F: Form> Node<F> {
    fn child(self: &Arc<Self>, tx: &STx<'_>, d: Dir) -> StmResult<Link<F>> {
        match d {
            Dir::Left => self.left(tx),
            Dir::Right => self.right(tx),
        }
    }

    /// The `d` link, in a read-only transaction.
    fn child_ro(self: &Arc<Self>, tx: &RTx<'_>, d: Dir) -> StmResult<Link<F>> {
        match d {
            Dir::Left => self.left.get_ro(tx, self),
            Dir::Right => self.right.get_ro(tx, self),
        }
    }

    /// Writes the `d` link if it changes.
    fn set_child(self: &Arc<Self>, tx: &STx<'_>, d: Dir, old: &Link<F>, new: Link<F>) -> StmResult<()> {
        if same(old, &new) {
            return Ok(());
        }
        match d {
            Dir::Left => self.set_left(tx, new),
            Dir::Right => self.set_right(tx, new),
        }
    }
}

impl<F: Form> Treap<F> {
    /// An empty treap.
    pub fn new() -> Self {
        Treap { head: Arc::new(Head { top: F::Cell::make(None) }) }
    }

    /// Inserts into the subtree at `n`; its new root and whether the key
    /// is new.
    fn ins(&self, tx: &STx<'_>, n: Link<F>, key: u64, value: u64) -> StmResult<(Link<F>, bool)> {
        let Some(n) = n else {
            let leaf = Node { key, prio: mix(key), value: F::Cell::make(value), left: F::Cell::make(None), right: F::Cell::make(None) };
            return Ok((Some(Arc::new(leaf)), true));
        };
        if key == n.key {
            n.set_value(tx, value)?;
            return Ok((Some(n), false));
        }
        let d = Dir::of(key, n.key);
        let c = n.child(tx, d)?;
        let (nc, new) = self.ins(tx, c.clone(), key, value)?;
        match &nc {
            Some(x) if x.prio > n.prio => {
                // Rotate x above n: n takes x's inner subtree.
                let inner = x.child(tx, d.flip())?;
                n.set_child(tx, d, &c, inner.clone())?;
                x.set_child(tx, d.flip(), &inner, Some(n))?;
                Ok((nc, new))
            }
            _ => {
                n.set_child(tx, d, &c, nc)?;
                Ok((Some(n), new))
            }
        }
    }

    /// Removes from the subtree at `n`; its new root and whether the key
    /// was there.
    fn del(&self, tx: &STx<'_>, n: Link<F>, key: u64) -> StmResult<(Link<F>, bool)> {
        let Some(n) = n else { return Ok((None, false)) };
        if key == n.key {
            let (l, r) = (n.left(tx)?, n.right(tx)?);
            return Ok((self.merge(tx, l, r)?, true));
        }
        let d = Dir::of(key, n.key);
        let c = n.child(tx, d)?;
        let (nc, found) = self.del(tx, c.clone(), key)?;
        n.set_child(tx, d, &c, nc)?;
        Ok((Some(n), found))
    }

    /// Joins two subtrees whose keys are all smaller in `l` than in `r`.
    fn merge(&self, tx: &STx<'_>, l: Link<F>, r: Link<F>) -> StmResult<Link<F>> {
        let (a, b) = match (l, r) {
            (None, r) => return Ok(r),
            (l, None) => return Ok(l),
            (Some(a), Some(b)) => (a, b),
        };
        if a.prio > b.prio {
            let ar = a.right(tx)?;
            let m = self.merge(tx, ar.clone(), Some(b))?;
            a.set_child(tx, Dir::Right, &ar, m)?;
            Ok(Some(a))
        } else {
            let bl = b.left(tx)?;
            let m = self.merge(tx, Some(a), bl.clone())?;
            b.set_child(tx, Dir::Left, &bl, m)?;
            Ok(Some(b))
        }
    }

    fn set_top(&self, tx: &STx<'_>, old: &Link<F>, new: Link<F>) -> StmResult<()> {
        if same(old, &new) {
            return Ok(());
        }
        self.head.set_top(tx, new)
    }

    /// Checks the subtree at `n` within `(lo, hi)` under priority `cap`.
    fn check_node(
        &self,
        tx: &STx<'_>,
        n: &Link<F>,
        lo: Option<u64>,
        hi: Option<u64>,
        cap: u64,
        out: &mut Vec<(u64, u64)>,
    ) -> StmResult<()> {
        let Some(n) = n else { return Ok(()) };
        let ordered = lo.is_none_or(|lo| lo < n.key) && hi.is_none_or(|hi| n.key < hi);
        if !ordered || n.prio > cap || n.prio != mix(n.key) {
            return Err(broken(format!("treap node {}: out of order or above its parent's priority", n.key)));
        }
        self.check_node(tx, &n.left(tx)?, lo, Some(n.key), n.prio, out)?;
        out.push((n.key, n.value(tx)?));
        self.check_node(tx, &n.right(tx)?, Some(n.key), hi, n.prio, out)
    }
}

impl<F: Form> VMap for Treap<F> {
    fn get(&self, tx: &RTx<'_>, key: u64) -> StmResult<Option<u64>> {
        let mut cur = self.head.top.get_ro(tx, &self.head)?;
        while let Some(n) = cur {
            if n.key == key {
                return n.value.get_ro(tx, &n).map(Some);
            }
            cur = n.child_ro(tx, Dir::of(key, n.key))?;
        }
        Ok(None)
    }

    fn insert(&self, tx: &STx<'_>, key: u64, value: u64) -> StmResult<bool> {
        let top = self.head.top(tx)?;
        let (nt, new) = self.ins(tx, top.clone(), key, value)?;
        self.set_top(tx, &top, nt)?;
        Ok(new)
    }

    fn remove(&self, tx: &STx<'_>, key: u64) -> StmResult<bool> {
        let top = self.head.top(tx)?;
        let (nt, found) = self.del(tx, top.clone(), key)?;
        self.set_top(tx, &top, nt)?;
        Ok(found)
    }

    fn check(&self) -> Result<Vec<(u64, u64)>> {
        atomically(|tx| {
            let mut out = Vec::new();
            self.check_node(tx, &self.head.top(tx)?, None, None, u64::MAX, &mut out)?;
            Ok(out)
        })
    }
}
