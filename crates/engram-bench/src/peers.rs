//! Safe wrappers around the C peers in `peers/pmdk_peers.c`: the PMDK
//! (libpmemobj) and malloc implementations of binary-trees, n-body and sps
//! that Engram's benchmarks compare against.
//!
//! What this module keeps true:
//!
//! - No function here panics, aborts on a PMDK failure, or leaves a pool
//!   open. A PMDK function creates its pool fresh at `path` (removing any old
//!   file there) and closes it before returning; the pool file stays on disk
//!   and removing it is the caller's business.
//! - Every failure comes back as a [`PeerError`] carrying libpmemobj's own
//!   message (`pmemobj_errormsg`, read on the calling thread right after the
//!   failing call, which is where libpmemobj keeps it).
//! - [`Measured::nanos`] is measured inside C with `CLOCK_MONOTONIC` and never
//!   includes creating or closing the pool; for sps it covers only the
//!   swapping transaction, not filling the array.
//! - Pools are sized by the `*_pool_bytes` functions below so that a
//!   workload does not run out of pool space, including undo logs.
//!
//! On tmpfs (`/dev/shm`) libpmemobj flushes with `msync` unless the
//! environment has `PMEM_IS_PMEM_FORCE=1` when the first pool is created; the
//! benchmark binary is expected to set it (see DESIGN.md, "Benchmarks").

use std::ffi::{c_char, c_int, CStr, CString};
use std::io;
use std::num::NonZeroU64;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::workloads::{binary_trees_max_depth, binary_trees_peak_nodes};

/// A result and the time it took, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured<T> {
    /// The workload's result (node count, energy or checksum).
    pub value: T,
    /// Elapsed time of the measured part, in nanoseconds.
    pub nanos: u64,
}

/// Why a peer could not run.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The pool path cannot be passed to C (it contains a NUL byte).
    #[error("pool path {path:?} contains a NUL byte")]
    BadPath {
        /// The pool file.
        path: PathBuf,
    },
    /// An argument is outside what the workload accepts.
    #[error("invalid argument: {what}")]
    InvalidArgument {
        /// The argument that was rejected.
        what: &'static str,
    },
    /// An old file at the pool path could not be removed.
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
    #[error("pmemobj_root failed in pool {path:?}: {message} ({source})")]
    Root {
        /// The pool file.
        path: PathBuf,
        /// libpmemobj's error message.
        message: String,
        /// The underlying error.
        source: io::Error,
    },
    /// An atomic allocation (`pmemobj_alloc`) failed, typically a full pool
    /// (libpmemobj's message then is about failing to extend the pool; the
    /// source says ENOMEM).
    #[error("pmemobj_alloc failed in pool {path:?} of {pool_bytes} bytes: {message} ({source})")]
    Alloc {
        /// The pool file.
        path: PathBuf,
        /// The pool size, bytes.
        pool_bytes: u64,
        /// libpmemobj's error message.
        message: String,
        /// The underlying error.
        source: io::Error,
    },
    /// A transaction aborted, typically a full pool or undo log.
    #[error("transaction aborted in pool {path:?} of {pool_bytes} bytes: {message} ({source})")]
    TxAborted {
        /// The pool file.
        path: PathBuf,
        /// The pool size, bytes.
        pool_bytes: u64,
        /// libpmemobj's error message.
        message: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The C side returned a status this wrapper does not know.
    #[error("unknown status {code} from the C peer")]
    UnknownStatus {
        /// The status code.
        code: i32,
    },
}

/// Status codes of `enum peer_status` in `pmdk_peers.c`.
mod status {
    pub const OK: i32 = 0;
    pub const ERR_ARG: i32 = -1;
    pub const ERR_UNLINK: i32 = -2;
    pub const ERR_CREATE: i32 = -3;
    pub const ERR_ROOT: i32 = -4;
    pub const ERR_ALLOC: i32 = -5;
    pub const ERR_TX: i32 = -6;
    // -7, ERR_NOMEM, comes only from malloc_bt and is handled there.
}

mod ffi {
    use std::ffi::{c_char, c_int};

    extern "C" {
        pub fn pmdk_bt_tx(path: *const c_char, depth: u32, pool_bytes: u64, count_out: *mut u64, nanos_out: *mut u64) -> c_int;
        pub fn pmdk_bt_atomic(path: *const c_char, depth: u32, pool_bytes: u64, count_out: *mut u64, nanos_out: *mut u64) -> c_int;
        pub fn malloc_bt(depth: u32, count_out: *mut u64, nanos_out: *mut u64) -> c_int;
        pub fn pmdk_nbody(path: *const c_char, steps: u64, pool_bytes: u64, energy_out: *mut f64, nanos_out: *mut u64) -> c_int;
        pub fn volatile_nbody(steps: u64) -> f64;
        pub fn pmdk_sps(
            path: *const c_char,
            n: u64,
            swaps: u64,
            seed: u64,
            pool_bytes: u64,
            checksum_out: *mut u64,
            nanos_out: *mut u64,
        ) -> c_int;
        pub fn pmemobj_errormsg() -> *const c_char;
    }
}

const MIB: u64 = 1 << 20;

/// Fixed headroom of every pool: heap metadata, lanes and log extensions.
const POOL_BASE_BYTES: u64 = 64 * MIB;

/// Pool bytes per binary-trees node alive at once (32-byte node, allocation
/// header and size-class rounding, with room to spare).
const BT_BYTES_PER_NODE: u64 = 128;

/// Undo-log bytes per sps swap: two 8-byte snapshots, each a log entry with
/// its header, plus the allocations that extend the log. Measured on libpmemobj
/// 1.12.1 with nearly all snapshots distinct (n = 2 x swaps): 81 to 97 bytes
/// per swap; 128 leaves a margin.
const SPS_BYTES_PER_SWAP: u64 = 128;

/// Pool size for binary-trees at `max_depth` (already clamped).
pub fn binary_trees_pool_bytes(max_depth: u32) -> u64 {
    POOL_BASE_BYTES.saturating_add(binary_trees_peak_nodes(max_depth).saturating_mul(BT_BYTES_PER_NODE))
}

/// Pool size for n-body: the bodies and one small undo log fit in the base.
pub fn nbody_pool_bytes() -> u64 {
    POOL_BASE_BYTES
}

/// Pool size for sps: the array plus one undo-log entry per snapshot.
pub fn sps_pool_bytes(n: u64, swaps: u64) -> u64 {
    POOL_BASE_BYTES.saturating_add(swaps.saturating_mul(SPS_BYTES_PER_SWAP)).saturating_add(n.saturating_mul(8))
}

/// libpmemobj's message for the last failure on this thread.
fn pmem_message() -> String {
    // SAFETY: pmemobj_errormsg has no preconditions and returns a pointer to
    // a NUL-terminated thread-local buffer that stays valid until the next
    // libpmemobj call on this thread; we copy it out before making one.
    unsafe {
        let msg = ffi::pmemobj_errormsg();
        if msg.is_null() {
            return String::from("(no message from libpmemobj)");
        }
        CStr::from_ptr(msg).to_string_lossy().into_owned()
    }
}

/// Turns a C status into a result, reading errno and libpmemobj's message
/// for the failure. Must be called right after the C call, on its thread.
fn check(code: c_int, path: &Path, pool_bytes: u64) -> Result<(), PeerError> {
    // Read errno first: nothing may run before it that could change it.
    let source = io::Error::last_os_error();
    if code == status::OK {
        return Ok(());
    }
    let path = path.to_path_buf();
    let message = pmem_message();
    Err(match code {
        status::ERR_ARG => PeerError::InvalidArgument { what: "rejected by the C peer" },
        status::ERR_UNLINK => PeerError::Unlink { path, source },
        status::ERR_CREATE => PeerError::Create { path, pool_bytes, message, source },
        status::ERR_ROOT => PeerError::Root { path, message, source },
        status::ERR_ALLOC => PeerError::Alloc { path, pool_bytes, message, source },
        status::ERR_TX => PeerError::TxAborted { path, pool_bytes, message, source },
        code => PeerError::UnknownStatus { code },
    })
}

fn c_path(path: &Path) -> Result<CString, PeerError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| PeerError::BadPath { path: path.to_path_buf() })
}

type BtFn = unsafe extern "C" fn(*const c_char, u32, u64, *mut u64, *mut u64) -> c_int;

fn pmdk_binary_trees(path: &Path, depth: u32, run: BtFn) -> Result<Measured<u64>, PeerError> {
    let max_depth = binary_trees_max_depth(depth);
    let pool_bytes = binary_trees_pool_bytes(max_depth);
    let cpath = c_path(path)?;
    let (mut value, mut nanos) = (0u64, 0u64);
    // SAFETY: cpath is a valid NUL-terminated string for the whole call and
    // the two out-pointers point to live, writable u64s; the C function
    // writes nothing else and keeps no pointer after returning.
    let code = unsafe { run(cpath.as_ptr(), max_depth, pool_bytes, &mut value, &mut nanos) };
    check(code, path, pool_bytes)?;
    Ok(Measured { value, nanos })
}

/// binary-trees with one libpmemobj transaction per tree build and one per
/// tree free, in a fresh pool at `path`. `depth` is clamped as CLBG does
/// ([`binary_trees_max_depth`]); the value is the sum of all node counts.
pub fn pmdk_binary_trees_tx(path: &Path, depth: u32) -> Result<Measured<u64>, PeerError> {
    pmdk_binary_trees(path, depth, ffi::pmdk_bt_tx)
}

/// binary-trees with one atomic `pmemobj_alloc`/`pmemobj_free` per node, in a
/// fresh pool at `path`. Depth and value as in [`pmdk_binary_trees_tx`].
pub fn pmdk_binary_trees_atomic(path: &Path, depth: u32) -> Result<Measured<u64>, PeerError> {
    pmdk_binary_trees(path, depth, ffi::pmdk_bt_atomic)
}

/// binary-trees with `malloc`/`free`. Depth and value as in
/// [`pmdk_binary_trees_tx`].
///
/// Running out of memory is treated like any Rust allocation failure: it
/// goes to [`std::alloc::handle_alloc_error`].
pub fn malloc_binary_trees(depth: u32) -> Measured<u64> {
    let max_depth = binary_trees_max_depth(depth);
    let (mut value, mut nanos) = (0u64, 0u64);
    // SAFETY: both out-pointers point to live, writable u64s, and malloc_bt
    // keeps neither after returning.
    let code = unsafe { ffi::malloc_bt(max_depth, &mut value, &mut nanos) };
    match code {
        status::OK => Measured { value, nanos },
        // The depth was clamped to what C accepts, so the only failure left
        // is ERR_NOMEM: malloc returned NULL for a two-pointer node.
        _ => std::alloc::handle_alloc_error(std::alloc::Layout::new::<[usize; 2]>()),
    }
}

/// n-body for `steps` steps with one libpmemobj transaction per step, the
/// bodies in the root object of a fresh pool at `path`; the value is the
/// final energy.
pub fn pmdk_nbody(path: &Path, steps: u64) -> Result<Measured<f64>, PeerError> {
    let pool_bytes = nbody_pool_bytes();
    let cpath = c_path(path)?;
    let (mut value, mut nanos) = (0f64, 0u64);
    // SAFETY: cpath is a valid NUL-terminated string for the whole call and
    // the out-pointers point to a live f64 and u64; C keeps neither.
    let code = unsafe { ffi::pmdk_nbody(cpath.as_ptr(), steps, pool_bytes, &mut value, &mut nanos) };
    check(code, path, pool_bytes)?;
    Ok(Measured { value, nanos })
}

/// n-body for `steps` steps in plain C memory; the final energy. For
/// cross-checking the other implementations.
pub fn volatile_nbody(steps: u64) -> f64 {
    // SAFETY: volatile_nbody takes a plain integer, touches only its own
    // stack and cannot fail.
    unsafe { ffi::volatile_nbody(steps) }
}

/// sps: an array of `n` u64 (`a[i] = i`) in a fresh pool at `path`, then one
/// transaction of `swaps` random swaps driven by xorshift64* from `seed`.
/// The value is [`crate::workloads::sps_checksum`] of the result; the time
/// covers only the swapping transaction.
pub fn pmdk_sps(path: &Path, n: usize, swaps: u64, seed: NonZeroU64) -> Result<Measured<u64>, PeerError> {
    if n == 0 {
        return Err(PeerError::InvalidArgument { what: "sps needs n > 0" });
    }
    let n = n as u64; // usize is at most 64 bits on every supported target
    let pool_bytes = sps_pool_bytes(n, swaps);
    let cpath = c_path(path)?;
    let (mut value, mut nanos) = (0u64, 0u64);
    // SAFETY: cpath is a valid NUL-terminated string for the whole call and
    // the out-pointers point to live, writable u64s; C keeps neither.
    let code = unsafe { ffi::pmdk_sps(cpath.as_ptr(), n, swaps, seed.get(), pool_bytes, &mut value, &mut nanos) };
    check(code, path, pool_bytes)?;
    Ok(Measured { value, nanos })
}
