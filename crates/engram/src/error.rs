//! The one error type of the engine.
//!
//! Every failure the engine can report is a variant of [`Error`], and every
//! variant has a stable numeric [`Error::code`] that the C ABI, Go, Java and
//! C++ front ends map to their own idiom. Library code never panics or exits
//! on bad input: a corrupt, truncated or foreign pool, a wrong layout, a full
//! pool and a bad pointer all arrive here.
//!
//! Codes are stable: a new variant takes the next free number, no code is
//! ever reused or renumbered (docs/errors.md has the table).

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
    #[error("{path}: pool layout is {found:?}, program expects {expected:?}")]
    WrongLayout {
        /// The pool file.
        path: PathBuf,
        /// Layout the program asked for.
        expected: String,
        /// Layout recorded in the pool.
        found: String,
    },
    /// A type's layout differs from the one recorded in the pool.
    #[error("{path}: type {type_name} does not match the pool's layout for it: {changed}")]
    LayoutMismatch {
        /// The pool file.
        path: PathBuf,
        /// The Rust (or front-end) type name.
        type_name: String,
        /// What differs, pool's value first: `size 16 -> 24`, `align`,
        /// `pointer offsets [0] -> [0, 8]`, or `field signature hash` when
        /// only the fields' names or types changed.
        changed: String,
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
    /// The pool is already open (in this or another process): its file
    /// lock is held. Not to be confused with [`Error::LockTimeout`].
    #[error("{path}: pool is already open by another handle or process")]
    AlreadyOpen {
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
    /// An STM transaction writes more than its redo record can hold (4 GiB:
    /// a record too large for a log half overflows into an array of its own).
    #[error("transaction too large: its redo record needs {needed} bytes, a record holds at most {limit} (about {} variables)", limit / 32)]
    TxTooLarge {
        /// Bytes the record would need.
        needed: u64,
        /// Bytes a record may have.
        limit: u64,
    },
    /// A transaction was started inside another on the same thread
    /// (`atomically` within `atomically`; compose with `or_else` instead).
    #[error("nested transaction: {what}")]
    NestedTransaction {
        /// What was attempted.
        what: &'static str,
    },
    /// An object was freed twice in one region.
    #[error("object {addr:#x} freed twice in one region")]
    DoubleFree {
        /// The object's address.
        addr: u64,
    },
    /// An index or range is outside an array or collection.
    #[error("index {index}+{count} out of bounds for length {len}")]
    OutOfBounds {
        /// First index asked for.
        index: u64,
        /// Elements asked for from there.
        count: u64,
        /// The length.
        len: u64,
    },
    /// The requested pool size is below the smallest pool the format allows.
    #[error("pool size {requested} bytes is too small: a pool needs at least {minimum} bytes")]
    PoolTooSmall {
        /// The size asked for (the maximum size, rounded down to whole spans).
        requested: u64,
        /// [`crate::format::MIN_POOL_SIZE`].
        minimum: u64,
    },
    /// A failure-atomic region was opened inside an STM transaction, whose
    /// body may run several times (its region would commit each time).
    #[error("a failure-atomic region (Pool::txn) cannot be opened inside an STM transaction (atomically): the body may run several times")]
    TxnInAtomically,
    /// A pointer field holds a value that is not null and not a live object
    /// of this pool (checked mode: refused at alloc, write or commit).
    #[error("{type_name} field at +{field} of object {object:#x} holds {value:#x}: {reason}")]
    BadPointerField {
        /// Type of the object holding the field.
        type_name: String,
        /// Byte offset of the field in the object's payload.
        field: u64,
        /// Payload address of the object holding the field (0: not yet allocated).
        object: u64,
        /// The offending pointer value.
        value: u64,
        /// Why it is refused.
        reason: &'static str,
    },
    /// `check` found pointer fields that do not point at live objects (the
    /// walk treated them as null); `engram check --repair` clears them.
    #[error("{count} pointer field(s) do not point at live objects; first: {first}")]
    BadFields {
        /// How many.
        count: u64,
        /// The first one, described.
        first: String,
    },
    /// A thunk in the pool names a function this program did not register
    /// (`engram::lazy::register`).
    #[error("lazy function {name:?} is not registered by this program")]
    UnknownFunction {
        /// The stable name the pool records.
        name: String,
    },
    /// An STM transaction of one pool used a variable of another open
    /// pool: one transaction uses one pool (its commit is durable through
    /// that pool's redo log alone), so it is refused and writes nothing.
    #[error("{pool}: an STM transaction of this pool used a variable of {other}; one transaction uses one pool")]
    CrossPool {
        /// The pool the transaction runs on.
        pool: PathBuf,
        /// The pool the variable belongs to.
        other: PathBuf,
    },
    /// An STM clock reached its limit: a lock word carries a 48-bit
    /// version, so a domain hands out at most `stm::MAX_VERSION`
    /// timestamps (a pool's over its whole life, across opens; the
    /// volatile domain's per process). The commit was refused before any
    /// version could wrap and wrote nothing; every later update commit of
    /// that domain is refused too, reads keep working (docs/stm.md,
    /// "Limits").
    #[error("{domain}: the STM version clock reached its limit of {limit} commit timestamps; the commit was refused and wrote nothing ({remedy})")]
    StmClockExhausted {
        /// The pool's file, or "volatile variables" for the process-wide domain of `TVar`s.
        domain: String,
        /// The last timestamp a version can carry (`stm::MAX_VERSION`).
        limit: u64,
        /// What to do.
        remedy: &'static str,
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
            Error::AlreadyOpen { .. } => 12,
            Error::Exists { .. } => 13,
            Error::RootType { .. } => 14,
            Error::TableFull { .. } => 15,
            Error::LockTimeout => 16,
            Error::Aborted => 17,
            Error::Busy { .. } => 18,
            Error::ReadOnly => 19,
            Error::TxTooLarge { .. } => 20,
            Error::NestedTransaction { .. } => 21,
            Error::DoubleFree { .. } => 22,
            Error::OutOfBounds { .. } => 23,
            Error::PoolTooSmall { .. } => 24,
            Error::TxnInAtomically => 25,
            Error::BadPointerField { .. } => 26,
            Error::BadFields { .. } => 27,
            Error::UnknownFunction { .. } => 28,
            Error::CrossPool { .. } => 29,
            Error::StmClockExhausted { .. } => 30,
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
            Error::WrongLayout { path: "p".into(), expected: "a".into(), found: "b".into() },
            Error::LayoutMismatch { path: "p".into(), type_name: "T".into(), changed: "size 1 -> 2".into() },
            Error::corrupt("c"),
            Error::PoolFull { requested: 1, max_size: 2 },
            Error::invalid("i"),
            Error::BadPointer { addr: 1 },
            Error::AlreadyOpen { path: "p".into() },
            Error::Exists { path: "p".into() },
            Error::RootType { name: "r".into(), expected: "a".into(), found: "b".into() },
            Error::TableFull { table: "root", capacity: 1 },
            Error::LockTimeout,
            Error::Aborted,
            Error::Busy { what: "x" },
            Error::ReadOnly,
            Error::TxTooLarge { needed: 2, limit: 1 },
            Error::NestedTransaction { what: "x" },
            Error::DoubleFree { addr: 1 },
            Error::OutOfBounds { index: 1, count: 1, len: 0 },
            Error::PoolTooSmall { requested: 1, minimum: 2 },
            Error::TxnInAtomically,
            Error::BadPointerField { type_name: "T".into(), field: 8, object: 16, value: 1, reason: "r" },
            Error::BadFields { count: 1, first: "f".into() },
            Error::UnknownFunction { name: "f".into() },
            Error::CrossPool { pool: "a".into(), other: "b".into() },
            Error::StmClockExhausted { domain: "p".into(), limit: 1, remedy: "r" },
        ];
        let mut codes: Vec<i32> = errs.iter().map(Error::code).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), errs.len());
        // Stable and dense: 1..=N, new codes appended.
        assert_eq!(codes, (1..=errs.len() as i32).collect::<Vec<_>>());
    }
}
