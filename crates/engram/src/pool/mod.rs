//! The pool: a file mapped at a fixed address, holding a garbage-collected
//! heap with named roots and undo-logged regions.
//!
//! A [`Pool`] is a cheap, cloneable handle. The pool is closed cleanly when
//! [`Pool::close`] is called on the last handle (or the last handle drops):
//! caches drained, allocator bitmaps written out, everything persisted, and
//! the header marked clean so the next open costs O(metadata). A pool that
//! was not closed cleanly is recovered on open (`open.rs`).

mod asym;
mod deferred;
pub(crate) mod gate;
pub(crate) mod layer;
mod map;
mod open;
mod raw;
mod region;
mod softdirty;
pub(crate) mod space;

pub use deferred::{RecoveryGc, RecoveryGcHook, RecoveryGcState, RecoveryGcStatus};
pub use open::default_durability;
pub use region::Region;

use crate::alloc::{Heap, HeapStats};
use crate::error::{Error, Result};
use crate::gc::MarkStats;
use crate::pmem::Durability;
use crate::tx::{RootInfo, Tx};
use crate::types::TypeTable;
use parking_lot::Mutex;
use space::Space;
use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Options for [`Pool::create`].
#[derive(Clone, Debug)]
pub struct CreateOptions {
    /// Layout name checked on every open (at most 64 bytes).
    pub layout: String,
    /// Initial file size (rounded up to 64 KiB, at least 4.8 MiB).
    pub initial_size: u64,
    /// Largest the pool may grow to (its address reservation).
    pub max_size: u64,
    /// Durability mode; `None` picks `pmem` on DAX, `msync` on tmpfs, `wal`
    /// elsewhere.
    pub durability: Option<Durability>,
    /// Fails if the file exists (default), instead of overwriting it.
    pub exclusive: bool,
    /// Receives stores, flushes and fences in `Trace` mode.
    pub tracer: Option<std::sync::Arc<crate::trace::Tracer>>,
    /// Checked mode: validate pointer fields at alloc, write and commit
    /// (`Error::BadPointerField`). On by default in debug builds.
    pub check_pointers: bool,
    /// Wal mode: records the log's file operations (the WAL crash explorer).
    pub wal_recorder: Option<std::sync::Arc<crate::wal::Recorder>>,
    /// Wal mode: checkpoint when the log passes this many bytes (`None`:
    /// [`crate::wal::CHECKPOINT_BYTES`], 16 MiB); ignored in other modes.
    pub wal_checkpoint_bytes: Option<u64>,
}

impl CreateOptions {
    /// Options with the given layout and defaults: 16 MiB growing to 64 GiB.
    pub fn new(layout: &str) -> Self {
        CreateOptions {
            layout: layout.to_string(),
            initial_size: 16 << 20,
            max_size: 64 << 30,
            durability: None,
            exclusive: true,
            tracer: None,
            check_pointers: cfg!(debug_assertions),
            wal_recorder: None,
            wal_checkpoint_bytes: None,
        }
    }

    /// Sets the initial size.
    pub fn initial_size(mut self, bytes: u64) -> Self {
        self.initial_size = bytes;
        self
    }

    /// Sets the maximum size.
    pub fn max_size(mut self, bytes: u64) -> Self {
        self.max_size = bytes;
        self
    }

    /// Sets the durability mode.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = Some(d);
        self
    }

    /// Allows overwriting an existing file.
    pub fn overwrite(mut self) -> Self {
        self.exclusive = false;
        self
    }

    /// Turns checked mode (pointer-field validation) on or off.
    pub fn check_pointers(mut self, on: bool) -> Self {
        self.check_pointers = on;
        self
    }

    /// Records this pool's persistent-memory events (`Trace` mode).
    pub fn trace(mut self, tracer: std::sync::Arc<crate::trace::Tracer>) -> Self {
        self.durability = Some(Durability::Trace);
        self.tracer = Some(tracer);
        self
    }

    /// Wal mode: checkpoints whenever the log passes `bytes` (see
    /// [`OpenOptions::wal_checkpoint_bytes`]).
    pub fn wal_checkpoint_bytes(mut self, bytes: u64) -> Self {
        self.wal_checkpoint_bytes = Some(bytes);
        self
    }
}

/// Options for [`Pool::open`].
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// The layout name the program expects; `None` accepts any.
    pub layout: Option<String>,
    /// Durability mode; `None` picks `pmem` on DAX, `msync` on tmpfs, `wal`
    /// elsewhere.
    pub durability: Option<Durability>,
    /// Map privately (copy-on-write): recovery and writes never reach the
    /// file. Used by `engram check` and `engram info`.
    pub read_only: bool,
    /// How long [`Tx::lock`] waits before failing with `LockTimeout`.
    pub lock_timeout: Duration,
    /// Test hook: map at a different address even if the preferred one is free.
    pub force_relocate: bool,
    /// Receives stores, flushes and fences in `Trace` mode.
    pub tracer: Option<std::sync::Arc<crate::trace::Tracer>>,
    /// Checked mode: validate pointer fields at alloc, write and commit
    /// (`Error::BadPointerField`). On by default in debug builds.
    pub check_pointers: bool,
    /// Wal mode: records the log's file operations (the WAL crash explorer).
    pub wal_recorder: Option<std::sync::Arc<crate::wal::Recorder>>,
    /// After a crash: collect garbage in open, or in the background while
    /// the program runs (`docs/gc.md`).
    pub recovery_gc: RecoveryGc,
    /// Test hook: behave as on a kernel without soft-dirty bits (the
    /// deferred recovery GC falls back to eager).
    #[doc(hidden)]
    pub no_soft_dirty: bool,
    /// Test hook of the deferred recovery GC (see [`RecoveryGcHook`]).
    #[doc(hidden)]
    pub recovery_gc_hook: Option<RecoveryGcHook>,
    /// Test hook: the deferred recovery GC learns the written pages from
    /// the regions (which log every range they change and allocate every
    /// object they link) instead of the kernel's soft-dirty bits; blind to
    /// STM writes, so only for programs that write through regions alone.
    #[doc(hidden)]
    pub region_write_cards: bool,
    /// Wal mode: checkpoint when the log passes this many bytes (`None`:
    /// [`crate::wal::CHECKPOINT_BYTES`], 16 MiB); ignored in other modes.
    pub wal_checkpoint_bytes: Option<u64>,
}

impl OpenOptions {
    /// Options expecting `layout`.
    pub fn new(layout: &str) -> Self {
        OpenOptions { layout: Some(layout.to_string()), ..Self::any() }
    }

    /// Options accepting any layout.
    pub fn any() -> Self {
        OpenOptions {
            layout: None,
            durability: None,
            read_only: false,
            lock_timeout: Duration::from_secs(2),
            force_relocate: false,
            tracer: None,
            check_pointers: cfg!(debug_assertions),
            wal_recorder: None,
            recovery_gc: RecoveryGc::Auto,
            no_soft_dirty: false,
            recovery_gc_hook: None,
            region_write_cards: false,
            wal_checkpoint_bytes: None,
        }
    }

    /// Sets the durability mode.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = Some(d);
        self
    }

    /// Sets when the garbage of a crash is collected.
    pub fn recovery_gc(mut self, when: RecoveryGc) -> Self {
        self.recovery_gc = when;
        self
    }

    /// Opens privately; nothing is written to the file.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Turns checked mode (pointer-field validation) on or off.
    pub fn check_pointers(mut self, on: bool) -> Self {
        self.check_pointers = on;
        self
    }

    /// Records this pool's persistent-memory events (`Trace` mode).
    pub fn trace(mut self, tracer: std::sync::Arc<crate::trace::Tracer>) -> Self {
        self.durability = Some(Durability::Trace);
        self.tracer = Some(tracer);
        self
    }

    /// Wal mode: checkpoints (copies the log into the pool file and starts
    /// a new log generation) whenever the log passes `bytes`, instead of
    /// [`crate::wal::CHECKPOINT_BYTES`] (16 MiB). A small value makes
    /// checkpoints run every few commits, so that kill tests land during and
    /// after them; any value is safe (below the log header's 4 KiB every
    /// flush checkpoints), only slower. Ignored in other modes.
    pub fn wal_checkpoint_bytes(mut self, bytes: u64) -> Self {
        self.wal_checkpoint_bytes = Some(bytes);
        self
    }
}

/// What happened while opening a pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// The last close was clean (no recovery needed). True for a pool this
    /// handle just created.
    pub was_clean: bool,
    /// This handle created the pool (`Pool::create`, or `Pool::open_or_create`
    /// finding no file) rather than opening an existing one.
    pub created: bool,
    /// Undo-log entries rolled back.
    pub undone_entries: u64,
    /// Regions rolled back (log slots with live entries).
    pub undone_regions: u64,
    /// The pool was mapped at a new base and its pointers rewritten.
    pub relocated: bool,
    /// The recovery GC's findings (None after a clean close).
    pub recovered: Option<MarkStats>,
    /// What STM recovery replayed (None if the pool has no STM variables).
    pub stm: Option<crate::stm::StmRecovery>,
    /// The pool was closed cleanly but a saved slot bitmap failed its
    /// checksum, so the bitmaps were rebuilt by marking (`recovered` is set).
    pub bitmaps_rebuilt: bool,
    /// Pointer fields the recovery GC found pointing at no live object and
    /// treated as null (`Pool::repair` clears them).
    pub bad_fields: Vec<crate::BadField>,
    /// The recovery GC runs in the background (`Pool::recovery_gc_status`);
    /// `recovered` is None and the heap is sealed until it finishes.
    pub deferred_gc: bool,
}

/// What [`Pool::check_report`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Reachable objects and bytes (bad fields treated as null).
    pub stats: MarkStats,
    /// Pointer fields that point at no live object.
    pub bad_fields: Vec<crate::BadField>,
    /// Live objects whose header fields disagree with how the engine writes
    /// headers (unknown flag bits, a plain object's count other than 1, an
    /// array count that does not match its slot): damage a checksum would
    /// catch, which heap objects do not carry. Reported, never repaired.
    pub header_doubts: Vec<String>,
    /// Reachable objects the allocator holds as free (their slot bit is
    /// clear, or their span is not allocated): each would be handed out
    /// again while still linked. Reported, never repaired.
    pub free_count: u64,
    /// The first few of them, described.
    pub free_reachable: Vec<String>,
}

/// Figures about an open pool (`engram info`).
#[derive(Clone, Debug)]
pub struct PoolInfo {
    /// The pool file.
    pub path: std::path::PathBuf,
    /// Format version.
    pub version: u32,
    /// Layout name.
    pub layout: String,
    /// UUID.
    pub uuid: String,
    /// Mapped bytes (the file size in use).
    pub size: u64,
    /// Maximum size.
    pub max_size: u64,
    /// Where the pool is mapped.
    pub base: u64,
    /// Durability mode of this open.
    pub durability: Durability,
    /// Flush instruction (pmem mode).
    pub flush: &'static str,
    /// Mapped with MAP_SYNC.
    pub dax: bool,
    /// Objects allocated and not freed (after recovery: reachable ones).
    pub live_objects: u64,
    /// Bytes of their slots, headers included.
    pub live_bytes: u64,
    /// Allocator figures.
    pub heap: HeapStats,
    /// How the open went.
    pub open: OpenReport,
    /// Registered types.
    pub types: usize,
    /// Named roots.
    pub roots: usize,
}

pub(crate) struct PoolInner {
    pub space: Space,
    pub heap: Heap,
    pub types: TypeTable,
    /// Free log slots (an atomic bitmap; see `tx/slots.rs`).
    slots: crate::tx::SlotSet,
    pub locks: crate::tx::LockTable,
    /// Regions hold it shared; collection and close hold it exclusively.
    pub gate: gate::Gate,
    pub lock_timeout: Duration,
    report: OpenReport,
    stats: Mutex<MarkStats>,
    closed: std::sync::atomic::AtomicBool,
    /// Set by a simulated crash: the pool is abandoned, not closed.
    crashed: std::sync::atomic::AtomicBool,
    /// Volatile per-pool state of the layer built on this pool (the STM's,
    /// created on the first `atomically`); see `layer.rs`.
    pub layer_state: Mutex<Option<Arc<dyn std::any::Any + Send + Sync>>>,
    /// Checked mode: regions validate the pointer fields they store.
    pub check_pointers: bool,
    /// The deferred recovery GC's state (`deferred.rs`).
    pub(crate) deferred: deferred::Deferred,
}

impl PoolInner {
    /// Whether this thread is inside a region of this pool.
    pub(crate) fn in_region(&self) -> bool {
        let id = self.heap.id;
        ACTIVE.with(|a| a.borrow().iter().any(|(h, _)| *h == id))
    }

    /// Before the first write of a path that bypasses regions (the STM,
    /// persistent laziness): see `Deferred::before_unregioned_writes`.
    pub(crate) fn before_unregioned_writes(&self) -> Result<()> {
        self.deferred.before_unregioned_writes(self.in_region())
    }

    /// Takes a free log slot, with its generation if the slot set knows it
    /// (`tx/slots.rs`, generation cache).
    #[inline]
    pub fn take_slot(&self) -> (u32, Option<u64>) {
        let i = self.slots.take();
        (i, self.slots.take_gen(i))
    }

    /// Records the generation the owner of slot `i` left durable on the media.
    #[inline]
    pub fn slot_gen_known(&self, i: u32, gen: u64) {
        self.slots.put_gen(i, gen)
    }

    #[inline]
    pub fn put_slot(&self, i: u32) {
        self.slots.put(i)
    }
}

thread_local! {
    /// Regions running on this thread: (heap id, the outermost Tx).
    static ACTIVE: RefCell<Vec<(u64, *const ())>> = const { RefCell::new(Vec::new()) };
}

/// Removes pool `id`'s region from this thread's `ACTIVE` list (there is
/// at most one: a nested `txn` joins it, a second `begin` is refused); it
/// is usually the last entry, so this is a pop, not a pass over the list.
fn unregister_active(id: u64) {
    // try_with: a region may end while its thread's locals are torn down.
    let _ = ACTIVE.try_with(|a| {
        let mut a = a.borrow_mut();
        if a.last().is_some_and(|&(h, _)| h == id) {
            a.pop();
        } else if let Some(i) = a.iter().position(|&(h, _)| h == id) {
            a.remove(i);
        }
    });
}

/// Ends a region for the persister (`Persister::region_end`): `commit`
/// waits until the region is durable; dropping it (rollback, error, panic,
/// simulated crash) does not wait.
struct RegionEnd<'a> {
    persist: &'a crate::pmem::Persister,
    done: bool,
}

impl<'a> RegionEnd<'a> {
    fn begin(persist: &'a crate::pmem::Persister) -> Self {
        persist.region_begin();
        RegionEnd { persist, done: false }
    }

    fn commit(mut self) -> Result<()> {
        self.done = true;
        self.persist.region_end(true)
    }
}

impl Drop for RegionEnd<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.persist.region_end(false);
        }
    }
}

/// A handle to an open pool. Clone it to share between threads.
///
/// # Example
/// ```
/// use engram::{Pool, CreateOptions, Durability};
/// let dir = tempfile_dir();
/// let path = dir.join("doc.pool");
/// let pool = Pool::create(&path, CreateOptions::new("counter").durability(Durability::Process))?;
/// pool.txn(|tx| {
///     let c = tx.alloc(41u64)?;
///     tx.update(c, |v| *v += 1)?;
///     tx.set_root("counter", c)
/// })?;
/// pool.close()?;
///
/// let pool = Pool::open(&path, engram::OpenOptions::new("counter"))?;
/// let n = pool.txn(|tx| {
///     let c = tx.root::<u64>("counter")?.expect("root exists");
///     tx.read(c)
/// })?;
/// assert_eq!(n, 42);
/// # pool.close()?;
/// # fn tempfile_dir() -> std::path::PathBuf {
/// #     let d = std::env::temp_dir().join(format!("engram-doc-{}", std::process::id()));
/// #     std::fs::create_dir_all(&d).unwrap(); let _ = std::fs::remove_file(d.join("doc.pool")); d }
/// # Ok::<(), engram::Error>(())
/// ```
#[derive(Clone)]
pub struct Pool {
    inner: Arc<PoolInner>,
}

// A panic inside a region rolls the region back, so a pool seen after a
// caught panic holds no half-done update.
impl std::panic::UnwindSafe for Pool {}
impl std::panic::RefUnwindSafe for Pool {}

impl Pool {
    /// Creates a new pool file at `path`.
    ///
    /// An `ENGRAM_COMMIT_RECORD` value the engine does not know is an
    /// [`Error::InvalidArgument`], returned before the file is touched.
    pub fn create(path: impl AsRef<Path>, opts: CreateOptions) -> Result<Pool> {
        crate::pmem::check_commit_record_setting()?;
        open::create(path.as_ref(), &opts).map(|inner| Pool { inner: Arc::new(inner) })
    }

    /// Opens an existing pool, recovering it if it was not closed cleanly.
    ///
    /// An `ENGRAM_RECOVERY_GC` value the engine does not know (with
    /// [`RecoveryGc::Auto`], the default) is an [`Error::InvalidArgument`],
    /// returned before the file is touched; so is an unknown
    /// `ENGRAM_COMMIT_RECORD` value.
    pub fn open(path: impl AsRef<Path>, mut opts: OpenOptions) -> Result<Pool> {
        crate::pmem::check_commit_record_setting()?;
        opts.recovery_gc = opts.recovery_gc.resolve()?;
        let (inner, claim) = open::open(path.as_ref(), &opts)?;
        let inner = Arc::new(inner);
        if let Some(claim) = claim {
            deferred::start(&inner, claim)?;
        }
        Ok(Pool { inner })
    }

    /// Opens the pool at `path`, or creates it with `create` if there is no
    /// file. `pool.open_report().created` says which happened (a created
    /// pool's report also says `was_clean`).
    ///
    /// ```
    /// use engram::{CreateOptions, Durability, Pool};
    /// # let path = std::env::temp_dir().join(format!("engram-ooc-doc-{}.pool", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let pool = Pool::open_or_create(&path, CreateOptions::new("app").durability(Durability::Process))?;
    /// assert!(pool.open_report().created && pool.open_report().was_clean);
    /// pool.close()?;
    /// let pool = Pool::open_or_create(&path, CreateOptions::new("app").durability(Durability::Process))?;
    /// assert!(!pool.open_report().created);
    /// # pool.close()?; std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), engram::Error>(())
    /// ```
    pub fn open_or_create(path: impl AsRef<Path>, create: CreateOptions) -> Result<Pool> {
        let path = path.as_ref();
        if path.exists() {
            let mut o = OpenOptions::new(&create.layout);
            o.durability = create.durability;
            o.check_pointers = create.check_pointers;
            Pool::open(path, o)
        } else {
            Pool::create(path, create)
        }
    }

    /// Runs `f` as one failure-atomic region.
    ///
    /// If `f` returns `Ok`, everything it wrote is durable when `txn`
    /// returns; if it returns `Err` or panics, everything it wrote is undone
    /// (and the panic continues). A region started inside another region on
    /// the same thread joins it (nesting is flattened): an `Err` from the
    /// inner one makes the outer one roll back with [`Error::Aborted`].
    ///
    /// Inside an STM transaction body ([`Pool::atomically`]), which may run
    /// several times, a region is refused with [`Error::TxnInAtomically`].
    pub fn txn<R, E: From<Error>>(&self, f: impl FnOnce(&Tx<'_>) -> std::result::Result<R, E>) -> std::result::Result<R, E> {
        if crate::stm::in_atomically() {
            return Err(Error::TxnInAtomically.into());
        }
        let id = self.inner.heap.id;
        if let Some(outer) = ACTIVE.with(|a| a.borrow().iter().find(|(h, _)| *h == id).map(|&(_, t)| t)) {
            // SAFETY: the pointer was registered by the outermost `txn` call
            // on this thread, whose Tx lives on its stack frame until it
            // unregisters it; we are inside that call.
            let tx = unsafe { &*(outer as *const Tx<'_>) };
            let r = f(tx);
            if r.is_err() {
                tx.doom();
            }
            return r;
        }
        if self.inner.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::Busy { what: "pool is closed" }.into());
        }
        // `end` before `tx`: every way out drops the Tx (its locks, slot and
        // gate) before the region ends for the persister.
        let end = RegionEnd::begin(&self.inner.space.persist);
        // The `Tx` lives in this block and is dropped in place at its end
        // (`drop(tx)` would move it, a `memcpy` per region), before `end`.
        let v = {
            // Gate, then slot; the `Tx` built in this frame (`Tx::begin`).
            let gate = self.inner.gate.read();
            let (slot, gen) = Tx::take_slot(&self.inner)?;
            let tx = Tx::new(&self.inner, gate, slot, gen);
            ACTIVE.with(|a| a.borrow_mut().push((id, &tx as *const Tx<'_> as *const ())));
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&tx)));
            unregister_active(id);
            match result {
                Ok(Ok(v)) if !tx.is_doomed() => match tx.check_pointers_at_commit() {
                    Ok(()) => {
                        self.crash_guard(|| tx.commit())?;
                        v
                    }
                    Err(e) => {
                        self.crash_guard(|| tx.rollback())?;
                        return Err(e.into());
                    }
                },
                Ok(Ok(_)) => {
                    self.crash_guard(|| tx.rollback())?;
                    return Err(Error::Aborted.into());
                }
                Ok(Err(e)) => {
                    self.crash_guard(|| tx.rollback())?;
                    return Err(e);
                }
                Err(panic) if crate::failpoint::is_crash(&*panic) => {
                    // A simulated crash: abandon the pool without undoing anything.
                    self.inner.crashed.store(true, std::sync::atomic::Ordering::Release);
                    drop(tx);
                    std::panic::resume_unwind(panic)
                }
                Err(panic) => {
                    let _ = tx.rollback();
                    std::panic::resume_unwind(panic)
                }
            }
        };
        // The region's locks are released (the `Tx` dropped); in wal mode,
        // wait until its recordings are durable.
        end.commit()?;
        Ok(v)
    }

    /// Runs `f`; if a failpoint fires inside it, abandons the pool (no clean
    /// close) before letting the simulated crash continue.
    fn crash_guard<T>(&self, f: impl FnOnce() -> T) -> T {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(v) => v,
            Err(panic) => {
                if crate::failpoint::is_crash(&*panic) {
                    self.inner.crashed.store(true, std::sync::atomic::Ordering::Release);
                }
                std::panic::resume_unwind(panic)
            }
        }
    }

    /// Collects garbage now. Waits for running regions to finish; fails with
    /// [`Error::Busy`] if called from inside a region.
    pub fn collect(&self) -> Result<MarkStats> {
        self.collect_with_progress(&|_| {})
    }

    /// [`Pool::collect`], calling `progress` with the objects marked so far.
    pub fn collect_with_progress(&self, progress: &dyn Fn(u64)) -> Result<MarkStats> {
        if self.in_region() {
            return Err(Error::Busy { what: "collect called inside a region" });
        }
        self.inner.deferred.wait();
        let _excl = self.inner.gate.write();
        open::collect(&self.inner, None, progress)
    }

    /// Where the recovery GC of this open stands (a deferred one runs in
    /// the background: see [`RecoveryGc`]).
    pub fn recovery_gc_status(&self) -> RecoveryGcStatus {
        self.inner.deferred.status()
    }

    /// Waits until a deferred recovery GC is no longer pending; fails with
    /// [`Error::Busy`] inside a region (its final pause needs none running).
    pub fn wait_recovery_gc(&self) -> Result<RecoveryGcStatus> {
        if self.in_region() {
            return Err(Error::Busy { what: "wait_recovery_gc called inside a region" });
        }
        Ok(self.inner.deferred.wait())
    }

    /// Whether this thread is inside a region of this pool.
    fn in_region(&self) -> bool {
        self.inner.in_region()
    }

    /// Lists the named roots.
    pub fn roots(&self) -> Result<Vec<RootInfo>> {
        // Recursive: a region of this thread may already hold the gate.
        let _g = self.inner.gate.read_recursive();
        let entries = crate::tx::used_root_entries(&self.inner.space)?;
        Ok(entries
            .into_iter()
            .map(|(_, e, name)| RootInfo {
                name,
                addr: e.ptr,
                type_name: self.inner.types.get(e.type_id).map(|d| d.name.clone()).unwrap_or_default(),
                array: e.flags & crate::format::ROOT_ARRAY != 0,
                type_id: e.type_id,
            })
            .collect())
    }

    /// Figures about the pool.
    pub fn info(&self) -> PoolInfo {
        let inner = &*self.inner;
        let h = inner.space.header();
        let (live_objects, live_bytes) = inner.heap.live();
        PoolInfo {
            path: inner.space.path.clone(),
            version: h.version,
            layout: h.layout_name(),
            uuid: h.uuid_string(),
            size: inner.space.size(),
            max_size: h.max_size,
            base: inner.space.base(),
            durability: inner.space.persist.mode(),
            flush: inner.space.persist.instr().name(),
            dax: inner.space.map.is_dax(),
            live_objects,
            live_bytes,
            heap: inner.heap.stats(),
            open: inner.report.clone(),
            types: inner.types.all().len(),
            roots: crate::tx::used_root_entries(&inner.space).map(|v| v.len()).unwrap_or(0),
        }
    }

    /// How the open went (recovery, relocation).
    pub fn open_report(&self) -> &OpenReport {
        &self.inner.report
    }

    /// Closes the pool cleanly. Fails with [`Error::Busy`] if other handles
    /// are still alive (the pool then closes when the last one drops).
    pub fn close(self) -> Result<()> {
        // The recovery GC's thread holds a handle: stop it if ours is the last other.
        if Arc::strong_count(&self.inner) <= 2 {
            self.inner.deferred.stop_and_join();
        }
        match Arc::try_unwrap(self.inner) {
            Ok(inner) => open::close(inner),
            Err(_) => Err(Error::Busy { what: "other handles to the pool are alive" }),
        }
    }

    pub(crate) fn inner(&self) -> &PoolInner {
        &self.inner
    }

    /// Abandons the pool as if the process had crashed here: no clean close,
    /// nothing more written; the next open recovers. For crash tests.
    #[doc(hidden)]
    pub fn simulate_crash(self) {
        self.inner.crashed.store(true, std::sync::atomic::Ordering::Release);
        self.inner.deferred.stop_and_join();
    }

    /// Checks the whole reachable heap: every pointer and header. Returns
    /// what the mark walk found; pointer fields that point at no live object
    /// are [`Error::BadFields`] (see [`Pool::check_report`] for the list),
    /// and live objects whose header fields disagree with how the engine
    /// writes headers are [`Error::Corrupt`] (`CheckReport::header_doubts`),
    /// as are reachable objects the allocator holds as free
    /// (`CheckReport::free_reachable`: they would be handed out again while
    /// still linked).
    pub fn check(&self) -> Result<MarkStats> {
        self.check_with_progress(&|_| {})
    }

    /// [`Pool::check`], calling `progress` with the objects marked so far.
    pub fn check_with_progress(&self, progress: &dyn Fn(u64)) -> Result<MarkStats> {
        let r = self.check_report(progress)?;
        match (r.bad_fields.first(), r.header_doubts.first(), r.free_reachable.first()) {
            (None, None, None) => Ok(r.stats),
            (Some(first), _, _) => Err(Error::BadFields { count: r.bad_fields.len() as u64, first: first.to_string() }),
            (None, Some(first), _) => Err(Error::corrupt(format!("{} damaged object headers; the first: {first}", r.header_doubts.len()))),
            (None, None, Some(first)) => {
                Err(Error::corrupt(format!("{} reachable objects the allocator holds as free; the first: {first}", r.free_count)))
            }
        }
    }

    /// Walks the whole reachable heap and lists every pointer field that
    /// points at no live object (each treated as null for the walk), then
    /// compares the objects reached with the allocator's slot bitmaps and
    /// span tables, calling `progress` with the objects marked so far.
    pub fn check_report(&self, progress: &dyn Fn(u64)) -> Result<CheckReport> {
        if self.in_region() {
            return Err(Error::Busy { what: "check called inside a region" });
        }
        let _excl = self.inner.gate.write();
        let m = crate::gc::mark_checking_headers(&self.inner.space, &self.inner.types, progress)?;
        self.inner.heap.drain_caches(&self.inner.space);
        let base = self.inner.space.base();
        let bad_targets: crate::hash::FastSet<u64> = m.bad.iter().map(|b| b.value.wrapping_sub(base)).collect();
        let (free_count, free_reachable) = self.inner.heap.reachable_but_free(&m.marks, 8, &|at| bad_targets.contains(&at));
        Ok(CheckReport { stats: m.stats, bad_fields: m.bad, header_doubts: m.doubts, free_count, free_reachable })
    }

    /// Clears every pointer field that points at no live object (sets it to
    /// null) in one failure-atomic region, so a crash mid-repair changes
    /// nothing; then collects. Returns the fields it cleared.
    pub fn repair(&self, progress: &dyn Fn(u64)) -> Result<Vec<crate::BadField>> {
        let bad = self.check_report(progress)?.bad_fields;
        if bad.is_empty() {
            return Ok(bad);
        }
        let base = self.inner.space.base();
        self.txn(|tx| {
            for b in &bad {
                // Only if it still holds what the walk saw.
                if self.inner.space.read::<u64>(b.at)? == b.value {
                    tx.log_range(base + b.at, 8)?;
                    self.inner.space.write(b.at, &0u64)?;
                }
            }
            Ok::<_, Error>(())
        })?;
        self.collect_with_progress(progress)?;
        Ok(bad)
    }
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering;
        self.heap.retire();
        if !self.closed.load(Ordering::Acquire) && !self.crashed.load(Ordering::Acquire) {
            let _ = open::shutdown(self);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::alloc::{classes::slot_size, locate, span_off, Loc};
    use crate::{CreateOptions, Durability, Error, PArray, Pool};

    /// `check` compares the mark with the allocator: a reachable object
    /// whose slot the allocator holds as free (here: given back behind the
    /// engine's back, as an allocator bug would) is reported, and a
    /// consistent heap, small and large objects, is not.
    #[test]
    fn check_reports_a_reachable_object_in_a_free_slot() {
        let path = std::env::temp_dir().join(format!("engram-check-free-{}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let pool = Pool::create(&path, CreateOptions::new("check").durability(Durability::Process)).unwrap();
        let (small, _big) = pool
            .txn(|tx| {
                let small = tx.alloc(7u64)?;
                let big: PArray<u64> = tx.alloc_array(100_000)?;
                tx.set_root("small", small)?;
                tx.set_root_array("big", big)?;
                Ok::<_, Error>((small, big))
            })
            .unwrap();
        assert_eq!(pool.check().unwrap().objects, 2);
        let space = &pool.inner.space;
        let Some(Loc::Small { span, class, index }) = locate(space, small.addr()) else { panic!("not a small object") };
        let hdr = space.base() + span_off(span) + index as u64 * slot_size(class);
        pool.inner.heap.give_back(space, class, [hdr]);
        let r = pool.check_report(&|_| {}).unwrap();
        assert_eq!(r.free_count, 1, "{:?}", r.free_reachable);
        assert!(r.free_reachable[0].contains(&format!("{:#x}", small.addr() - space.base())), "{:?}", r.free_reachable);
        match pool.check() {
            Err(Error::Corrupt { what }) => assert!(what.contains("allocator holds as free"), "{what}"),
            other => panic!("check: {other:?}"),
        }
        drop(pool);
        let _ = std::fs::remove_file(&path);
    }
}
