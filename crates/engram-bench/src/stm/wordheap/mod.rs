//! What the persistent-TM peers' structures are written against: a heap
//! of 8-byte words addressed by offset (0 is null), read through [`Mem`]
//! and changed through a transaction's [`Tx::store`]. RomulusLog's
//! reimplementation ([`super::romulus`]) and OneFile-LF's
//! ([`super::onefile`]) each implement the two traits; the allocator
//! ([`alloc`]), the red-black tree ([`rbtree`]) and the chained hash set
//! ([`hashset`]) are written once, generic over them, and monomorphised
//! per peer (no dynamic dispatch on a load or a store). Each peer also
//! implements [`Peer`] (its file and its transactions), through which the
//! benchmark's one map adapter ([`map::WordMap`]) drives either.
//!
//! Keeps true: the structures touch the heap only through these traits,
//! so each peer's isolation and durability rules cover every word they
//! read or write.

pub mod alloc;
pub mod hashset;
pub mod map;
pub mod rbtree;
#[cfg(test)]
pub(crate) mod testing;

use std::path::Path;

use crate::stm::workload::{BenchError, Contents};

/// A fresh file at `path` (overwriting an old one) of `len` bytes.
pub(crate) fn create_file(path: &Path, len: u64) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
    file.set_len(len)?;
    Ok(file)
}

/// The file at `path`, to read and write; its length.
pub(crate) fn open_file(path: &Path) -> std::io::Result<(std::fs::File, u64)> {
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    let len = file.metadata()?.len();
    Ok((file, len))
}

/// Maps `len` bytes of `file`, shared.
pub(crate) fn map_shared(file: &std::fs::File, len: u64) -> std::io::Result<*mut u8> {
    use std::os::fd::AsRawFd;
    // SAFETY: a fresh shared mapping of an open file of at least `len`
    // bytes; nothing else refers to the address range yet.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), len as usize, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, file.as_raw_fd(), 0)
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(p.cast())
}

/// Why a structure operation failed, whatever the peer.
#[derive(Debug, thiserror::Error)]
pub enum HeapError {
    /// The heap has no room for the allocation (its size in bytes).
    #[error("heap of {0} bytes is full")]
    Full(u64),
    /// A structure found its invariants broken.
    #[error("{0}")]
    Broken(String),
}

/// What transactions read: words of the heap.
pub trait Mem {
    /// The word at `off`.
    fn load(&self, off: u64) -> u64;
    /// Bytes of the heap (offsets below it are words of it).
    fn heap_bytes(&self) -> u64;
}

/// An update transaction.
pub trait Tx: Mem {
    /// The peer's error, which a structure's own errors convert into.
    type Error: From<HeapError>;
    /// Stores `v` at `off` as part of the transaction.
    fn store(&mut self, off: u64, v: u64) -> Result<(), Self::Error>;
}

/// A peer as [`map::WordMap`] drives it: a file holding one word heap,
/// and read-only and update transactions on that heap.
pub trait Peer: Sized + Sync {
    /// The peer's name in messages.
    const NAME: &'static str;
    /// Why an operation of the peer failed.
    type Error: From<HeapError> + Into<BenchError> + std::fmt::Debug;
    /// A read-only transaction's view of the heap.
    type View<'a>: Mem
    where
        Self: 'a;
    /// An update transaction.
    type Tx<'a>: Tx<Error = Self::Error>
    where
        Self: 'a;

    /// A fresh file at `path` (overwriting an old one) whose heap of
    /// `heap` bytes is empty.
    fn create(path: &Path, heap: u64) -> Result<Self, Self::Error>;

    /// Opens the file at `path` and recovers it.
    fn open(path: &Path) -> Result<Self, Self::Error>;

    /// Runs `f` as a read-only transaction (perhaps more than once, until
    /// its loads are consistent).
    fn read<R>(&self, f: impl Fn(&Self::View<'_>) -> R) -> Result<R, Self::Error>;

    /// Runs `f` as an update transaction: committed if it returns `Ok`,
    /// nothing of it kept if it returns `Err`. `f` may run more than once;
    /// its last run's result is returned.
    fn update<R>(&self, f: impl FnMut(&mut Self::Tx<'_>) -> Result<R, Self::Error>) -> Result<R, Self::Error>;
}

/// A structure of the benchmark in root word 0 of a heap.
#[derive(Clone, Copy, Debug)]
pub enum Coll {
    /// The red-black tree.
    Tree(rbtree::RbTree),
    /// The chained hash set.
    Hash(hashset::HashSet),
}

impl Coll {
    /// The key's value.
    pub fn get<M: Mem>(&self, m: &M, k: u64) -> Option<u64> {
        match self {
            Coll::Tree(t) => t.get(m, k),
            Coll::Hash(h) => h.get(m, k),
        }
    }

    /// Sets the key's value; the value it replaced.
    pub fn insert<T: Tx>(&self, tx: &mut T, k: u64, v: u64) -> Result<Option<u64>, T::Error> {
        match self {
            Coll::Tree(t) => t.insert(tx, k, v),
            Coll::Hash(h) => h.insert(tx, k, v),
        }
    }

    /// Removes the key; its value.
    pub fn remove<T: Tx>(&self, tx: &mut T, k: u64) -> Result<Option<u64>, T::Error> {
        match self {
            Coll::Tree(t) => t.remove(tx, k),
            Coll::Hash(h) => h.remove(tx, k),
        }
    }

    /// Checks the invariants; what the structure holds.
    pub fn check<M: Mem>(&self, m: &M) -> Result<Contents, HeapError> {
        match self {
            Coll::Tree(t) => t.check(m),
            Coll::Hash(h) => h.check(m),
        }
    }
}
