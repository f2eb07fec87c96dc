//! The one error type of the engine.
//!
//! Every failure the engine can report is a variant of [`Error`], and every
//! variant has a stable numeric [`Error::code`] that the C ABI, Go, Java and
//! C++ front ends map to their own idiom. Library code never panics or exits
//! on bad input: a corrupt, truncated or foreign pool, a wrong layout, a full
//! pool and a bad pointer all arrive here.

use std::path::PathBuf;

/// Result alias used throughout the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Engram.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed.
    #[error("{op}: {source}")]
    Io {
        /// What the engine was doing.
        op: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with an Engram pool header.
    #[error("{path}: not an Engram pool (bad magic)")]
    NotAPool {
        /// The file that was opened.
        path: PathBuf,
    },
    /// The file is shorter than its header says it is.
    #[error("{path}: truncated pool: file has {actual} bytes, header needs {expected}")]
    Truncated {
        /// The file that was opened.
        path: PathBuf,
        /// Bytes the header records.
        expected: u64,
        /// Bytes the file has.
        actual: u64,
    },
    /// Both header copies fail their checksum.
    #[error("{path}: both pool header copies fail their CRC32C checksum")]
    BadChecksum {
        /// The file that was opened.
        path: PathBuf,
    },
    /// The pool was written by a format version this build does not read.
    #[error("{path}: pool format version {found} is not supported (this build reads {supported})")]
    UnsupportedVersion {
        /// The file that was opened.
        path: PathBuf,
        /// Version found in the header.
        found: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// The pool's layout name differs from the one the program asked for.
    #[error("pool layout is {found:?}, program expects {expected:?}")]
    WrongLayout {
        /// Layout the program asked for.
        expected: String,
        /// Layout recorded in the pool.
        found: String,
    },
    /// A type's layout differs from the one recorded in the pool.
    #[error("type {type_name} does not match the pool's layout for it (size or fields changed)")]
    LayoutMismatch {
        /// The Rust (or front-end) type name.
        type_name: String,
    },
    /// The pool's metadata is inconsistent.
    #[error("corrupt pool: {what}")]
    Corrupt {
        /// A readable description of what is wrong.
        what: String,
    },
    /// The pool reached its configured maximum size.
    #[error("pool is full: {requested} more bytes needed, maximum size {max_size} reached")]
    PoolFull {
        /// Bytes the failing request needed.
        requested: u64,
        /// The configured maximum.
        max_size: u64,
    },
    /// An argument is outside what the engine accepts.
    #[error("invalid argument: {what}")]
    InvalidArgument {
        /// What was wrong with it.
        what: String,
    },
    /// A pointer does not point into this pool's heap.
    #[error("pointer {addr:#x} is not a valid object address in this pool")]
    BadPointer {
        /// The offending address.
        addr: u64,
    },
    /// The pool is already open (in this or another process).
    #[error("{path}: pool is already open by another handle or process")]
    Locked {
        /// The file that was opened.
        path: PathBuf,
    },
    /// The file already exists (on create).
    #[error("{path}: file exists")]
    Exists {
        /// The file that was to be created.
        path: PathBuf,
    },
    /// A named root holds a different type from the one asked for.
    #[error("root {name:?} holds type {found}, not {expected}")]
    RootType {
        /// Root name.
        name: String,
        /// Type asked for.
        expected: String,
        /// Type recorded in the root.
        found: String,
    },
    /// A fixed-size table (roots, types, log slots) has no room left.
    #[error("{table} table is full ({capacity} entries)")]
    TableFull {
        /// Which table.
        table: &'static str,
        /// Its capacity.
        capacity: u32,
    },
    /// A transaction could not take a lock in time (probable deadlock); it was rolled back.
    #[error("lock wait timed out (probable deadlock); the region was rolled back")]
    LockTimeout,
    /// A nested region failed, so the enclosing region rolled back.
    #[error("a nested region failed; the whole region was rolled back")]
    Aborted,
    /// The pool is in use by transactions or other handles.
    #[error("pool is busy: {what}")]
    Busy {
        /// What is still using it.
        what: &'static str,
    },
    /// The operation needs a writable pool.
    #[error("pool was opened read-only")]
    ReadOnly,
    /// A thunk in the pool names a function this program did not register
    /// (`engram::lazy::register`).
    #[error("lazy function {name:?} is not registered by this program")]
    UnknownFunction {
        /// The stable name the pool records.
        name: String,
    },
}

impl Error {
    /// The stable code of this error, shared by every front end.
    pub fn code(&self) -> i32 {
        match self {
            Error::Io { .. } => 1,
            Error::NotAPool { .. } => 2,
            Error::Truncated { .. } => 3,
            Error::BadChecksum { .. } => 4,
            Error::UnsupportedVersion { .. } => 5,
            Error::WrongLayout { .. } => 6,
            Error::LayoutMismatch { .. } => 7,
            Error::Corrupt { .. } => 8,
            Error::PoolFull { .. } => 9,
            Error::InvalidArgument { .. } => 10,
            Error::BadPointer { .. } => 11,
            Error::Locked { .. } => 12,
            Error::Exists { .. } => 13,
            Error::RootType { .. } => 14,
            Error::TableFull { .. } => 15,
            Error::LockTimeout => 16,
            Error::Aborted => 17,
            Error::Busy { .. } => 18,
            Error::ReadOnly => 19,
            Error::UnknownFunction { .. } => 32,
        }
    }

    pub(crate) fn io(op: &'static str, source: std::io::Error) -> Self {
        Error::Io { op, source }
    }

    pub(crate) fn last_os(op: &'static str) -> Self {
        Error::io(op, std::io::Error::last_os_error())
    }

    pub(crate) fn corrupt(what: impl Into<String>) -> Self {
        Error::Corrupt { what: what.into() }
    }

    pub(crate) fn invalid(what: impl Into<String>) -> Self {
        Error::InvalidArgument { what: what.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct() {
        let errs = [
            Error::io("x", std::io::Error::other("y")),
            Error::NotAPool { path: "p".into() },
            Error::Truncated { path: "p".into(), expected: 1, actual: 0 },
            Error::BadChecksum { path: "p".into() },
            Error::UnsupportedVersion { path: "p".into(), found: 9, supported: 1 },
            Error::WrongLayout { expected: "a".into(), found: "b".into() },
            Error::LayoutMismatch { type_name: "T".into() },
            Error::corrupt("c"),
            Error::PoolFull { requested: 1, max_size: 2 },
            Error::invalid("i"),
            Error::BadPointer { addr: 1 },
            Error::Locked { path: "p".into() },
            Error::Exists { path: "p".into() },
            Error::RootType { name: "r".into(), expected: "a".into(), found: "b".into() },
            Error::TableFull { table: "root", capacity: 1 },
            Error::LockTimeout,
            Error::Aborted,
            Error::Busy { what: "x" },
            Error::ReadOnly,
            Error::UnknownFunction { name: "f".into() },
        ];
        let mut codes: Vec<i32> = errs.iter().map(Error::code).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), errs.len());
    }
}
