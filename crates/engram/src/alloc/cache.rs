//! Per-thread caches of free slots, one per (thread, open pool).
//!
//! What it keeps true: a slot in a cache is marked in use in its span's
//! volatile bitmap, so no other thread can be handed it; the heap's registry
//! holds every cache, so closing the pool or collecting can take the slots
//! back (`Heap::drain_caches`). A cache's mutex is taken by its own thread
//! (uncontended) and by the drainer only while no region runs. A region
//! (`Tx`) takes slots a batch at a time into its [`Magazine`] and frees a
//! whole commit's objects under one lock, so the mutex is taken about once
//! per 32 allocations, not per allocation; the magazine goes back into the
//! cache when the region ends, so no slot is held outside a cache or an
//! object across regions (a collection, which runs while no region runs,
//! sees every slot).

use super::classes::NUM_CLASSES;
use super::{Heap, BATCH};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One thread's cache for one heap.
pub(crate) struct CacheCell {
    heap_id: u64,
    dead: AtomicBool,
    bins: Mutex<Vec<Vec<u64>>>,
}

impl CacheCell {
    fn new(heap_id: u64) -> Self {
        CacheCell { heap_id, dead: AtomicBool::new(false), bins: Mutex::new(vec![Vec::new(); NUM_CLASSES]) }
    }

    /// Empties the cache, returning its slots per class.
    pub fn take_all(&self) -> Vec<Vec<u64>> {
        std::mem::replace(&mut *self.bins.lock(), vec![Vec::new(); NUM_CLASSES])
    }

    /// Slots cached per class.
    pub fn counts(&self) -> Vec<usize> {
        self.bins.lock().iter().map(Vec::len).collect()
    }

    /// Marks the cache as belonging to a closed pool.
    pub fn retire(&self) {
        self.dead.store(true, Ordering::Relaxed);
    }
}

thread_local! {
    static CACHES: RefCell<Vec<Arc<CacheCell>>> = const { RefCell::new(Vec::new()) };
}

/// This thread's cache for `heap`, created and registered on first use.
pub(crate) fn cell(heap: &Heap) -> Arc<CacheCell> {
    CACHES.with(|caches| {
        let mut caches = caches.borrow_mut();
        if let Some(cell) = caches.iter().find(|c| c.heap_id == heap.id) {
            return cell.clone();
        }
        caches.retain(|c| !c.dead.load(Ordering::Relaxed));
        let cell = Arc::new(CacheCell::new(heap.id));
        heap.register_cache(cell.clone());
        caches.push(cell.clone());
        cell
    })
}

impl CacheCell {
    /// Pops a cached slot (header address) of class `c`.
    #[inline]
    pub(crate) fn pop(&self, c: usize) -> Option<u64> {
        self.bins.lock()[c].pop()
    }

    /// Caches `hdrs` of class `c`.
    pub(crate) fn push_all(&self, c: usize, hdrs: Vec<u64>) {
        self.bins.lock()[c].extend(hdrs);
    }

    /// Caches one freed slot; returns slots to give back if the bin overflows.
    #[inline]
    pub(crate) fn push(&self, c: usize, hdr: u64) -> Option<Vec<u64>> {
        let mut bins = self.bins.lock();
        let bin = &mut bins[c];
        bin.push(hdr);
        (bin.len() > 2 * BATCH).then(|| bin.split_off(BATCH))
    }
}

/// Free slots of one class that a running region took from its thread's
/// cache in one batch (header addresses). Emptied back into the cache when
/// the region ends (`Heap::return_magazine`). While a region runs, its
/// magazine's slots count as live in `Heap::live` (at most one batch).
#[derive(Default)]
pub(crate) struct Magazine {
    pub(super) class: usize,
    pub(super) slots: Vec<u64>,
}

impl Magazine {
    /// A slot of class `c`, if the magazine holds that class.
    #[inline]
    pub(crate) fn pop(&mut self, c: usize) -> Option<u64> {
        if self.class == c {
            self.slots.pop()
        } else {
            None
        }
    }

    /// Whether it holds no slot.
    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

impl CacheCell {
    /// Moves up to a batch of cached slots of class `c` into `out`.
    pub(crate) fn take_batch(&self, c: usize, out: &mut Vec<u64>) {
        let mut bins = self.bins.lock();
        let bin = &mut bins[c];
        let n = bin.len().saturating_sub(BATCH);
        out.extend(bin.drain(n..));
    }

    /// Caches every slot of `hdrs` (class `c`), leaving it empty; returns
    /// slots to give back if the bin overflows.
    pub(crate) fn put_from(&self, c: usize, hdrs: &mut Vec<u64>) -> Option<Vec<u64>> {
        let mut bins = self.bins.lock();
        let bin = &mut bins[c];
        bin.append(hdrs);
        (bin.len() > 2 * BATCH).then(|| bin.split_off(BATCH))
    }

    /// Caches freed slots `(class, header)` under one lock; returns the
    /// overflow of each bin that overflowed, to give back.
    pub(crate) fn push_many(&self, hdrs: impl Iterator<Item = (usize, u64)>) -> Vec<(usize, Vec<u64>)> {
        let mut spill = Vec::new();
        let mut bins = self.bins.lock();
        for (c, hdr) in hdrs {
            let bin = &mut bins[c];
            bin.push(hdr);
            if bin.len() > 2 * BATCH {
                spill.push((c, bin.split_off(BATCH)));
            }
        }
        spill
    }
}
