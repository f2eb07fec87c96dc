//! [`PString`]: a growable UTF-8 string in the pool.
//!
//! What it keeps true: the handle points at a `StrHeader { len, buf }`;
//! bytes `0..len` of the `u8` array `buf` are valid UTF-8, because they only
//! ever change by whole `&str`s (`set`, `push_str`) or by truncation at a
//! character boundary. Storage works as in [`super::PBytes`]: appending past
//! the capacity doubles it inside the region, freeing the old array only when
//! the region commits. Reading bytes that are not UTF-8 (a damaged pool) is
//! [`crate::Error::Corrupt`], never a panic.
//!
//! On a crash or rollback: header and bytes are undo-logged, so the string
//! is exactly what it was before the region, in the old buffer.

use super::handle_impls;
use super::raw::{self, Header};
use crate::{Error, PArray, PPtr, Persistent, Result, Tx};

/// The pool object a [`PString`] points to.
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::StrHeader")]
#[repr(C)]
struct StrHeader {
    /// Bytes in use (UTF-8).
    len: u64,
    /// The bytes; its length is the capacity. Null when the capacity is 0.
    buf: PArray<u8>,
}

impl Header<u8> for StrHeader {
    fn parts(&self) -> (u64, PArray<u8>) {
        (self.len, self.buf)
    }
    fn from_parts(len: u64, buf: PArray<u8>) -> Self {
        StrHeader { len, buf }
    }
}

/// A growable UTF-8 string in a pool.
///
/// A handle (one pool pointer, `Copy` and [`Persistent`]) like
/// [`super::PVec`]; every method works inside a region and takes the
/// string's lock until the region ends. Lengths are in bytes.
///
/// # Example
/// ```
/// use engram::{collections::PString, CreateOptions, Durability, Pool};
/// # let path = std::env::temp_dir().join(format!("engram-doc-pstring-{}.pool", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let pool = Pool::create(&path, CreateOptions::new("doc").durability(Durability::Process))?;
/// pool.txn(|tx| {
///     let s = PString::new(tx, "grüß")?;
///     s.push_str(tx, " dich")?;
///     s.set_root(tx, "greeting")
/// })?;
/// let s = pool.txn(|tx| PString::from_root(tx, "greeting")?.expect("root exists").get(tx))?;
/// assert_eq!(s, "grüß dich");
/// # pool.close()?; std::fs::remove_file(&path).unwrap();
/// # Ok::<(), engram::Error>(())
/// ```
#[repr(transparent)]
pub struct PString(PPtr<StrHeader>);

handle_impls!(PString[] "engram::PString");

impl PString {
    /// A string holding a copy of `s`.
    pub fn new(tx: &Tx<'_>, s: &str) -> Result<Self> {
        let p = raw::alloc::<StrHeader, u8>(tx, s.len() as u64)?;
        raw::extend(tx, p, s.as_bytes())?;
        Ok(PString(p))
    }

    /// Copies the string out of the pool.
    pub fn get(self, tx: &Tx<'_>) -> Result<String> {
        let bytes = raw::to_vec(tx, self.0)?;
        String::from_utf8(bytes).map_err(|e| Error::corrupt(format!("PString at {:#x} is not UTF-8: {e}", self.0.addr())))
    }

    /// Replaces the contents with `s`.
    pub fn set(self, tx: &Tx<'_>, s: &str) -> Result<()> {
        raw::replace(tx, self.0, s.as_bytes())
    }

    /// Appends `s`.
    pub fn push_str(self, tx: &Tx<'_>, s: &str) -> Result<()> {
        raw::extend(tx, self.0, s.as_bytes())
    }

    /// Length in bytes.
    pub fn len(self, tx: &Tx<'_>) -> Result<u64> {
        raw::len(tx, self.0)
    }

    /// Whether the string is empty.
    pub fn is_empty(self, tx: &Tx<'_>) -> Result<bool> {
        Ok(self.len(tx)? == 0)
    }

    /// Keeps the first `n` bytes (no-op if there are not more). Fails with
    /// [`Error::InvalidArgument`] if byte `n` is inside a character.
    pub fn truncate(self, tx: &Tx<'_>, n: u64) -> Result<()> {
        let (len, buf) = raw::open(tx, self.0)?;
        if n < len && is_continuation(tx.get(buf, n)?) {
            return Err(Error::invalid(format!("byte {n} is not a character boundary")));
        }
        raw::truncate(tx, self.0, n)
    }

    /// Empties the string; the capacity stays.
    pub fn clear(self, tx: &Tx<'_>) -> Result<()> {
        raw::truncate(tx, self.0, 0)
    }

    /// Frees the header and buffer when the region commits. The handle (and
    /// every copy of it) must not be used afterwards.
    pub fn free(self, tx: &Tx<'_>) -> Result<()> {
        raw::free(tx, self.0)
    }

    /// Points root `name` at this string.
    pub fn set_root(self, tx: &Tx<'_>, name: &str) -> Result<()> {
        tx.set_root(name, self.0)
    }

    /// The string root `name` points to, if the root exists. Fails with
    /// [`Error::RootType`] if it holds something else.
    pub fn from_root(tx: &Tx<'_>, name: &str) -> Result<Option<Self>> {
        Ok(tx.root::<StrHeader>(name)?.map(PString))
    }
}

/// Whether `b` continues a multi-byte UTF-8 character (0b10xx_xxxx).
fn is_continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}
