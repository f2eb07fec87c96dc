//! Why a hardware transaction aborted: the RTM status word (`EAX` after an
//! abort) decoded, and the same layout for the emulated backend, so the
//! levels above classify aborts one way on both.
//!
//! Layout (Intel SDM vol. 1, 16.3.5): bit 0 explicit (`xabort`), bit 1 the
//! hardware suggests a retry may succeed, bit 2 a conflict with another
//! logical processor, bit 3 an internal buffer overflowed (capacity), bit 4 a
//! debug breakpoint, bit 5 the abort happened in a nested transaction, bits
//! 24-31 the `xabort` code. A status of 0 is an abort with no reason given
//! (an interrupt, a system call, an unfriendly instruction).
//!
//! No crash behaviour: nothing here touches a pool.

/// `xabort` was executed; the code is in bits 24-31.
pub const EXPLICIT: u32 = 1 << 0;
/// The hardware thinks the transaction may succeed on a retry.
pub const RETRY: u32 = 1 << 1;
/// Another logical processor touched a line in the read or write set.
pub const CONFLICT: u32 = 1 << 2;
/// The footprint overflowed the tracking buffers.
pub const CAPACITY: u32 = 1 << 3;
/// A debug breakpoint was hit.
pub const DEBUG: u32 = 1 << 4;
/// The abort happened inside a nested transaction.
pub const NESTED: u32 = 1 << 5;

/// Explicit abort codes used by this crate (the `xabort` immediate).
pub mod code {
    /// The fallback (commit) lock was held at subscription.
    pub const LOCKED: u8 = 1;
    /// The body called `retry` (or an `or_else` that cannot continue in
    /// hardware): run again in software to block on the read set.
    pub const RETRY: u8 = 2;
    /// A value-based validation inside a hardware commit failed.
    pub const VALIDATE: u8 = 3;
    /// The body returned an error; the transaction is abandoned.
    pub const USER: u8 = 4;
    /// A hardware transaction handle was dropped without a commit.
    pub const DROPPED: u8 = 5;
    /// The zombie bound (`check` calls without a subscription) was reached.
    pub const ZOMBIE: u8 = 6;
    /// Largest code the RTM backend can raise (`xabort` takes an immediate,
    /// so codes are dispatched through a table of this size).
    pub const MAX: u8 = 15;
}

/// A decoded abort status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Abort(pub u32);

/// The main cause of an abort, for counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    /// `xabort(code)`.
    Explicit(u8),
    /// A conflicting access by another thread.
    Conflict,
    /// The footprint did not fit.
    Capacity,
    /// A debug breakpoint.
    Debug,
    /// Nested transaction abort with no other reason.
    Nested,
    /// No reason given (interrupt, system call, unsupported instruction).
    Other,
}

impl Cause {
    /// Index into a per-cause counter array of [`Cause::COUNT`] entries.
    pub fn index(self) -> usize {
        match self {
            Cause::Explicit(_) => 0,
            Cause::Conflict => 1,
            Cause::Capacity => 2,
            Cause::Debug => 3,
            Cause::Nested => 4,
            Cause::Other => 5,
        }
    }
    /// Number of distinct [`Cause::index`] values.
    pub const COUNT: usize = 6;
    /// Names in [`Cause::index`] order.
    pub const NAMES: [&'static str; 6] = ["explicit", "conflict", "capacity", "debug", "nested", "other"];
}

impl Abort {
    /// An explicit abort with `code`.
    pub fn explicit(code: u8) -> Abort {
        Abort(EXPLICIT | (u32::from(code) << 24))
    }
    /// The `xabort` code, if the abort was explicit.
    pub fn code(self) -> Option<u8> {
        (self.0 & EXPLICIT != 0).then_some((self.0 >> 24) as u8)
    }
    /// The hardware's hint that a retry may succeed.
    pub fn may_retry(self) -> bool {
        self.0 & RETRY != 0
    }
    /// A conflict with another thread.
    pub fn conflict(self) -> bool {
        self.0 & CONFLICT != 0
    }
    /// A capacity overflow.
    pub fn capacity(self) -> bool {
        self.0 & CAPACITY != 0
    }
    /// A debug breakpoint.
    pub fn debug(self) -> bool {
        self.0 & DEBUG != 0
    }
    /// Inside a nested transaction.
    pub fn nested(self) -> bool {
        self.0 & NESTED != 0
    }
    /// The same status with the nested bit set.
    pub fn in_nested(self) -> Abort {
        Abort(self.0 | NESTED)
    }
    /// The main cause: explicit, then capacity, conflict, debug, nested.
    pub fn cause(self) -> Cause {
        match self.code() {
            Some(c) => Cause::Explicit(c),
            None if self.capacity() => Cause::Capacity,
            None if self.conflict() => Cause::Conflict,
            None if self.debug() => Cause::Debug,
            None if self.nested() => Cause::Nested,
            None => Cause::Other,
        }
    }
}

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} (status {:#x}{})", self.cause(), self.0, if self.may_retry() { ", retry hint" } else { "" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_every_bit() {
        assert_eq!(Abort::explicit(7).cause(), Cause::Explicit(7));
        assert_eq!(Abort::explicit(7).code(), Some(7));
        assert_eq!(Abort(CONFLICT | RETRY).cause(), Cause::Conflict);
        assert!(Abort(CONFLICT | RETRY).may_retry());
        assert_eq!(Abort(CAPACITY).cause(), Cause::Capacity);
        assert!(!Abort(CAPACITY).may_retry());
        assert_eq!(Abort(DEBUG).cause(), Cause::Debug);
        assert_eq!(Abort(NESTED).cause(), Cause::Nested);
        assert!(Abort(CONFLICT).in_nested().nested());
        assert_eq!(Abort(0).cause(), Cause::Other);
        // A real status: xabort(0xff) from a nested transaction.
        let s = Abort(0xff00_0021);
        assert_eq!(s.code(), Some(0xff));
        assert!(s.nested());
        let mut seen = [false; Cause::COUNT];
        for c in [Cause::Explicit(0), Cause::Conflict, Cause::Capacity, Cause::Debug, Cause::Nested, Cause::Other] {
            seen[c.index()] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
