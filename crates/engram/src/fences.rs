//! The names of the engine's fences and named flushes, declared once.
//!
//! Every fence the engine issues names the protocol step it orders
//! (`Persister::fence(what)`), and so does every flush a fault-injection
//! test may drop (`flush_named`). The crash explorer keys on those names:
//! its fault switches drop a step by name (`failpoint::drop_fence`,
//! `drop_flush`), `crash_explorer.rs` files each step as caught, harmless or
//! an open gap, and the double-crash mode tells a recovering open from a
//! plain one by the fences the open issued. A name written out twice, once
//! at the call and once in such a list, goes stale silently when the call
//! is renamed or a step is added (session redo13r's two new recovery fences
//! were missing from the double mode's list, which then took no recovering
//! image). So each name is a constant here, used at the call and in every
//! list, and [`ALL`] holds them all with their [`Kind`] and the [`Stage`]s
//! that issue them, from which the lists that must be complete are derived
//! ([`is_recovery`]). Tests keep the table honest: `crash_explorer.rs`
//! checks that the engine's non-test source passes no string literal to a
//! fence or named flush, that every constant is used there, and that each
//! is classified once; the double-crash mode refuses an open whose trace
//! holds a fence declared neither [`Stage::Recovery`] nor [`Stage::Open`].
//!
//! Nothing here is persistent and nothing here runs: the names are what a
//! trace records, never stored in a pool.

/// Whether a name belongs to a fence or to a named flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `Persister::fence` (and the `write_persist`, `settle_bumps`,
    /// `fence_redo` forms): orders and completes this thread's flushes.
    Fence,
    /// `Persister::flush_named`: a write-back a test may drop.
    Flush,
}

/// What issues a fence or flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// A failure-atomic region's log, commit or rollback (`log.rs`, `tx/`).
    Region,
    /// An open's recovery, when it has something to recover: an undo log
    /// rolled back or a committed region's generation moved on, a redo
    /// record replayed, STM records replayed. The double-crash mode counts
    /// an open that issued one of these as *recovering*.
    Recovery,
    /// Any open, whatever it finds (the header update, the recovery GC's
    /// sweep, a relocation, the STM's new epoch).
    Open,
    /// The clean close.
    Close,
    /// Allocation: span and arena tables, huge objects, the type table.
    Alloc,
    /// Online collection (and the STM's quiesce before it).
    Gc,
    /// Pool growth.
    Growth,
    /// STM commits.
    Stm,
    /// Persistent laziness (`lazy/`).
    Lazy,
    /// A front end's own fence (`Pool::fence`, `engram_fence`).
    FrontEnd,
}

/// One named step: its name (the constant), kind and stages.
#[derive(Clone, Copy, Debug)]
pub struct Named {
    /// The name the call passes and the trace records.
    pub name: &'static str,
    /// The constant's identifier (for the source checks).
    pub ident: &'static str,
    /// Fence or named flush.
    pub kind: Kind,
    /// What issues it.
    pub stages: &'static [Stage],
}

impl Named {
    /// Whether `stage` issues this step.
    pub fn issued_by(&self, stage: Stage) -> bool {
        self.stages.contains(&stage)
    }
}

/// Declares each name as a constant and lists them all in [`ALL`].
macro_rules! named {
    ($($(#[$doc:meta])* $c:ident: $kind:ident [$($stage:ident),+] = $name:literal,)*) => {
        $($(#[$doc])* pub const $c: &str = $name;)*

        /// Every named fence and flush of the engine.
        pub const ALL: &[Named] =
            &[$(Named { name: $c, ident: stringify!($c), kind: Kind::$kind, stages: &[$(Stage::$stage),+] }),*];
    };
}

named! {
    // ----- undo logs and region commits (`log.rs`, `tx/mod.rs`)
    /// Step 1 of the undo log: an entry durable before its range changes.
    UNDO_ENTRY: Fence [Region] = "undo entry before the logged range is modified",
    /// Step 1's write-back of a batch of undo entries (`log_ranges`,
    /// `engram_region_log_many`): each of their lines once, before the fence.
    UNDO_BATCH: Flush [Region] = "undo entries of a batch, each line once",
    /// A jump entry that sends the scan on into a log chunk.
    JUMP_ENTRY: Fence [Region] = "jump entry before entries in the next chunk",
    /// A new log chunk's headers, before it is linked.
    CHUNK_HEADERS: Fence [Region] = "log chunk headers before the chunk is linked",
    /// The link to a new log chunk, before entries use it.
    CHUNK_LINK: Fence [Region] = "log chunk link before entries use it",
    /// The slot's generation word moved: a region committed, or recovery
    /// retired (or decided) a slot's log.
    GEN_BUMP: Fence [Region, Recovery] = "log generation bump: the region is committed",
    /// The old bytes an undo wrote back, before the log is invalidated
    /// (a region's rollback, or recovery).
    RESTORED_BYTES: Fence [Region, Recovery] = "restored bytes before the log is invalidated",
    /// The 3-fence commit's data, before the generation bump.
    REGION_DATA: Fence [Region] = "region data before the log is invalidated",
    /// The 2-fence commit's one commit fence (step 3').
    RECORD_COMMIT: Fence [Region] = "region data and its commit record",
    /// Write-back of a generation bump the 2-fence commit left pending (every fence's).
    PENDING_BUMP: Flush [Region] = "pending generation bump",
    /// A region that freed objects settles the pending bumps before they are reused.
    BUMPS_BEFORE_REUSE: Fence [Region] = "pending generation bumps before freed objects are reused",
    /// A sweep settles the pending bumps before it frees objects.
    BUMPS_BEFORE_SWEEP: Fence [Gc, Open] = "pending generation bumps before a sweep frees objects",
    /// `ArrayView::swap`: the undo entries of both elements under one fence.
    SWAP_ENTRIES: Fence [Region] = "undo entries of an array swap before either element changes",
    /// The lines of new objects that committed regions which logged nothing
    /// left unflushed (`fresh.rs`), written back by every later fence.
    FRESH_LINES: Flush [Region] = "fresh objects of earlier regions",
    /// Those lines fenced before a commit record (undo record, redo record,
    /// STM record) is written: a record may reach the media before the
    /// lines it links.
    FRESH_BEFORE_RECORD: Fence [Region, Stm] = "fresh objects of earlier regions before a commit record",

    // ----- the redo path (`tx/redo.rs`, `log/redo.rs`, `retires.rs`, `pmem.rs`)
    /// R2: a redo region's one commit fence.
    REDO_RECORD: Fence [Region] = "redo record: the region is committed",
    /// The chained retire: the slot's previous redo region's bytes, written
    /// back before this region's record fence.
    REDO_PREVIOUS: Flush [Region] = "redo data of the slot's previous region",
    /// Other slots' retires settled before a redo record.
    REDO_OTHER_RETIRES: Fence [Region] = "redo retires of other slots before a redo record",
    /// Retires settled before a redo region rolls back.
    REDO_ROLLBACK: Fence [Region] = "redo retires before a redo region rolls back",
    /// A region leaving the redo path: its undo entries.
    REDO_LEAVING: Fence [Region] = "undo entries of a region leaving redo",
    /// A full settle's step 1: in-place bytes written back.
    RETIRE_DATA: Flush [Region] = "redo data before its record is retired",
    /// A full settle's step 1 fence.
    RETIRE_FENCE: Fence [Region] = "redo data durable before its record's generation moves",
    /// A full settle's step 2: the moved generation word written back.
    RETIRE_BUMP: Flush [Region] = "redo retire generation bump",
    /// Format 4's slot recovery: replayed or restored bytes, before the word moves.
    RECOVERED_BYTES: Fence [Recovery] = "recovered bytes before the slot's generation moves",
    /// Format 4's slot recovery: the word past every written-ahead generation.
    RECOVERED_PAST: Fence [Recovery] = "recovered slot's generation past its written-ahead halves",

    // ----- allocation, types, the pool header (`alloc/`, `types.rs`, `pool/`)
    /// A span-table entry's write-back.
    SPAN_ENTRY: Flush [Alloc] = "span-table entry",
    /// A new huge object's arena-table entries, before its payload.
    HUGE_ALLOC: Fence [Alloc] = "arena table entries of a huge object before its payload overwrites the span tables",
    /// A freed huge object: span tables cleared before the arenas go back.
    HUGE_SPAN_TABLES: Fence [Alloc] = "span tables cleared before the arenas are handed back",
    /// A freed huge object's arena-table entries.
    HUGE_FREE: Fence [Alloc] = "arena table entries of a freed huge object",
    /// The end of a sweep (online, or the recovery GC of an open).
    SWEPT_SPANS: Fence [Gc, Open] = "span tables of swept spans",
    /// The clean close: slot bitmaps before the clean flag.
    CLEAN_BITMAPS: Fence [Close] = "slot bitmaps before the clean flag",
    /// A type-table entry's body, before its used flag.
    TYPE_BODY: Fence [Alloc] = "type entry body before its used flag",
    /// A type-table entry's used flag.
    TYPE_USED: Fence [Alloc] = "type entry used flag",
    /// A header copy (two-copy protocol).
    HEADER_COPY: Fence [Open, Close, Growth] = "header copy written before it is relied on",
    /// Growth: the new size, before the new space is used.
    GROWN_SIZE: Fence [Growth] = "grown size recorded before the new space is used",
    /// Relocation: swizzled pointers, before the relocation is recorded finished.
    SWIZZLED: Fence [Open] = "swizzled pointers before the relocation is finished",

    // ----- the persistent STM (`stm/`)
    /// An STM commit's one fence.
    STM_RECORD: Fence [Stm] = "STM redo record and copies before the new values are visible",
    /// A write-free transaction's new objects.
    STM_MADE: Fence [Stm] = "objects allocated by a transaction that wrote no variable",
    /// The STM clock reservation.
    STM_CLOCK: Fence [Stm] = "STM clock reservation before versions above it are used",
    /// Quiesce: idle threads' in-place values, before their records are cleared.
    STM_IDLE_VALUES: Fence [Gc] = "in-place STM values of idle threads before their records are cleared",
    /// A record with new objects cleared before later records (quiesce, recovery).
    STM_YOUNG_CLEARED: Fence [Gc, Recovery] = "an STM record with new objects cleared before later records",
    /// Quiesce: the records cleared.
    STM_CLEARED: Fence [Gc] = "STM records cleared",
    /// The helping rule: another thread's in-place values first.
    STM_HELP_VALUES: Fence [Stm] = "another thread's in-place STM values before its records with new objects are cleared",
    /// The helping rule: the helped records cleared.
    STM_HELP_CLEARED: Fence [Stm] = "records with new objects cleared before a later record is overwritten",
    /// STM recovery's replay (issued by every open of a pool with STM
    /// variables, replaying zero records or more: such opens all count as
    /// recovering).
    STM_REPLAYED: Fence [Recovery, Open] = "replayed STM values before their records are cleared",
    /// STM recovery's end: records cleared, a new epoch.
    STM_EPOCH: Fence [Open] = "STM records cleared and epoch bumped",

    // ----- laziness, front ends
    /// `lazy::sync`.
    LAZY_SYNC: Fence [Lazy] = "lazy links of this thread made durable (lazy::sync)",
    /// A forced result's copy, before the link that publishes it (`lazy::FENCE_RESULT`).
    LAZY_RESULT: Fence [Lazy] = "lazy result copy before the indirection that publishes it",
    /// `Pool::fence` (the C ABI's `engram_fence`).
    FRONT_END: Fence [FrontEnd] = "front end fence",
    /// `Pool::persist` (the C ABI's `engram_persist`): a flush, then this fence.
    FRONT_END_PERSIST: Fence [FrontEnd] = "front end persist",
}

/// The declaration of `name`, if it is one of [`ALL`].
pub fn find(name: &str) -> Option<&'static Named> {
    ALL.iter().find(|n| n.name == name)
}

/// Whether `name` is a fence that only an open with something to recover
/// issues ([`Stage::Recovery`]).
pub fn is_recovery(name: &str) -> bool {
    find(name).is_some_and(|n| n.kind == Kind::Fence && n.issued_by(Stage::Recovery))
}

/// Whether an open may issue the fence `name` ([`Stage::Recovery`] or
/// [`Stage::Open`]).
pub fn issued_by_open(name: &str) -> bool {
    find(name).is_some_and(|n| n.kind == Kind::Fence && (n.issued_by(Stage::Recovery) || n.issued_by(Stage::Open)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_identifiers_are_distinct() {
        for (i, a) in ALL.iter().enumerate() {
            assert!(!a.name.is_empty() && !a.stages.is_empty(), "{}", a.ident);
            for b in &ALL[i + 1..] {
                assert_ne!(a.name, b.name, "{} and {} share a name", a.ident, b.ident);
                assert_ne!(a.ident, b.ident);
            }
        }
    }

    /// The double-crash mode's recovering opens are told by these: the
    /// slot recovery's fences, the STM's replay, and the two an undo or a
    /// record-committed region's recovery issues.
    #[test]
    fn recovery_fences_are_derived_from_the_stages() {
        let mut rec: Vec<&str> = ALL.iter().filter(|n| is_recovery(n.name)).map(|n| n.ident).collect();
        rec.sort();
        assert_eq!(
            rec,
            ["GEN_BUMP", "RECOVERED_BYTES", "RECOVERED_PAST", "RESTORED_BYTES", "STM_REPLAYED", "STM_YOUNG_CLEARED"],
            "a recovery fence added or removed: update this test and docs/crash-consistency.md"
        );
        assert!(!is_recovery(SPAN_ENTRY) && !is_recovery("no such fence"));
        assert!(issued_by_open(HEADER_COPY) && !issued_by_open(UNDO_ENTRY));
    }
}
