//! The persistence seam: every flush and fence the engine issues goes through
//! [`Persister`].
//!
//! What it keeps true: a range passed to [`Persister::flush`] is durable once a
//! later [`Persister::fence`] on the same thread returns `Ok`. Nothing else is
//! promised: an unflushed store may or may not survive a power failure, and
//! stores to different cache lines persist in no particular order.
//!
//! Modes (see `docs/format.md`, "Durability"):
//! - `Pmem`: cache-line write-back (CLWB, else CLFLUSHOPT, else CLFLUSH, chosen
//!   by CPUID whatever the vendor) and SFENCE. Right for DAX mappings, and for
//!   `/dev/shm` when emulating persistent memory.
//! - `Msync`: `flush` records the dirty pages of the calling thread, tagged
//!   with the persister (one per open pool); `fence` merges that persister's
//!   pages and `msync(MS_SYNC)`s each run. Pages a closed pool left behind
//!   (a flush with no fence before close, e.g. a region that failed) are
//!   dropped, never synced: their mapping may be gone (`msync` would fail
//!   with ENOMEM) or belong to another pool by now. Durable on ordinary storage.
//! - `Wal`: the pool is mapped privately and `flush` records byte ranges
//!   per thread (tagged like msync's); `fence` copies their current bytes
//!   into the pool's write-ahead log batch (`wal.rs`) and, outside a
//!   failure-atomic region, returns once a group commit made them durable
//!   (one `fdatasync` for every thread waiting). Inside a region
//!   ([`Persister::region_begin`]) a fence only records; the region's end
//!   ([`Persister::region_end`]) waits. Durable on ordinary storage, with
//!   one device flush per commit.
//! - `Process`: nothing is flushed; the data survives a process crash (the page
//!   cache keeps it) but not a power failure.
//! - `Trace`: nothing is flushed for real; every store, flush and fence is
//!   reported to a [`crate::trace::Tracer`] for the crash explorer, each
//!   flush with the instruction `Pmem` mode would use on this CPU (or the
//!   one the tracer forces, `Tracer::force_flush_kind`).
//!
//! Every fence names what it orders (`what`), so that a tracer (the crash
//! explorer) can attribute each ordering point to a protocol step. Counters of
//! flushes and fences are kept per thread for the benchmarks.

use crate::error::{Error, Result};
use crate::trace::Tracer;
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How the engine makes stores durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Durability {
    /// CLWB/CLFLUSHOPT/CLFLUSH + SFENCE: persistent memory (or tmpfs emulating it).
    Pmem,
    /// `msync(MS_SYNC)` of the dirty pages at each fence: ordinary storage.
    Msync,
    /// Private mapping plus a write-ahead log with group commit: one
    /// `fdatasync` per commit (shared by concurrent commits); ordinary storage.
    Wal,
    /// No flushing: survives a process crash, not a power failure.
    Process,
    /// Records stores, flushes and fences for the crash explorer (needs a
    /// tracer in the create/open options).
    Trace,
}

impl Durability {
    /// The lower-case name used by the CLI and `engram info`.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Pmem => "pmem",
            Durability::Msync => "msync",
            Durability::Wal => "wal",
            Durability::Process => "process",
            Durability::Trace => "trace",
        }
    }

    /// Parses the name printed by [`Durability::name`].
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "pmem" => Ok(Durability::Pmem),
            "msync" => Ok(Durability::Msync),
            "wal" => Ok(Durability::Wal),
            "process" => Ok(Durability::Process),
            "trace" => Ok(Durability::Trace),
            other => Err(Error::invalid(format!("unknown durability mode {other:?} (pmem, msync, wal, process, trace)"))),
        }
    }
}

/// Which cache-line write-back instruction this CPU offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushInstr {
    /// CLWB: write back, keep the line cached.
    Clwb,
    /// CLFLUSHOPT: write back and evict, weakly ordered.
    Clflushopt,
    /// CLFLUSH: write back and evict, ordered with all stores.
    Clflush,
}

impl FlushInstr {
    /// Chooses the best instruction by CPUID (any vendor).
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            // CPUID leaf 7 subleaf 0, EBX bit 24 = CLWB, bit 23 = CLFLUSHOPT.
            // CPUID is available on every x86-64 processor.
            let leaf7 = core::arch::x86_64::__cpuid_count(7, 0);
            if leaf7.ebx & (1 << 24) != 0 {
                return FlushInstr::Clwb;
            }
            if leaf7.ebx & (1 << 23) != 0 {
                return FlushInstr::Clflushopt;
            }
        }
        FlushInstr::Clflush
    }

    /// The same instruction for the persistency model.
    pub fn kind(self) -> crate::trace::FlushKind {
        match self {
            FlushInstr::Clwb => crate::trace::FlushKind::Clwb,
            FlushInstr::Clflushopt => crate::trace::FlushKind::Clflushopt,
            FlushInstr::Clflush => crate::trace::FlushKind::Clflush,
        }
    }

    /// The instruction's mnemonic.
    pub fn name(self) -> &'static str {
        match self {
            FlushInstr::Clwb => "clwb",
            FlushInstr::Clflushopt => "clflushopt",
            FlushInstr::Clflush => "clflush",
        }
    }
}

/// Cache-line size assumed by the flush loops and the persistency model.
pub const CACHE_LINE: usize = 64;
const PAGE: usize = 4096;

thread_local! {
    static COUNTERS: Cell<Counters> = const { Cell::new(Counters { flushes: 0, fences: 0 }) };
    /// Dirty page runs of this thread in msync mode, dirty byte ranges in wal
    /// mode: (persister id, start, end).
    static DIRTY: RefCell<Vec<(u64, usize, usize)>> = const { RefCell::new(Vec::new()) };
    /// Wal mode: persisters this thread is inside a region of.
    static IN_REGION: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    /// Wal mode: (persister id, number of this thread's last recording).
    static RECORDED: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Ids of the persisters alive now (msync mode only): a fence drops the
/// runs of ids not in this set.
static LIVE: Mutex<BTreeSet<u64>> = Mutex::new(BTreeSet::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One pool's persister identity; dropping the last clone retires the id.
#[derive(Debug)]
struct PersisterId(u64);

impl PersisterId {
    fn new() -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).insert(id);
        PersisterId(id)
    }
}

impl Drop for PersisterId {
    fn drop(&mut self) {
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.0);
    }
}

/// Per-thread counts of flush and fence operations (for benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Cache lines (pmem) or ranges (msync) flushed.
    pub flushes: u64,
    /// Fences issued.
    pub fences: u64,
}

/// The calling thread's flush and fence counts since it started.
pub fn counters() -> Counters {
    COUNTERS.with(Cell::get)
}

fn count(flushes: u64, fences: u64) {
    COUNTERS.with(|c| {
        let mut v = c.get();
        v.flushes += flushes;
        v.fences += fences;
        c.set(v);
    });
}

/// The one place where the engine flushes and fences.
#[derive(Clone, Debug)]
pub struct Persister {
    mode: Durability,
    instr: FlushInstr,
    tracer: Option<Arc<Tracer>>,
    id: Arc<PersisterId>,
    /// Wal mode: the log and the pool's base address.
    wal: Option<(Arc<crate::wal::Wal>, usize)>,
    /// Generation bumps of the 2-fence commit awaiting a fence: every fence
    /// flushes them first (`bumps.rs`).
    bumps: Arc<crate::bumps::PendingBumps>,
    /// Redo records whose in-place bytes await a fence (`retires.rs`).
    retires: Arc<crate::retires::PendingRetires>,
    /// Lines of new objects that committed regions left unflushed: every
    /// fence writes them back first (`fresh.rs`).
    fresh: Arc<crate::fresh::PendingFresh>,
    /// Whether regions may commit by record (`commits_by_record`).
    by_record: bool,
}

/// Which modes commit by record, from `ENGRAM_COMMIT_RECORD`: unset or
/// `on`: pmem and trace, whose fences wait for write-backs; `all`: process
/// mode too (no fence there orders anything, so the record only costs time;
/// the tests use it to run the record path under their threads); `off`:
/// none (the 3-fence commit everywhere, for before/after measurements in
/// one build). Read once per process. Any other value is an
/// [`Error::InvalidArgument`] from [`check_commit_record_setting`], which
/// `Pool::create` and `Pool::open` call before they touch the file.
fn commit_record_setting() -> &'static std::result::Result<Option<bool>, String> {
    static SETTING: std::sync::OnceLock<std::result::Result<Option<bool>, String>> = std::sync::OnceLock::new();
    SETTING.get_or_init(|| match std::env::var("ENGRAM_COMMIT_RECORD").as_deref() {
        Err(std::env::VarError::NotPresent) | Ok("on") => Ok(Some(false)),
        Ok("all") => Ok(Some(true)),
        Ok("off") => Ok(None),
        Ok(v) => Err(format!("ENGRAM_COMMIT_RECORD={v:?}: expected on, off or all")),
        Err(std::env::VarError::NotUnicode(_)) => Err("ENGRAM_COMMIT_RECORD is not UTF-8".into()),
    })
}

/// `Ok` unless `ENGRAM_COMMIT_RECORD` holds a value the engine does not know.
pub(crate) fn check_commit_record_setting() -> Result<()> {
    commit_record_setting().as_ref().map(|_| ()).map_err(|what| Error::invalid(what.clone()))
}

/// Whether a pool in `mode` commits by record (see [`commit_record_setting`];
/// a refused setting never gets this far, and counts as unset).
fn record_commit_modes(mode: Durability) -> bool {
    match (commit_record_setting(), mode) {
        (Ok(None), _) => false,
        (Ok(Some(true)), Durability::Process) => true,
        (_, m) => matches!(m, Durability::Pmem | Durability::Trace),
    }
}

impl Persister {
    /// A persister for `mode`, using the CPU's best flush instruction.
    /// `Trace` without a tracer records nothing (it behaves as `Process`).
    pub fn new(mode: Durability, tracer: Option<Arc<Tracer>>) -> Self {
        let tracer = if mode == Durability::Trace { tracer } else { None };
        let by_record = record_commit_modes(mode);
        Persister {
            mode,
            instr: FlushInstr::detect(),
            tracer,
            id: Arc::new(PersisterId::new()),
            wal: None,
            bumps: Default::default(),
            retires: Default::default(),
            fresh: Default::default(),
            by_record,
        }
    }

    /// Attaches the write-ahead log of a `Wal`-mode pool mapped at `base`.
    pub(crate) fn with_wal(mut self, wal: Arc<crate::wal::Wal>, base: u64) -> Self {
        self.wal = Some((wal, base as usize));
        self
    }

    /// The write-ahead log, in `Wal` mode.
    pub(crate) fn wal(&self) -> Option<&crate::wal::Wal> {
        self.wal.as_ref().map(|(w, _)| &**w)
    }

    /// The pool's pending generation bumps (`bumps.rs`).
    pub(crate) fn bumps(&self) -> &crate::bumps::PendingBumps {
        &self.bumps
    }

    /// Whether regions may commit by commit record with the generation bump
    /// left to a later fence (`log.rs`, steps 3' and 4'): in the modes whose
    /// fence orders this thread's write-backs (pmem and the tracer's Px86
    /// model; process mode, which writes nothing back, only with
    /// `ENGRAM_COMMIT_RECORD=all`). Msync and wal keep the 3-fence commit,
    /// as does every mode with `ENGRAM_COMMIT_RECORD=off`.
    #[inline]
    pub(crate) fn commits_by_record(&self) -> bool {
        self.by_record
    }

    /// Whether a region that logged nothing may leave its new objects
    /// unflushed at commit, listed for the next fence of any thread
    /// (`fresh.rs`): in the modes whose fence orders this thread's
    /// write-backs (pmem, and the tracer's Px86 model, so the crash explorer
    /// checks it). Msync and wal write back at commit as before; process
    /// mode writes nothing back anyway.
    #[inline]
    pub(crate) fn defers_fresh(&self) -> bool {
        matches!(self.mode, Durability::Pmem | Durability::Trace)
    }

    /// Lists the lines of new objects (`ranges`: pool offsets and lengths
    /// of a pool mapped at `base`) for the next fence of any thread
    /// (`fresh.rs`). Only in a mode where [`Persister::defers_fresh`].
    pub(crate) fn defer_fresh(&self, base: u64, ranges: &[(u64, u64)]) {
        debug_assert!(self.defers_fresh());
        self.fresh.defer(base, ranges);
    }

    /// If lines of new objects are listed (`fresh.rs`): a fence named
    /// `what`, which writes them back first, so they are durable before the
    /// caller's next store. For commit records, which may reach the media
    /// before their own fence (any line may be evicted early), so the
    /// objects they link must be durable before the record is written.
    #[inline]
    pub(crate) fn settle_fresh(&self, what: &'static str) -> Result<()> {
        if self.fresh.any() {
            return self.fence(what);
        }
        Ok(())
    }

    /// Before a fence: the listed lines of new objects written back on this
    /// thread (`fresh.rs`); the set stays locked until the caller has fenced
    /// and retires it. One load when none is listed.
    #[inline]
    fn flush_fresh(&self) -> Option<crate::fresh::Listed<'_>> {
        // SAFETY: listed lines lie in the pool's heap, which stays mapped
        // (and never shrinks) while the pool is open.
        self.fresh.flush_listed(|a, l| unsafe { self.flush_named(a as *const u8, l as usize, crate::fences::FRESH_LINES) })
    }

    /// The pool's pending redo retires (`retires.rs`).
    pub(crate) fn retires(&self) -> &crate::retires::PendingRetires {
        &self.retires
    }

    /// Whether regions may commit by redo record (`log/redo.rs`): pmem and
    /// trace (the Px86 model), the modes whose fence orders this thread's
    /// write-backs and in which the record commit is on. Msync, wal and
    /// process modes log undo only: wal's fences are recordings of stores
    /// already made, msync writes whole pages back at each fence (no line
    /// to leave for later), and process mode has no fence to save.
    #[inline]
    pub(crate) fn commits_by_redo(&self) -> bool {
        self.by_record && matches!(self.mode, Durability::Pmem | Durability::Trace)
    }

    /// If any generation bump or redo retire is pending, fences (named
    /// `what`), which makes every pending bump durable and settles every
    /// retire; otherwise does nothing.
    pub(crate) fn settle_bumps(&self, what: &'static str) -> Result<()> {
        if self.bumps.pending() || self.retires.listed(None).is_some() {
            self.fence(what)?;
        }
        Ok(())
    }

    /// The tracer, in `Trace` mode.
    pub fn tracer(&self) -> Option<&Tracer> {
        self.tracer.as_deref()
    }

    /// [`Persister::flush`], unless a test dropped flushes named `what`.
    ///
    /// # Safety
    /// As for [`Persister::flush`].
    pub unsafe fn flush_named(&self, addr: *const u8, len: usize, what: &'static str) {
        if !crate::failpoint::flush_dropped(what) {
            // SAFETY: the caller's contract is flush's.
            unsafe { self.flush(addr, len) };
        }
    }

    /// The durability mode.
    pub fn mode(&self) -> Durability {
        self.mode
    }

    /// The flush instruction used in `Pmem` mode.
    pub fn instr(&self) -> FlushInstr {
        self.instr
    }

    /// Starts writing back `len` bytes at `addr`; durable after the next fence.
    ///
    /// # Safety
    /// `[addr, addr+len)` must lie inside one live mapping of this process
    /// (the write-back instructions fault on an unmapped address, and
    /// `msync` would act on whatever is mapped there), and in `Trace` mode
    /// inside the traced pool.
    #[inline]
    pub unsafe fn flush(&self, addr: *const u8, len: usize) {
        // Process mode writes nothing back: no call on a region's path.
        if len == 0 || self.mode == Durability::Process {
            return;
        }
        // Pmem mode, the one that runs hot, without a call.
        if self.mode == Durability::Pmem {
            self.flush_lines(addr as usize, len);
            return;
        }
        // SAFETY: the caller's contract is flush's.
        unsafe { self.flush_by_mode(addr, len) }
    }

    /// [`Persister::flush`] of a non-empty range in a mode that writes back.
    ///
    /// # Safety
    /// As for [`Persister::flush`].
    unsafe fn flush_by_mode(&self, addr: *const u8, len: usize) {
        match self.mode {
            Durability::Pmem => self.flush_lines(addr as usize, len),
            Durability::Msync => {
                let start = addr as usize & !(PAGE - 1);
                let end = (addr as usize + len + PAGE - 1) & !(PAGE - 1);
                let id = self.id.0;
                DIRTY.with(|d| d.borrow_mut().push((id, start, end)));
                count(1, 0);
            }
            Durability::Wal => {
                let id = self.id.0;
                DIRTY.with(|d| d.borrow_mut().push((id, addr as usize, addr as usize + len)));
                count(1, 0);
            }
            Durability::Trace => {
                if let Some(t) = &self.tracer {
                    t.flush(addr as u64, len as u64, self.instr.kind());
                }
            }
            Durability::Process => {}
        }
    }

    #[inline]
    fn flush_lines(&self, addr: usize, len: usize) {
        let mut line = addr & !(CACHE_LINE - 1);
        let end = addr + len;
        let mut n = 0;
        while line < end {
            // SAFETY: `line` lies in the caller's mapped range (rounded down to
            // its cache line, which is in the same page), and write-back
            // instructions do not change memory contents.
            unsafe { flush_line(self.instr, line as *const u8) };
            line += CACHE_LINE;
            n += 1;
        }
        count(n, 0);
    }

    /// Orders and completes every earlier flush of this thread. `what` names
    /// the protocol step this fence orders (for tracing and review).
    #[inline]
    pub fn fence(&self, what: &'static str) -> Result<()> {
        if crate::failpoint::fence_dropped(what) {
            return Ok(());
        }
        // Process mode orders nothing; unless a bump was ever listed (the
        // record path, `commits_by_record`), there is nothing to retire
        // either (and no redo retire: process mode never lists one,
        // `commits_by_redo`): exactly what the full path would do, without
        // its call.
        if self.mode == Durability::Process && !self.bumps.any() {
            return Ok(());
        }
        // Pmem mode with nothing to ride on the fence (no redo retire ever
        // listed, no bump pending, no fresh line listed: the STM's update
        // commit, say) is the `sfence` alone, without the two calls:
        // exactly what the full path does then, its checks in its order.
        if self.mode == Durability::Pmem && !self.retires.ever() && !self.bumps.pending() && !self.fresh.any() {
            sfence();
            count(0, 1);
            return Ok(());
        }
        self.fence_and_bumps(what)
    }

    /// [`Persister::fence`] once its fault switch is checked.
    fn fence_and_bumps(&self, what: &'static str) -> Result<()> {
        // Pending redo retires are settled first (`retires.rs`, a full settle;
        // one load when no redo region ever committed in this pool).
        let retired = if self.retires.ever() { self.settle_retires(None)? } else { None };
        self.fence_with_riders(what)?;
        if let Some(seen) = retired {
            for (s, g) in seen.pairs() {
                self.retires.clear(s, g);
            }
        }
        Ok(())
    }

    /// Steps 1 and 2 of a full settle (`retires.rs`) of every listed retire
    /// but `except`'s: their in-place ranges written back and fenced, then
    /// their words moved and written back; the caller's fence that follows
    /// makes the words durable, and then clears what this returns.
    fn settle_retires(&self, except: Option<u32>) -> Result<Option<crate::retires::Seen>> {
        let Some(seen) = self.retires.listed(except) else { return Ok(None) };
        for (s, _) in seen.pairs() {
            // SAFETY: the ranges are region data inside the pool, which
            // stays mapped while the pool is open.
            self.retires.flush_ranges(s, |a, l| unsafe { self.flush_named(a as *const u8, l as usize, crate::fences::RETIRE_DATA) });
        }
        self.retire_fence(crate::fences::RETIRE_FENCE)?;
        for (s, g) in seen.pairs() {
            let word = self.retires.bump(s, g);
            // SAFETY: a log slot's generation word, mapped while the pool is open.
            unsafe { self.flush_named(word as *const u8, 8, crate::fences::RETIRE_BUMP) };
        }
        Ok(Some(seen))
    }

    /// Step 1's fence of a full settle (no pending bump or retire rides on
    /// it: the caller's fence that follows takes them).
    fn retire_fence(&self, what: &'static str) -> Result<()> {
        if crate::failpoint::fence_dropped(what) {
            return Ok(());
        }
        self.fence_only(what)
    }

    /// The commit fence of a redo region on slot `slot` (`log/redo.rs`),
    /// named `what`: as [`Persister::fence`], except that slot `slot`'s own
    /// listed retire (its previous region's record) is not settled in full
    /// but chained: its in-place ranges are written back before this one
    /// fence, and its word moves after it, a pending bump (`retires.rs`).
    /// Where the region's own ranges `next` (absolute address, length)
    /// cover every byte of the previous one's, that write-back is left out
    /// (the subsumed retire: once this fence completes, this region's
    /// record reproduces every byte the previous one stored, and this
    /// region's own retire writes the same ranges back later).
    /// Other slots' retires must have been settled by the caller.
    pub(crate) fn fence_redo(&self, slot: u32, next: impl Iterator<Item = (u64, u64)> + Clone, what: &'static str) -> Result<()> {
        if crate::failpoint::fence_dropped(what) {
            return Ok(());
        }
        let own = self.retires.of(slot);
        if own.is_some() && !self.retires.covered_by(slot, next) {
            // SAFETY: as in `settle_retires`.
            self.retires.flush_ranges(slot, |a, l| unsafe { self.flush_named(a as *const u8, l as usize, crate::fences::REDO_PREVIOUS) });
        }
        self.fence_with_riders(what)?;
        if let Some(g) = own {
            // Unlisted first, then the word moved by a plain store (the
            // owner's, `PendingRetires::move_own`), then the pending bump
            // listed (never before the word holds it: a fence of another
            // thread could write the old word back and retire the pair).
            self.retires.clear(slot, g);
            self.retires.move_own(slot, g);
            self.bumps.add(slot, (g + 1) & crate::format::LOG_GEN_MASK);
        }
        Ok(())
    }

    /// The fence `what` with what rides on every fence: the 2-fence
    /// commit's deferred generation bumps (`bumps.rs`) and the lines of new
    /// objects that committed regions left unflushed (`fresh.rs`) are
    /// written back before it and retired once it has completed.
    #[inline]
    fn fence_with_riders(&self, what: &'static str) -> Result<()> {
        // Only a pending pair builds (and returns) the list of what was
        // flushed: the bits stay set once a region committed by record, and
        // the list is 136 bytes to build, copy and retire (`bumps.rs`).
        let bumps = if self.bumps.pending() {
            // SAFETY: a pending word is a log slot's generation word, inside
            // the pool's metadata, which stays mapped while the pool is open.
            self.bumps.flush(|addr| unsafe { self.flush_named(addr as *const u8, 8, crate::fences::PENDING_BUMP) })
        } else {
            None
        };
        let fresh = self.flush_fresh();
        self.fence_only(what)?;
        self.bumps.retire(bumps);
        if let Some(f) = fresh {
            f.retire();
        }
        Ok(())
    }

    #[inline(always)]
    fn fence_only(&self, what: &'static str) -> Result<()> {
        match self.mode {
            Durability::Pmem => {
                sfence();
                count(0, 1);
                Ok(())
            }
            Durability::Msync => {
                count(0, 1);
                msync_dirty(self.id.0)
            }
            Durability::Wal => {
                count(0, 1);
                self.wal_fence()
            }
            Durability::Trace => {
                if let Some(t) = &self.tracer {
                    t.fence(what);
                }
                Ok(())
            }
            Durability::Process => Ok(()),
        }
    }

    /// Flush then fence: `len` bytes at `addr` are durable on return.
    ///
    /// # Safety
    /// As for [`Persister::flush`].
    pub unsafe fn persist(&self, addr: *const u8, len: usize, what: &'static str) -> Result<()> {
        // SAFETY: the caller's contract is flush's.
        unsafe { self.flush(addr, len) };
        self.fence(what)
    }
}

impl Persister {
    /// Marks the start of a failure-atomic region on this thread: in `Wal`
    /// mode its fences only record until [`Persister::region_end`].
    #[inline]
    pub fn region_begin(&self) {
        if self.mode == Durability::Wal {
            IN_REGION.with(|r| r.borrow_mut().push(self.id.0));
        }
    }

    /// Ends the region [`Persister::region_begin`] started. With `durable`
    /// (a commit), returns once everything the thread recorded is durable.
    #[inline]
    pub fn region_end(&self, durable: bool) -> Result<()> {
        if self.mode != Durability::Wal {
            return Ok(());
        }
        self.wal_region_end(durable)
    }

    /// [`Persister::region_end`] in `Wal` mode.
    fn wal_region_end(&self, durable: bool) -> Result<()> {
        let id = self.id.0;
        let _ = IN_REGION.try_with(|r| {
            let mut r = r.borrow_mut();
            if let Some(i) = r.iter().rposition(|&x| x == id) {
                r.remove(i);
            }
        });
        if durable {
            self.wal_wait()
        } else {
            Ok(())
        }
    }

    /// Wal-mode fence: record this thread's ranges; outside a region, wait
    /// until they are durable.
    fn wal_fence(&self) -> Result<()> {
        let Some((wal, base)) = &self.wal else { return Ok(()) };
        let id = self.id.0;
        let runs = take_dirty(id);
        if !runs.is_empty() {
            // SAFETY: every run was recorded by `flush` on this pool's live
            // mapping (runs of other persisters are not taken), and lies in
            // it (`flush`'s contract); the bytes are this thread's own
            // stores, which the engine's protocols (region locks, per-thread
            // logs) keep other threads from writing meanwhile.
            let pieces = runs.iter().map(|&(s, e)| ((s - base) as u64, unsafe { std::slice::from_raw_parts(s as *const u8, e - s) }));
            let seq = wal.record(pieces);
            RECORDED.with(|r| {
                let mut r = r.borrow_mut();
                match r.iter_mut().find(|x| x.0 == id) {
                    Some(x) => x.1 = seq,
                    None => r.push((id, seq)),
                }
            });
        }
        if IN_REGION.with(|r| r.borrow().contains(&id)) {
            return Ok(());
        }
        self.wal_wait()
    }

    /// Waits until this thread's last recording for this pool is durable.
    fn wal_wait(&self) -> Result<()> {
        let Some((wal, _)) = &self.wal else { return Ok(()) };
        let id = self.id.0;
        let seq = RECORDED.try_with(|r| r.borrow().iter().find(|x| x.0 == id).map_or(0, |x| x.1)).unwrap_or(0);
        if seq == 0 {
            return Ok(());
        }
        wal.wait_durable(seq)
    }
}

/// Takes this thread's runs of persister `id` and msyncs them; drops the
/// runs of persisters that no longer exist.
fn msync_dirty(id: u64) -> Result<()> {
    let runs = take_dirty(id);
    if runs.is_empty() {
        return Ok(());
    }
    for (s, e) in runs {
        // SAFETY: every range was recorded by `flush` on a live shared mapping;
        // msync only writes pages back and reports an error for unmapped ranges.
        let rc = unsafe { libc::msync(s as *mut libc::c_void, e - s, libc::MS_SYNC) };
        if rc != 0 {
            return Err(Error::last_os("msync"));
        }
    }
    Ok(())
}

/// Takes this thread's runs of persister `id`, sorted and merged; drops the
/// runs of persisters that no longer exist.
fn take_dirty(id: u64) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = DIRTY.with(|d| {
        let mut d = d.borrow_mut();
        if d.iter().all(|r| r.0 == id) {
            return d.drain(..).map(|(_, s, e)| (s, e)).collect();
        }
        let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        let mut mine = Vec::new();
        d.retain(|&(owner, s, e)| {
            if owner == id {
                mine.push((s, e));
                false
            } else {
                live.contains(&owner)
            }
        });
        mine
    });
    if runs.len() > 1 {
        runs.sort_unstable();
    }
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(runs.len());
    for (s, e) in runs {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// Writes back the cache line holding `p`.
///
/// # Safety
/// `p` must be inside a live mapping.
#[cfg(target_arch = "x86_64")]
unsafe fn flush_line(instr: FlushInstr, p: *const u8) {
    use core::arch::asm;
    // SAFETY: p is a mapped address (caller's contract); CLWB/CLFLUSHOPT
    // were detected by CPUID before this persister was built, and write-back
    // instructions do not change memory contents.
    unsafe {
        match instr {
            FlushInstr::Clwb => asm!("clwb [{0}]", in(reg) p, options(nostack, preserves_flags)),
            FlushInstr::Clflushopt => asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags)),
            FlushInstr::Clflush => core::arch::x86_64::_mm_clflush(p),
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn flush_line(_instr: FlushInstr, _p: *const u8) {}

fn sfence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SFENCE has no memory-safety preconditions.
    unsafe {
        core::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_roundtrip() {
        for m in [Durability::Pmem, Durability::Msync, Durability::Wal, Durability::Process, Durability::Trace] {
            assert_eq!(Durability::parse(m.name()).unwrap(), m);
        }
        assert!(Durability::parse("fast").is_err());
    }

    #[test]
    fn pmem_counts_lines() {
        let buf = vec![0u8; 256];
        let p = Persister::new(Durability::Pmem, None);
        let before = counters();
        // 130 bytes starting 10 bytes into a line touches 3 lines at most.
        let start = buf.as_ptr().wrapping_add(64 - (buf.as_ptr() as usize % 64)).wrapping_add(10);
        // SAFETY: [start, start+130) lies inside `buf` (64 + 10 + 130 <= 256 from its start).
        unsafe { p.persist(start, 130, "test") }.unwrap();
        let after = counters();
        assert_eq!(after.flushes - before.flushes, 3);
        assert_eq!(after.fences - before.fences, 1);
    }

    /// A pool closed with flushed-but-unfenced pages (a failed region) must
    /// not make the next pool's fence on the same thread msync the old,
    /// unmapped range (that failed with ENOMEM: CI's TestBadInput).
    #[test]
    fn msync_fence_ignores_pages_of_a_closed_pool() {
        const LEN: usize = 2 * PAGE;
        let map = || {
            // SAFETY: a fresh anonymous shared mapping of LEN bytes, no fixed address.
            let p = unsafe {
                libc::mmap(std::ptr::null_mut(), LEN, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0)
            };
            assert_ne!(p, libc::MAP_FAILED);
            p as *mut u8
        };
        let old = map();
        let a = Persister::new(Durability::Msync, None);
        // SAFETY: [old, old+LEN) is mapped above.
        unsafe { a.flush(old, LEN) };
        drop(a);
        let new = map(); // before the unmap, so it cannot take the old address
                         // SAFETY: `old` was mapped above with LEN bytes and is not used again.
        assert_eq!(unsafe { libc::munmap(old as *mut libc::c_void, LEN) }, 0);
        let b = Persister::new(Durability::Msync, None);
        // SAFETY: [new, new+LEN) is mapped above.
        unsafe { b.persist(new, 8, "test") }.unwrap();
        // A live persister's pages stay pending across another's fence.
        let c = Persister::new(Durability::Msync, None);
        // SAFETY: as above.
        unsafe { c.flush(new.wrapping_add(PAGE), 8) };
        b.fence("test").unwrap();
        assert!(DIRTY.with(|d| d.borrow().iter().any(|r| r.0 == c.id.0)));
        c.fence("test").unwrap();
        assert!(DIRTY.with(|d| d.borrow().is_empty()));
        // SAFETY: `new` was mapped above with LEN bytes.
        assert_eq!(unsafe { libc::munmap(new as *mut libc::c_void, LEN) }, 0);
    }

    #[test]
    fn process_mode_is_free() {
        let p = Persister::new(Durability::Process, None);
        let before = counters();
        let x = 0u8;
        // SAFETY: one byte of a live local.
        unsafe { p.persist(&x, 1, "test") }.unwrap();
        assert_eq!(counters(), before);
    }
}
