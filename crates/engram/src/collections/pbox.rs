//! [`PBox`]: an owning typed pointer to one value in the pool.
//!
//! What it keeps true: a non-null `PBox<T>` points at one pool object of
//! type `T`, which it owns: [`PBox::free`] frees it. Reads and writes go
//! through the region and take the object's lock until the region ends.
//!
//! On a crash or rollback: a `set` or `update` is undo-logged, so the value
//! is what it was before the region; a box allocated by the region is freed
//! by the rollback (or is garbage after a crash); a `free` happens only if
//! the region commits.

use super::handle_impls;
use crate::{PPtr, Persistent, Result, Tx};

/// An owning pointer to one `T` in a pool.
///
/// Unlike `Box`, a `PBox` is `Copy` (it must be, to be [`Persistent`] and
/// sit in other pool objects): ownership is a convention — one place frees
/// it, and no copy is used after that. Otherwise the GC reclaims it once it
/// is unreachable.
///
/// # Example
/// ```
/// use engram::{collections::PBox, CreateOptions, Durability, Pool};
/// # let path = std::env::temp_dir().join(format!("engram-doc-pbox-{}.pool", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let pool = Pool::create(&path, CreateOptions::new("doc").durability(Durability::Process))?;
/// let counter = pool.txn(|tx| {
///     let b = PBox::new(tx, 41u64)?;
///     b.set_root(tx, "counter")?;
///     Ok::<_, engram::Error>(b)
/// })?;
/// let n = pool.txn(|tx| {
///     counter.update(tx, |v| *v += 1)?;
///     counter.get(tx)
/// })?;
/// assert_eq!(n, 42);
/// # pool.close()?; std::fs::remove_file(&path).unwrap();
/// # Ok::<(), engram::Error>(())
/// ```
#[repr(transparent)]
pub struct PBox<T>(PPtr<T>);

handle_impls!(PBox[T] "engram::PBox");

impl<T: Persistent> PBox<T> {
    /// Allocates a `T` holding `v`.
    pub fn new(tx: &Tx<'_>, v: T) -> Result<Self> {
        tx.alloc(v).map(PBox)
    }

    /// A copy of the value.
    pub fn get(self, tx: &Tx<'_>) -> Result<T> {
        tx.lock_ptr(self.0)?;
        tx.read(self.0)
    }

    /// Replaces the value with `v`, returning the old one.
    pub fn set(self, tx: &Tx<'_>, v: T) -> Result<T> {
        tx.lock_ptr(self.0)?;
        let old = tx.read(self.0)?;
        tx.write(self.0, v)?;
        Ok(old)
    }

    /// Changes the value in place with `f` and returns what `f` returns.
    pub fn update<R>(self, tx: &Tx<'_>, f: impl FnOnce(&mut T) -> R) -> Result<R> {
        tx.lock_ptr(self.0)?;
        tx.update(self.0, f)
    }

    /// Frees the value when the region commits. The box (and every copy of
    /// it) must not be used afterwards.
    pub fn free(self, tx: &Tx<'_>) -> Result<()> {
        tx.lock_ptr(self.0)?;
        tx.free(self.0)
    }

    /// The pointer inside.
    pub fn as_ptr(self) -> PPtr<T> {
        self.0
    }

    /// Takes ownership of the object `p` points to. The pointer is checked
    /// when the box is used.
    pub fn from_ptr(p: PPtr<T>) -> Self {
        PBox(p)
    }

    /// Points root `name` at the boxed value.
    pub fn set_root(self, tx: &Tx<'_>, name: &str) -> Result<()> {
        tx.set_root(name, self.0)
    }

    /// The box root `name` points to, if the root exists. Fails with
    /// [`crate::Error::RootType`] if it holds another type. Roots set with
    /// [`Tx::set_root`] on a `PPtr<T>` are read back the same way.
    pub fn from_root(tx: &Tx<'_>, name: &str) -> Result<Option<Self>> {
        Ok(tx.root::<T>(name)?.map(PBox))
    }
}
