//! Per-thread caches of free slots, one per (thread, open pool).
//!
//! What it keeps true: a slot in a cache is marked in use in its span's
//! volatile bitmap, so no other thread can be handed it; the heap's registry
//! holds every cache, so closing the pool or collecting can take the slots
//! back (`Heap::drain_caches`). A cache's mutex is taken by its own thread
//! (uncontended) and by the drainer only while no region runs. A region
//! (`Tx`) takes slots a batch at a time into its [`Magazine`] (which is also
//! its record of what it allocated; batches grow from 32 to 1024 slots as
//! the region allocates) and frees a whole commit's objects under one lock,
//! so the mutex is taken at most once per 32 allocations, not per
//! allocation; the magazine's unused slots go back into the cache when the
//! region ends (under the same lock as the bins' budgets are updated), so
//! no slot is held outside a cache or an object across regions (a collection, which runs while no region runs,
//! sees every slot).
//!
//! A bin holds up to its budget: the larger of [`bin_cap`] (one span's
//! worth of its class, at least `2 * BATCH`) and what this thread's recent
//! regions took of the class (`want`, a high-water mark set at the end of
//! each region that allocated from the class, decaying by a quarter per
//! such region that took less). So a thread that builds and frees a whole
//! structure region after region keeps the freed structure's slots for the
//! next build instead of sending them back to the span bitmaps and taking
//! them out again; beyond the budget, the bin's older part goes back to its
//! spans in one batch (`Heap::give_back`, one span-map lookup per run of
//! slots of one span, not per slot). What one thread keeps out of other
//! threads' reach between collections is thus at most about what its
//! largest recent region allocated, per class (a collection or closing the
//! pool takes it all back: `Heap::drain_caches`).

use super::classes::{slots_per_span, NUM_CLASSES};
use super::{Heap, BATCH};

/// Most slots one magazine batch takes ([`Magazine::next_batch`]).
pub(crate) const MAX_BATCH: usize = 1024;
/// Fewest slots a magazine batch takes after a short one
/// ([`Magazine::next_batch`]).
pub(crate) const SWITCH_BATCH: usize = 4;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One thread's cache for one heap.
pub(crate) struct CacheCell {
    heap_id: u64,
    dead: AtomicBool,
    bins: Mutex<Bins>,
}

/// A cache's bins and their budgets, under one mutex.
struct Bins {
    /// Free slots (header addresses) per class; the most recently freed last.
    slots: Vec<Vec<u64>>,
    /// Per class: how many slots this thread's recent regions took (see the
    /// module docs); a bin's budget is `max(bin_cap, want)`.
    want: [u32; NUM_CLASSES],
}

impl Bins {
    fn new() -> Self {
        Bins { slots: vec![Vec::new(); NUM_CLASSES], want: [0; NUM_CLASSES] }
    }

    /// Most slots bin `c` keeps.
    #[inline]
    fn budget(&self, c: usize) -> usize {
        bin_cap(c).max(self.want[c] as usize)
    }

    /// Pushes `hdrs` into bin `c`; returns what goes back if it overflows.
    #[inline]
    fn put(&mut self, c: usize, hdrs: &[u64]) -> Option<Vec<u64>> {
        let budget = self.budget(c);
        let bin = &mut self.slots[c];
        bin.extend_from_slice(hdrs);
        overflow(budget, bin)
    }
}

impl CacheCell {
    fn new(heap_id: u64) -> Self {
        CacheCell { heap_id, dead: AtomicBool::new(false), bins: Mutex::new(Bins::new()) }
    }

    /// Empties the cache, returning its slots per class (the budgets stay).
    pub fn take_all(&self) -> Vec<Vec<u64>> {
        std::mem::replace(&mut self.bins.lock().slots, vec![Vec::new(); NUM_CLASSES])
    }

    /// Slots cached per class.
    pub fn counts(&self) -> Vec<usize> {
        self.bins.lock().slots.iter().map(Vec::len).collect()
    }

    /// A region of this thread ended having handed out `used[c]` slots of
    /// each class `c`, leaving `unused` (a class and slots its magazine
    /// took and did not hand out): caches `unused`, raises each used
    /// class's `want` to that count, or lets it decay by a quarter towards
    /// it, and trims a bin now over its budget. One lock for the region's
    /// end. Returns the slots to give back, per class.
    pub(crate) fn note_use(&self, unused: (usize, &[u64]), used: &[u32; NUM_CLASSES]) -> Vec<(usize, Vec<u64>)> {
        let mut bins = self.bins.lock();
        let (uc, rest) = unused;
        bins.slots[uc].extend_from_slice(rest);
        let mut spill = Vec::new();
        for (c, &n) in used.iter().enumerate() {
            if n == 0 && (c != uc || rest.is_empty()) {
                continue;
            }
            if n > 0 {
                let w = &mut bins.want[c];
                *w = n.max(*w - *w / 4);
            }
            if let Some(over) = bins.put(c, &[]) {
                spill.push((c, over));
            }
        }
        spill
    }

    /// Marks the cache as belonging to a closed pool.
    pub fn retire(&self) {
        self.dead.store(true, Ordering::Relaxed);
    }
}

/// Most slots a bin of class `c` holds: one span's worth, at least
/// `2 * BATCH` (the large classes). Bounds what one thread keeps out of
/// other threads' reach between collections to about 64 KiB per class
/// (2 MiB for the largest classes, as before).
#[inline]
pub(crate) fn bin_cap(c: usize) -> usize {
    (slots_per_span(c) as usize).max(2 * BATCH)
}

/// The slots to give back when a bin holds more than its `budget`: all
/// but the newest `budget / 2` (the bin keeps the recently freed,
/// cache-warm ones on top).
#[inline]
fn overflow(budget: usize, bin: &mut Vec<u64>) -> Option<Vec<u64>> {
    (bin.len() > budget).then(|| bin.drain(..bin.len() - budget / 2).collect())
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
        self.bins.lock().slots[c].pop()
    }

    /// Caches `hdrs` of class `c`.
    pub(crate) fn push_all(&self, c: usize, hdrs: Vec<u64>) {
        self.bins.lock().slots[c].extend(hdrs);
    }

    /// Caches one freed slot; returns slots to give back if the bin overflows.
    #[inline]
    pub(crate) fn push(&self, c: usize, hdr: u64) -> Option<Vec<u64>> {
        self.bins.lock().put(c, &[hdr])
    }
}

/// The slots a running region took from its thread's cache, a batch of
/// one class at a time, and which of them it handed out: the region's
/// whole allocation record (rollback frees exactly the handed-out slots).
///
/// Per allocation it costs one index increment: the slots taken are kept in
/// one vector, batch after batch, and a batch's handed-out part is always a
/// prefix of it (`slots[start..next]` for the current batch, a recorded
/// range for every earlier one). No per-object entry, no hashing. Unused
/// slots of a batch go back into the cache when the batch ends (a refill of
/// another class: `Heap::close_batch`; or the region ends:
/// `Heap::end_region`), so the vector
/// then holds only handed-out slots. While a region runs, its magazine's
/// slots count as live in `Heap::live` (handed out, or one unused batch).
/// Volatile: a crash loses it, and recovery's GC frees every slot no
/// committed region linked.
#[derive(Default)]
pub(crate) struct Magazine {
    /// Header addresses of every slot taken in this region, in batches.
    pub(super) slots: Vec<u64>,
    /// Finished batches: (class, end in `slots`); each starts where the
    /// previous one ends, and every slot in it was handed out.
    pub(super) runs: Vec<(usize, usize)>,
    /// Class of the current batch.
    pub(super) class: usize,
    /// Where the current batch starts in `slots`.
    pub(super) start: usize,
    /// The current batch's next slot to hand out (`slots[next..]` unused).
    pub(super) next: usize,
}

impl Magazine {
    /// Hands out a slot of class `c`, if the current batch has one.
    #[inline]
    pub(crate) fn pop(&mut self, c: usize) -> Option<u64> {
        let h = *self.slots.get(self.next).filter(|_| self.class == c)?;
        self.next += 1;
        Some(h)
    }

    /// How many slots its next batch takes: [`BATCH`] at first, then half
    /// of what the region took so far, up to [`MAX_BATCH`]. A region that
    /// allocates a few objects takes one small batch, as before; one that
    /// builds a large structure refills (one cache lock, or one class lock)
    /// about once per `MAX_BATCH` allocations instead of once per `BATCH`.
    /// What a batch leaves unused goes back to the cache when the region
    /// ends (`Heap::end_region`).
    ///
    /// After a batch that handed out only a few slots (the region wanted
    /// another class: a Redis key's entry, key and value are three
    /// classes), it takes at most four times that many, at least
    /// [`SWITCH_BATCH`]: a region whose allocations alternate classes
    /// switches batches at every allocation, and each switch moved a whole
    /// batch (up to [`MAX_BATCH`] slots) out of the cache and its unused
    /// rest back. A class run long enough grows back geometrically.
    #[inline]
    pub(crate) fn next_batch(&self) -> usize {
        let grown = (self.slots.len() / 2).clamp(BATCH, MAX_BATCH);
        match self.runs.as_slice() {
            [.., (_, before), (_, end)] => grown.min((4 * (end - before)).max(SWITCH_BATCH)),
            [(_, end)] => grown.min((4 * end).max(SWITCH_BATCH)),
            [] => grown,
        }
    }

    /// Whether it holds no unused slot.
    pub(crate) fn is_empty(&self) -> bool {
        self.next == self.slots.len()
    }

    /// Slots handed out in this region so far. They are exactly
    /// `slots[..handed_out_count()]`: the unused rest of an ended batch is
    /// cut off when it goes back to the cache.
    #[inline]
    pub(crate) fn handed_out_count(&self) -> usize {
        self.next
    }

    /// The slots handed out from the `from`-th one on: (class, header address).
    ///
    /// Starts at the first run that ends after `from` (the runs' ends
    /// increase): `RegionSets::mark_fresh` asks for the slots since its
    /// last call, after every few allocations, and a region whose
    /// allocations alternate classes (a Redis key's entry, key and value)
    /// has a run per allocation, so walking the runs from the first made
    /// marking quadratic in the region's allocations (callgrind: a quarter
    /// of engram-redis's instructions for 800 INCRs a region creating keys).
    pub(crate) fn handed_out_from(&self, from: usize) -> impl Iterator<Item = (usize, u64)> + '_ {
        let first = self.runs.partition_point(|&(_, end)| end <= from);
        let mut lo = first.checked_sub(1).map_or(0, |i| self.runs[i].1);
        let runs = self.runs[first..].iter().copied().chain(std::iter::once((self.class, self.next)));
        runs.flat_map(move |(c, end)| {
            let r = lo.max(from).min(end)..end;
            lo = end;
            self.slots[r].iter().map(move |&h| (c, h))
        })
    }

    /// Slots handed out per class in the batches that ended (all of them,
    /// once `Heap::close_batch` or `Heap::end_region` ended the last one).
    pub(crate) fn used_per_class(&self) -> [u32; NUM_CLASSES] {
        let mut used = [0u32; NUM_CLASSES];
        let mut lo = 0;
        for &(c, end) in &self.runs {
            used[c] += (end - lo) as u32;
            lo = end;
        }
        used
    }

    /// Every slot handed out in this region: (class, header address).
    pub(crate) fn handed_out(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.handed_out_from(0)
    }

    /// Forgets everything (the region ended; its unused slots went back).
    pub(crate) fn reset(&mut self) {
        debug_assert!(self.is_empty(), "unused slots must go back to the cache first");
        self.slots.clear();
        self.runs.clear();
        (self.class, self.start, self.next) = (0, 0, 0);
    }
}

impl CacheCell {
    /// Moves up to `n` cached slots of class `c` into `out`, the most
    /// recently freed ones.
    pub(crate) fn take_batch(&self, c: usize, n: usize, out: &mut Vec<u64>) {
        let mut bins = self.bins.lock();
        let bin = &mut bins.slots[c];
        let keep = bin.len().saturating_sub(n);
        out.extend(bin.drain(keep..));
    }

    /// Caches every slot of `hdrs` (class `c`); returns slots to give back
    /// if the bin overflows.
    pub(crate) fn put_from(&self, c: usize, hdrs: &[u64]) -> Option<Vec<u64>> {
        self.bins.lock().put(c, hdrs)
    }

    /// Caches freed slots under one lock, given as runs of one class:
    /// `hdrs` split at the starts `runs` names, `(class, start)`, each run
    /// copied into its bin as a block and the budget checked once at its
    /// end. Returns the overflow of each bin that overflowed, to give back.
    pub(crate) fn push_runs(&self, hdrs: &[u64], runs: &[(usize, usize)]) -> Vec<(usize, Vec<u64>)> {
        let mut spill = Vec::new();
        let mut bins = self.bins.lock();
        for (i, &(c, start)) in runs.iter().enumerate() {
            let end = runs.get(i + 1).map_or(hdrs.len(), |&(_, e)| e);
            if let Some(over) = bins.put(c, &hdrs[start..end]) {
                spill.push((c, over));
            }
        }
        spill
    }

    /// Caches freed slots `(class, header)` under one lock; returns the
    /// overflow of each bin that overflowed, to give back. A run of slots
    /// of one class (a freed structure) is pushed as a run, its bin's
    /// budget checked once at its end.
    pub(crate) fn push_many(&self, hdrs: impl Iterator<Item = (usize, u64)>) -> Vec<(usize, Vec<u64>)> {
        let mut spill = Vec::new();
        let mut bins = self.bins.lock();
        let mut hdrs = hdrs.peekable();
        while let Some((c, first)) = hdrs.next() {
            let bin = &mut bins.slots[c];
            bin.push(first);
            while let Some((_, h)) = hdrs.next_if(|&(k, _)| k == c) {
                bin.push(h);
            }
            if let Some(over) = bins.put(c, &[]) {
                spill.push((c, over));
            }
        }
        spill
    }
}

#[cfg(test)]
mod tests {
    use super::{bin_cap, overflow, CacheCell, Magazine, BATCH, MAX_BATCH, SWITCH_BATCH};
    use crate::alloc::classes::{slots_per_span, NUM_CLASSES};

    #[test]
    fn a_bin_holds_a_span_worth_and_spills_its_older_half() {
        assert_eq!(bin_cap(0), slots_per_span(0) as usize, "32-byte slots: 2048");
        assert_eq!(bin_cap(NUM_CLASSES - 1), 2 * BATCH, "the largest classes keep the old floor");
        let cap = bin_cap(0);
        let mut bin: Vec<u64> = (0..cap as u64).collect();
        assert_eq!(overflow(cap, &mut bin), None, "full is not over");
        bin.push(cap as u64);
        let spilled = overflow(cap, &mut bin).expect("over the cap");
        assert_eq!(spilled, (0..(cap / 2 + 1) as u64).collect::<Vec<_>>(), "the oldest go back");
        assert_eq!(bin, ((cap / 2 + 1) as u64..=cap as u64).collect::<Vec<_>>(), "the newest stay, in order");
    }

    #[test]
    fn a_bin_keeps_what_recent_regions_used_and_the_budget_decays() {
        let cell = CacheCell::new(0);
        let (cap, big) = (bin_cap(0), 4 * bin_cap(0));
        let mut used = [0u32; NUM_CLASSES];
        used[0] = big as u32;
        assert!(cell.note_use((0, &[]), &used).is_empty(), "nothing cached, nothing to trim");
        // the next region frees the structure the last one built: it stays
        assert!(cell.push_many((0..big as u64).map(|h| (0, h))).is_empty());
        assert_eq!(cell.counts()[0], big);
        assert!(cell.push_many(std::iter::once((1, 7))).is_empty(), "other classes keep their own budget");
        // one more is over the budget: the older part goes back
        let spill = cell.push_many(std::iter::once((0, big as u64)));
        assert_eq!(spill, vec![(0, (0..(big / 2 + 1) as u64).collect())]);
        // regions that use little let the budget decay and trim the bin
        used[0] = 1;
        let mut back = spill[0].1.len();
        for _ in 0..20 {
            back += cell.note_use((0, &[]), &used).iter().map(|(_, v)| v.len()).sum::<usize>();
        }
        assert!(cell.counts()[0] <= cap, "back to a span's worth: {}", cell.counts()[0]);
        assert_eq!(back + cell.counts()[0], big + 1, "every slot is cached or given back");
    }

    #[test]
    fn a_magazine_counts_what_it_handed_out_per_class() {
        let mut m = Magazine::default();
        start(&mut m, 0, &[1, 2, 3]);
        m.pop(0);
        m.pop(0);
        close(&mut m);
        start(&mut m, 2, &[4]);
        m.pop(2);
        close(&mut m);
        start(&mut m, 0, &[5]);
        m.pop(0);
        close(&mut m);
        let used = m.used_per_class();
        assert_eq!((used[0], used[1], used[2]), (3, 0, 1));
    }

    #[test]
    fn batches_grow_with_what_the_region_took_up_to_a_cap() {
        let mut m = Magazine::default();
        assert_eq!(m.next_batch(), BATCH, "a region's first batch is small");
        let mut took = Vec::new();
        while m.handed_out_count() < 20_000 {
            let n = m.next_batch();
            took.push(n);
            start(&mut m, 0, &vec![1; n]);
            while m.pop(0).is_some() {}
            close(&mut m);
        }
        assert!(took.windows(2).all(|w| w[0] <= w[1]), "never shrinks: {took:?}");
        assert_eq!(*took.last().unwrap(), MAX_BATCH, "capped");
        assert!(took.len() < 40, "20,000 slots in {} batches, not 625", took.len());
    }

    #[test]
    fn alternating_classes_take_small_batches_and_a_long_run_grows_back() {
        let mut m = Magazine::default();
        // a region far enough in for a big batch, then a key's three
        // classes in turn: each switch takes a few slots, not hundreds
        start(&mut m, 0, &vec![1; 3000]);
        for _ in 0..3000 {
            m.pop(0);
        }
        close(&mut m);
        assert_eq!(m.next_batch(), MAX_BATCH, "a full run keeps its growth");
        start(&mut m, 3, &vec![2; MAX_BATCH]);
        m.pop(3);
        close(&mut m);
        for i in 0..30 {
            let n = m.next_batch();
            assert!(n <= 4 * SWITCH_BATCH, "switch {i} took {n}");
            start(&mut m, 1 + i % 3, &vec![2; n]);
            m.pop(1 + i % 3);
            close(&mut m);
        }
        // one class again: batches grow back geometrically to the cap
        let mut took = Vec::new();
        while took.last() != Some(&MAX_BATCH) {
            let n = m.next_batch();
            took.push(n);
            start(&mut m, 0, &vec![1; n]);
            while m.pop(0).is_some() {}
            close(&mut m);
            assert!(took.len() < 10, "{took:?}");
        }
        assert_eq!(m.handed_out().count(), m.handed_out_count());
    }

    #[test]
    fn the_region_end_caches_the_unused_rest_and_trims_under_one_lock() {
        let cell = CacheCell::new(0);
        let cap = bin_cap(0);
        let mut used = [0u32; NUM_CLASSES];
        used[2] = 3;
        // an unused rest of class 0 is cached even though class 0 was not used
        assert!(cell.note_use((0, &[7, 8]), &used).is_empty());
        assert_eq!((cell.counts()[0], cell.counts()[2]), (2, 0));
        // a rest that takes the bin over its budget spills the older part
        let rest: Vec<u64> = (100..100 + cap as u64).collect();
        let spill = cell.note_use((0, &rest), &used);
        assert_eq!(spill.len(), 1);
        assert_eq!(spill[0].0, 0);
        assert_eq!(spill[0].1.len() + cell.counts()[0], cap + 2, "every slot cached or given back");
        assert_eq!(cell.counts()[0], cap / 2, "the newest stay");
    }

    /// A batch as `Heap::refill` starts one (after `Heap::close_batch`).
    fn start(m: &mut Magazine, class: usize, slots: &[u64]) {
        m.class = class;
        m.slots.extend_from_slice(slots);
    }

    /// What `Heap::close_batch` does, without a cache: cut the unused rest.
    fn close(m: &mut Magazine) -> Vec<u64> {
        let unused = m.slots.split_off(m.next);
        if m.next > m.start {
            m.runs.push((m.class, m.next));
        }
        m.start = m.next;
        unused
    }

    #[test]
    fn records_exactly_the_handed_out_slots_across_batches() {
        let mut m = Magazine::default();
        assert!(m.is_empty() && m.handed_out().next().is_none());
        start(&mut m, 0, &[10, 11, 12]);
        assert_eq!(m.pop(1), None, "another class");
        assert_eq!((m.pop(0), m.pop(0)), (Some(10), Some(11)));
        assert_eq!(close(&mut m), vec![12]);
        start(&mut m, 2, &[20, 21]);
        assert_eq!(close(&mut m), vec![20, 21], "a batch closed untouched records nothing");
        start(&mut m, 3, &[30, 31]);
        assert_eq!(m.pop(3), Some(30));
        let all: Vec<_> = m.handed_out().collect();
        assert_eq!(all, vec![(0, 10), (0, 11), (3, 30)]);
        assert_eq!(m.handed_out_count(), 3);
        assert_eq!(m.handed_out_from(1).collect::<Vec<_>>(), vec![(0, 11), (3, 30)]);
        assert_eq!(m.handed_out_from(3).count(), 0);
        assert_eq!(m.pop(3), Some(31));
        assert_eq!(m.pop(3), None, "batch used up");
        assert!(close(&mut m).is_empty());
        m.reset();
        assert!(m.is_empty() && m.handed_out_count() == 0 && m.handed_out().next().is_none());
    }

    #[test]
    fn handed_out_from_skips_earlier_runs_exactly() {
        // Classes alternating (a run per slot or two, some batches closed
        // untouched), and an open batch: every `from` gives the tail of
        // the whole list.
        let mut m = Magazine::default();
        for i in 0..40u64 {
            start(&mut m, (i % 3) as usize, &[100 * i, 100 * i + 1, 100 * i + 2]);
            for _ in 0..i % 3 {
                m.pop((i % 3) as usize).expect("a slot of the batch's class");
            }
            close(&mut m);
        }
        start(&mut m, 1, &[9000, 9001]);
        m.pop(1);
        let all: Vec<_> = m.handed_out().collect();
        assert_eq!(all.len(), m.handed_out_count());
        for from in 0..=all.len() + 1 {
            let tail: Vec<_> = m.handed_out_from(from).collect();
            assert_eq!(tail, all[from.min(all.len())..], "from {from}");
        }
    }
}
