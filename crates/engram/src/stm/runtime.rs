//! Selectable TM runtimes for the STM (Yates & Scott's comparison, issue
//! 11): the interface (`atomically`, `retry`, `or_else`) is unchanged; what
//! changes is how a commit takes its write set.
//!
//! - [`Runtime::Fine`] (default): fine-grain versioned locks, taken one CAS
//!   at a time, then the read set validated (TL2).
//! - [`Runtime::FineHtm`]: the same software body, but the commit locks the
//!   write set *and* validates the read set in one short hardware
//!   transaction ([`crate::htm`]: real RTM where detected, else the
//!   emulated backend). A failed validation re-runs the body; a held lock
//!   or a conflict retries the hardware commit up to
//!   [`HtmPolicy::commit_attempts`] times, a capacity abort goes straight to
//!   the software commit, which is the fallback level. The rest of the
//!   commit (timestamp, redo record, the ONE fence, in-place stores, wake-
//!   ups) is unchanged, so PSTM keeps its protocol: no flush or fence runs
//!   inside a hardware transaction (they would abort it on RTM).
//!
//! Invariants: both runtimes can run at once in one process (per thread,
//! [`set_thread_runtime`]); a lock word is locked only by one committer at
//! a time. For that, with the *emulated* backend every lock-word write of
//! every commit (software ones too) goes through the backend's
//! non-transactional operations (`word_cas`, `word_store`), so an
//! emulated hardware commit sees them as conflicts. That routing is decided
//! once, at the first commit of the process ([`backend`]): it is armed when
//! the backend is RTM (no cost: plain atomics), or when an HTM runtime was
//! asked for before (`ENGRAM_STM_RUNTIME=fine-htm`, or a call to
//! [`set_default_runtime`] / [`set_thread_runtime`]). Asking for
//! `FineHtm` after an unarmed start is an error, never a silent race.
//!
//! Crash behaviour: lock bits are not part of the durable protocol (a stale
//! lock of an older epoch reads as unlocked), and a hardware commit only
//! sets lock bits, so recovery and the redo format are unchanged.

use crate::error::{Error, Result};
use crate::htm::{Abort, Cause, EmuConfig, Htm};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

/// How commits take their write set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Runtime {
    /// Fine-grain STM: a CAS per write-set lock word, then validation.
    Fine,
    /// Fine HTM: lock the write set and validate the reads in one hardware
    /// transaction; the software commit is the fallback.
    FineHtm,
    /// Hybrid (Yates & Scott's three levels) for volatile transactions:
    /// level 1 runs the whole body and the write-set locking in one
    /// hardware transaction; level 2 is `FineHtm`; level 3 the software
    /// lock commit. `Pool::atomically` starts at level 2.
    Hybrid,
}

impl Runtime {
    /// Every runtime, in the order benchmarks and reports list them.
    pub const ALL: &'static [Runtime] = &[Runtime::Fine, Runtime::FineHtm, Runtime::Hybrid];

    /// `fine`, `fine-htm` or `hybrid`.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Fine => "fine",
            Runtime::FineHtm => "fine-htm",
            Runtime::Hybrid => "hybrid",
        }
    }

    /// Parses [`Runtime::name`].
    pub fn parse(s: &str) -> Result<Runtime> {
        match s {
            "fine" => Ok(Runtime::Fine),
            "fine-htm" => Ok(Runtime::FineHtm),
            "hybrid" => Ok(Runtime::Hybrid),
            _ => Err(Error::invalid(format!("unknown STM runtime {s:?} (expected fine, fine-htm or hybrid)"))),
        }
    }

    fn code(self) -> u8 {
        self as u8
    }

    fn of(code: u8) -> Runtime {
        match code {
            1 => Runtime::FineHtm,
            2 => Runtime::Hybrid,
            _ => Runtime::Fine,
        }
    }

    /// Whether commits try the hardware commit (levels 2-3).
    pub fn uses_htm(self) -> bool {
        self != Runtime::Fine
    }
}

/// Retry policy of the hardware commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HtmPolicy {
    /// Hardware attempts before the software commit (conflicts and held
    /// locks count; a capacity abort without retry hint falls back at once).
    pub commit_attempts: u32,
    /// Level-1 attempts (the paper's choice: two) before the body runs in
    /// software; `retry`, a user error or a capacity abort leave at once.
    pub hw_attempts: u32,
}

impl Default for HtmPolicy {
    fn default() -> Self {
        HtmPolicy { commit_attempts: 4, hw_attempts: 2 }
    }
}

const UNSET: u8 = u8::MAX;
static DEFAULT: AtomicU8 = AtomicU8::new(UNSET);
static ASKED: AtomicBool = AtomicBool::new(false);
static ATTEMPTS: AtomicU64 = AtomicU64::new(4);
static HW_ATTEMPTS: AtomicU64 = AtomicU64::new(2);
static EMU_CFG: Mutex<Option<EmuConfig>> = Mutex::new(None);
static BACKEND: OnceLock<Backend> = OnceLock::new();

/// The process's HTM backend and whether commits route lock words through it.
struct Backend {
    htm: Htm,
    armed: bool,
}

thread_local! {
    static THREAD: Cell<u8> = const { Cell::new(UNSET) };
    static STATS: Cell<RuntimeStats> = const { Cell::new(RuntimeStats::ZERO) };
}

fn env_runtime() -> Option<Runtime> {
    std::env::var("ENGRAM_STM_RUNTIME").ok().and_then(|s| Runtime::parse(&s).ok())
}

fn init() -> &'static Backend {
    BACKEND.get_or_init(|| {
        let forced = EMU_CFG.lock().ok().and_then(|c| c.clone());
        let htm = match forced {
            Some(cfg) => Htm::emulated(cfg),
            None => Htm::auto(EmuConfig::default()),
        };
        let asked = ASKED.load(Ordering::SeqCst) || env_runtime().is_some_and(|r| r != Runtime::Fine);
        Backend { armed: htm.is_rtm() || asked, htm }
    })
}

/// The process's HTM backend (chosen at the first commit: RTM when
/// detected and `ENGRAM_HTM` is not `emulated`, else the emulated backend).
pub fn backend() -> &'static Htm {
    &init().htm
}

/// Whether hardware commits can run in this process (see the module doc).
pub fn htm_armed() -> bool {
    init().armed
}

/// Uses the emulated backend with schedule `cfg` (even where RTM exists:
/// tests use it to force every abort cause) and arms the HTM runtimes.
/// Takes effect only before the process's first commit; returns whether it
/// did.
pub fn configure_emulated(cfg: EmuConfig) -> bool {
    if BACKEND.get().is_some() {
        return false;
    }
    if let Ok(mut c) = EMU_CFG.lock() {
        *c = Some(cfg);
    }
    ASKED.store(true, Ordering::SeqCst);
    BACKEND.get().is_none()
}

/// Sets the hardware commit's retry policy (process-wide).
pub fn set_policy(p: HtmPolicy) {
    ATTEMPTS.store(u64::from(p.commit_attempts.max(1)), Ordering::Relaxed);
    HW_ATTEMPTS.store(u64::from(p.hw_attempts), Ordering::Relaxed);
}

/// The hardware commit's retry policy.
pub fn policy() -> HtmPolicy {
    HtmPolicy { commit_attempts: ATTEMPTS.load(Ordering::Relaxed) as u32, hw_attempts: HW_ATTEMPTS.load(Ordering::Relaxed) as u32 }
}

fn check_armed(rt: Runtime) -> Result<()> {
    ASKED.store(true, Ordering::SeqCst);
    if rt.uses_htm() && !htm_armed() {
        return Err(Error::invalid(
            "an HTM STM runtime (fine-htm, hybrid) was asked for after the process's first commit ran without it on the emulated backend; \
             set ENGRAM_STM_RUNTIME=fine-htm or choose a runtime before the first transaction",
        ));
    }
    Ok(())
}

/// Sets the runtime of every thread without its own
/// ([`set_thread_runtime`]). Default: `ENGRAM_STM_RUNTIME`, else `Fine`.
pub fn set_default_runtime(rt: Runtime) -> Result<()> {
    check_armed(rt)?;
    DEFAULT.store(rt.code(), Ordering::SeqCst);
    Ok(())
}

/// Sets the calling thread's runtime (`None`: the default again).
pub fn set_thread_runtime(rt: Option<Runtime>) -> Result<()> {
    if let Some(rt) = rt {
        check_armed(rt)?;
    }
    THREAD.with(|t| t.set(rt.map_or(UNSET, Runtime::code)));
    Ok(())
}

/// The calling thread's runtime.
pub fn current() -> Runtime {
    let t = THREAD.with(Cell::get);
    if t != UNSET {
        return Runtime::of(t);
    }
    let d = DEFAULT.load(Ordering::Relaxed);
    if d != UNSET {
        return Runtime::of(d);
    }
    env_runtime().unwrap_or(Runtime::Fine)
}

/// Counts of the calling thread's commits under the HTM runtimes (take
/// deltas; thread-local, so counting adds no shared write).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Update commits whose write set was locked by a hardware transaction.
    pub hw_commits: u64,
    /// Update commits that fell back to the software lock commit.
    pub sw_fallbacks: u64,
    /// Hardware commits aborted, by [`Cause::index`].
    pub hw_aborts: [u64; Cause::COUNT],
    /// Hardware commits whose read validation failed (the body ran again).
    pub validate_aborts: u64,
    /// Hardware commits that met a write-set lock held by another commit.
    pub locked_aborts: u64,
    /// Transactions committed at level 1 (Hybrid: all in hardware).
    pub l1_commits: u64,
    /// Level-1 attempts aborted, by [`Cause::index`] (explicit codes:
    /// `LOCKED` a subscribed lock word was held, `RETRY` the body retried,
    /// `USER` it failed).
    pub l1_aborts: [u64; Cause::COUNT],
}

impl RuntimeStats {
    const ZERO: RuntimeStats = RuntimeStats {
        hw_commits: 0,
        sw_fallbacks: 0,
        hw_aborts: [0; Cause::COUNT],
        validate_aborts: 0,
        locked_aborts: 0,
        l1_commits: 0,
        l1_aborts: [0; Cause::COUNT],
    };

    /// Hardware aborts of every cause.
    pub fn aborts(&self) -> u64 {
        self.hw_aborts.iter().sum()
    }
}

/// The calling thread's [`RuntimeStats`].
pub fn stats() -> RuntimeStats {
    STATS.with(Cell::get)
}

pub(crate) fn count(f: impl FnOnce(&mut RuntimeStats)) {
    STATS.with(|c| {
        let mut s = c.get();
        f(&mut s);
        c.set(s);
    });
}

pub(crate) fn count_abort(a: Abort) {
    count(|s| s.hw_aborts[a.cause().index()] += 1);
}

/// Level-1 attempts a volatile transaction of this thread gets.
pub(crate) fn level1_attempts() -> u32 {
    if current() == Runtime::Hybrid && htm_armed() {
        policy().hw_attempts
    } else {
        0
    }
}

/// Counts a level-1 abort; returns the level-1 attempts left after it.
pub(crate) fn level1_failed(a: Abort, left: u32) -> u32 {
    count(|s| s.l1_aborts[a.cause().index()] += 1);
    let leave =
        matches!(a.code(), Some(crate::htm::abort::code::RETRY | crate::htm::abort::code::USER)) || (a.capacity() && !a.may_retry());
    if a.code() == Some(crate::htm::abort::code::LOCKED) {
        for _ in 0..64 {
            std::hint::spin_loop();
        }
    }
    if leave {
        0
    } else {
        left.saturating_sub(1)
    }
}

/// The backend lock words must be written through, if any (emulated and
/// armed). Called at the start of every update commit, before its first
/// lock-word write, so the routing is fixed before any commit runs.
#[inline]
pub(crate) fn route() -> Option<&'static Htm> {
    let b = init();
    (b.armed && !b.htm.is_rtm()).then_some(&b.htm)
}

/// A lock-word CAS (through the emulated backend when routed).
#[inline]
pub(crate) fn word_cas(via: Option<&Htm>, w: &AtomicU64, old: u64, new: u64) -> bool {
    match via {
        Some(h) => h.nt_cas(w, old, new),
        None => w.compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire).is_ok(),
    }
}

/// A lock-word store (through the emulated backend when routed).
#[inline]
pub(crate) fn word_store(via: Option<&Htm>, w: &AtomicU64, x: u64) {
    match via {
        Some(h) => h.nt_store(w, x),
        None => w.store(x, Ordering::Release),
    }
}
