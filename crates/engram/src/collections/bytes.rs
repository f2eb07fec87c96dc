//! [`PBytes`]: a growable byte string in the pool.
//!
//! What it keeps true: the handle points at a `BytesHeader { len, buf }`;
//! bytes `0..len` of the `u8` array `buf` are the contents, and `buf` is null
//! exactly while the capacity is 0. It is the buffer of `raw.rs` with bytes
//! for elements: appending past the capacity doubles it inside the region,
//! freeing the old array only when the region commits.
//!
//! On a crash or rollback: header and bytes are undo-logged, so the contents
//! are exactly those before the region, in the old buffer.

use super::handle_impls;
use super::raw::{self, Header};
use crate::{PArray, PPtr, Persistent, Result, Tx};

/// The pool object a [`PBytes`] points to.
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::BytesHeader")]
#[repr(C)]
struct BytesHeader {
    /// Bytes in use.
    len: u64,
    /// The bytes; its length is the capacity. Null when the capacity is 0.
    buf: PArray<u8>,
}

impl Header<u8> for BytesHeader {
    fn parts(&self) -> (u64, PArray<u8>) {
        (self.len, self.buf)
    }
    fn from_parts(len: u64, buf: PArray<u8>) -> Self {
        BytesHeader { len, buf }
    }
}

/// A growable byte string in a pool.
///
/// A handle (one pool pointer, `Copy` and [`Persistent`]) like
/// [`super::PVec`]; every method works inside a region and takes the
/// string's lock until the region ends.
///
/// # Example
/// ```
/// use engram::{collections::PBytes, CreateOptions, Durability, Pool};
/// # let path = std::env::temp_dir().join(format!("engram-doc-pbytes-{}.pool", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let pool = Pool::create(&path, CreateOptions::new("doc").durability(Durability::Process))?;
/// let b = pool.txn(|tx| {
///     let b = PBytes::new(tx, b"\x00\x01")?;
///     b.extend_from_slice(tx, &[0xff; 3])?;
///     b.set_root(tx, "blob")?;
///     Ok::<_, engram::Error>(b)
/// })?;
/// assert_eq!(pool.txn(|tx| b.get(tx))?, vec![0, 1, 0xff, 0xff, 0xff]);
/// # pool.close()?; std::fs::remove_file(&path).unwrap();
/// # Ok::<(), engram::Error>(())
/// ```
#[repr(transparent)]
pub struct PBytes(PPtr<BytesHeader>);

handle_impls!(PBytes[] "engram::PBytes");

impl PBytes {
    /// A byte string holding a copy of `data`.
    pub fn new(tx: &Tx<'_>, data: &[u8]) -> Result<Self> {
        let p = raw::alloc::<BytesHeader, u8>(tx, data.len() as u64)?;
        raw::extend(tx, p, data)?;
        Ok(PBytes(p))
    }

    /// Copies the bytes out of the pool.
    pub fn get(self, tx: &Tx<'_>) -> Result<Vec<u8>> {
        raw::to_vec(tx, self.0)
    }

    /// Replaces the contents with `data`.
    pub fn set(self, tx: &Tx<'_>, data: &[u8]) -> Result<()> {
        raw::replace(tx, self.0, data)
    }

    /// Appends `data`.
    pub fn extend_from_slice(self, tx: &Tx<'_>, data: &[u8]) -> Result<()> {
        raw::extend(tx, self.0, data)
    }

    /// Appends one byte.
    pub fn push(self, tx: &Tx<'_>, b: u8) -> Result<()> {
        raw::extend(tx, self.0, &[b])
    }

    /// Number of bytes.
    pub fn len(self, tx: &Tx<'_>) -> Result<u64> {
        raw::len(tx, self.0)
    }

    /// Whether there are no bytes.
    pub fn is_empty(self, tx: &Tx<'_>) -> Result<bool> {
        Ok(self.len(tx)? == 0)
    }

    /// Keeps the first `n` bytes (no-op if there are not more).
    pub fn truncate(self, tx: &Tx<'_>, n: u64) -> Result<()> {
        raw::truncate(tx, self.0, n)
    }

    /// Removes every byte; the capacity stays.
    pub fn clear(self, tx: &Tx<'_>) -> Result<()> {
        raw::truncate(tx, self.0, 0)
    }

    /// Frees the header and buffer when the region commits. The handle (and
    /// every copy of it) must not be used afterwards.
    pub fn free(self, tx: &Tx<'_>) -> Result<()> {
        raw::free(tx, self.0)
    }

    /// Points root `name` at this byte string.
    pub fn set_root(self, tx: &Tx<'_>, name: &str) -> Result<()> {
        tx.set_root(name, self.0)
    }

    /// The byte string root `name` points to, if the root exists. Fails with
    /// [`crate::Error::RootType`] if it holds something else.
    pub fn from_root(tx: &Tx<'_>, name: &str) -> Result<Option<Self>> {
        Ok(tx.root::<BytesHeader>(name)?.map(PBytes))
    }
}
