//! Named failpoints on protocol steps, for crash tests.
//!
//! A test arms a failpoint on its own thread
//! (`arm(Failpoint::LogAfterAppend, 3)` fires on the fourth hit). When it
//! fires, the engine unwinds with a [`SimulatedCrash`] payload; `Pool::txn`
//! recognises it and, instead of rolling back, abandons the pool as a
//! crashed process would: nothing more is written, the next open must
//! recover. Points are the variants of [`Failpoint`], so a misspelt point is
//! a compile error rather than a failpoint that silently never fires.
//!
//! Arming (and the fault switches `drop_fence` and `drop_flush`) exists
//! only with the `failpoints` cargo feature (part of `testing`; the C ABI
//! does not enable it). Without it, `Failpoint::hit` and the fault-switch
//! checks are empty `#[inline(always)]` functions: the
//! engine's protocol steps compile to no code at all. With it, a hit costs
//! one thread-local read when nothing is armed.
//!
//! ```
//! # #[cfg(feature = "failpoints")] {
//! use engram::failpoint::{arm, disarm_all, is_crash, Failpoint};
//! use engram::{CreateOptions, Durability, Pool};
//! # let path = std::env::temp_dir().join(format!("engram-fp-doc-{}.pool", std::process::id()));
//! # let _ = std::fs::remove_file(&path);
//! let pool = Pool::create(&path, CreateOptions::new("fp").durability(Durability::Process)).unwrap();
//! arm(Failpoint::TxBeforeCommit, 0);
//! let r = std::panic::catch_unwind(|| pool.txn(|tx| tx.set_root("r", tx.alloc(1u64)?)));
//! disarm_all();
//! assert!(is_crash(&*r.unwrap_err()));
//! // the pool was abandoned, not closed: the next open recovers
//! drop(pool);
//! let pool = Pool::open(&path, engram::OpenOptions::new("fp").durability(Durability::Process)).unwrap();
//! assert!(!pool.open_report().was_clean);
//! # drop(pool); std::fs::remove_file(&path).unwrap();
//! # }
//! ```

/// The panic payload of a fired failpoint (the point's [`Failpoint::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimulatedCrash(pub &'static str);

macro_rules! failpoints {
    ($($(#[$doc:meta])* $v:ident = $name:literal,)*) => {
        /// A protocol step a crash test can stop at.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Failpoint {
            $($(#[$doc])* $v,)*
        }

        impl Failpoint {
            /// Every failpoint.
            pub const ALL: &'static [Failpoint] = &[$(Failpoint::$v),*];

            /// The dotted name (`"tx.before_commit"`), as in [`SimulatedCrash`].
            pub const fn name(self) -> &'static str {
                match self {
                    $(Failpoint::$v => $name,)*
                }
            }
        }
    };
}

failpoints! {
    /// An undo-log entry was appended and persisted (`log.rs`).
    LogAfterAppend = "log.after_append",
    /// Recovery is about to roll back one undo entry (`log.rs`).
    LogUndoEntry = "log.undo_entry",
    /// A region wrote an object in place (`tx/mod.rs`).
    TxAfterWrite = "tx.after_write",
    /// A region is about to commit (its data not yet flushed).
    TxBeforeCommit = "tx.before_commit",
    /// A region committed (its log invalidated).
    TxAfterCommit = "tx.after_commit",
    /// A redo region's record is durable, its bytes not yet in place (`tx/redo.rs`).
    TxRedoAfterRecord = "tx.redo_after_record",
    /// A new span was taken for the allocator (`alloc/mod.rs`).
    AllocNewSpan = "alloc.new_span",
    /// A header copy is about to be rewritten (`pool/space.rs`).
    HeaderBeforeWrite = "header.before_write",
    /// Relocation rewrote a pointer (`gc.rs`).
    GcSwizzle = "gc.swizzle",
    /// An STM commit's fence made its redo record durable (`stm/engine/commit.rs`).
    StmAfterFence = "stm.after_fence",
    /// An STM commit stored its new values in place.
    StmAfterApply = "stm.after_apply",
}

impl std::fmt::Display for Failpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a panic payload is a simulated crash.
pub fn is_crash(payload: &(dyn std::any::Any + Send)) -> bool {
    payload.downcast_ref::<SimulatedCrash>().is_some()
}

#[cfg(feature = "failpoints")]
mod armed {
    use super::{Failpoint, SimulatedCrash};
    use std::cell::RefCell;

    thread_local! {
        static ARMED: RefCell<Vec<(Failpoint, u64)>> = const { RefCell::new(Vec::new()) };
        static DROPPED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
        static DROPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// How many fences and flushes the fault switches of this thread dropped
    /// since [`disarm_all`] (a test checks its workload reached the step).
    pub fn drops() -> u64 {
        DROPS.with(|c| c.get())
    }

    /// Fault switch: fences named `what` (see `Persister::fence`) do nothing on
    /// this thread until [`disarm_all`]. The crash explorer must then find a
    /// violation; a test that it does proves the explorer can fail.
    pub fn drop_fence(what: &str) {
        DROPPED.with(|d| d.borrow_mut().push(format!("fence:{what}")));
    }

    /// Fault switch: flushes named `what` (see `Persister::flush_named`) do nothing.
    pub fn drop_flush(what: &str) {
        DROPPED.with(|d| d.borrow_mut().push(format!("flush:{what}")));
    }

    /// A planted bug: a named deviation from a protocol that a test switches on
    /// (on this thread, until [`disarm_all`]) to prove a check catches that
    /// class of bug. The names are listed in [`BUGS`].
    pub fn plant(bug: &str) {
        DROPPED.with(|d| d.borrow_mut().push(format!("bug:{bug}")));
    }

    /// The bugs [`plant`] knows: (name, what the engine then does wrong).
    pub const BUGS: &[(&str, &str)] = &[
        (
            "stm.adopted_log_not_reflushed",
            "a thread that adopts an exited thread's redo log does not flush that thread's last in-place values again, so \
             its fence does not cover them before it overwrites their records",
        ),
        (
            "alloc.partial_huge_not_repaired",
            "recovery leaves the arena-table entries of a multi-arena huge object that a crash left partial (a head \
             without its tail, a lone tail) as they are, and refuses the pool as corrupt",
        ),
        (
            "space.backing_fails",
            "the file system cannot allocate the pool file's blocks for fresh heap spans (a full disk): `Space::back` \
             fails with ENOSPC, so allocations that need a new span fail with `Io`",
        ),
        (
            "wal.reserve_fails",
            "a wal checkpoint cannot reserve the pool file's blocks (a full disk, or a file system without \
             `fallocate`): every piece is written with `pwrite` instead of through the mapping",
        ),
        (
            "wal.checkpoint_unguarded",
            "a wal checkpoint (which runs with the log's lock free) leaves the files unowned: another leader may \
             write and sync records into the old generation, which the checkpoint's new salt then invalidates",
        ),
        (
            "wal.gather_returns_early",
            "a wal commit that arrives while the next flush's leader gathers returns at once, before that flush has \
             written and synced its record",
        ),
        (
            "stm.ro_no_recheck",
            "a read-only transaction's seqlock read does not read the lock word again after the value, so a value \
             a committer stores between the two loads is seen with the old version",
        ),
        ("stm.ro_no_rv_check", "a read-only transaction accepts a version newer than its snapshot"),
        (
            "stm.ro_slow_read",
            "not a bug by itself: a read-only transaction's read yields the processor between the lock-word load and \
             the value load, which widens the window the two bugs above open (tests plant it with them, and alone)",
        ),
        (
            "tx.redo_in_place_before_fence",
            "a redo region stores its new bytes in place before its record's fence, so a crash before the fence can \
             leave some of them durable with no valid record",
        ),
        (
            "tx.redo_read_misses_own_writes",
            "a redo region's reads by value do not see its own pending writes (they read the bytes in place only)",
        ),
        ("stm.reservation_not_persisted", "the STM clock reservation is raised in memory but never written to the pool"),
        (
            "types.pointer_map_not_persisted",
            "a new type-table entry is written without its last pointer offset (an off-by-one, checksummed as \
             written), while the program keeps the right ones in memory: a later process's GC does not trace that field",
        ),
    ];

    pub(crate) fn planted(bug: &str) -> bool {
        dropped("bug", bug)
    }

    fn dropped(kind: &str, what: &str) -> bool {
        let hit = DROPPED.with(|d| {
            let d = d.borrow();
            !d.is_empty() && d.iter().any(|x| x.strip_prefix(kind).and_then(|r| r.strip_prefix(':')) == Some(what))
        });
        if hit {
            DROPS.with(|c| c.set(c.get() + 1));
        }
        hit
    }

    /// This thread's fault switches and planted bugs, to hand to a helper
    /// thread with [`adopt_switches`] (a workload that runs several threads).
    pub fn switches() -> Vec<String> {
        DROPPED.with(|d| d.borrow().clone())
    }

    /// Turns on, on this thread, the switches [`switches`] returned.
    pub fn adopt_switches(s: &[String]) {
        DROPPED.with(|d| d.borrow_mut().extend(s.iter().cloned()));
    }

    pub(crate) fn fence_dropped(what: &str) -> bool {
        dropped("fence", what)
    }

    pub(crate) fn flush_dropped(what: &str) -> bool {
        dropped("flush", what)
    }

    thread_local! {
        static STRETCH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Widens, on this thread, the gap between a `TVar` read's first load
    /// of its lock word and its load of the value (a `yield_now` there), so
    /// a stress test meets commits inside that gap often: the re-check of
    /// the word is what must catch them (`stm/engine/tx.rs`). Until
    /// `stretch_reads(false)`.
    pub fn stretch_reads(on: bool) {
        STRETCH.with(|c| c.set(on));
    }

    /// The gap [`stretch_reads`] widens.
    #[inline]
    pub(crate) fn read_gap() {
        if STRETCH.with(std::cell::Cell::get) {
            std::thread::yield_now();
        }
    }

    thread_local! {
        static APPLY_GAP: std::cell::Cell<Option<fn()>> = const { std::cell::Cell::new(None) };
    }

    /// Calls `f` on this thread after each volatile value a commit installs
    /// in place (between two in-place stores: later written words are still
    /// locked), until `on_apply_gap(None)`: a test stalls a commit there.
    pub fn on_apply_gap(f: Option<fn()>) {
        APPLY_GAP.with(|c| c.set(f));
    }

    /// The point [`on_apply_gap`] hooks.
    #[inline]
    pub(crate) fn apply_gap() {
        if let Some(f) = APPLY_GAP.with(std::cell::Cell::get) {
            f();
        }
    }

    /// Arms failpoint `point` on this thread: it fires after `skip` more hits.
    pub fn arm(point: Failpoint, skip: u64) {
        ARMED.with(|a| a.borrow_mut().push((point, skip)));
    }

    /// Disarms every failpoint of this thread, leaving its fault switches on
    /// (a workload that crashes itself on purpose keeps a test's dropped fence).
    pub fn disarm_failpoints() {
        ARMED.with(|a| a.borrow_mut().clear());
    }

    /// Disarms every failpoint and fault switch of this thread.
    pub fn disarm_all() {
        ARMED.with(|a| a.borrow_mut().clear());
        DROPPED.with(|d| d.borrow_mut().clear());
        DROPS.with(|c| c.set(0));
    }

    impl Failpoint {
        /// Marks this protocol step; unwinds with [`SimulatedCrash`] if armed here.
        #[inline]
        pub(crate) fn hit(self) {
            let fire = ARMED.with(|a| {
                let mut a = a.borrow_mut();
                if a.is_empty() {
                    return false;
                }
                let Some(i) = a.iter().position(|(p, _)| *p == self) else { return false };
                if a[i].1 == 0 {
                    a.remove(i);
                    true
                } else {
                    a[i].1 -= 1;
                    false
                }
            });
            if fire {
                std::panic::panic_any(SimulatedCrash(self.name()));
            }
        }
    }
}

#[cfg(feature = "failpoints")]
pub use armed::{
    adopt_switches, arm, disarm_all, disarm_failpoints, drop_fence, drop_flush, drops, on_apply_gap, plant, stretch_reads, switches, BUGS,
};
#[cfg(feature = "failpoints")]
pub(crate) use armed::{apply_gap, fence_dropped, flush_dropped, planted, read_gap};

/// Without the `failpoints` feature a commit's installs have no hook.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) fn apply_gap() {}

/// Without the `failpoints` feature a `TVar` read has no widened gap.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) fn read_gap() {}

#[cfg(not(feature = "failpoints"))]
impl Failpoint {
    /// Marks this protocol step: nothing, without the `failpoints` feature.
    #[inline(always)]
    pub(crate) fn hit(self) {}
}

/// Without the `failpoints` feature no fence is ever dropped.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) fn fence_dropped(_what: &str) -> bool {
    false
}

/// Without the `failpoints` feature no bug is ever planted.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) fn planted(_bug: &str) -> bool {
    false
}

/// Without the `failpoints` feature no flush is ever dropped.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) fn flush_dropped(_what: &str) -> bool {
    false
}

#[cfg(all(test, feature = "failpoints"))]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_dotted() {
        let mut names: Vec<&str> = Failpoint::ALL.iter().map(|p| p.name()).collect();
        assert!(names.iter().all(|n| n.contains('.')));
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Failpoint::ALL.len());
    }

    #[test]
    fn fires_after_skip_hits_then_disarms() {
        arm(Failpoint::GcSwizzle, 2);
        Failpoint::TxAfterWrite.hit(); // another point: not counted
        Failpoint::GcSwizzle.hit();
        Failpoint::GcSwizzle.hit();
        let r = std::panic::catch_unwind(|| Failpoint::GcSwizzle.hit());
        let p = r.unwrap_err();
        assert_eq!(p.downcast_ref::<SimulatedCrash>(), Some(&SimulatedCrash("gc.swizzle")));
        Failpoint::GcSwizzle.hit(); // fired once, then gone
        disarm_all();
    }
}
