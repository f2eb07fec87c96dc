//! Transactional persistent collections: maps and sets for users, and the
//! Yates & Scott / PSTM benchmark structures, all changed inside
//! [`Pool::atomically`](crate::Pool::atomically) transactions.
//!
//! - [`PMap`] and [`PSet`]: a hash array mapped trie (the stm-containers
//!   design the PSTM paper used). Each trie node is its own small
//!   [`PTVar`](super::PTVar) holding a bitmap and an immutable array of
//!   slots; an update rewrites only the deepest node on its key's path, so
//!   updates to different keys touch different variables unless their keys
//!   share that node. Any `Persistent` key and value (keys also `Hash + Eq`).
//! - [`RbTree`]: one transactional cell per node: a node is a `PTVar` cell
//!   object, one lock word over its key, links, value and parent-and-colour
//!   word, 64 bytes with its header, so a lookup reads one line and one
//!   lock word per level (`rbtree.rs`).
//! - [`Treap`]: "transactional fields embedded
//!   in objects": every node is one pool object whose mutable parts (value,
//!   links) are [`PTField`](crate::stm::PTField)s, so a transaction reads
//!   and writes exactly the words the algorithm touches, with no
//!   indirection per variable. Keys and values are plain values of at
//!   most 8 bytes (`u64` in the benchmarks).
//!   The key is a `PTField` too, set when the node is made (before it is linked) and declared
//!   `#[immutable]`, so `field!` gives a read-only
//!   [`ImmutableRef`](super::ImmutableRef): the bounds-checked seqlock read
//!   without a read-set entry, so a lookup's read set holds only the links
//!   and values it followed, and no code can write a key afterwards.
//! - [`HashTable`]: a bucket is a transactional cell (a lock word, then
//!   key, value and next link: the [`PTVar`](super::PTVar) cell format, 32
//!   bytes, two buckets a line) holding its chain's first entry inline;
//!   the rest of the chain are overflow nodes of the same cell format, one
//!   line each. A lookup whose key is the inline one, or whose bucket is
//!   empty, reads one cell in one line; an update locks one word per cell
//!   it changes. Keys and values are plain values of at most 8 bytes.
//!
//! Every collection is a *handle*: `Copy`, [`Persistent`](crate::Persistent)
//! and [`Persist`], one pool pointer. It can sit in a
//! [`PTVar`](super::PTVar), in a `PTField`, in another collection, or in a
//! named root: each type's `root(pool, name)` keeps the handle in
//! `pool.root::<Handle>(name)` (a `PTVar`), creating the collection on first
//! use. The handle itself never changes, so it may be used across
//! transactions once obtained.
//!
//! What they keep true (each file states its structure's invariants, and
//! each type has a `check` that verifies them and returns a [`Shape`]):
//! - every operation is one or more reads and writes of transactional
//!   variables inside the caller's transaction, so a group of operations is
//!   atomic and isolated with everything else the transaction does, user
//!   code never sees a half-done update of another transaction (the STM
//!   validates every read), and `retry`/`or_else` compose with them;
//! - nodes a transaction creates are private to it until it commits (freed
//!   if it aborts); nodes it unlinks are never freed by the collection: they
//!   become garbage for the engine's GC ([`Pool::collect`](crate::Pool::collect)),
//!   which runs only while no transaction is running, so a concurrent
//!   reader that still holds a pointer to an unlinked node reads it safely
//!   (and then fails validation and runs again);
//! - hashes are stable (`hash.rs`): FNV-1a over the bytes a key's `Hash`
//!   impl feeds (the HAMT, the treap's priorities) or a word at a time
//!   (`HashTable`), both finished with the murmur3 avalanche: the same key
//!   hashes the same in every process, so a trie or table finds its keys
//!   after a restart. The key's
//!   `Hash` impl must be deterministic (derived ones and those of integers,
//!   arrays and pool pointers are; never `RandomState`).
//!
//! On a crash: the collections add no protocol of their own and inherit the
//! STM's. A committed transaction is durable (its redo record is replayed
//! if the in-place values did not all reach the media); an uncommitted one
//! leaves no trace but unreachable nodes, which recovery's GC reclaims.
//!
//! Size limits: a transaction writes at most about a thousand variables (the
//! redo record's half-log), so a few hundred structural updates at most per
//! transaction; there is no such limit across transactions.

mod hamt;
pub(crate) mod hashtable;
mod rbtree;
mod treap;

pub use hamt::{PMap, PSet};
pub use hashtable::HashTable;
pub use rbtree::RbTree;
pub use treap::Treap;

use super::{Persist, STx, StmError, StmResult};
use crate::{Error, Pool, Result};

/// What a collection's `check` found: the structure satisfies its
/// invariants, and has this shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// Entries.
    pub len: u64,
    /// Pool objects the collection consists of (all of them reachable from
    /// its handle; after [`Pool::collect`] this many objects are live for
    /// it).
    pub objects: u64,
    /// Longest path from the top, in nodes (0 when empty).
    pub height: u64,
}

/// A plain value a [`PTField`](crate::stm::PTField) can hold: `Persistent`,
/// written as itself (`Persist<P = Self>`), and at most 8 bytes (checked at
/// compile time when a node is made). Implemented for every such type.
pub trait Plain: crate::Persistent + Persist<P = Self> {}

impl<T: crate::Persistent + Persist<P = T>> Plain for T {}

/// `fld!(ptr, Type, field)`: `engram::field!` for this crate's collections.
macro_rules! fld {
    ($ptr:expr, $ty:ty, $field:ident) => {
        $crate::field!($ptr, $ty, $field)
    };
}
pub(crate) use fld;

/// A side of a binary tree node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    Left,
    Right,
}

/// Visits the nodes of the binary tree under `top` in key order (left
/// subtree, node, right subtree), reading children through `child`. Shared
/// by the red-black tree and the treap.
pub(crate) fn in_order<T>(
    top: crate::PPtr<T>,
    mut child: impl FnMut(crate::PPtr<T>, Dir) -> StmResult<crate::PPtr<T>>,
    mut visit: impl FnMut(crate::PPtr<T>) -> StmResult<()>,
) -> StmResult<()> {
    let (mut stack, mut cur) = (Vec::new(), top);
    while !cur.is_null() || !stack.is_empty() {
        while !cur.is_null() {
            stack.push(cur);
            cur = child(cur, Dir::Left)?;
        }
        let n = stack.pop().unwrap_or_default();
        visit(n)?;
        cur = child(n, Dir::Right)?;
    }
    Ok(())
}

impl Dir {
    /// The other side.
    pub(crate) fn flip(self) -> Dir {
        match self {
            Dir::Left => Dir::Right,
            Dir::Right => Dir::Left,
        }
    }
}

/// The error `check` returns for a broken invariant.
pub(crate) fn broken(what: String) -> StmError {
    StmError::Failed(Error::corrupt(what))
}

/// A collection handle: one pool pointer, null (address 0) before the
/// collection is made.
pub(crate) trait Handle: Persist<P = Self> + crate::Persistent {
    /// The handle of the collection at `addr`.
    fn from_addr(addr: u64) -> Self;
    /// The address it points to.
    fn addr(&self) -> u64;
}

/// The collection in root `name`, made by `make` if the root is new or
/// holds the null handle. The root is a `PTVar<H>`.
pub(crate) fn root_handle<H: Handle>(pool: &Pool, name: &str, make: impl Fn(&STx<'_>) -> StmResult<H>) -> Result<H> {
    let var = pool.root::<H>(name, || H::from_addr(0))?;
    pool.atomically(|tx| {
        let h = tx.read(&var)?;
        if h.addr() != 0 {
            return Ok(h);
        }
        let h = make(tx)?;
        tx.write(&var, h)?;
        Ok(h)
    })
}

/// `Clone`, `Copy`, equality and `Debug` by address, and [`Persist`] as a
/// plain value, for a handle type that implements [`Handle`].
macro_rules! handle {
    ($name:ident [$($g:ident),*], $label:literal) => {
        impl<$($g: $crate::Persistent),*> Clone for $name<$($g),*> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<$($g: $crate::Persistent),*> Copy for $name<$($g),*> {}
        impl<$($g: $crate::Persistent),*> PartialEq for $name<$($g),*> {
            fn eq(&self, o: &Self) -> bool {
                $crate::stm::collections::Handle::addr(self) == $crate::stm::collections::Handle::addr(o)
            }
        }
        impl<$($g: $crate::Persistent),*> Eq for $name<$($g),*> {}
        impl<$($g: $crate::Persistent),*> std::fmt::Debug for $name<$($g),*> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!($label, "({:#x})"), $crate::stm::collections::Handle::addr(self))
            }
        }
        impl<$($g: $crate::Persistent),*> $crate::stm::Persist for $name<$($g),*> {
            type P = Self;
            fn persist(&self, _: &mut $crate::stm::CopyCx<'_>) -> $crate::Result<Self> {
                Ok(*self)
            }
            fn plain(&self) -> Option<Self> {
                Some(*self)
            }
        }
    };
}
pub(crate) use handle;
