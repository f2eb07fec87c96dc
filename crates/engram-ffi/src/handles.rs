//! Handles: the integers C holds instead of pointers to our memory.
//!
//! - Pools live in one process-wide table (`POOLS`), id -> [`PoolEntry`].
//!   Each call clones the entry's `Pool` handle out of the table, so a call
//!   never holds the table lock while it works. Closing removes the entry
//!   (refused while regions of the pool are running).
//! - Regions are tied to the thread that began them (the engine's `Region`
//!   is not `Send`), so they live in a thread-local table (`REGIONS`). A
//!   region handle used on another thread, or after it ended, is simply not
//!   found: `ENGRAM_ERR_REGION_ENDED`, never a wild access.
//! - Ids come from one counter and are never reused, so a stale handle can
//!   never name a newer object.

use crate::{engram_code, FfiError, FfiResult};
use engram::{Pool, Region};
use parking_lot::RwLock;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// One open pool.
pub(crate) struct PoolEntry {
    pub pool: Pool,
    /// Regions running on it (any thread): close is refused while > 0.
    pub regions: AtomicU32,
}

fn pools() -> &'static RwLock<HashMap<u64, Arc<PoolEntry>>> {
    static POOLS: OnceLock<RwLock<HashMap<u64, Arc<PoolEntry>>>> = OnceLock::new();
    POOLS.get_or_init(Default::default)
}

fn closed(id: u64) -> FfiError {
    FfiError::Code(engram_code::ENGRAM_ERR_CLOSED, format!("pool handle {id} is closed or was never opened"))
}

/// Registers an open pool; returns its handle.
pub(crate) fn add_pool(pool: Pool) -> u64 {
    let id = next_id();
    pools().write().insert(id, Arc::new(PoolEntry { pool, regions: AtomicU32::new(0) }));
    id
}

/// The pool behind handle `id`.
pub(crate) fn pool(id: u64) -> FfiResult<Arc<PoolEntry>> {
    pools().read().get(&id).cloned().ok_or_else(|| closed(id))
}

/// Removes handle `id` unless regions are running on it.
pub(crate) fn remove_pool(id: u64) -> FfiResult<Arc<PoolEntry>> {
    let mut t = pools().write();
    let e = t.get(&id).ok_or_else(|| closed(id))?;
    let n = e.regions.load(Ordering::Acquire);
    if n > 0 {
        return Err(FfiError::Engine(engram::Error::Busy { what: "regions are still running on the pool" }));
    }
    Ok(t.remove(&id).expect("present: checked under the same lock"))
}

/// One region running on this thread.
pub(crate) struct RegionSlot {
    /// `None` only while the slot is being ended.
    pub region: Option<Region>,
    pub pool_id: u64,
    pub entry: Arc<PoolEntry>,
    /// Begin calls not yet matched by commit/abort (nesting is flattened).
    pub depth: u32,
}

thread_local! {
    /// (handle, slot): a thread runs at most one region per pool, so this is
    /// short and a linear scan beats hashing on every call.
    static REGIONS: RefCell<Vec<(u64, RegionSlot)>> = const { RefCell::new(Vec::new()) };
}

fn ended(id: u64) -> FfiError {
    FfiError::Code(engram_code::ENGRAM_ERR_REGION_ENDED, format!("region handle {id} has ended or belongs to another thread"))
}

/// The region of pool `pool_id` running on this thread, if any.
pub(crate) fn region_of_pool(pool_id: u64) -> Option<u64> {
    REGIONS.with(|r| r.borrow().iter().find(|(_, s)| s.pool_id == pool_id).map(|&(id, _)| id))
}

pub(crate) fn add_region(slot: RegionSlot) -> u64 {
    let id = next_id();
    slot.entry.regions.fetch_add(1, Ordering::AcqRel);
    REGIONS.with(|r| r.borrow_mut().push((id, slot)));
    id
}

/// Runs `f` on region `id` of this thread. The table stays borrowed during
/// `f`, so `f` must not call back into the region table.
pub(crate) fn with_region<R>(id: u64, f: impl FnOnce(&mut RegionSlot) -> FfiResult<R>) -> FfiResult<R> {
    REGIONS.with(|r| {
        let mut t = r.borrow_mut();
        let slot = t.iter_mut().find(|(h, _)| *h == id).ok_or_else(|| ended(id))?;
        f(&mut slot.1)
    })
}

/// Whether region `id` of this thread has already logged `[addr, addr+len)`
/// by its cached bitmap page (`Region::is_logged`): false when in doubt,
/// when the table is borrowed, or when the handle is not found (the caller
/// then takes its guarded path, which reports the error). Cannot panic:
/// `try_with`, `try_borrow` and a read-only check.
#[inline]
pub(crate) fn logged_already(id: u64, addr: u64, len: u64) -> bool {
    REGIONS
        .try_with(|r| {
            let Ok(t) = r.try_borrow() else { return false };
            let Some((_, slot)) = t.iter().find(|(h, _)| *h == id) else { return false };
            slot.region.as_ref().is_some_and(|reg| reg.is_logged(addr, len))
        })
        .unwrap_or(false)
}

/// Takes region `id` out of this thread's table (its outermost end).
pub(crate) fn take_region(id: u64) -> FfiResult<RegionSlot> {
    REGIONS
        .with(|r| {
            let mut t = r.borrow_mut();
            let i = t.iter().position(|(h, _)| *h == id)?;
            Some(t.swap_remove(i).1)
        })
        .ok_or_else(|| ended(id))
}

impl Drop for RegionSlot {
    /// A region still running when its thread exits (or whose handle is
    /// dropped by an end call) rolls back first; then the pool may close.
    fn drop(&mut self) {
        drop(self.region.take());
        self.entry.regions.fetch_sub(1, Ordering::AcqRel);
    }
}
