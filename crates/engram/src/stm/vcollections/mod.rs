//! The Yates & Scott benchmark structures on the *volatile* STM: a
//! red-black tree ([`RbTree`]), a hash array mapped trie ([`Hamt`]) and a
//! treap ([`Treap`]), maps from `u64` to `u64`, each written once and
//! instantiated in two layouts ([`Form`]):
//!
//! - [`Boxed`]: one [`TVar`] per mutable node field (the paper's baseline:
//!   every field its own heap object, reached through a pointer);
//! - [`Embedded`]: the fields are [`TField`]s inside the node (the paper's
//!   mutable constructor fields), one allocation per node.
//!
//! Nodes are `#[derive(TStruct)]` structs shared as `Arc`s; keys (and the
//! treap's priorities) are `#[immutable]`: plain values read with no
//! read-set entry. The algorithms follow the persistent ones in
//! `stm::collections` (CLRS red-black tree with parent links, held here as
//! `Weak` so nodes never form reference cycles; treap by rotations; a
//! 32-way trie over a 64-bit mix of the key).
//!
//! What they keep true: every operation is reads and writes in the
//! caller's transaction (so it composes, and user code never sees another
//! transaction's half-done update); each type's `check` verifies its
//! shape (order, colours and black heights; heap order; every leaf on its
//! hash's path) and returns the contents. Lookups (`get`) run in a
//! read-only transaction ([`crate::stm::atomically_read`]: no read set;
//! in an update, through [`crate::stm::RTx::over`]). Unlinked nodes are freed when the
//! last transaction holding them ends (`Arc`), so a zombie never reads
//! freed memory. A parent link whose node is gone (a snapshot older than
//! the commit that unlinked it) makes the transaction run again.
//! Volatile: nothing survives a crash.
//!
//! ```
//! use engram::stm::{atomically, atomically_read};
//! use engram::stm::vcollections::{Embedded, RbTree, VMap};
//!
//! let t = RbTree::<Embedded>::new();
//! atomically(|tx| {
//!     t.insert(tx, 5, 50)?;
//!     t.insert(tx, 3, 30)?;
//!     t.remove(tx, 5)
//! })
//! .unwrap();
//! assert_eq!(atomically_read(|tx| t.get(tx, 3)).unwrap(), Some(30));
//! assert_eq!(t.check().unwrap(), vec![(3, 30)]);
//! ```

mod hamt;
mod rbtree;
#[cfg(test)]
mod tests;
mod treap;

pub use hamt::Hamt;
pub use rbtree::RbTree;
pub use treap::Treap;

use super::{RTx, STx, StmError, StmResult, TCell, TField, TVar};
use crate::error::{Error, Result};
use std::sync::Arc;

/// How a node holds its mutable fields.
pub trait Form: Send + Sync + 'static {
    /// The cell of one field.
    type Cell<T: Send + Sync + 'static>: TCell<Value = T>;
    /// `tvar` or `embedded` (benchmark reports).
    const NAME: &'static str;
}

/// One [`TVar`] per field.
pub struct Boxed;
impl Form for Boxed {
    type Cell<T: Send + Sync + 'static> = TVar<T>;
    const NAME: &'static str = "tvar";
}

/// Fields embedded in the node ([`TField`]).
pub struct Embedded;
impl Form for Embedded {
    type Cell<T: Send + Sync + 'static> = TField<T>;
    const NAME: &'static str = "embedded";
}

/// A transactional map from `u64` to `u64` (the benchmark's interface).
pub trait VMap: Send + Sync {
    /// The key's value (read-only: `stm::atomically_read`, or an update's
    /// `RTx::over(tx)`).
    fn get(&self, tx: &RTx<'_>, key: u64) -> StmResult<Option<u64>>;
    /// Sets the key's value; whether the key is new.
    fn insert(&self, tx: &STx<'_>, key: u64, value: u64) -> StmResult<bool>;
    /// Removes the key; whether it was there.
    fn remove(&self, tx: &STx<'_>, key: u64) -> StmResult<bool>;
    /// Checks the shape (its own transaction) and returns the contents in
    /// key order; a broken shape is `Error::Corrupt`.
    fn check(&self) -> Result<Vec<(u64, u64)>>;
}

/// Left or right.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Dir {
    Left,
    Right,
}

impl Dir {
    pub(crate) fn flip(self) -> Dir {
        match self {
            Dir::Left => Dir::Right,
            Dir::Right => Dir::Left,
        }
    }
    /// The side of a node with key `node_key` where `key` belongs.
    pub(crate) fn of(key: u64, node_key: u64) -> Dir {
        if key < node_key {
            Dir::Left
        } else {
            Dir::Right
        }
    }
}

/// Whether two links point to the same node.
pub(crate) fn same<N>(a: &Option<Arc<N>>, b: &Option<Arc<N>>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => Arc::ptr_eq(x, y),
        (None, None) => true,
        _ => false,
    }
}

/// A bijective 64-bit mix (splitmix64's finaliser): distinct keys get
/// distinct hashes and priorities.
pub(crate) fn mix(k: u64) -> u64 {
    let mut z = k.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A shape error found by a `check`.
pub(crate) fn broken(what: String) -> StmError {
    StmError::Failed(Error::Corrupt { what })
}
