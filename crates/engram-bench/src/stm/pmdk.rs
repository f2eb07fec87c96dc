//! Safe wrappers around the PMDK peers of the STM benchmarks
//! (`peers/pmdk_stm_peers.c`): a libpmemobj red-black tree and chained hash
//! table from u64 to u64, every update one libpmemobj transaction and every
//! operation under one global mutex (libpmemobj gives failure atomicity,
//! not isolation; the OneFile/Romulus suite wraps its PMDK structures the
//! same way).
//!
//! What this module keeps true:
//!
//! - No function here panics or leaves a pool open: [`PmdkMap::create`]
//!   makes a fresh pool (removing an old file at the path) and dropping the
//!   map closes it; the file stays for the caller to remove.
//! - Every failure comes back as a [`PmdkError`] carrying libpmemobj's own
//!   message and errno, read on the calling thread right after the failing
//!   call (both are thread-local in libpmemobj).
//! - The map may be shared by threads: the C side serialises every call on
//!   its mutex.
//!
//! On tmpfs libpmemobj flushes with `msync` unless `PMEM_IS_PMEM_FORCE=1`
//! is in the environment before its first pool: [`PmdkMap::create`] refuses
//! to run without it (the runner sets it for PMDK children only; see
//! `job.rs`).

use std::ffi::{c_int, c_void, CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use super::workload::{BenchError, Contents, Op, Structure, TxMap, HASH_BUCKETS, KEY_RANGE};

/// Status codes of `enum stm_status` in `pmdk_stm_peers.c`.
mod status {
    pub const OK: i32 = 0;
    pub const ERR_ARG: i32 = -1;
    pub const ERR_UNLINK: i32 = -2;
    pub const ERR_CREATE: i32 = -3;
    pub const ERR_ROOT: i32 = -4;
    pub const ERR_TX: i32 = -6;
    pub const ERR_NOMEM: i32 = -7;
    pub const ERR_CHECK: i32 = -8;
}

/// `enum stm_kind` in `pmdk_stm_peers.c`.
const KIND_RBTREE: c_int = 0;
const KIND_HASH: c_int = 1;

mod ffi {
    use std::ffi::{c_char, c_int, c_void};

    extern "C" {
        pub fn stm_create(path: *const c_char, kind: c_int, nbuckets: u64, pool_bytes: u64, out: *mut *mut c_void) -> c_int;
        pub fn stm_close(p: *mut c_void);
        pub fn stm_get(p: *mut c_void, key: u64, value_out: *mut u64, found: *mut c_int) -> c_int;
        pub fn stm_insert(p: *mut c_void, key: u64, value: u64, existed: *mut c_int) -> c_int;
        pub fn stm_remove(p: *mut c_void, key: u64, found: *mut c_int) -> c_int;
        pub fn stm_insert_batch(p: *mut c_void, keys: *const u64, values: *const u64, n: usize) -> c_int;
        pub fn stm_check(p: *mut c_void, len_out: *mut u64, sum_out: *mut u64) -> c_int;
        pub fn pmemobj_errormsg() -> *const c_char;
    }
}

/// Why a PMDK peer failed.
#[derive(Debug, thiserror::Error)]
pub enum PmdkError {
    /// PMDK has no such structure here.
    #[error("no PMDK peer for the {0}")]
    NoPeer(&'static str),
    /// `PMEM_IS_PMEM_FORCE=1` is missing: libpmemobj would msync on tmpfs.
    #[error("the PMDK peer needs {var}=1 in its environment (set before the first pool)")]
    NotForced {
        /// The environment variable.
        var: &'static str,
    },
    /// The pool path cannot be passed to C.
    #[error("pool path {0:?} contains a NUL byte")]
    BadPath(PathBuf),
    /// The C side rejected an argument.
    #[error("invalid argument to the C peer")]
    InvalidArgument,
    /// An old pool file could not be removed.
    #[error("cannot remove old pool file {path:?}: {source}")]
    Unlink {
        /// The pool file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// `pmemobj_create` failed.
    #[error("pmemobj_create({path:?}, {pool_bytes} bytes) failed: {message} ({source})")]
    Create {
        /// The pool file.
        path: PathBuf,
        /// The pool size, bytes.
        pool_bytes: u64,
        /// libpmemobj's error message.
        message: String,
        /// The underlying error.
        source: io::Error,
    },
    /// `pmemobj_root` failed.
    #[error("pmemobj_root failed: {message} ({source})")]
    Root {
        /// libpmemobj's error message.
        message: String,
        /// The underlying error.
        source: io::Error,
    },
    /// A transaction aborted (a full pool, typically).
    #[error("transaction aborted: {message} ({source})")]
    TxAborted {
        /// libpmemobj's error message.
        message: String,
        /// The underlying error.
        source: io::Error,
    },
    /// malloc or a mutex failed in C.
    #[error("out of memory in the C peer")]
    NoMemory,
    /// The structure's invariants do not hold.
    #[error("the PMDK {0} failed its invariant check")]
    Broken(&'static str),
    /// A status this wrapper does not know.
    #[error("unknown status {0} from the C peer")]
    UnknownStatus(i32),
}

/// libpmemobj's message for the last failure on this thread.
fn pmem_message() -> String {
    // SAFETY: pmemobj_errormsg has no preconditions and returns a pointer to
    // a NUL-terminated thread-local buffer valid until the next libpmemobj
    // call on this thread; it is copied out before any such call.
    unsafe {
        let msg = ffi::pmemobj_errormsg();
        if msg.is_null() {
            return "(no message from libpmemobj)".into();
        }
        CStr::from_ptr(msg).to_string_lossy().into_owned()
    }
}

/// Turns a C status into a result; must run right after the call, on its
/// thread (errno and the message are thread-local).
fn check(code: c_int, path: &Path, pool_bytes: u64, what: &'static str) -> Result<(), PmdkError> {
    let source = io::Error::last_os_error();
    Err(match code {
        status::OK => return Ok(()),
        status::ERR_ARG => PmdkError::InvalidArgument,
        status::ERR_UNLINK => PmdkError::Unlink { path: path.to_path_buf(), source },
        status::ERR_CREATE => PmdkError::Create { path: path.to_path_buf(), pool_bytes, message: pmem_message(), source },
        status::ERR_ROOT => PmdkError::Root { message: pmem_message(), source },
        status::ERR_TX => PmdkError::TxAborted { message: pmem_message(), source },
        status::ERR_NOMEM => PmdkError::NoMemory,
        status::ERR_CHECK => PmdkError::Broken(what),
        code => PmdkError::UnknownStatus(code),
    })
}

/// Pool bytes for a map of at most `key_range` entries: 64 MiB of headroom
/// (heap metadata, lanes, undo logs) plus 256 bytes per possible entry
/// (a 72-byte node with its allocation header, rounded to its class) and
/// the bucket array.
pub fn pool_bytes(key_range: u64) -> u64 {
    (64 << 20) + key_range.saturating_mul(256) + HASH_BUCKETS * 16
}

/// A libpmemobj map in its own pool.
pub struct PmdkMap {
    raw: NonNull<c_void>,
    path: PathBuf,
    what: &'static str,
}

// SAFETY: the C peer serialises every call on its own pthread mutex and
// keeps no thread-affine state (libpmemobj's transactions are per thread),
// so the handle may be used from any thread, by several at once.
unsafe impl Send for PmdkMap {}
// SAFETY: as above.
unsafe impl Sync for PmdkMap {}

impl PmdkMap {
    /// A fresh pool at `path` holding an empty `structure` (red-black tree
    /// or hash table), sized for `key_range` keys.
    pub fn create(path: &Path, structure: Structure, key_range: u64) -> Result<Self, PmdkError> {
        let (kind, what) = match structure {
            Structure::Rbtree => (KIND_RBTREE, "red-black tree"),
            Structure::Hashtable => (KIND_HASH, "hash table"),
            s => return Err(PmdkError::NoPeer(s.label())),
        };
        let var = crate::job::PMEM_FORCE_VAR;
        if std::env::var_os(var).is_none_or(|v| v != "1") {
            return Err(PmdkError::NotForced { var });
        }
        let cpath = CString::new(path.as_os_str().as_bytes()).map_err(|_| PmdkError::BadPath(path.to_path_buf()))?;
        let bytes = pool_bytes(key_range.max(KEY_RANGE));
        let mut raw = std::ptr::null_mut();
        // SAFETY: cpath is NUL-terminated and lives through the call; `raw`
        // is a live out-pointer, written only on success.
        let code = unsafe { ffi::stm_create(cpath.as_ptr(), kind, HASH_BUCKETS, bytes, &mut raw) };
        check(code, path, bytes, what)?;
        let raw = NonNull::new(raw).ok_or(PmdkError::UnknownStatus(code))?;
        Ok(PmdkMap { raw, path: path.to_path_buf(), what })
    }

    fn status(&self, code: c_int) -> Result<(), PmdkError> {
        check(code, &self.path, 0, self.what)
    }

    /// The key's value.
    pub fn get(&self, key: u64) -> Result<Option<u64>, PmdkError> {
        let (mut v, mut found) = (0u64, 0 as c_int);
        // SAFETY: raw is a live peer (closed only by drop); the out-pointers
        // are live locals.
        let code = unsafe { ffi::stm_get(self.raw.as_ptr(), key, &mut v, &mut found) };
        self.status(code)?;
        Ok((found != 0).then_some(v))
    }

    /// Sets the key's value in one transaction; whether it was present.
    pub fn insert(&self, key: u64, value: u64) -> Result<bool, PmdkError> {
        let mut existed = 0 as c_int;
        // SAFETY: as in `get`.
        let code = unsafe { ffi::stm_insert(self.raw.as_ptr(), key, value, &mut existed) };
        self.status(code)?;
        Ok(existed != 0)
    }

    /// Removes the key in one transaction; whether it was present.
    pub fn remove(&self, key: u64) -> Result<bool, PmdkError> {
        let mut found = 0 as c_int;
        // SAFETY: as in `get`.
        let code = unsafe { ffi::stm_remove(self.raw.as_ptr(), key, &mut found) };
        self.status(code)?;
        Ok(found != 0)
    }

    /// Inserts every pair in one transaction.
    pub fn insert_all(&self, pairs: &[(u64, u64)]) -> Result<(), PmdkError> {
        let (keys, values): (Vec<u64>, Vec<u64>) = pairs.iter().copied().unzip();
        // SAFETY: both arrays hold pairs.len() u64s and outlive the call;
        // the C side only reads them.
        let code = unsafe { ffi::stm_insert_batch(self.raw.as_ptr(), keys.as_ptr(), values.as_ptr(), keys.len()) };
        self.status(code)
    }

    /// Checks the invariants; the contents.
    pub fn check(&self) -> Result<Contents, PmdkError> {
        let (mut len, mut sum) = (0u64, 0u64);
        // SAFETY: as in `get`.
        let code = unsafe { ffi::stm_check(self.raw.as_ptr(), &mut len, &mut sum) };
        self.status(code)?;
        Ok(Contents { len, sum })
    }
}

impl Drop for PmdkMap {
    fn drop(&mut self) {
        // SAFETY: raw came from stm_create and is closed exactly once, here;
        // no other reference to the map exists during drop.
        unsafe { ffi::stm_close(self.raw.as_ptr()) };
    }
}

impl TxMap for PmdkMap {
    type Local = ();

    fn apply(&self, _: &mut (), op: Op) -> Result<bool, BenchError> {
        Ok(match op {
            Op::Lookup(k) => {
                std::hint::black_box(self.get(k)?);
                false
            }
            Op::Insert(k, v) => {
                self.insert(k, v)?;
                true
            }
            Op::Delete(k) => self.remove(k)?,
        })
    }

    fn insert_batch(&self, pairs: &[(u64, u64)]) -> Result<(), BenchError> {
        Ok(self.insert_all(pairs)?)
    }

    fn contents(&self) -> Result<Contents, BenchError> {
        Ok(self.check()?)
    }
}
