//! The deferred recovery GC: after a crash the pool opens at once, and the
//! garbage the crash left is collected in the background (docs/gc.md).
//!
//! Pipeline:
//! 1. open (`open.rs`) undoes interrupted regions as always, then *seals*
//!    the heap (`Heap::seal_small_spans`: every slot of every small span in
//!    use counts as allocated, so the program allocates from free spans;
//!    large and huge objects are in use until swept) and clears the
//!    kernel's soft-dirty bits (`softdirty.rs`);
//! 2. a background thread marks from the roots and logs while the program
//!    runs (`gc::ConcurrentMark`; marking only reads the heap);
//! 3. the final pause: the GC gate held exclusively (no region running),
//!    layers quiesced, thread caches drained; the pages written since step 1
//!    are read from pagemap, and the roots, logs and every marked object on
//!    a written page (or a page not present) are scanned again, to a
//!    fixpoint; then the sweep, as in an online collection. The pause is
//!    proportional to the pages written during step 2.
//!
//! Why the final marks are complete: an object reachable at the pause but
//! unmarked hangs, on its path from a root, below a first unmarked object
//! whose holder is marked (or a root); the holder was scanned after the
//! clear, so the field must have changed since, which dirtied its page.
//!
//! What it keeps true:
//! - Nothing is freed before the final pause, and frees the program makes
//!   meanwhile are exact (only objects it unlinked): a crash during the
//!   deferred phase leaves a pool the next open recovers (again).
//! - A clean close before the final pause does not write the sealed
//!   bitmaps as exact and leaves the clean flag 0: the next open runs the
//!   recovery GC again. Close stops the background mark (it does not wait).
//! - Online collection waits for the deferred GC to finish first.
//! - Relocation, `trace` mode, read-only opens, a kernel without soft-dirty
//!   bits (unless the region card table is asked for), a second soft-dirty
//!   deferred GC in the same process (the bits are process-wide) and
//!   `ENGRAM_RECOVERY_GC=eager` collect eagerly in open.
//! - With the region card table (`RecoveryGc::DeferredCards`) the write
//!   barrier is the regions' own bookkeeping: every logged range and every
//!   allocated object marks its pages. Write paths outside regions (the STM,
//!   persistent laziness) would not, so their first use in this open waits
//!   for the collection to finish ([`Deferred::before_unregioned_writes`]).

use super::PoolInner;
use crate::error::{Error, Result};
use crate::gc::{ConcurrentMark, MarkStats};
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When a pool opened after a crash collects its garbage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecoveryGc {
    /// `ENGRAM_RECOVERY_GC` (`eager`, `deferred` or `deferred-cards`) if
    /// set, else `Eager`.
    #[default]
    Auto,
    /// In `Pool::open`, before it returns.
    Eager,
    /// In the background, with the kernel's soft-dirty bits as the write
    /// barrier; eagerly where the kernel lacks them.
    Deferred,
    /// In the background, with the regions' card table as the write
    /// barrier (any kernel): for programs whose pool writes all go through
    /// regions (`Pool::txn`, the C ABI's regions, the Go front end's
    /// transactions). The STM and persistent laziness wait for the
    /// collection to finish before their first write; stores a front end
    /// makes outside any region (Go's `Persist` of data written directly)
    /// are not seen, so such a program must not ask for this (docs/gc.md).
    DeferredCards,
}

impl RecoveryGc {
    /// `Auto` resolved from the environment: `ENGRAM_RECOVERY_GC` unset or
    /// empty means `Eager`; a value other than `eager`, `deferred` or
    /// `deferred-cards` is an [`Error::InvalidArgument`] (a misspelt policy
    /// must not silently become another one).
    pub fn resolve(self) -> Result<RecoveryGc> {
        match self {
            RecoveryGc::Auto => match std::env::var("ENGRAM_RECOVERY_GC") {
                Err(std::env::VarError::NotPresent) => Ok(RecoveryGc::Eager),
                Ok(v) => Self::parse(&v),
                Err(std::env::VarError::NotUnicode(_)) => Err(Error::invalid("ENGRAM_RECOVERY_GC is not UTF-8")),
            },
            other => Ok(other),
        }
    }

    /// The policy an `ENGRAM_RECOVERY_GC` value names (`""` is `Eager`).
    pub fn parse(v: &str) -> Result<RecoveryGc> {
        match v {
            "" | "eager" => Ok(RecoveryGc::Eager),
            "deferred" => Ok(RecoveryGc::Deferred),
            "deferred-cards" => Ok(RecoveryGc::DeferredCards),
            _ => Err(Error::invalid(format!("ENGRAM_RECOVERY_GC={v:?}: expected eager, deferred or deferred-cards"))),
        }
    }
}

/// Where the recovery GC of this open stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecoveryGcState {
    /// The pool was closed cleanly (or just created): nothing to collect.
    #[default]
    NotNeeded,
    /// Collected in `Pool::open`.
    Eager,
    /// Collecting in the background.
    Pending,
    /// The background collection finished.
    Finished,
    /// Stopped by close (or a simulated crash) before it finished: the next
    /// open recovers again.
    Stopped,
    /// Failed (the error code is in the status): the heap stays sealed and
    /// the next open recovers again.
    Failed,
}

/// Progress of the recovery GC (`Pool::recovery_gc_status`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryGcStatus {
    /// Where it stands.
    pub state: RecoveryGcState,
    /// Objects marked by the concurrent phase.
    pub marked: u64,
    /// Live objects after the sweep.
    pub live_objects: u64,
    /// Slots and objects the sweep freed (sealed slots that held no live
    /// object count too).
    pub freed: u64,
    /// Pool pages written during the concurrent phase (or not present).
    pub dirty_pages: u64,
    /// Marked objects scanned again in the final pause.
    pub rescanned: u64,
    /// Pointer fields found pointing at no live object (treated as null).
    pub bad_fields: u64,
    /// The concurrent phase's wall time.
    pub concurrent: Duration,
    /// The final pause: wall time with the world stopped.
    pub pause: Duration,
    /// The final pause's CPU time (of the collecting thread).
    pub pause_cpu: Duration,
    /// With `Failed`: the error's stable code.
    pub error_code: u32,
}

/// Test hook of the deferred GC: called on its thread with the objects
/// marked so far at every stop check of the concurrent phase (every 4096
/// objects) and with `u64::MAX` before the final pause; the second argument
/// says whether the pool is being closed or crashed. A hook that blocks
/// holds the GC there (and must return once the pool is stopping).
#[derive(Clone)]
pub struct RecoveryGcHook(pub Arc<HookFn>);

/// The function of a [`RecoveryGcHook`]: (objects marked, is the pool stopping).
pub type HookFn = dyn Fn(u64, &dyn Fn() -> bool) + Send + Sync;

// A test hook: options stay usable across `catch_unwind` (as before it).
impl std::panic::UnwindSafe for RecoveryGcHook {}
impl std::panic::RefUnwindSafe for RecoveryGcHook {}

impl std::fmt::Debug for RecoveryGcHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecoveryGcHook")
    }
}

/// The deferred GC's shared state, in every `PoolInner`.
#[derive(Default)]
pub(crate) struct Deferred {
    status: Mutex<RecoveryGcStatus>,
    changed: Condvar,
    stop: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub hook: Option<RecoveryGcHook>,
    /// With `RecoveryGc::DeferredCards`: the pages regions wrote, used
    /// instead of the soft-dirty bits.
    pub cards: Option<Cards>,
    /// Regions card their writes (set in open with `cards`; cleared when
    /// the collection ended, so later regions pay one load, not an atomic
    /// read-modify-write).
    pub carding: AtomicBool,
}

/// A bit per pool page, set by regions when they log a range or allocate
/// an object: a software stand-in for the soft-dirty bits that sees region
/// writes only (`RecoveryGc::DeferredCards`; docs/gc.md argues why that is
/// every pointer a region can change). A bit is set before the write it
/// stands for and never cleared during the phase, and the final pause
/// reads the table under the GC gate held exclusively, after every region
/// that set a bit has ended.
pub(crate) struct Cards(Box<[std::sync::atomic::AtomicU64]>);

impl Cards {
    pub fn new(max_size: u64) -> Self {
        Cards((0..max_size.div_ceil(4096 * 64)).map(|_| std::sync::atomic::AtomicU64::new(0)).collect())
    }

    fn mark(&self, off: u64, len: u64) {
        for p in off / 4096..=(off + len.max(1) - 1) / 4096 {
            if let Some(w) = self.0.get((p / 64) as usize) {
                w.fetch_or(1 << (p % 64), Ordering::Relaxed);
            }
        }
    }

    fn written(&self, pages: u64) -> Vec<bool> {
        (0..pages).map(|p| self.0.get((p / 64) as usize).is_some_and(|w| w.load(Ordering::Acquire) & (1 << (p % 64)) != 0)).collect()
    }
}

impl Deferred {
    /// A state for an open that collected (or not) in open.
    pub fn settled(state: RecoveryGcState) -> Self {
        let d = Deferred::default();
        d.status.lock().state = state;
        d
    }

    /// Records a region's write to `[off, off + len)` (with cards on).
    #[inline]
    pub fn card(&self, off: u64, len: u64) {
        if let Some(c) = &self.cards {
            if self.carding.load(Ordering::Relaxed) {
                c.mark(off, len);
            }
        }
    }

    /// Called before the first write of a path that bypasses regions (the
    /// STM's state, persistent laziness): with the card table collecting,
    /// waits until it finished, as those writes set no card. Inside a
    /// region (whose GC gate the final pause needs) it cannot wait:
    /// [`Error::Busy`].
    pub fn before_unregioned_writes(&self, in_region: bool) -> Result<()> {
        if self.cards.is_none() || self.status().state != RecoveryGcState::Pending {
            return Ok(());
        }
        if in_region {
            return Err(Error::Busy { what: "STM or lazy writes inside a region while the card-tracked recovery GC runs" });
        }
        self.wait();
        Ok(())
    }

    pub fn status(&self) -> RecoveryGcStatus {
        *self.status.lock()
    }

    /// The heap's bitmaps are not exact yet (sealed): a clean close must
    /// not save them.
    pub fn unfinished(&self) -> bool {
        matches!(self.status.lock().state, RecoveryGcState::Pending | RecoveryGcState::Stopped | RecoveryGcState::Failed)
    }

    /// Waits until the background collection is no longer pending.
    pub fn wait(&self) -> RecoveryGcStatus {
        let mut s = self.status.lock();
        while s.state == RecoveryGcState::Pending {
            self.changed.wait(&mut s);
        }
        *s
    }

    /// Stops the background collection (if it has not reached its sweep)
    /// and waits for its thread to end.
    pub fn stop_and_join(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
    }

    fn set(&self, f: impl FnOnce(&mut RecoveryGcStatus)) {
        f(&mut self.status.lock());
        self.changed.notify_all();
    }
}

/// Starts the background collection of a pool opened sealed (step 2).
pub(crate) fn start(inner: &Arc<PoolInner>, claim: super::softdirty::Claim) -> Result<()> {
    inner.deferred.set(|s| s.state = RecoveryGcState::Pending);
    let pool = Arc::clone(inner);
    let spawned = std::thread::Builder::new().name("engram-recovery-gc".into()).spawn(move || {
        let _claim = claim;
        run(&pool);
    });
    match spawned {
        Ok(h) => {
            *inner.deferred.thread.lock() = Some(h);
            Ok(())
        }
        Err(e) => {
            inner.deferred.set(|s| s.state = RecoveryGcState::Failed);
            Err(Error::io("spawn the recovery GC thread", e))
        }
    }
}

fn run(inner: &PoolInner) {
    let d = &inner.deferred;
    let stopping = || d.stop.load(Ordering::Acquire) || inner.crashed.load(Ordering::Acquire);
    let hook = |n: u64| {
        if let Some(h) = &d.hook {
            (h.0)(n, &stopping);
        }
    };
    let t0 = Instant::now();
    let mut cm = ConcurrentMark::new(&inner.space, &inner.types);
    let marked = std::cell::Cell::new(0u64);
    let stop = || {
        marked.set(marked.get() + 4096);
        hook(marked.get());
        stopping()
    };
    let r = match cm.concurrent(&stop) {
        Ok(true) => {
            let concurrent = t0.elapsed();
            d.set(|s| {
                s.concurrent = concurrent;
                s.marked = cm.marked();
            });
            hook(u64::MAX);
            final_pause(inner, cm, &stopping)
        }
        Ok(false) => Ok(false),
        Err(e) => Err(e),
    };
    // No one reads the cards any more (the pause is over, or never comes).
    d.carding.store(false, Ordering::Relaxed);
    d.set(|s| match r {
        Ok(true) => s.state = RecoveryGcState::Finished,
        Ok(false) => s.state = RecoveryGcState::Stopped,
        Err(e) => {
            s.state = RecoveryGcState::Failed;
            s.error_code = e.code() as u32;
        }
    });
}

/// Step 3. Returns false if stopped before the sweep.
fn final_pause(inner: &PoolInner, mut cm: ConcurrentMark<'_>, stop: &dyn Fn() -> bool) -> Result<bool> {
    let _excl = inner.gate.write();
    if stop() {
        return Ok(false);
    }
    let (wall, cpu) = (Instant::now(), thread_cpu());
    let space = &inner.space;
    super::layer::quiesce_all(inner)?;
    inner.heap.drain_caches(space);
    inner.heap.prune_caches(space);
    let written = match &inner.deferred.cards {
        Some(c) => c.written(space.size() / 4096),
        None => super::softdirty::written(space.base(), space.size())?,
    };
    let rescanned = cm.finish(&written)?;
    let m = cm.result();
    let (before, _) = inner.heap.live();
    space.persist.settle_bumps(crate::fences::BUMPS_BEFORE_SWEEP)?;
    inner.heap.sweep(space, &m.marks)?;
    let (live, bytes) = inner.heap.live();
    *inner.stats.lock() = MarkStats { objects: live, bytes, ..m.stats };
    let (pause, pause_cpu) = (wall.elapsed(), thread_cpu().saturating_sub(cpu));
    let dirty = written.iter().filter(|&&w| w).count() as u64;
    inner.deferred.set(|s| {
        s.live_objects = live;
        s.freed = before.saturating_sub(live);
        s.dirty_pages = dirty;
        s.rescanned = rescanned;
        s.bad_fields = m.stats.bad_fields;
        s.pause = pause;
        s.pause_cpu = pause_cpu;
    });
    Ok(true)
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    // SAFETY: clock_gettime fills the zeroed timespec; no other effect.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: as above, with a valid pointer to `ts`.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::RecoveryGc;
    use crate::Error;

    #[test]
    fn recovery_gc_values_parse_and_a_misspelt_one_is_refused() {
        assert_eq!(RecoveryGc::parse("").unwrap(), RecoveryGc::Eager);
        assert_eq!(RecoveryGc::parse("eager").unwrap(), RecoveryGc::Eager);
        assert_eq!(RecoveryGc::parse("deferred").unwrap(), RecoveryGc::Deferred);
        assert_eq!(RecoveryGc::parse("deferred-cards").unwrap(), RecoveryGc::DeferredCards);
        for bad in ["defered", "Deferred", "cards", "deferred_cards", " eager"] {
            match RecoveryGc::parse(bad) {
                Err(Error::InvalidArgument { what }) => assert!(what.contains("ENGRAM_RECOVERY_GC"), "{what}"),
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
        assert_eq!(RecoveryGc::Deferred.resolve().unwrap(), RecoveryGc::Deferred);
    }
}
