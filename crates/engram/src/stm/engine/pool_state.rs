//! Per-pool STM state (volatile): the pool's STM metadata root, its
//! persisted clock reservation and every thread's redo log; the quiesce hook
//! that GC and close run with no transaction in flight.
//!
//! The hot path: each thread keeps, per pool it has used, one [`Local`]
//! (the pool's state, its own redo log, allocation cache and the pool's
//! type ids of the types it allocated) in a
//! thread-local list found by the heap's process-unique id. Starting a
//! transaction clones that `Rc` (a thread-private count), so it takes no
//! lock and writes no shared line; the pool's `layer_state` mutex and the
//! `Arc` counts are touched only the first time a thread uses a pool.
//! An entry whose pool has closed (`StmPool::closed`, set when the pool
//! drops its state) is pruned the next time the thread links a pool.

use super::domain::Domain;
use super::snapshot::Snapshot;
use crate::alloc::cache::CacheCell;
use crate::alloc::Loc;
use crate::error::{Error, Result};
use crate::pool::PoolInner;
use crate::ptr::{PArray, PPtr};
use crate::stm::redo::{StmMeta, HALF, META_ROOT};
use crate::Pool;
use parking_lot::Mutex;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Versions reserved (persisted) at a time.
pub(super) const RESERVE: u64 = 1 << 20;

/// Per-pool STM state (volatile).
pub(crate) struct StmPool {
    /// The pool's clock, serial lock and wait list (`domain.rs`); the
    /// clock starts above the persisted reservation.
    pub(super) domain: Domain,
    pub(super) meta_off: u64,
    pub(super) epoch: u16,
    /// Versions below this are covered by the persisted reservation.
    pub(super) reserved: Mutex<u64>,
    pub(super) reserved_fast: AtomicU64,
    pub(super) logs: Mutex<Vec<Arc<Mutex<ThreadLog>>>>,
    /// Who created the boxes of boxed variables (`boxed.rs`).
    pub(super) boxes: Mutex<super::boxed::BoxBook>,
    /// Retained records that carry new objects (`young.rs`).
    pub(super) young: super::young::Young,
    /// Set when the pool drops its state (close): threads prune their
    /// [`Local`] entries for it.
    closed: AtomicBool,
    /// The pool's address reservation `[lo, hi)` (it never moves) and its
    /// file, to name the pool a foreign variable belongs to ([`owner_of`]).
    span: (u64, u64),
    path: std::path::PathBuf,
}

/// Every pool whose STM state exists in this process, for [`owner_of`]
/// (touched when a pool's state is made, and on the cross-pool error path).
static POOLS: Mutex<Vec<std::sync::Weak<StmPool>>> = parking_lot::const_mutex(Vec::new());

/// The file of the open pool whose reservation holds `addr`, if one has
/// STM state (for `Error::CrossPool`).
pub(super) fn owner_of(addr: u64) -> Option<std::path::PathBuf> {
    let pools = POOLS.lock();
    pools
        .iter()
        .filter_map(|w| w.upgrade())
        .find(|p| !p.closed.load(Ordering::Acquire) && addr >= p.span.0 && addr < p.span.1)
        .map(|p| p.path.clone())
}

fn register(s: &Arc<StmPool>) {
    let mut pools = POOLS.lock();
    pools.retain(|w| w.upgrade().is_some_and(|p| !p.closed.load(Ordering::Acquire)));
    pools.push(Arc::downgrade(s));
}

/// What the pool's `layer_state` holds: dropping it (the pool closes)
/// marks the state closed for the threads that still cache it.
struct StmSlot(Arc<StmPool>);

impl Drop for StmSlot {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
    }
}

/// One thread's view of one pool: found without a lock on every
/// transaction (see the module comment).
pub(crate) struct Local {
    heap_id: u64,
    pub(super) stm: Arc<StmPool>,
    pub(super) log: Arc<Mutex<ThreadLog>>,
    pub(super) cache: Arc<CacheCell>,
    /// This thread's slot in the pool's GC gate (`pool/gate.rs`).
    pub(super) gate: Arc<crate::pool::gate::GateSlot>,
    /// The pool's type ids of the Rust types this thread's transactions
    /// allocated ([`Local::pool_type_id`]): the pool's own table takes a shared
    /// lock and hashes the `TypeId` on every lookup.
    types: RefCell<Vec<(std::any::TypeId, u32)>>,
    /// The snapshot this thread's read-only transactions reuse
    /// (`snapshot.rs`).
    pub(super) snap: Snapshot,
}

/// Entries [`Local::pool_type_id`] keeps per thread and pool (more types are
/// looked up in the pool's table each time).
const TYPE_CACHE: usize = 16;

impl Local {
    /// The pool's type id of `T` (registering it on first use), from this
    /// thread's cache. A pool's table never renumbers or forgets a type
    /// while the pool is open, and a `Local` belongs to one open pool (by
    /// its heap's process-unique id), so a cached id stays right.
    pub(super) fn pool_type_id<T: crate::Persistent>(&self, inner: &PoolInner) -> Result<u32> {
        let key = std::any::TypeId::of::<T>();
        if let Some(&(_, id)) = self.types.borrow().iter().find(|(k, _)| *k == key) {
            return Ok(id);
        }
        let id = inner.types.id_of::<T>(&inner.space)?;
        let mut types = self.types.borrow_mut();
        if types.len() < TYPE_CACHE {
            types.push((key, id));
        }
        Ok(id)
    }
}

/// One thread's redo log in one pool.
#[derive(Default)]
pub(crate) struct ThreadLog {
    /// Pool offset of the log bytes (two halves).
    pub(super) log_off: u64,
    pub(super) commits: u64,
    /// Cells stored in place since this log's last fence: (offset, bytes);
    /// whoever fences for the log next (its next commit, a helper, quiesce)
    /// flushes them first (`commit::flush_unfenced`), unless it is this
    /// log's thread and `written_back` says it issued them already.
    pub(super) unfenced: Vec<(u64, u64)>,
    /// Whether this log's thread issued the write-backs of every cell in
    /// `unfenced` itself, after its commit's last locked instruction
    /// (`commit::write_back_in_place`): its own next fence completes them,
    /// so its next commit does not issue them again. A fence of another
    /// thread completes none of them: a helper or quiesce flushes the list
    /// regardless, and a thread adopting the log clears this first.
    /// Cleared with the list ([`ThreadLog::fenced`]).
    pub(super) written_back: bool,
    pub(super) buf: Vec<u8>,
    /// The overflow array of the record in each half, if it has one.
    pub(super) overflow: [Option<Loc>; 2],
    /// The timestamp of the record in each half (0: none).
    pub(super) half_wv: [u64; 2],
    /// The record in each half if it carries new objects: registered,
    /// and published in `published` (`young.rs`).
    pub(super) young: [Option<super::young::YoungRec>; 2],
    /// `young` as other threads' commits read it, without this log's lock.
    pub(super) published: Arc<super::young::Published>,
    /// Whether `published` is listed in the pool's [`super::young::Young`].
    pub(super) listed: bool,
    /// The other logs' published records, as listed at the list's
    /// generation `.0` (re-read when it grows).
    pub(super) others: (u64, Vec<Arc<super::young::Published>>),
    /// Per half: its record wrote into new objects of an older record of
    /// another log (decided at its commit): its reuse helps first.
    pub(super) touched: [bool; 2],
    /// The half just written holds new objects, in this span of pool
    /// offsets: `apply` registers it.
    pub(super) young_pending: Option<(usize, (u64, u64))>,
}

impl ThreadLog {
    /// The log's in-place values are durable (a fence, after their
    /// write-backs, completed): nothing is left to write back.
    pub(super) fn fenced(&mut self) {
        self.unfenced.clear();
        self.written_back = false;
    }
}

/// This thread's entries, one per pool it has used. Dropping the list (the
/// thread exits) forgets [`LAST`] first.
struct Locals(Vec<Rc<Local>>);

impl Drop for Locals {
    fn drop(&mut self) {
        LAST.with(|c| c.set((0, std::ptr::null())));
    }
}

thread_local! {
    static LOCALS: RefCell<Locals> = const { RefCell::new(Locals(Vec::new())) };
    /// The heap id and entry of the pool this thread used last: an entry
    /// of `LOCALS` (heap ids start at 1, so `(0, null)` is none). Kept
    /// right where `LOCALS` changes ([`link_local`], `Drop for Locals`):
    /// an entry leaves the list only when its pool has closed, and a
    /// `Local` never moves (it is behind an `Rc`). No destructor, so the
    /// read-only path reaches it without a registration check.
    static LAST: Cell<(u64, *const Local)> = const { Cell::new((0, std::ptr::null())) };
}

/// What a pool-bound transaction needs: the pool and this thread's entry
/// for it, both borrowed for the call ([`local_ref`]: no count is taken or
/// dropped per attempt).
pub(super) struct PoolCtx<'p> {
    pub(super) inner: &'p PoolInner,
    pub(super) local: &'p Local,
}

impl<'p> PoolCtx<'p> {
    pub(super) fn stm(&self) -> &StmPool {
        &self.local.stm
    }
    #[inline]
    pub(super) fn domain(&self) -> &Domain {
        &self.local.stm.domain
    }
    pub(super) fn log(&self) -> &Mutex<ThreadLog> {
        &self.local.log
    }
    pub(super) fn cache(&self) -> &CacheCell {
        &self.local.cache
    }
}

/// This thread's [`Local`] for `pool`: a thread-local lookup on the hot
/// path (inlined); the first use links the pool's state and a redo log.
#[inline]
pub(super) fn local(pool: &Pool) -> Result<Rc<Local>> {
    let id = pool.inner().heap.id;
    if let Some(l) = LOCALS.with(|m| m.borrow().0.iter().find(|l| l.heap_id == id).cloned()) {
        return Ok(l);
    }
    link_local(pool, id)
}

/// [`local`] without a count, for the read-only path: the entry of the pool
/// this thread used last, one thread-local load and a comparison; else the
/// list (and the cache set to the entry found).
#[inline]
pub(super) fn local_ref(pool: &Pool) -> Result<&Local> {
    let id = pool.inner().heap.id;
    let (last, p) = LAST.with(Cell::get);
    if last == id {
        // SAFETY: `LAST` names an entry of this thread's `LOCALS` (see
        // there); it is this pool's, which cannot close while `pool` is
        // borrowed, so the entry stays in the list, and behind its `Rc` it
        // never moves, for the borrow's life.
        return Ok(unsafe { &*p });
    }
    local_ref_slow(pool, id)
}

/// [`local_ref`] when the cache names another pool.
#[cold]
#[inline(never)]
fn local_ref_slow(pool: &Pool, id: u64) -> Result<&Local> {
    let l = local(pool)?;
    let p = Rc::as_ptr(&l);
    LAST.with(|c| c.set((id, p)));
    // SAFETY: `l` is an entry of `LOCALS` (`local` found or linked it),
    // which keeps it for as long as its pool is open (see `LAST`).
    Ok(unsafe { &*p })
}

/// [`local`]'s first use of `pool` on this thread (kept out of line, so the
/// lookup above stays a few instructions).
#[cold]
#[inline(never)]
fn link_local(pool: &Pool, id: u64) -> Result<Rc<Local>> {
    let stm = stm_pool(pool)?;
    let log = thread_log(pool, &stm)?;
    let gate = pool.inner().gate.register();
    let l = Rc::new(Local {
        heap_id: id,
        stm,
        log,
        cache: pool.inner().heap.cache(),
        gate,
        types: RefCell::default(),
        snap: Snapshot::default(),
    });
    LOCALS.with(|m| {
        let mut m = m.borrow_mut();
        // The cache may name an entry pruned here: forget it first.
        LAST.with(|c| c.set((0, std::ptr::null())));
        m.0.retain(|l| !l.stm.closed.load(Ordering::Acquire));
        m.0.push(l.clone());
    });
    Ok(l)
}

/// The pool's STM state, if a transaction has run on it.
fn state(inner: &PoolInner) -> Option<Arc<StmPool>> {
    inner.layer_state.lock().as_ref().and_then(|a| a.downcast_ref::<StmSlot>()).map(|s| s.0.clone())
}

/// The pool's STM state, created (with its metadata root) on first use.
pub(super) fn stm_pool(pool: &Pool) -> Result<Arc<StmPool>> {
    let inner = pool.inner();
    if let Some(s) = state(inner) {
        return Ok(s);
    }
    // A bad ENGRAM_STM_CLOCK_START is refused before anything is written.
    super::domain::clock_start()?;
    // The STM's writes set no region cards: a card-tracked recovery GC
    // must finish before the STM starts on this pool (pool/deferred.rs).
    inner.before_unregioned_writes()?;
    // Regions lock nothing by themselves: without the root table's lock,
    // two threads starting at once would both find no root, and the second
    // `set_root` would unlink the first one's metadata (and its logs).
    let meta = linking(|| {
        pool.txn(|tx| {
            tx.lock(crate::tx::ROOTS_LOCK)?;
            match tx.root::<StmMeta>(META_ROOT)? {
                Some(m) => Ok(m),
                None => {
                    let logs = tx.alloc_array::<PArray<u8>>(16)?;
                    let m = tx.alloc(StmMeta { clock_reserved: 0, epoch: 1, logs })?;
                    tx.set_root(META_ROOT, m).map(|_| m)
                }
            }
        })
    })?;
    // Under the metadata's lock: a thread already linking its log (another
    // thread created the state meanwhile) may be replacing the log table,
    // freeing the one an unlocked read would have found.
    let (m, found) = linking(|| {
        pool.txn(|tx| {
            tx.lock_ptr(meta)?;
            let m = tx.read(meta)?;
            Ok::<_, Error>((m, earlier_logs(tx, m.logs)?))
        })
    })?;
    let earlier = adoptable(found);
    let mut slot = inner.layer_state.lock();
    if let Some(s) = slot.as_ref().and_then(|a| a.downcast_ref::<StmSlot>()) {
        return Ok(s.0.clone());
    }
    // Above this pool's reservation (and, by default, every reservation of
    // this process: domain::ClockStart).
    let start = super::domain::start_above(m.clock_reserved)?;
    let s = Arc::new(StmPool {
        domain: Domain::new(start),
        meta_off: meta.addr() - inner.space.base(),
        epoch: (m.epoch & 0x7FFF) as u16,
        reserved: Mutex::new(m.clock_reserved),
        reserved_fast: AtomicU64::new(m.clock_reserved),
        logs: Mutex::new(earlier),
        closed: AtomicBool::new(false),
        boxes: Mutex::new(Default::default()),
        young: Default::default(),
        span: (inner.space.base(), inner.space.base() + inner.space.map.reserved()),
        path: inner.space.path.clone(),
    });
    *slot = Some(Arc::new(StmSlot(s.clone())));
    register(&s);
    Ok(s)
}

/// Testing only: moves the version clock of `pool`'s domain (or, with
/// `None`, of the volatile domain) forward to at least `at_least`, and
/// returns the clock then. The clock never moves back, so every version
/// already handed out stays at or below it; the pool's reservation follows
/// at its next commit, as for any timestamp. Tests reach the clock's limit
/// (`word::MAX_VERSION`, docs/stm.md "Limits") this way without 2^48
/// commits.
#[doc(hidden)]
pub fn clock_for_tests(pool: Option<&Pool>, at_least: u64) -> Result<u64> {
    let advance = |d: &Domain| d.clock.0.fetch_max(at_least, Ordering::AcqRel).max(at_least);
    Ok(match pool {
        Some(p) => advance(&stm_pool(p)?.domain),
        None => advance(&super::domain::VOLATILE),
    })
}

/// The pool offsets of the redo logs linked by earlier opens (read inside
/// the caller's region, which holds the metadata's lock).
fn earlier_logs(tx: &crate::tx::Tx<'_>, logs: PArray<PArray<u8>>) -> Result<Vec<u64>> {
    let base = tx.pool.space.base();
    let mut out = Vec::new();
    if logs.is_null() {
        return Ok(out);
    }
    for i in 0..tx.len(logs)? {
        let log = tx.get(logs, i)?;
        if !log.is_null() && tx.len(log)? >= 2 * HALF {
            out.push(log.addr() - base);
        }
    }
    Ok(out)
}

/// The redo logs linked by earlier opens, ready to be adopted by this open's
/// threads (held by no thread yet). Their records were replayed and cleared
/// by the open (`redo::recover`), so a log can be reused from its first
/// half; without this every open would link new logs and leak the old ones.
fn adoptable(found: Vec<u64>) -> Vec<Arc<Mutex<ThreadLog>>> {
    found.into_iter().map(|log_off| Arc::new(Mutex::new(ThreadLog { log_off, ..Default::default() }))).collect()
}

/// A redo log for this thread (kept in its [`Local`]): an exited thread's,
/// or a new one, allocated and linked.
fn thread_log(pool: &Pool, stm: &Arc<StmPool>) -> Result<Arc<Mutex<ThreadLog>>> {
    // Adopt the log of a thread that has exited, if any.
    let adopted = stm.logs.lock().iter().find(|l| Arc::strong_count(l) == 1).cloned();
    let log = match adopted {
        // The exited thread's last in-place values stay listed in the log
        // (`unfenced`): this thread's first commit writes them back before
        // its fence (`commit.rs`, `flush_unfenced`), before it overwrites
        // the records that cover them. The exited thread's own write-backs
        // of them (`written_back`, round 26) are completed by no fence of
        // this thread: the mark is cleared, so they are issued again.
        Some(l) => {
            if !crate::failpoint::planted("stm.adopted_write_back_trusted") {
                l.lock().written_back = false;
            }
            l
        }
        None => {
            let meta = PPtr::<StmMeta>::from_addr(pool.inner().space.base() + stm.meta_off);
            let log = linking(|| {
                pool.txn(|tx| {
                    // The metadata's lock, taken before the free entry is
                    // chosen: two threads linking their first logs at once
                    // would otherwise pick the same entry, and the second
                    // store would unlink the first log. The GC would free it
                    // while its thread still writes redo records into it (over
                    // whatever was allocated there next).
                    tx.lock_ptr(meta)?;
                    let m = tx.read(meta)?;
                    let mut table = m.logs;
                    let n = tx.len(table)?;
                    let mut free = None;
                    for i in 0..n {
                        if tx.get(table, i)?.is_null() {
                            free = Some(i);
                            break;
                        }
                    }
                    let i = match free {
                        Some(i) => i,
                        None => {
                            let bigger = tx.alloc_array::<PArray<u8>>(n * 2)?;
                            for k in 0..n {
                                tx.set(bigger, k, tx.get(table, k)?)?;
                            }
                            tx.free_array(m.logs)?;
                            // Only the table field: `reserve_clock` persists
                            // `clock_reserved` outside any region, so writing
                            // back the whole (stale) struct could lower it.
                            tx.write(logs_field(meta), bigger)?;
                            table = bigger;
                            n
                        }
                    };
                    let bytes = tx.alloc_array::<u8>(2 * HALF)?;
                    tx.set(table, i, bytes)?;
                    Ok::<_, Error>(bytes)
                })
            })?;
            let l = Arc::new(Mutex::new(ThreadLog { log_off: log.addr() - pool.inner().space.base(), ..Default::default() }));
            stm.logs.lock().push(l.clone());
            l
        }
    };
    Ok(log)
}

/// Runs a region that links STM metadata, again while its lock times out:
/// threads starting at once queue on the one lock (each region is short
/// and makes progress), and a rolled-back attempt changed nothing.
fn linking<R>(mut region: impl FnMut() -> Result<R>) -> Result<R> {
    loop {
        match region() {
            Err(Error::LockTimeout) => std::thread::yield_now(),
            r => return r,
        }
    }
}

/// The `logs` field of the metadata object at `meta`.
fn logs_field(meta: PPtr<StmMeta>) -> PPtr<PArray<PArray<u8>>> {
    PPtr::from_addr(meta.addr() + std::mem::offset_of!(StmMeta, logs) as u64)
}

/// Online GC and the clean close: makes every thread's in-place values
/// durable and clears all redo records (no STM transaction may run; the
/// caller holds the GC gate exclusively).
pub(crate) fn quiesce(inner: &PoolInner) -> Result<()> {
    let Some(stm) = state(inner) else { return Ok(()) };
    let space = &inner.space;
    // Every record is cleared below: no box is listed by one any more.
    stm.boxes.lock().clear();
    let logs = stm.logs.lock();
    let mut records = Vec::new();
    for l in logs.iter() {
        let l = l.lock();
        super::commit::flush_unfenced(space, &l);
        for h in 0..2 {
            if l.half_wv[h] != 0 {
                records.push((l.half_wv[h], l.log_off + h as u64 * HALF, l.young[h].is_some()));
            }
        }
    }
    space.persist.fence(crate::fences::STM_IDLE_VALUES)?;
    // Oldest first, and a record with new objects durably cleared before
    // any later one (young.rs: it must never outlive a later record).
    records.sort_unstable();
    for (_, off, young) in records {
        space.write(off, &0u32)?;
        space.flush(off, 4);
        if young {
            space.persist.fence(crate::fences::STM_YOUNG_CLEARED)?;
        }
    }
    for l in logs.iter() {
        let mut l = l.lock();
        l.fenced();
        l.half_wv = [0; 2];
        l.touched = [false; 2];
        for h in 0..2 {
            stm.young.unregister(&mut l, h);
        }
        // The overflow arrays become garbage with their records (the GC
        // frees them).
        l.overflow = [None; 2];
        for h in 0..2 {
            space.write(l.log_off + h * HALF, &0u32)?;
            space.flush(l.log_off + h * HALF, 4);
        }
    }
    space.persist.fence(crate::fences::STM_CLEARED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CreateOptions, Durability};
    use std::sync::Barrier;

    /// Each pool has its own clock, and volatile variables theirs: commits
    /// on one pool advance that pool's clock alone, and a reopened pool's
    /// clock starts above every version its variables carry.
    #[test]
    fn each_pool_has_its_own_clock() {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        let path = |t: &str| dir.join(format!("engram-unit-stm-clock-{t}-{}.pool", std::process::id()));
        let (pa, pb) = (path("a"), path("b"));
        let make = |p: &std::path::Path| {
            let _ = std::fs::remove_file(p);
            Pool::create(p, CreateOptions::new("stm-clock").durability(Durability::Process)).unwrap()
        };
        let (a, b) = (make(&pa), make(&pb));
        let va: crate::stm::PTVar<u64> = a.root("v", || 0).unwrap();
        let vb: crate::stm::PTVar<u64> = b.root("v", || 0).unwrap();
        let (sa, sb) = (stm_pool(&a).unwrap(), stm_pool(&b).unwrap());
        let (a0, b0) = (sa.domain.now(), sb.domain.now());
        for i in 1..=10 {
            a.atomically(|tx| tx.write(&va, i)).unwrap();
        }
        assert_eq!(sa.domain.now(), a0 + 10);
        assert_eq!(sb.domain.now(), b0, "pool a's commits moved pool b's clock");
        b.atomically(|tx| tx.write(&vb, 1)).unwrap();
        assert_eq!(sb.domain.now(), b0 + 1);
        let last = sa.domain.now();
        drop((sa, sb));
        a.close().unwrap();
        let a = Pool::open(&pa, crate::OpenOptions::new("stm-clock").durability(Durability::Process)).unwrap();
        let va: crate::stm::PTVar<u64> = a.root("v", || 0).unwrap();
        assert!(stm_pool(&a).unwrap().domain.now() > last, "a reopened pool's clock must start above its versions");
        a.atomically(|tx| tx.write(&va, 11)).unwrap();
        assert_eq!(a.atomically(|tx| tx.read(&va)).unwrap(), 11);
        a.close().unwrap();
        b.close().unwrap();
        let _ = (std::fs::remove_file(&pa), std::fs::remove_file(&pb));
    }

    #[repr(C)]
    #[derive(Clone, Copy, crate::Persistent)]
    #[engram(name = "engram::test::TypeCacheFirst")]
    struct First {
        x: u64,
    }

    #[repr(C)]
    #[derive(Clone, Copy, crate::Persistent)]
    #[engram(name = "engram::test::TypeCacheNode")]
    struct Node {
        x: u64,
        y: u64,
    }

    /// The type ids `STx::alloc` writes come from a cache per thread *and
    /// pool* (`Local::pool_type_id`): one Rust type has a different id in
    /// each pool (its place in that pool's table), and an object allocated
    /// in a pool carries that pool's id, whatever other pool the thread
    /// used first. (A cache keyed by the Rust type alone writes pool a's id
    /// into pool b's objects: this test catches it.)
    #[test]
    fn allocated_objects_carry_their_own_pools_type_ids() {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        let path = |t: &str| dir.join(format!("engram-unit-stm-types-{t}-{}.pool", std::process::id()));
        let (pa, pb) = (path("a"), path("b"));
        let make = |p: &std::path::Path| {
            let _ = std::fs::remove_file(p);
            Pool::create(p, CreateOptions::new("stm-types").durability(Durability::Process)).unwrap()
        };
        let (a, b) = (make(&pa), make(&pb));
        // Pool a registers `First` before `Node`, pool b `Node` alone: the
        // two pools number `Node` differently.
        let header = |p: PPtr<Node>| {
            // SAFETY: a live object of the pool, allocated just now.
            unsafe { std::ptr::read((p.addr() - crate::format::OBJ_HEADER) as *const crate::format::ObjHeader) }.type_id
        };
        a.atomically(|tx| tx.alloc(First { x: 1 }).map(drop)).unwrap();
        for _ in 0..2 {
            let na = a.atomically(|tx| tx.alloc(Node { x: 1, y: 2 })).unwrap();
            let nb = b.atomically(|tx| tx.alloc(Node { x: 3, y: 4 })).unwrap();
            let (ida, idb) =
                (a.inner().types.id_of::<Node>(&a.inner().space).unwrap(), b.inner().types.id_of::<Node>(&b.inner().space).unwrap());
            assert_ne!(ida, idb, "the test needs the two pools to number Node differently");
            assert_eq!((header(na), header(nb)), (ida, idb), "an object carries another pool's type id");
        }
        a.close().unwrap();
        b.close().unwrap();
        let _ = (std::fs::remove_file(&pa), std::fs::remove_file(&pb));
    }

    /// Threads that start using a fresh pool at the same moment each get a
    /// redo log of their own, every one linked from the metadata the pool's
    /// root names: a log left unlinked is freed by the next collection while
    /// its thread still writes records into it.
    #[test]
    fn first_logs_of_racing_threads_are_all_linked() {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        let path = dir.join(format!("engram-unit-stm-logs-{}.pool", std::process::id()));
        // 18 threads: more than the table's first 16 entries, so it grows too.
        let threads = 18;
        for round in 0..12 {
            let _ = std::fs::remove_file(&path);
            let pool = Pool::create(&path, CreateOptions::new("stm-logs").durability(Durability::Process)).unwrap();
            let barrier = Barrier::new(threads);
            let offs: Vec<u64> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            let off = local(&pool).map(|l| l.log.lock().log_off);
                            // alive until all have theirs (an exited
                            // thread's log is adopted by the next one)
                            barrier.wait();
                            off.unwrap()
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let base = pool.inner().space.base();
            let stm = state(pool.inner()).unwrap();
            let root = pool.txn(|tx| tx.root::<StmMeta>(META_ROOT)).unwrap().unwrap();
            assert_eq!(root.addr(), base + stm.meta_off, "round {round}: the root names other metadata than the pool uses");
            let linked: Vec<u64> = pool
                .txn(|tx| {
                    let m = tx.read(root)?;
                    (0..tx.len(m.logs)?).map(|i| tx.get(m.logs, i).map(|a| a.addr())).collect::<Result<Vec<_>>>()
                })
                .unwrap();
            let mut distinct = offs.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), threads, "round {round}: two threads share a log");
            for off in offs {
                assert!(linked.contains(&(base + off)), "round {round}: the log at {off:#x} is not linked");
            }
            pool.close().unwrap();
        }
        let _ = std::fs::remove_file(&path);
    }

    /// Volatile-only transactions (`stm::atomically`) touch no pool: they
    /// run while this thread holds a pool's GC gate exclusively (entering
    /// it, shared, would deadlock here: the watchdog turns that into a
    /// failure), and neither the pool's clock nor this thread's redo log
    /// moves.
    #[test]
    fn volatile_transactions_touch_no_pool() {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        let path = dir.join(format!("engram-unit-stm-no-pool-{}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let (done, wait) = std::sync::mpsc::channel();
        let p = path.clone();
        let h = std::thread::spawn(move || {
            let pool = Pool::create(&p, CreateOptions::new("stm-no-pool").durability(Durability::Process)).unwrap();
            let a: crate::stm::PTVar<u64> = pool.root("a", || 1).unwrap();
            pool.atomically(|tx| tx.modify(&a, |x| x + 1)).unwrap();
            let clock = stm_pool(&pool).unwrap().domain.now();
            let commits = local(&pool).unwrap().log.lock().commits;
            let vars = [crate::stm::TVar::new(String::from("x")), crate::stm::TVar::new(String::new())];
            let got = {
                let _excl = pool.inner().gate.write();
                for k in 0..2000 {
                    crate::stm::atomically(|tx| {
                        let s = tx.read(&vars[k % 2])?;
                        tx.write(&vars[(k + 1) % 2], s + "y")
                    })
                    .unwrap();
                }
                crate::stm::atomically(|tx| tx.or_else(|tx| tx.retry(), |tx| tx.read(&vars[0]))).unwrap()
            };
            assert!(got.starts_with('x'), "{got}");
            assert_eq!(stm_pool(&pool).unwrap().domain.now(), clock, "a volatile transaction moved the pool's clock");
            assert_eq!(local(&pool).unwrap().log.lock().commits, commits, "a volatile transaction used the pool's redo log");
            assert_eq!(pool.atomically(|tx| tx.read(&a)).unwrap(), 2);
            pool.close().unwrap();
            let _ = done.send(());
        });
        if wait.recv_timeout(std::time::Duration::from_secs(120)).is_err() {
            panic!("volatile transactions blocked (on the pool's gate?) or the body failed");
        }
        h.join().unwrap();
        let _ = std::fs::remove_file(&path);
    }
}
