//! STM clock domains: the version clock, the serial lock and the `retry`
//! wait list, one set per pool (in its `StmPool`) and one process-wide
//! [`VOLATILE`] set for volatile `TVar`s / `TField`s.
//!
//! Which domain a variable belongs to: a `PTVar`/`PTField` to its pool's,
//! every volatile variable to [`VOLATILE`]. A variable's version is always
//! a timestamp of its own domain's clock, so versions of one domain are
//! only ever compared with a snapshot of the same clock. Two pools'
//! transactions therefore share no clock line, serial lock or wait list.
//!
//! Rules that keep a transaction that touches two domains (one pool and
//! volatile variables) serialisable and opaque:
//! - it samples both clocks when it begins, before its first read, and a
//!   snapshot extension samples both again before re-validating every read;
//!   a read is checked against its own domain's snapshot;
//! - a commit locks its whole write set before it takes a timestamp in
//!   each domain it writes (one `fetch_add` per domain written, none in a
//!   domain only read), then validates;
//! - the TL2 validation skip holds per domain: it is taken only if, in
//!   every domain the transaction read, nobody else took a timestamp since
//!   its snapshot (its own timestamp is `rv + 1`, or, in a domain it only
//!   read, the clock still reads `rv`, loaded after a SeqCst fence that
//!   follows the locks).
//!
//! Why that suffices: a writer U takes its timestamps only after locking
//! all it writes. If a transaction T read a value U wrote, U's timestamp in
//! that domain is at or below T's snapshot there, so U held all its locks
//! before T began, and any other variable of U that T reads afterwards is
//! seen locked or newer than T's snapshot (extension re-validates, or T
//! conflicts). So T never sees part of a writer; and a writer that changes
//! something T read after T read it has a timestamp above T's snapshot in
//! that domain, which the skip rule or validation catches.
//!
//! The serial lock: a transaction that keeps losing holds its pool's lock
//! exclusively (and the volatile domain's too if its last attempt touched a
//! volatile variable, or if it has no pool), always pool first; a commit
//! takes, shared and only while a serial transaction exists, the lock of
//! each domain it writes, in the same order. No thread waits for a lock
//! while holding one taken later in that order, so no deadlock.
//!
//! Where a pool's clock starts ([`ClockStart`]): above its persisted
//! reservation, and by default also above every reservation of the process
//! ([`HIGH`], while that is at most half the clock's range: [`LIFT_MAX`]),
//! so versions are unique per process. Versions repeated across
//! pools are harmless (nothing process-wide is keyed by a version;
//! `tests/stm_clocks.rs` runs the crash explorer with colliding clocks);
//! the process-wide start is defence in depth.
//!
//! No crash behaviour: volatile. (A pool's persisted clock reservation
//! lives beside its domain in `StmPool`; the pool's clock starts above it.)

use crate::error::{Error, Result};
use crate::htm::wakeup::WakeList;
use parking_lot::{RwLock, RwLockWriteGuard};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// A clock on a cache line of its own (committers of one domain write it;
/// nothing else should share the line).
#[repr(align(128))]
pub(crate) struct Clock(pub(super) AtomicU64);

/// One domain's shared STM state.
pub(crate) struct Domain {
    pub(super) clock: Clock,
    /// Held exclusively by a transaction that keeps losing (`run.rs`).
    pub(super) serial: RwLock<()>,
    /// Transactions running, or waiting to run, serially in this domain.
    pub(super) serial_wanted: AtomicU32,
    /// Transactions blocked in `retry` on a variable of this domain.
    pub(crate) waiters: WakeList,
}

/// The highest clock reservation any pool of this process has persisted
/// (raised only when a reservation is persisted: once per 2^20 commits of a
/// pool, never on the hot path). Under [`ClockStart::Process`] a pool's
/// clock starts at or above it, so no version is handed out twice in one
/// process, in any pool, as with the single clock this replaced.
pub(crate) static HIGH: AtomicU64 = AtomicU64::new(1);

/// Where a pool's clock starts when its STM state is made (first use after
/// an open). Either way it starts above the pool's own persisted
/// reservation, which is all a pool's versions need: each is compared only
/// with its own domain's clock, and nothing process-wide is keyed by a
/// version (docs/stm.md, "Versions repeated across pools").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockStart {
    /// Also at or above every reservation any pool of this process has
    /// persisted (`domain::HIGH`): versions are unique per process (the default;
    /// defence in depth, it costs nothing on the hot path).
    Process,
    /// Just above the pool's own reservation: two pools of one process (or
    /// a pool opened after another process ran) hand out the same version
    /// numbers. Tests use it to prove that repeats are harmless.
    Pool,
}

/// 0: not chosen yet (the environment decides on first use); else
/// `ClockStart as u8 + 1`.
static START: AtomicU8 = AtomicU8::new(0);

/// Chooses where the clocks of pools whose STM state is made from now on
/// start (process-wide; pools already in use keep their clocks).
pub fn set_clock_start(c: ClockStart) {
    START.store(c as u8 + 1, Ordering::Release);
}

/// The process's [`ClockStart`]: [`set_clock_start`]'s, else
/// `ENGRAM_STM_CLOCK_START` (`process` or `pool`; unset: `process`).
pub fn clock_start() -> Result<ClockStart> {
    match START.load(Ordering::Acquire) {
        1 => return Ok(ClockStart::Process),
        2 => return Ok(ClockStart::Pool),
        _ => {}
    }
    let c = parse_start(std::env::var("ENGRAM_STM_CLOCK_START"))?;
    // (a racing set_clock_start wins)
    let _ = START.compare_exchange(0, c as u8 + 1, Ordering::AcqRel, Ordering::Acquire);
    clock_start()
}

/// `ENGRAM_STM_CLOCK_START` as read: unset means [`ClockStart::Process`].
fn parse_start(v: std::result::Result<String, std::env::VarError>) -> Result<ClockStart> {
    const WANT: &str = "expected \"process\" or \"pool\"";
    match v {
        Err(std::env::VarError::NotPresent) => Ok(ClockStart::Process),
        Ok(v) if v == "process" => Ok(ClockStart::Process),
        Ok(v) if v == "pool" => Ok(ClockStart::Pool),
        Ok(v) => Err(Error::invalid(format!("ENGRAM_STM_CLOCK_START={v:?}: {WANT}"))),
        Err(_) => Err(Error::invalid(format!("ENGRAM_STM_CLOCK_START is not valid Unicode: {WANT}"))),
    }
}

/// Under [`ClockStart::Process`], a pool's clock is lifted to the process's
/// [`HIGH`] only while that is at most this: the lift is defence in depth,
/// and it must not age a young pool toward the clock's limit
/// (`word::MAX_VERSION`, docs/stm.md "Limits") because an old pool was
/// used in the same process.
const LIFT_MAX: u64 = crate::stm::word::MAX_VERSION / 2;

/// The first clock value of a pool whose persisted reservation is
/// `reserved` (see [`ClockStart`]).
pub(crate) fn start_above(reserved: u64) -> Result<u64> {
    Ok(match clock_start()? {
        ClockStart::Pool => reserved + 1,
        ClockStart::Process => {
            let high = HIGH.fetch_max(reserved, Ordering::AcqRel);
            (reserved + 1).max(if high <= LIFT_MAX { high } else { 0 })
        }
    })
}

/// The process-wide domain of volatile variables (and of volatile-only
/// transactions).
pub(crate) static VOLATILE: Domain = Domain::new(1);

impl Domain {
    /// A domain whose clock starts at `clock`.
    pub(crate) const fn new(clock: u64) -> Domain {
        Domain {
            clock: Clock(AtomicU64::new(clock)),
            serial: parking_lot::const_rwlock(()),
            serial_wanted: AtomicU32::new(0),
            waiters: WakeList::new(),
        }
    }

    /// The clock now (a snapshot).
    #[inline]
    pub(super) fn now(&self) -> u64 {
        self.clock.0.load(Ordering::Acquire)
    }

    /// A commit timestamp.
    #[inline]
    pub(super) fn stamp(&self) -> u64 {
        self.clock.0.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Whether nobody took a timestamp in this domain since snapshot `rv`,
    /// checked after the caller's write locks (the fence orders the check
    /// after them: a writer that stamps later sees the locks).
    pub(super) fn quiet_since(&self, rv: u64) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.clock.0.load(Ordering::SeqCst) == rv
    }

    /// The commit side of the serial lock: held shared over a commit while
    /// a serial transaction exists, else nothing.
    pub(super) fn commit_guard(&self) -> Option<parking_lot::RwLockReadGuard<'_, ()>> {
        (self.serial_wanted.load(Ordering::SeqCst) > 0).then(|| self.serial.read())
    }
}

/// A serial attempt's hold on one domain: its lock exclusively, counted in
/// `serial_wanted` until dropped.
pub(super) struct SerialHold<'d> {
    domain: &'d Domain,
    guard: Option<RwLockWriteGuard<'d, ()>>,
}

impl<'d> SerialHold<'d> {
    pub(super) fn take(domain: &'d Domain) -> Self {
        domain.serial_wanted.fetch_add(1, Ordering::SeqCst);
        SerialHold { domain, guard: Some(domain.serial.write()) }
    }
}

impl Drop for SerialHold<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.domain.serial_wanted.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The environment's clock start: unset is the process-wide start, a
    /// wrong value a typed error naming the variable.
    #[test]
    fn clock_start_from_the_environment() {
        use std::env::VarError;
        assert_eq!(parse_start(Err(VarError::NotPresent)).unwrap(), ClockStart::Process);
        assert_eq!(parse_start(Ok("process".into())).unwrap(), ClockStart::Process);
        assert_eq!(parse_start(Ok("pool".into())).unwrap(), ClockStart::Pool);
        for bad in [Ok("Pool".to_string()), Ok(String::new()), Err(VarError::NotUnicode("x".into()))] {
            let e = parse_start(bad).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains("ENGRAM_STM_CLOCK_START"), "{e}");
        }
    }
}
