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
//! - [`Runtime::Coarse`]: the paper's coarse-grain level as a runtime of
//!   its own: a commit takes one global commit lock (exclusive), stores
//!   the write set's words locked with plain stores (no per-variable CAS:
//!   nobody else can lock a word while it holds the lock), validates the
//!   read set under it, and runs the durable tail unchanged (PSTM keeps the
//!   redo record and the ONE fence). See `engine/coarse.rs`.
//!
//! Invariants: the runtimes can run at once in one process (per thread,
//! [`set_thread_runtime`]); a lock word is locked only by one committer at
//! a time. For that, with the *emulated* backend every lock-word write of
//! every commit (software ones too) goes through the backend's
//! non-transactional operations (`word_cas`, `word_store`), so an
//! emulated hardware commit sees them as conflicts. Whether hardware
//! commits may run at all is decided once, at the first commit of the
//! process ([`backend`]), on every backend alike: they are armed when an
//! HTM runtime was asked for before (`ENGRAM_STM_RUNTIME=fine-htm`, or a
//! call to [`set_default_runtime`] / [`set_thread_runtime`] /
//! [`configure_emulated`]). Armed, lock-word writes are routed through the
//! emulated backend (RTM needs no routing: plain atomics), and the software
//! commit gives up what is sound only while no hardware commit can run
//! (the read-set skip, unrecorded reads, the lean commit). So RTM alone
//! does not arm: a process that never asks for an HTM runtime keeps the
//! fast paths on an RTM machine too. Asking for `FineHtm` or `Hybrid`
//! after an unarmed start is an error, never a silent race, on RTM and
//! emulated backends alike.
//!
//! The coarse lock is armed the same way (at the first commit: when any
//! runtime was chosen explicitly before, [`configure_emulated`] was called,
//! or `ENGRAM_STM_RUNTIME=coarse|hybrid`): then every other update commit holds it
//! shared from locking its write set to its last in-place store, and
//! level-1 hardware transactions subscribe to its word. Asking for
//! `Coarse` after an unarmed start is an error.
//!
//! Crash behaviour: lock bits are not part of the durable protocol (a stale
//! lock of an older epoch reads as unlocked), and a hardware commit only
//! sets lock bits, so recovery and the redo format are unchanged.

use crate::error::{Error, Result};
pub use crate::htm::hybrid::{Attempts, Subscription};
use crate::htm::{Abort, Cause, EmuConfig, Htm};
/// Value-based validation counts of `Coarse` commits (`engine/values.rs`).
pub use crate::stm::engine::{value_checks, ValueChecks};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
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
    /// hardware transaction; level 2 is `FineHtm`; level 3 the commit
    /// under the coarse lock (as [`Runtime::Coarse`]'s) when it is armed,
    /// else the fine-grain software commit. `Pool::atomically` starts at
    /// level 2.
    Hybrid,
    /// Coarse-grain STM: one global commit lock, the read set validated
    /// under it (by value where recorded: `TVar`s by `Arc` pointer, plain
    /// pool values by bytes), no per-variable lock CAS (volatile and
    /// persistent).
    Coarse,
}

impl Runtime {
    /// Every runtime, in the order benchmarks and reports list them.
    pub const ALL: &'static [Runtime] = &[Runtime::Fine, Runtime::FineHtm, Runtime::Hybrid, Runtime::Coarse];

    /// `fine`, `fine-htm`, `hybrid` or `coarse`.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Fine => "fine",
            Runtime::FineHtm => "fine-htm",
            Runtime::Hybrid => "hybrid",
            Runtime::Coarse => "coarse",
        }
    }

    /// Parses [`Runtime::name`].
    pub fn parse(s: &str) -> Result<Runtime> {
        match s {
            "fine" => Ok(Runtime::Fine),
            "fine-htm" => Ok(Runtime::FineHtm),
            "hybrid" => Ok(Runtime::Hybrid),
            "coarse" => Ok(Runtime::Coarse),
            _ => Err(Error::invalid(format!("unknown STM runtime {s:?} (expected fine, fine-htm, hybrid or coarse)"))),
        }
    }

    fn code(self) -> u8 {
        self as u8
    }

    fn of(code: u8) -> Runtime {
        match code {
            1 => Runtime::FineHtm,
            2 => Runtime::Hybrid,
            3 => Runtime::Coarse,
            _ => Runtime::Fine,
        }
    }

    /// Whether commits try the hardware commit (levels 2-3).
    pub fn uses_htm(self) -> bool {
        matches!(self, Runtime::FineHtm | Runtime::Hybrid)
    }
}

/// Retry policy of the hardware levels (the paper's: hardware-commit
/// attempts proportional to the threads, two full-hardware attempts, lazy
/// subscription). Default: [`HtmPolicy::from_env`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HtmPolicy {
    /// Hardware-commit attempts before the software commit (conflicts and
    /// held locks count; a capacity abort without retry hint falls back at
    /// once). Default: one per thread.
    pub commit_attempts: Attempts,
    /// Level-1 attempts before the body runs in software; `retry`, a user
    /// error or a capacity abort leave at once. Default: two.
    pub hw_attempts: Attempts,
    /// Threads, for [`Attempts::PerThread`] (default: available parallelism).
    pub threads: u32,
    /// When level 1 reads the fallback locks (`ENGRAM_STM_SUBSCRIPTION=
    /// lazy|early`, default lazy): see `engine/level1.rs`.
    pub subscription: Subscription,
    /// Lazy level 1 re-checks its subscription every this many reads (so a
    /// zombie that loops reading is bounded; 0: only at commit).
    pub zombie_reads: u32,
}

impl Default for HtmPolicy {
    fn default() -> Self {
        HtmPolicy {
            commit_attempts: Attempts::PerThread(1),
            hw_attempts: Attempts::Fixed(2),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            subscription: Subscription::Lazy,
            zombie_reads: 256,
        }
    }
}

impl HtmPolicy {
    /// The default, with `ENGRAM_STM_SUBSCRIPTION` (`lazy` or `early`;
    /// anything else is ignored) applied.
    pub fn from_env() -> HtmPolicy {
        let mut p = HtmPolicy::default();
        if let Ok(s) = std::env::var("ENGRAM_STM_SUBSCRIPTION") {
            if let Ok(sub) = parse_subscription(&s) {
                p.subscription = sub;
            }
        }
        p
    }

    /// `n` attempts resolved against [`HtmPolicy::threads`].
    pub fn resolve(&self, a: Attempts) -> u32 {
        match a {
            Attempts::Fixed(n) => n,
            Attempts::PerThread(k) => k.saturating_mul(self.threads.max(1)),
        }
    }
}

/// Parses `lazy` or `early`.
pub fn parse_subscription(s: &str) -> Result<Subscription> {
    match s {
        "lazy" => Ok(Subscription::Lazy),
        "early" => Ok(Subscription::Early),
        _ => Err(Error::invalid(format!("unknown subscription {s:?} (expected lazy or early)"))),
    }
}

const UNSET: u8 = u8::MAX;
static DEFAULT: AtomicU8 = AtomicU8::new(UNSET);
static ASKED: AtomicBool = AtomicBool::new(false);
static DEFAULT_POLICY: OnceLock<HtmPolicy> = OnceLock::new();
static POLICY: Mutex<Option<HtmPolicy>> = Mutex::new(None);
/// The set policy's resolved figures (read on every commit, so atomics).
static POLICY_SET: AtomicBool = AtomicBool::new(false);
static COMMIT_N: AtomicU32 = AtomicU32::new(0);
static HW_N: AtomicU32 = AtomicU32::new(0);
static EARLY: AtomicBool = AtomicBool::new(false);
static ZOMBIE_READS: AtomicU32 = AtomicU32::new(0);
static EMU_CFG: Mutex<Option<EmuConfig>> = Mutex::new(None);
static BACKEND: OnceLock<Backend> = OnceLock::new();

/// The process's HTM backend and whether commits route lock words through it.
struct Backend {
    htm: Htm,
    armed: bool,
    /// Whether the coarse lock is in use (`engine/coarse.rs`).
    coarse: bool,
}

thread_local! {
    static THREAD: Cell<u8> = const { Cell::new(UNSET) };
    static STATS: Cell<RuntimeStats> = const { Cell::new(RuntimeStats::ZERO) };
}

/// `ENGRAM_STM_RUNTIME`, read once per process: [`current`] runs on every
/// transaction, and reading the environment takes a lock and allocates.
fn env_runtime() -> Option<Runtime> {
    static ENV: OnceLock<Option<Runtime>> = OnceLock::new();
    *ENV.get_or_init(|| std::env::var("ENGRAM_STM_RUNTIME").ok().and_then(|s| Runtime::parse(&s).ok()))
}

fn init() -> &'static Backend {
    BACKEND.get_or_init(|| {
        let forced = EMU_CFG.lock().ok().and_then(|c| c.clone());
        let htm = match forced {
            Some(cfg) => Htm::emulated(cfg),
            None => Htm::auto(EmuConfig::default()),
        };
        let explicit = ASKED.load(Ordering::SeqCst);
        let asked = explicit || env_runtime().is_some_and(|r| r != Runtime::Fine);
        let coarse = explicit || matches!(env_runtime(), Some(Runtime::Coarse | Runtime::Hybrid));
        // RTM alone does not arm (module doc): arming costs every software
        // commit its fast paths.
        Backend { armed: asked, coarse, htm }
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

/// Whether hardware commits may run in this process: [`htm_armed`] once
/// the backend is chosen (at the first commit), `true` before (without
/// choosing it, so a later `configure_emulated` still takes effect).
pub(crate) fn htm_maybe_armed() -> bool {
    BACKEND.get().is_none_or(|b| b.armed)
}

/// Whether `Coarse` commits can run in this process, so the others
/// coordinate with them (see the module doc).
pub fn coarse_armed() -> bool {
    init().coarse
}

/// Whether `Coarse` commits may run (false only once the process's first
/// commit ran without arming the lock); cheap: never initialises.
#[inline]
pub(crate) fn coarse_possible() -> bool {
    BACKEND.get().is_none_or(|b| b.coarse)
}

/// Uses the emulated backend with schedule `cfg` (even where RTM exists:
/// tests use it to force every abort cause) and arms every runtime.
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

/// Sets the hardware levels' retry policy (process-wide).
pub fn set_policy(p: HtmPolicy) {
    if let Ok(mut c) = POLICY.lock() {
        *c = Some(p);
    }
    COMMIT_N.store(p.resolve(p.commit_attempts).max(1), Ordering::Relaxed);
    HW_N.store(p.resolve(p.hw_attempts), Ordering::Relaxed);
    EARLY.store(p.subscription == Subscription::Early, Ordering::Relaxed);
    ZOMBIE_READS.store(p.zombie_reads, Ordering::Relaxed);
    POLICY_SET.store(true, Ordering::Release);
}

/// The hardware levels' retry policy.
pub fn policy() -> HtmPolicy {
    POLICY.lock().ok().and_then(|c| *c).unwrap_or_else(|| *default_policy())
}

fn default_policy() -> &'static HtmPolicy {
    DEFAULT_POLICY.get_or_init(HtmPolicy::from_env)
}

/// Hardware-commit attempts, resolved.
pub(crate) fn commit_attempts() -> u32 {
    if POLICY_SET.load(Ordering::Acquire) {
        return COMMIT_N.load(Ordering::Relaxed);
    }
    let p = default_policy();
    p.resolve(p.commit_attempts).max(1)
}

/// Level 1's subscription and its zombie re-check period, resolved.
pub(crate) fn subscription() -> (Subscription, u32) {
    if POLICY_SET.load(Ordering::Acquire) {
        let sub = if EARLY.load(Ordering::Relaxed) { Subscription::Early } else { Subscription::Lazy };
        return (sub, ZOMBIE_READS.load(Ordering::Relaxed));
    }
    let p = default_policy();
    (p.subscription, p.zombie_reads)
}

fn hw_attempts() -> u32 {
    if POLICY_SET.load(Ordering::Acquire) {
        return HW_N.load(Ordering::Relaxed);
    }
    let p = default_policy();
    p.resolve(p.hw_attempts)
}

fn check_armed(rt: Runtime) -> Result<()> {
    ASKED.store(true, Ordering::SeqCst);
    if rt == Runtime::Coarse && !coarse_armed() {
        return Err(Error::invalid(
            "the coarse STM runtime was asked for after the process's first commit ran without it; \
             set ENGRAM_STM_RUNTIME=coarse or choose a runtime before the first transaction",
        ));
    }
    if rt.uses_htm() && !htm_armed() {
        return Err(Error::invalid(
            "an HTM STM runtime (fine-htm, hybrid) was asked for after the process's first commit ran without it; \
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
    /// Update commits under the coarse lock: every `Coarse` commit, and
    /// `Hybrid`'s level-3 commits (those count in `sw_fallbacks` too).
    pub coarse_commits: u64,
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
        coarse_commits: 0,
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
        hw_attempts()
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

/// A lock-word load for validation (through the emulated backend when
/// routed: `nt_load` waits out an emulated commit that holds the word's
/// stripe, between validating its reads and storing its writes; a plain
/// load there could miss its locks and let two commits each validate
/// against the other's old state — a write skew RTM cannot produce, since
/// `xend` is atomic).
#[inline]
pub(crate) fn word_load(via: Option<&Htm>, w: &AtomicU64) -> u64 {
    match via {
        Some(h) => h.nt_load(w),
        None => w.load(Ordering::Acquire),
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
