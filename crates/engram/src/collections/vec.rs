//! [`PVec`]: a growable vector in the pool.
//!
//! What it keeps true: the handle points at a `VecHeader { len, buf }`;
//! elements `0..len` of `buf` are the vector, the slots after them hold no
//! pool pointer, and `buf` is null exactly while the capacity is 0. Growth
//! doubles the capacity inside the region that pushes: a new array is
//! allocated, the elements are copied, and the old array is freed when the
//! region commits (see `raw.rs`).
//!
//! On a crash or rollback: the header and every element written are
//! undo-logged, so the vector is exactly as it was before the region, still
//! pointing at its old buffer; a buffer allocated by the region is freed by
//! the rollback, or is garbage for recovery's GC after a crash.

use super::handle_impls;
use super::raw::{self, Header};
use crate::{PArray, PPtr, Persistent, Result, Tx};

/// The pool object a [`PVec`] points to.
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::VecHeader")]
#[repr(C)]
struct VecHeader<T> {
    /// Elements in use.
    len: u64,
    /// The elements; its length is the capacity. Null when the capacity is 0.
    buf: PArray<T>,
}

impl<T: Persistent> Header<T> for VecHeader<T> {
    fn parts(&self) -> (u64, PArray<T>) {
        (self.len, self.buf)
    }
    fn from_parts(len: u64, buf: PArray<T>) -> Self {
        VecHeader { len, buf }
    }
}

/// A growable vector of `T` in a pool.
///
/// A `PVec` is a handle: one pool pointer, `Copy` and [`Persistent`], so it
/// can be stored in other persistent structs, in collections and in roots.
/// Every method works inside a region and takes the vector's lock until the
/// region ends. Indices and lengths are `u64`, as in the engine's arrays.
/// `free` releases the vector's own storage, not what its elements point to.
///
/// # Example
/// ```
/// use engram::{collections::PVec, CreateOptions, Durability, Pool};
/// # let path = std::env::temp_dir().join(format!("engram-doc-pvec-{}.pool", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let pool = Pool::create(&path, CreateOptions::new("doc").durability(Durability::Process))?;
/// pool.txn(|tx| {
///     let v = PVec::<u64>::new(tx)?;
///     v.extend_from_slice(tx, &[1, 2, 3])?;
///     v.push(tx, 4)?;
///     v.set_root(tx, "numbers")
/// })?;
/// let sum = pool.txn(|tx| {
///     let v = PVec::<u64>::from_root(tx, "numbers")?.expect("root exists");
///     assert_eq!(v.pop(tx)?, Some(4));
///     Ok::<_, engram::Error>(v.to_vec(tx)?.iter().sum::<u64>())
/// })?;
/// assert_eq!(sum, 6);
/// # pool.close()?; std::fs::remove_file(&path).unwrap();
/// # Ok::<(), engram::Error>(())
/// ```
#[repr(transparent)]
pub struct PVec<T>(PPtr<VecHeader<T>>);

handle_impls!(PVec[T] "engram::PVec");

impl<T: Persistent> PVec<T> {
    /// An empty vector (no buffer until the first push).
    pub fn new(tx: &Tx<'_>) -> Result<Self> {
        Self::with_capacity(tx, 0)
    }

    /// An empty vector with room for `n` elements.
    pub fn with_capacity(tx: &Tx<'_>, n: u64) -> Result<Self> {
        raw::alloc(tx, n).map(PVec)
    }

    /// Number of elements.
    pub fn len(self, tx: &Tx<'_>) -> Result<u64> {
        raw::len(tx, self.0)
    }

    /// Whether the vector has no elements.
    pub fn is_empty(self, tx: &Tx<'_>) -> Result<bool> {
        Ok(self.len(tx)? == 0)
    }

    /// Number of elements the buffer holds without growing.
    pub fn capacity(self, tx: &Tx<'_>) -> Result<u64> {
        let (_, buf) = raw::open(tx, self.0)?;
        raw::capacity(tx, buf)
    }

    /// Appends `v`, doubling the buffer if it is full.
    pub fn push(self, tx: &Tx<'_>, v: T) -> Result<()> {
        raw::extend(tx, self.0, &[v])
    }

    /// Appends every element of `src`.
    pub fn extend_from_slice(self, tx: &Tx<'_>, src: &[T]) -> Result<()> {
        raw::extend(tx, self.0, src)
    }

    /// Removes and returns the last element, or `None` if empty.
    pub fn pop(self, tx: &Tx<'_>) -> Result<Option<T>> {
        raw::pop(tx, self.0)
    }

    /// Element `i`, or `None` if `i >= len`.
    pub fn get(self, tx: &Tx<'_>, i: u64) -> Result<Option<T>> {
        raw::get(tx, self.0, i)
    }

    /// Replaces element `i` with `v` and returns the old element.
    /// Fails with [`crate::Error::OutOfBounds`] if `i >= len`.
    pub fn set(self, tx: &Tx<'_>, i: u64, v: T) -> Result<T> {
        raw::set(tx, self.0, i, v)
    }

    /// Copies the elements out of the pool.
    pub fn to_vec(self, tx: &Tx<'_>) -> Result<Vec<T>> {
        raw::to_vec(tx, self.0)
    }

    /// Keeps the first `n` elements (no-op if there are not more); the
    /// capacity stays.
    pub fn truncate(self, tx: &Tx<'_>, n: u64) -> Result<()> {
        raw::truncate(tx, self.0, n)
    }

    /// Removes every element; the capacity stays.
    pub fn clear(self, tx: &Tx<'_>) -> Result<()> {
        raw::truncate(tx, self.0, 0)
    }

    /// Frees the vector's header and buffer when the region commits. The
    /// handle (and every copy of it) must not be used afterwards.
    pub fn free(self, tx: &Tx<'_>) -> Result<()> {
        raw::free(tx, self.0)
    }

    /// Points root `name` at this vector.
    pub fn set_root(self, tx: &Tx<'_>, name: &str) -> Result<()> {
        tx.set_root(name, self.0)
    }

    /// The vector root `name` points to, if the root exists. Fails with
    /// [`crate::Error::RootType`] if it holds something else.
    pub fn from_root(tx: &Tx<'_>, name: &str) -> Result<Option<Self>> {
        Ok(tx.root::<VecHeader<T>>(name)?.map(PVec))
    }
}
