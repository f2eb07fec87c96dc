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
            "tx.fresh_never_written_back",
            "a region that logged nothing commits without writing its new objects back and without listing them for \
             a later fence (`fresh.rs`), so a later region can link objects that are not durable",
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
            "wal.tail_not_rewritten",
            "a wal record that starts inside a block writes that block's earlier bytes (the end of the record \
             before, durable and returned) as zeros instead of as they are",
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
        (
            "gate.exclusive_unfenced",
            "the GC gate's exclusive holder runs no fence (no `membarrier`, `pool/asym.rs`, no sequentially \
             consistent store) between raising `excl` and reading the slots, and the processor reorders them: the \
             slots are read first, so a transaction that marks its slot in between runs under the GC",
        ),
        ("stm.ro_no_rv_check", "a read-only transaction accepts a version newer than its snapshot"),
        (
            "stm.ro_snapshot_ahead",
            "a read-only transaction's snapshot is ahead of the pool's clock (as a reused value no commit had reached)",
        ),
        (
            "stm.ro_fast_check_ignores_lock",
            "a read-only transaction's one-compare test of a lock word (`word::clean_at_most`) ignores its low bits, \
             so a word locked by a live committer passes if its version is not newer than the snapshot",
        ),
        (
            "stm.ro_slow_read",
            "not a bug by itself: a read-only transaction's read yields the processor between the lock-word load and \
             the value load, which widens the window the two bugs above open (tests plant it with them, and alone)",
        ),
        (
            "tx.last_object_ignores_len",
            "a region's bounds check answered from the object it found last accepts a range that starts inside that \
             object whatever its length, so a write may run past the object's end",
        ),
        (
            "tx.log_skips_tag",
            "a region's first log of a range checks only that it lies inside a slot's payload, not that the slot's \
             header carries the tag, so a write through a dangling pointer into a slot an earlier region freed is \
             accepted (and logged, and stored)",
        ),
        (
            "alloc.slot_past_span_end",
            "`locate_containing` accepts a slot index past the span's last whole slot, so a write into the bytes at a \
             span's end that hold no slot (and on into the next span) is taken for a write into an object",
        ),
        (
            "stm.young_span_lost",
            "a registered STM record with new objects is given an empty span, so no overwritten record is ever found \
             to have written into its objects, and nobody helps",
        ),
        (
            "stm.young_help_always",
            "not unsound: a thread helps (clears other threads' records with new objects, two fences each) before \
             every overwrite while any older one is registered, whether or not its record touched their objects (the \
             rule before 2026-12-02)",
        ),
        (
            "tx.redo_in_place_before_fence",
            "a redo region stores its new bytes in place before its record's fence, so a crash before the fence can \
             leave some of them durable with no valid record",
        ),
        (
            "retires.uncovered_as_covered",
            "a redo region's commit fence takes the slot's previous redo region for covered by its own ranges \
             whether or not it is, so the chain never writes the previous region's in-place bytes back: once the \
             word moves past that record, a crash can lose the bytes it stored outside the new region's ranges",
        ),
        (
            "tx.redo_other_slots_not_settled",
            "a redo region's commit does not settle the other slots' listed redo retires before its record's fence, so \
             two valid records of different slots may cover the same bytes and recovery, which replays slots in \
             index order, can replay the older one last",
        ),
        (
            "tx.redo_read_misses_own_writes",
            "a redo region's reads by value do not see its own pending writes (they read the bytes in place only)",
        ),
        (
            "stm.write_filter_unset",
            "a write does not set its word's bit in the write set's filter (`STx::wbits`), so a later read of the \
             same variable in that transaction misses its own write and reads the committed value",
        ),
        (
            "stm.known_cell_any",
            "a write in a transaction that allocated an object is taken to lie inside that object without looking, \
             so a write outside every allocated object is accepted instead of refused with `BadPointer`",
        ),
        (
            "stm.located_ignore_frees",
            "a write into the large object that an earlier write of the thread found with the allocator skips the \
             lookup even after the heap freed objects (`Located` ignores the free count), so a write into a freed \
             large object is accepted instead of refused with `BadPointer`",
        ),
        (
            "stm.fast_read_ignores_snapshot",
            "the inline read path of a full transaction (`STx::stable_words`) takes an unlocked version newer than \
             the transaction's snapshot instead of handing it to the full read, so an attempt can read half of \
             another transaction's commit",
        ),
        (
            "stm.fast_read_no_recheck",
            "the inline read path of a full transaction (`STx::stable_words`) does not refuse a lock word that changed \
             while it loaded the cell's value words, so a value (or half of a multi-word node) that a committer stored \
             between the two loads is seen with the old version",
        ),
        (
            "stm.fast_read_slow",
            "not a bug by itself: the inline read path of a full transaction yields the processor between the \
             lock-word load and the value loads, which widens the window `stm.fast_read_no_recheck` opens",
        ),
        (
            "stm.lean_skips_validation",
            "the lean commit of a small write set (`stm/engine/lean.rs`) takes every read as still valid instead of \
             validating it (or refusing unrecorded reads) after another commit, so an update commits over a value \
             another transaction changed",
        ),
        (
            "stm.lean_in_place_unlisted",
            "the lean commit (`stm/engine/lean.rs`) stores its values in place without listing them in the log's \
             `unfenced`, so the thread's next commit does not write them back before its fence and a crash after \
             their record is overwritten loses them",
        ),
        (
            "stm.in_place_not_flushed",
            "an STM update commit's in-place values (the log's `unfenced`) are not written back before the thread's \
             next fence: neither by the commit itself after its last locked instruction nor, for a list its thread \
             did not issue (an adopted log's), by the next commit before its fence, so that fence does not make them \
             durable and a crash after their record is overwritten loses them",
        ),
        (
            "stm.adopted_write_back_trusted",
            "a thread adopting an exited thread's redo log keeps the log's `written_back` mark, so its first commit \
             takes the exited thread's write-backs of its last in-place values as its own and fences without \
             issuing them again; no fence of the adopter completes them, and a crash after their record is \
             overwritten loses them",
        ),
        ("stm.reservation_not_persisted", "the STM clock reservation is raised in memory but never written to the pool"),
        (
            "stm.box_freed_early",
            "a commit that replaces a boxed `PTVar` value frees the old box at once, even while a redo record that lists \
             it (another thread's, or this very commit's) may still be replayed: the next commit's copy reuses the slot \
             before its fence, and a crash then drops that earlier record",
        ),
        (
            "stm.overflow_not_flushed",
            "a redo record too large for its log half is moved to an overflow array that is written but not flushed, \
             so the commit's one fence can make the stand-in record durable without the whole array",
        ),
        (
            "stm.young_not_carried",
            "a commit that made new transactional objects (cells, nodes) neither carries their initial bytes in its \
             redo record nor fences them first: a crash after the record's fence can keep a link to an object that \
             never reached the media",
        ),
        (
            "stm.young_not_helped",
            "a thread about to overwrite a log half does not first help other threads' older retained records that \
             carry new objects' initial bytes (make their in-place values durable, clear them): recovery then writes \
             an object's initial bytes back over a later change",
        ),
        (
            "stm.young_touch_missed",
            "a commit never marks its log half as having written into another thread's older new objects (the test \
             its reuse relies on), so the reuse does not help: recovery then writes an object's initial bytes back \
             over a later change",
        ),
        ("wal.skip_checksum", "wal replay accepts a record whose checksum does not match, so a torn record is replayed"),
        ("wal.skip_fdatasync", "a wal commit skips the log's fdatasync: it returns before its record is durable"),
        (
            "log.record_recovery_one_step",
            "slot recovery moves the log generation on by one, not three (format 4's `recover_slot`; two in the \
             whole-slot path, the bug 78040e5 fixed): entries the slot's next region wrote into the other half before \
             its first fence become live, and a crash after later regions on other slots undoes them over committed data",
        ),
        (
            "log.redo_replay_before_decision",
            "format 4's slot recovery replays a written-ahead redo record over ranges whose undo entries it kept by \
             the undo record's checksum without first making that decision durable: a crash during the recovery \
             leaves bytes the checksum no longer matches, and the next recovery undoes a committed region",
        ),
        (
            "log.recovery_invalidates_first",
            "recovery of an undo log bumps the slot's generation (persisted) before it writes the old bytes back and \
             fences them: a crash during that recovery leaves a half-undone region and no log to finish it",
        ),
        (
            "tx.kept_array_ignores_frees",
            "a region answers an array's length from the validation an earlier region of its thread kept even after \
             an object of the pool was freed or swept (the heap's free count is not compared)",
        ),
        (
            "tx.kept_array_ignores_pool",
            "a kept array validation is used in another open pool (or a later open of the same file): the heap id is \
             not compared",
        ),
        (
            "tx.kept_array_ignores_type",
            "a kept array validation is used for another element type (its size and alignment are not compared)",
        ),
        (
            "tx.kept_spans_ignore_frees",
            "a region keeps the span classes its thread's last region learned although an object was freed or swept \
             since, or the pool is another one (the key of the kept span cache is not compared)",
        ),
        ("tx.kept_types_ignore_pool", "the type ids a thread's regions kept for one open pool are used for another pool's allocations"),
        (
            "types.pointer_map_not_persisted",
            "a new type-table entry is written without its last pointer offset (an off-by-one, checksummed as \
             written), while the program keeps the right ones in memory: a later process's GC does not trace that field",
        ),
        (
            "tx.free_skips_tag",
            "`Tx::free` does not refuse an object whose header has lost its tag (freed by an earlier region): a \
             second free of it is accepted and its slot is handed out twice",
        ),
        (
            "tx.freed_set_kept",
            "a region's end does not empty its double-free set: the thread's next region that frees an object in a \
             slot freed, and handed out again, since is refused with `DoubleFree`",
        ),
        (
            "tx.free_any_slot_address",
            "`Tx::free`'s span-cache path accepts any address inside a slot of a cached span, not only its payload \
             start: freeing an interior pointer (or a header address) is accepted",
        ),
        (
            "stm.ht_remove_drops_overflow",
            "`HashTable::remove` of a bucket's inline entry empties the bucket instead of moving its first overflow \
             node's entry in: the keys in that bucket's overflow nodes are lost",
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
    /// the word is what must catch them (`stm/engine/tx/read.rs`). Until
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

    /// The `planted("NAME")` calls of the files under `dir` (a misspelt
    /// bug name in a test plants nothing, so tests' `plant("NAME")` calls
    /// are collected too, with `call` = `plant(`): (name, file).
    fn calls(dir: &std::path::Path, call: &str, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                calls(&p, call, out);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let mut rest = text.as_str();
            while let Some(at) = rest.find(call) {
                let before = rest[..at].chars().last();
                rest = &rest[at + call.len()..];
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue; // `implant(`, `planted(` when looking for `plant(`
                }
                let Some(arg) = rest.trim_start().strip_prefix('"') else { continue };
                if let Some((name, _)) = arg.split_once('"') {
                    out.push((name.to_string(), p.display().to_string()));
                }
            }
        }
    }

    /// Every bug planted in the engine's source is listed in [`BUGS`] with
    /// a description, once; every listed bug is planted somewhere; and every
    /// bug the tests plant is listed (a misspelt name would plant nothing).
    #[test]
    fn every_planted_bug_is_listed_and_every_listed_bug_is_planted() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut planted = Vec::new();
        calls(&root.join("src"), "planted(", &mut planted);
        planted.retain(|(_, file)| !file.ends_with("failpoint.rs"));
        assert!(planted.len() >= 15, "{planted:?}");
        let listed = |n: &str| BUGS.iter().filter(|(b, _)| *b == n).count();
        for (name, file) in &planted {
            assert_eq!(listed(name), 1, "bug {name:?} planted in {file} is listed {} times in BUGS", listed(name));
        }
        for (name, about) in BUGS {
            assert!(about.len() > 20, "bug {name:?}: no description");
            assert!(name.contains('.'), "bug {name:?}: not a dotted name");
            assert!(planted.iter().any(|(n, _)| n == name), "bug {name:?} is listed in BUGS but planted nowhere");
        }
        let mut used = Vec::new();
        calls(&root.join("tests"), "plant(", &mut used);
        calls(&root.join("src"), "plant(", &mut used);
        used.retain(|(_, file)| !file.ends_with("failpoint.rs"));
        for (name, file) in &used {
            assert_eq!(listed(name), 1, "{file} plants {name:?}, which BUGS does not list");
        }
    }
}
