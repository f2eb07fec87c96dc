//! # engram-ffi: the C ABI of Engram (`include/engram.h`)
//!
//! Everything a front end (C, C++, Go through cgo, Java through FFM) needs to
//! use a pool: create/open/close with options and the open report; type
//! registration; allocation and free by type id; named roots; failure-atomic
//! regions as explicit begin / log / lock / commit / abort calls (nesting
//! flattened); flush, fence and persist of a range; online GC; `check`; and
//! the `trace` durability mode with the crash explorer.
//!
//! Rules kept by every entry point (see `docs/c-abi.md`):
//!
//! - It returns an [`engram_status`]: `ENGRAM_OK` (0) or one code of
//!   [`engram_code`] — the engine's stable [`engram::Error::code`], plus a
//!   few codes of the ABI itself (closed handle, ended region, internal
//!   error). After a failure, [`engram_last_error`] describes it on the
//!   calling thread.
//! - No panic crosses the boundary: every body runs under `catch_unwind`
//!   (`call`), and a caught panic is `ENGRAM_ERR_INTERNAL`.
//! - Every pointer and length is validated: null pointers, bad UTF-8,
//!   addresses outside the pool or outside any object, overflowing lengths
//!   are errors, never undefined behaviour on our side.
//! - Handles are integers, never pointers to our memory, so a closed or
//!   made-up handle is detected (`ENGRAM_ERR_CLOSED`), not dereferenced.
//!
//! Crash behaviour is the engine's: a region that has not committed is
//! undone by recovery; a pool abandoned (or a process killed) is recovered by
//! the next open.

#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]

mod args;
mod explore;
mod handles;
mod pool;
mod region;

pub use explore::*;
pub use pool::*;
pub use region::*;

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Result of every call: `ENGRAM_OK` (0) or a value of [`engram_code`].
/// An int rather than the enum, so that a code added by a newer engine
/// never makes a value the C enum cannot hold.
pub type engram_status = i32;

/// Every status a call can return. Codes 1-99 are the engine's stable error
/// codes (`engram::Error::code`); 100 and up belong to the ABI itself.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum engram_code {
    /// Success.
    ENGRAM_OK = 0,
    /// An operating-system call failed (the message names it).
    ENGRAM_ERR_IO = 1,
    /// The file is not an Engram pool.
    ENGRAM_ERR_NOT_A_POOL = 2,
    /// The file is shorter than its header says.
    ENGRAM_ERR_TRUNCATED = 3,
    /// Both header copies fail their checksum.
    ENGRAM_ERR_BAD_CHECKSUM = 4,
    /// The pool's format version is not supported by this build.
    ENGRAM_ERR_UNSUPPORTED_VERSION = 5,
    /// The pool's layout name is not the one asked for.
    ENGRAM_ERR_WRONG_LAYOUT = 6,
    /// A registered type's layout differs from the pool's (the message names the type).
    ENGRAM_ERR_LAYOUT_MISMATCH = 7,
    /// The pool's metadata is inconsistent.
    ENGRAM_ERR_CORRUPT = 8,
    /// The pool reached its maximum size.
    ENGRAM_ERR_POOL_FULL = 9,
    /// An argument is outside what the engine accepts (null pointer, bad UTF-8, bad size...).
    ENGRAM_ERR_INVALID_ARGUMENT = 10,
    /// An address is not inside the pool, or not inside an object.
    ENGRAM_ERR_BAD_POINTER = 11,
    /// The pool file is already open (in this or another process).
    ENGRAM_ERR_ALREADY_OPEN = 12,
    /// The file exists (create without overwrite).
    ENGRAM_ERR_EXISTS = 13,
    /// A root holds another type than the one asked for.
    ENGRAM_ERR_ROOT_TYPE = 14,
    /// A fixed table (roots, types, log slots) is full.
    ENGRAM_ERR_TABLE_FULL = 15,
    /// A lock could not be taken in time (probable deadlock): the region will roll back.
    ENGRAM_ERR_LOCK_TIMEOUT = 16,
    /// The region was rolled back because a nested region or a lock failed.
    ENGRAM_ERR_ABORTED = 17,
    /// The pool is busy (regions running, closed, or called inside a region).
    ENGRAM_ERR_BUSY = 18,
    /// The pool was opened read-only.
    ENGRAM_ERR_READ_ONLY = 19,
    /// A region needs more undo log than one region may hold.
    ENGRAM_ERR_TX_TOO_LARGE = 20,
    /// A call that must not run inside a region (or transaction) was made inside one.
    ENGRAM_ERR_NESTED_TRANSACTION = 21,
    /// An object was freed twice.
    ENGRAM_ERR_DOUBLE_FREE = 22,
    /// An index or range is outside an array, string or object.
    ENGRAM_ERR_OUT_OF_BOUNDS = 23,
    /// The requested pool size is below the minimum (the message states it).
    ENGRAM_ERR_POOL_TOO_SMALL = 24,
    /// A failure-atomic region was opened inside an STM transaction.
    ENGRAM_ERR_TXN_IN_ATOMICALLY = 25,
    /// Checked mode refused a pointer field naming no live object of the pool (the message names type and field).
    ENGRAM_ERR_BAD_POINTER_FIELD = 26,
    /// `check` found pointer fields naming no live object (treated as null; repair clears them).
    ENGRAM_ERR_BAD_FIELDS = 27,
    /// A lazy thunk names a function this program did not register.
    ENGRAM_ERR_UNKNOWN_FUNCTION = 28,
    /// An STM transaction of one pool used a variable of another pool (the message names both).
    ENGRAM_ERR_CROSS_POOL = 29,
    /// An STM clock (a pool's, or the volatile one) reached its 48-bit limit: the commit was refused and wrote nothing (the message says what to do).
    ENGRAM_ERR_STM_CLOCK_EXHAUSTED = 30,
    /// The pool (or tracer) handle is closed or was never valid.
    ENGRAM_ERR_CLOSED = 100,
    /// The region handle has ended, or belongs to another thread.
    ENGRAM_ERR_REGION_ENDED = 101,
    /// A bug in Engram (a caught panic); the message says where.
    ENGRAM_ERR_INTERNAL = 102,
}

/// An error on the way out of the ABI.
pub(crate) enum FfiError {
    Engine(engram::Error),
    Code(engram_code, String),
}

impl From<engram::Error> for FfiError {
    fn from(e: engram::Error) -> Self {
        FfiError::Engine(e)
    }
}

pub(crate) type FfiResult<T = ()> = Result<T, FfiError>;

pub(crate) fn invalid(what: impl Into<String>) -> FfiError {
    FfiError::Code(engram_code::ENGRAM_ERR_INVALID_ARGUMENT, what.into())
}

thread_local! {
    static LAST: RefCell<(i32, CString)> = RefCell::new((0, CString::default()));
}

fn set_last(code: i32, msg: String) {
    let msg = CString::new(msg.replace('\0', "?")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = (code, msg));
}

/// Runs one entry point's body: catches panics, records the error.
pub(crate) fn call(f: impl FnOnce() -> FfiResult) -> engram_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(FfiError::Engine(e))) => {
            let code = e.code();
            set_last(code, e.to_string());
            code
        }
        Ok(Err(FfiError::Code(c, msg))) => {
            set_last(c as i32, msg);
            c as i32
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            let code = engram_code::ENGRAM_ERR_INTERNAL as i32;
            set_last(code, format!("internal error (caught panic): {what}"));
            code
        }
    }
}

/// The message of the last failed call on this thread ("" if none). The
/// string stays valid until the next failing call on this thread; copy it
/// to keep it. Never null.
#[no_mangle]
pub extern "C" fn engram_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().1.as_ptr())
}

/// The code of the last failed call on this thread (0 if none).
#[no_mangle]
pub extern "C" fn engram_last_error_code() -> engram_status {
    LAST.with(|l| l.borrow().0)
}

/// The constant's name of `code` ("ENGRAM_ERR_POOL_FULL"), or
/// "ENGRAM_ERR_UNKNOWN" for a code this build does not know. Static; never null.
#[no_mangle]
pub extern "C" fn engram_code_name(code: engram_status) -> *const c_char {
    let name: &'static [u8] = match code {
        0 => b"ENGRAM_OK\0",
        1 => b"ENGRAM_ERR_IO\0",
        2 => b"ENGRAM_ERR_NOT_A_POOL\0",
        3 => b"ENGRAM_ERR_TRUNCATED\0",
        4 => b"ENGRAM_ERR_BAD_CHECKSUM\0",
        5 => b"ENGRAM_ERR_UNSUPPORTED_VERSION\0",
        6 => b"ENGRAM_ERR_WRONG_LAYOUT\0",
        7 => b"ENGRAM_ERR_LAYOUT_MISMATCH\0",
        8 => b"ENGRAM_ERR_CORRUPT\0",
        9 => b"ENGRAM_ERR_POOL_FULL\0",
        10 => b"ENGRAM_ERR_INVALID_ARGUMENT\0",
        11 => b"ENGRAM_ERR_BAD_POINTER\0",
        12 => b"ENGRAM_ERR_ALREADY_OPEN\0",
        13 => b"ENGRAM_ERR_EXISTS\0",
        14 => b"ENGRAM_ERR_ROOT_TYPE\0",
        15 => b"ENGRAM_ERR_TABLE_FULL\0",
        16 => b"ENGRAM_ERR_LOCK_TIMEOUT\0",
        17 => b"ENGRAM_ERR_ABORTED\0",
        18 => b"ENGRAM_ERR_BUSY\0",
        19 => b"ENGRAM_ERR_READ_ONLY\0",
        20 => b"ENGRAM_ERR_TX_TOO_LARGE\0",
        21 => b"ENGRAM_ERR_NESTED_TRANSACTION\0",
        22 => b"ENGRAM_ERR_DOUBLE_FREE\0",
        23 => b"ENGRAM_ERR_OUT_OF_BOUNDS\0",
        24 => b"ENGRAM_ERR_POOL_TOO_SMALL\0",
        25 => b"ENGRAM_ERR_TXN_IN_ATOMICALLY\0",
        26 => b"ENGRAM_ERR_BAD_POINTER_FIELD\0",
        27 => b"ENGRAM_ERR_BAD_FIELDS\0",
        28 => b"ENGRAM_ERR_UNKNOWN_FUNCTION\0",
        29 => b"ENGRAM_ERR_CROSS_POOL\0",
        30 => b"ENGRAM_ERR_STM_CLOCK_EXHAUSTED\0",
        100 => b"ENGRAM_ERR_CLOSED\0",
        101 => b"ENGRAM_ERR_REGION_ENDED\0",
        102 => b"ENGRAM_ERR_INTERNAL\0",
        _ => b"ENGRAM_ERR_UNKNOWN\0",
    };
    name.as_ptr().cast()
}

/// The ABI version: bumped when a function or struct changes incompatibly.
pub const ENGRAM_ABI_VERSION: u32 = 1;

/// [`ENGRAM_ABI_VERSION`] of the linked library (compare with the header's).
#[no_mangle]
pub extern "C" fn engram_abi_version() -> u32 {
    ENGRAM_ABI_VERSION
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn engine_codes_match_the_c_enum() {
        use engram::Error;
        use engram_code::*;
        let pairs = [
            (Error::NotAPool { path: "p".into() }, ENGRAM_ERR_NOT_A_POOL),
            (Error::Truncated { path: "p".into(), expected: 1, actual: 0 }, ENGRAM_ERR_TRUNCATED),
            (Error::BadChecksum { path: "p".into() }, ENGRAM_ERR_BAD_CHECKSUM),
            (Error::UnsupportedVersion { path: "p".into(), found: 9, supported: 1 }, ENGRAM_ERR_UNSUPPORTED_VERSION),
            (Error::WrongLayout { path: "p".into(), expected: "a".into(), found: "b".into() }, ENGRAM_ERR_WRONG_LAYOUT),
            (Error::LayoutMismatch { path: "p".into(), type_name: "T".into(), changed: "size".into() }, ENGRAM_ERR_LAYOUT_MISMATCH),
            (Error::Corrupt { what: "c".into() }, ENGRAM_ERR_CORRUPT),
            (Error::PoolFull { requested: 1, max_size: 2 }, ENGRAM_ERR_POOL_FULL),
            (Error::InvalidArgument { what: "i".into() }, ENGRAM_ERR_INVALID_ARGUMENT),
            (Error::BadPointer { addr: 1 }, ENGRAM_ERR_BAD_POINTER),
            (Error::AlreadyOpen { path: "p".into() }, ENGRAM_ERR_ALREADY_OPEN),
            (Error::Exists { path: "p".into() }, ENGRAM_ERR_EXISTS),
            (Error::RootType { name: "r".into(), expected: "a".into(), found: "b".into() }, ENGRAM_ERR_ROOT_TYPE),
            (Error::TableFull { table: "root", capacity: 1 }, ENGRAM_ERR_TABLE_FULL),
            (Error::LockTimeout, ENGRAM_ERR_LOCK_TIMEOUT),
            (Error::Aborted, ENGRAM_ERR_ABORTED),
            (Error::Busy { what: "x" }, ENGRAM_ERR_BUSY),
            (Error::ReadOnly, ENGRAM_ERR_READ_ONLY),
            (Error::TxTooLarge { needed: 2, limit: 1 }, ENGRAM_ERR_TX_TOO_LARGE),
            (Error::NestedTransaction { what: "x" }, ENGRAM_ERR_NESTED_TRANSACTION),
            (Error::DoubleFree { addr: 1 }, ENGRAM_ERR_DOUBLE_FREE),
            (Error::OutOfBounds { index: 1, count: 1, len: 1 }, ENGRAM_ERR_OUT_OF_BOUNDS),
            (Error::PoolTooSmall { requested: 1, minimum: 2 }, ENGRAM_ERR_POOL_TOO_SMALL),
            (Error::TxnInAtomically, ENGRAM_ERR_TXN_IN_ATOMICALLY),
            (Error::BadPointerField { type_name: "T".into(), field: 8, object: 16, value: 1, reason: "r" }, ENGRAM_ERR_BAD_POINTER_FIELD),
            (Error::BadFields { count: 1, first: "f".into() }, ENGRAM_ERR_BAD_FIELDS),
            (Error::UnknownFunction { name: "f".into() }, ENGRAM_ERR_UNKNOWN_FUNCTION),
            (Error::CrossPool { pool: "a".into(), other: "b".into() }, ENGRAM_ERR_CROSS_POOL),
            (Error::StmClockExhausted { domain: "p".into(), limit: 1, remedy: "r" }, ENGRAM_ERR_STM_CLOCK_EXHAUSTED),
        ];
        for (e, c) in pairs {
            assert_eq!(e.code(), c as i32, "{e}");
            // SAFETY: engram_code_name returns a static NUL-terminated string.
            let name = unsafe { CStr::from_ptr(engram_code_name(c as i32)) }.to_str().unwrap();
            assert_eq!(name, format!("{c:?}"));
        }
        assert_eq!(engram::Error::Io { op: "x", source: std::io::Error::other("y") }.code(), ENGRAM_ERR_IO as i32);
    }

    #[test]
    fn panics_become_internal_errors() {
        let s = call(|| panic!("boom"));
        assert_eq!(s, engram_code::ENGRAM_ERR_INTERNAL as i32);
        // SAFETY: engram_last_error never returns null.
        let msg = unsafe { CStr::from_ptr(engram_last_error()) }.to_str().unwrap();
        assert!(msg.contains("boom"), "{msg}");
    }
}
