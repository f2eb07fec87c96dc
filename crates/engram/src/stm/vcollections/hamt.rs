//! Hash array mapped trie on the volatile STM: 32-way nodes indexed by
//! successive 5-bit chunks of `mix(key)` (bijective, so two keys never
//! share a whole hash and the trie is at most 13 levels deep). Each of a
//! node's 32 slots is its own transactional cell (a mutable array, as in
//! Yates & Scott's HAMT): empty, a leaf (`#[immutable]` key, transactional
//! value), or a child node. An insert that meets another key's leaf pushes
//! that leaf one level down into a new node (made privately, then linked
//! by one slot write); a remove empties the leaf's slot. Nodes are not
//! collapsed when they empty: a remove writes one slot, and the trie's
//! shape stays a function of the keys ever inserted.
//!
//! Unlike the persistent `PMap` (bitmap-compressed, copy-on-write nodes),
//! slots are not compressed: the per-slot cells are the point of the
//! TVar-vs-embedded comparison, and a write touches one slot, not a copy of
//! the node. Keeps true (checked by `check`): every leaf lies on its
//! hash's path, no key twice.

use super::{broken, mix, Form, VMap};
use crate::error::Result;
use crate::stm::{atomically, RTx, STx, StmResult, TCell, TStruct};
use std::sync::Arc;

const BITS: u32 = 5;
const WIDTH: usize = 1 << BITS;

/// A key and its value.
#[derive(TStruct)]
pub(crate) struct Leaf<F: Form> {
    #[immutable]
    key: u64,
    value: F::Cell<u64>,
}

/// What a slot holds.
pub(crate) enum Slot<F: Form> {
    Empty,
    Leaf(Arc<Leaf<F>>),
    Node(Arc<Node<F>>),
}

impl<F: Form> Clone for Slot<F> {
    fn clone(&self) -> Self {
        match self {
            Slot::Empty => Slot::Empty,
            Slot::Leaf(l) => Slot::Leaf(l.clone()),
            Slot::Node(n) => Slot::Node(n.clone()),
        }
    }
}

/// A trie node: 32 transactional slots.
pub(crate) struct Node<F: Form> {
    slots: [F::Cell<Slot<F>>; WIDTH],
}

impl<F: Form> Node<F> {
    fn empty() -> Self {
        Node { slots: std::array::from_fn(|_| F::Cell::make(Slot::Empty)) }
    }

    fn slot(self: &Arc<Self>, tx: &STx<'_>, i: usize) -> StmResult<Slot<F>> {
        self.slots[i].get(tx, self)
    }

    fn slot_ro(self: &Arc<Self>, tx: &RTx<'_>, i: usize) -> StmResult<Slot<F>> {
        self.slots[i].get_ro(tx, self)
    }

    fn set_slot(self: &Arc<Self>, tx: &STx<'_>, i: usize, s: Slot<F>) -> StmResult<()> {
        self.slots[i].set(tx, self, s)
    }
}

/// The slot index of hash `h` at `level`.
fn index(h: u64, level: u32) -> usize {
    ((h >> (BITS * level)) as usize) & (WIDTH - 1)
}

/// A key's leaf and where it hangs: the node and the slot.
type Found<F> = (Arc<Node<F>>, usize, Arc<Leaf<F>>);

/// A HAMT from `u64` to `u64` over layout `F`.
pub struct Hamt<F: Form> {
    root: Arc<Node<F>>,
}

impl<F: Form> Default for Hamt<F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F: Form> Hamt<F> {
    /// An empty trie.
    pub fn new() -> Self {
        Hamt { root: Arc::new(Node::empty()) }
    }

    /// The leaf of `key` and where it hangs (node, slot), if present.
    /// (Read-only: a lookup's, or an update's through `RTx::over`.)
    fn find(&self, tx: &RTx<'_>, key: u64) -> StmResult<Option<Found<F>>> {
        let h = mix(key);
        let mut node = self.root.clone();
        for level in 0..13 {
            let i = index(h, level);
            match node.slot_ro(tx, i)? {
                Slot::Empty => return Ok(None),
                Slot::Leaf(l) => return Ok((l.key == key).then_some((node, i, l))),
                Slot::Node(n) => node = n,
            }
        }
        Ok(None)
    }

    fn check_node(&self, tx: &STx<'_>, n: &Arc<Node<F>>, level: u32, path: u64, out: &mut Vec<(u64, u64)>) -> StmResult<()> {
        let mask = if BITS * level >= 64 { u64::MAX } else { (1u64 << (BITS * level)) - 1 };
        for i in 0..WIDTH {
            let here = path | ((i as u64) << (BITS * level));
            match n.slot(tx, i)? {
                Slot::Empty => {}
                Slot::Leaf(l) => {
                    let m = mask | ((WIDTH as u64 - 1) << (BITS * level));
                    if mix(l.key) & m != here & m {
                        return Err(broken(format!("hamt: key {} off its hash's path", l.key)));
                    }
                    out.push((l.key, l.value(tx)?));
                }
                Slot::Node(c) if level < 12 => self.check_node(tx, &c, level + 1, here, out)?,
                Slot::Node(_) => return Err(broken("hamt: deeper than 13 levels".into())),
            }
        }
        Ok(())
    }
}

impl<F: Form> VMap for Hamt<F> {
    fn get(&self, tx: &RTx<'_>, key: u64) -> StmResult<Option<u64>> {
        match self.find(tx, key)? {
            Some((_, _, l)) => l.value.get_ro(tx, &l).map(Some),
            None => Ok(None),
        }
    }

    fn insert(&self, tx: &STx<'_>, key: u64, value: u64) -> StmResult<bool> {
        let h = mix(key);
        let mut node = self.root.clone();
        let mut level = 0;
        loop {
            let i = index(h, level);
            match node.slot(tx, i)? {
                Slot::Empty => {
                    let leaf = Leaf { key, value: F::Cell::make(value) };
                    node.set_slot(tx, i, Slot::Leaf(Arc::new(leaf)))?;
                    return Ok(true);
                }
                Slot::Leaf(l) if l.key == key => {
                    l.set_value(tx, value)?;
                    return Ok(false);
                }
                Slot::Leaf(l) => {
                    // Push the other key one level down, into a new node.
                    let mut n = Node::empty();
                    n.slots[index(mix(l.key), level + 1)] = F::Cell::make(Slot::Leaf(l.clone()));
                    let n = Arc::new(n);
                    node.set_slot(tx, i, Slot::Node(n.clone()))?;
                    node = n;
                }
                Slot::Node(n) => node = n,
            }
            level += 1;
            if level > 12 {
                return Err(broken("hamt: two keys with one hash".into()));
            }
        }
    }

    fn remove(&self, tx: &STx<'_>, key: u64) -> StmResult<bool> {
        match self.find(&RTx::over(tx), key)? {
            Some((node, i, _)) => node.set_slot(tx, i, Slot::Empty).map(|()| true),
            None => Ok(false),
        }
    }

    fn check(&self) -> Result<Vec<(u64, u64)>> {
        atomically(|tx| {
            let mut out = Vec::new();
            self.check_node(tx, &self.root, 0, 0, &mut out)?;
            out.sort_unstable();
            if out.windows(2).any(|w| w[0].0 == w[1].0) {
                return Err(broken("hamt: a key twice".into()));
            }
            Ok(out)
        })
    }
}
