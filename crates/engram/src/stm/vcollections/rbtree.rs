//! Red-black tree on the volatile STM: CLRS without a sentinel, the same
//! steps as the persistent `stm::collections::RbTree` and the benchmark's
//! `TVarRbTree`, over `Arc` nodes. Parent links are `Weak` (no reference
//! cycles); following one whose node is gone means the snapshot is older
//! than the commit that unlinked it, so the transaction runs again
//! (`StmError::Conflict`). A removed node's key never moves to another
//! node: the successor is relinked in its place, so keys stay immutable.
//!
//! Keeps true (checked by `check`): search order, parent links, no red
//! node with a red child, equal black heights, a black root.

use super::{broken, same, Dir, Form, VMap};
use crate::error::Result;
use crate::stm::{atomically, RTx, STx, StmError, StmResult, TCell, TStruct};
use std::sync::{Arc, Weak};

type Link<F> = Option<Arc<Node<F>>>;
type Up<F> = Option<Weak<Node<F>>>;

/// A red-black tree node.
#[derive(TStruct)]
pub(crate) struct Node<F: Form> {
    #[immutable]
    key: u64,
    value: F::Cell<u64>,
    left: F::Cell<Link<F>>,
    right: F::Cell<Link<F>>,
    parent: F::Cell<Up<F>>,
    red: F::Cell<bool>,
}

/// The root's holder.
#[derive(TStruct)]
struct Head<F: Form> {
    top: F::Cell<Link<F>>,
}

/// A red-black tree from `u64` to `u64` over layout `F`.
pub struct RbTree<F: Form> {
    head: Arc<Head<F>>,
}

impl<F: Form> Default for RbTree<F> {
    fn default() -> Self {
        Self::new()
    }
}

fn is_red<F: Form>(tx: &STx<'_>, n: &Link<F>) -> StmResult<bool> {
    match n {
        Some(n) => n.red(tx),
        None => Ok(false),
    }
}

impl<F: Form> Node<F> {
    fn child(self: &Arc<Self>, tx: &STx<'_>, d: Dir) -> StmResult<Link<F>> {
        match d {
            Dir::Left => self.left(tx),
            Dir::Right => self.right(tx),
        }
    }

    fn set_child(self: &Arc<Self>, tx: &STx<'_>, d: Dir, c: Link<F>) -> StmResult<()> {
        match d {
            Dir::Left => self.set_left(tx, c),
            Dir::Right => self.set_right(tx, c),
        }
    }

    fn up(self: &Arc<Self>, tx: &STx<'_>) -> StmResult<Link<F>> {
        match self.parent(tx)? {
            None => Ok(None),
            Some(w) => w.upgrade().map(Some).ok_or(StmError::Conflict),
        }
    }

    fn set_up(self: &Arc<Self>, tx: &STx<'_>, p: &Link<F>) -> StmResult<()> {
        self.set_parent(tx, p.as_ref().map(Arc::downgrade))
    }

    /// The side of `self` where child `n` hangs.
    fn side(self: &Arc<Self>, tx: &STx<'_>, n: &Link<F>) -> StmResult<Dir> {
        Ok(if same(&self.left(tx)?, n) { Dir::Left } else { Dir::Right })
    }
}

impl<F: Form> RbTree<F> {
    /// An empty tree.
    pub fn new() -> Self {
        RbTree { head: Arc::new(Head { top: F::Cell::make(None) }) }
    }

    /// Makes `new` take `old`'s place under `parent` (or at the top).
    fn relink(&self, tx: &STx<'_>, parent: &Link<F>, old: &Link<F>, new: Link<F>) -> StmResult<()> {
        match parent {
            None => self.head.set_top(tx, new),
            Some(p) => {
                let d = p.side(tx, old)?;
                p.set_child(tx, d, new)
            }
        }
    }

    /// Rotates `x` down towards `d`: its `d.flip()` child takes its place.
    fn rotate(&self, tx: &STx<'_>, x: &Arc<Node<F>>, d: Dir) -> StmResult<()> {
        let y = x.child(tx, d.flip())?.ok_or_else(|| broken("rotation without a child".into()))?;
        let b = y.child(tx, d)?;
        x.set_child(tx, d.flip(), b.clone())?;
        if let Some(b) = &b {
            b.set_up(tx, &Some(x.clone()))?;
        }
        let p = x.up(tx)?;
        y.set_up(tx, &p)?;
        self.relink(tx, &p, &Some(x.clone()), Some(y.clone()))?;
        y.set_child(tx, d, Some(x.clone()))?;
        x.set_up(tx, &Some(y))
    }

    /// The node of `key` (read-only: a lookup's, or an update's through
    /// `RTx::over`).
    fn find(&self, tx: &RTx<'_>, key: u64) -> StmResult<Link<F>> {
        let mut cur = self.head.top.get_ro(tx, &self.head)?;
        while let Some(n) = cur {
            if n.key == key {
                return Ok(Some(n));
            }
            cur = match Dir::of(key, n.key) {
                Dir::Left => n.left.get_ro(tx, &n)?,
                Dir::Right => n.right.get_ro(tx, &n)?,
            };
        }
        Ok(None)
    }

    fn fix_insert(&self, tx: &STx<'_>, mut z: Arc<Node<F>>) -> StmResult<()> {
        loop {
            let Some(mut p) = z.up(tx)? else { break };
            if !p.red(tx)? {
                break;
            }
            let g = p.up(tx)?.ok_or_else(|| broken("a red node at the top".into()))?;
            let d = g.side(tx, &Some(p.clone()))?;
            let uncle = g.child(tx, d.flip())?;
            let red_uncle = is_red::<F>(tx, &uncle)?;
            if let Some(u) = uncle.as_ref().filter(|_| red_uncle) {
                p.set_red(tx, false)?;
                u.set_red(tx, false)?;
                g.set_red(tx, true)?;
                z = g;
                continue;
            }
            if same(&p.child(tx, d.flip())?, &Some(z.clone())) {
                self.rotate(tx, &p, d)?;
                z = p;
                p = z.up(tx)?.ok_or_else(|| broken("rotation lost a parent".into()))?;
            }
            p.set_red(tx, false)?;
            g.set_red(tx, true)?;
            self.rotate(tx, &g, d.flip())?;
            break;
        }
        if let Some(top) = self.head.top(tx)? {
            if top.red(tx)? {
                top.set_red(tx, false)?;
            }
        }
        Ok(())
    }

    /// Makes `v` take `u`'s place under `up`.
    fn replace(&self, tx: &STx<'_>, u: &Arc<Node<F>>, up: &Link<F>, v: &Link<F>) -> StmResult<()> {
        self.relink(tx, up, &Some(u.clone()), v.clone())?;
        if let Some(v) = v {
            v.set_up(tx, up)?;
        }
        Ok(())
    }

    fn unlink(&self, tx: &STx<'_>, z: &Arc<Node<F>>) -> StmResult<()> {
        let (zl, zr) = (z.left(tx)?, z.right(tx)?);
        let (x, xp, removed_black);
        if zl.is_none() || zr.is_none() {
            x = if zl.is_none() { zr } else { zl };
            xp = z.up(tx)?;
            removed_black = !z.red(tx)?;
            self.replace(tx, z, &xp, &x)?;
        } else {
            let zr = zr.ok_or_else(|| broken("no right child".into()))?;
            let mut y = zr.clone();
            while let Some(l) = y.left(tx)? {
                y = l;
            }
            removed_black = !y.red(tx)?;
            x = y.right(tx)?;
            if Arc::ptr_eq(&y, &zr) {
                xp = Some(y.clone());
            } else {
                xp = y.up(tx)?;
                self.replace(tx, &y, &xp, &x)?;
                y.set_right(tx, Some(zr.clone()))?;
                zr.set_up(tx, &Some(y.clone()))?;
            }
            let zp = z.up(tx)?;
            self.replace(tx, z, &zp, &Some(y.clone()))?;
            y.set_left(tx, zl.clone())?;
            if let Some(zl) = &zl {
                zl.set_up(tx, &Some(y.clone()))?;
            }
            y.set_red(tx, z.red(tx)?)?;
        }
        if removed_black {
            self.fix_remove(tx, x, xp)?;
        }
        Ok(())
    }

    fn fix_remove(&self, tx: &STx<'_>, mut x: Link<F>, mut xp: Link<F>) -> StmResult<()> {
        while let Some(p) = xp.clone() {
            if is_red::<F>(tx, &x)? {
                break;
            }
            let d = p.side(tx, &x)?;
            let mut w = p.child(tx, d.flip())?.ok_or_else(|| broken("a black node without a sibling".into()))?;
            if w.red(tx)? {
                w.set_red(tx, false)?;
                p.set_red(tx, true)?;
                self.rotate(tx, &p, d)?;
                w = p.child(tx, d.flip())?.ok_or_else(|| broken("no sibling after rotation".into()))?;
            }
            let (near, far) = (w.child(tx, d)?, w.child(tx, d.flip())?);
            if !is_red::<F>(tx, &near)? && !is_red::<F>(tx, &far)? {
                w.set_red(tx, true)?;
                xp = p.up(tx)?;
                x = Some(p);
                continue;
            }
            if !is_red::<F>(tx, &far)? {
                if let Some(near) = &near {
                    near.set_red(tx, false)?;
                }
                w.set_red(tx, true)?;
                self.rotate(tx, &w, d.flip())?;
                w = p.child(tx, d.flip())?.ok_or_else(|| broken("no sibling after rotation".into()))?;
            }
            w.set_red(tx, p.red(tx)?)?;
            p.set_red(tx, false)?;
            if let Some(far) = w.child(tx, d.flip())? {
                far.set_red(tx, false)?;
            }
            self.rotate(tx, &p, d)?;
            return Ok(());
        }
        if let Some(x) = &x {
            if x.red(tx)? {
                x.set_red(tx, false)?;
            }
        }
        Ok(())
    }

    /// Checks the subtree at `n`; its black height.
    fn check_node(
        &self,
        tx: &STx<'_>,
        n: &Link<F>,
        parent: &Link<F>,
        bounds: (Option<u64>, Option<u64>),
        out: &mut Vec<(u64, u64)>,
    ) -> StmResult<u64> {
        let Some(n) = n else { return Ok(1) };
        let ordered = bounds.0.is_none_or(|lo| lo < n.key) && bounds.1.is_none_or(|hi| n.key < hi);
        if !ordered || !same(&n.up(tx)?, parent) {
            return Err(broken(format!("rb node {}: out of order or wrong parent", n.key)));
        }
        let (l, r, red) = (n.left(tx)?, n.right(tx)?, n.red(tx)?);
        if red && (is_red::<F>(tx, &l)? || is_red::<F>(tx, &r)?) {
            return Err(broken(format!("rb node {}: a red node with a red child", n.key)));
        }
        let me = Some(n.clone());
        let bl = self.check_node(tx, &l, &me, (bounds.0, Some(n.key)), out)?;
        out.push((n.key, n.value(tx)?));
        let br = self.check_node(tx, &r, &me, (Some(n.key), bounds.1), out)?;
        if bl != br {
            return Err(broken(format!("rb node {}: black heights {bl} and {br}", n.key)));
        }
        Ok(bl + u64::from(!red))
    }
}

impl<F: Form> VMap for RbTree<F> {
    fn get(&self, tx: &RTx<'_>, key: u64) -> StmResult<Option<u64>> {
        match self.find(tx, key)? {
            Some(n) => n.value.get_ro(tx, &n).map(Some),
            None => Ok(None),
        }
    }

    fn insert(&self, tx: &STx<'_>, key: u64, value: u64) -> StmResult<bool> {
        let (mut parent, mut cur, mut d) = (None, self.head.top(tx)?, Dir::Left);
        while let Some(n) = cur {
            if n.key == key {
                n.set_value(tx, value)?;
                return Ok(false);
            }
            d = Dir::of(key, n.key);
            cur = n.child(tx, d)?;
            parent = Some(n);
        }
        let up = parent.as_ref().map(Arc::downgrade);
        let z = Arc::new(Node {
            key,
            value: F::Cell::make(value),
            left: F::Cell::make(None),
            right: F::Cell::make(None),
            parent: F::Cell::make(up),
            red: F::Cell::make(true),
        });
        match &parent {
            None => self.head.set_top(tx, Some(z.clone()))?,
            Some(p) => p.set_child(tx, d, Some(z.clone()))?,
        }
        self.fix_insert(tx, z)?;
        Ok(true)
    }

    fn remove(&self, tx: &STx<'_>, key: u64) -> StmResult<bool> {
        match self.find(&RTx::over(tx), key)? {
            Some(z) => self.unlink(tx, &z).map(|()| true),
            None => Ok(false),
        }
    }

    fn check(&self) -> Result<Vec<(u64, u64)>> {
        atomically(|tx| {
            let top = self.head.top(tx)?;
            if is_red::<F>(tx, &top)? {
                return Err(broken("rb tree: the top is red".into()));
            }
            let mut out = Vec::new();
            self.check_node(tx, &top, &None, (None, None), &mut out)?;
            Ok(out)
        })
    }
}
