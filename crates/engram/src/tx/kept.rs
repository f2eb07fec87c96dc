//! What a thread's regions keep between them: the last array a region
//! validated, and the pool type ids its regions looked up.
//!
//! Both live in the thread's `RegionSets` (the box a region takes at begin
//! and hands back at drop), so keeping them costs a region nothing.
//!
//! What it keeps true:
//!
//! - [`KeptArray`]: an array's validation (`Tx::len`: the object is
//!   allocated, tagged as an array, its elements fit its slot, aligned for
//!   the element type) holds for a later region only if that region runs on
//!   the same open pool (the heap's `id`, unique per open in the process:
//!   a reopened pool, or another pool mapped at the same address, has
//!   another), asks for the same element size and alignment, and no object
//!   of the heap was freed or swept since the validation began (the heap's
//!   free count, `Heap::frees_seen`, read BEFORE validating, so a free
//!   racing the validation also voids it). Array headers are not changed
//!   while an array is allocated, so nothing else can make it stale. The
//!   array's place is kept too: its span's class, which a region's span
//!   cache may learn again (`tx/spans.rs`: a small span's class changes
//!   only in a sweep, and a sweep moves the free count).
//! - [`KeptTypes`]: the pool's type id of a Rust type never changes while
//!   the pool is open (entries are only added), so the ids a region looked
//!   up hold for every later region on the same open pool; another heap id
//!   empties the list.
//!
//! Crash behaviour: volatile only; nothing here reaches the pool.

use super::Tx;
use crate::error::{Error, Result};
use crate::format::{ObjHeader, OBJ_ARRAY, OBJ_HEADER, OBJ_TAG, OBJ_TAG_MASK};
use crate::ptr::PArray;
use crate::types::Persistent;
use std::mem::{align_of, size_of};

impl Tx<'_> {
    /// Number of elements of array `a`.
    #[inline]
    pub fn len<T: Persistent>(&self, a: PArray<T>) -> Result<u64> {
        // An array's header never changes while it is allocated, and this
        // region frees nothing before it ends: one check per array and
        // region, and none while the thread's kept one holds.
        let shape = (size_of::<T>() as u64, align_of::<T>() as u64);
        let (addr, last_shape, count) = self.last_array.get();
        if addr == a.addr() && last_shape == shape {
            return Ok(count);
        }
        self.len_kept(a, shape)
    }

    /// [`Tx::len`] for an array this region has not validated yet: the
    /// validation an earlier region of this thread kept, if it holds
    /// (`tx/kept.rs`), else a new one, kept for the next regions.
    fn len_kept<T: Persistent>(&self, a: PArray<T>, shape: (u64, u64)) -> Result<u64> {
        let heap = &self.pool.heap;
        // Read before validating: a free from now on voids what is kept.
        let frees = heap.frees_seen();
        let kept = self.st.borrow().sets.array.count(heap.id, a.addr(), shape, frees);
        if let Some((count, loc)) = kept {
            // Its span's class still holds (no sweep since): learned as
            // `validate_array`'s `locate` would have.
            self.spans.learn(loc);
            self.last_array.set((a.addr(), shape, count));
            self.last_object.set((a.addr(), a.addr() + loc.capacity()));
            return Ok(count);
        }
        let (count, loc) = self.validate_array(a)?;
        self.last_array.set((a.addr(), shape, count));
        // A live object (tagged, checked just now): the region's first log
        // into it (`Tx::in_live_object`) need not read the header again.
        self.last_object.set((a.addr(), a.addr() + loc.capacity()));
        self.st.borrow_mut().sets.array = KeptArray::new(heap.id, a.addr(), shape, frees, (count, loc));
        Ok(count)
    }

    /// Checks that `a` points to an allocated array whose elements fit its
    /// slot, aligned for `T`; returns its element count and place.
    fn validate_array<T: Persistent>(&self, a: PArray<T>) -> Result<(u64, crate::alloc::Loc)> {
        let space = &self.pool.space;
        let Some(loc) = self.locate(a.addr()) else { return Err(Error::BadPointer { addr: a.addr() }) };
        let h: ObjHeader = space.read(a.addr() - OBJ_HEADER - space.base())?;
        if h.flags & OBJ_TAG_MASK != OBJ_TAG || h.flags & OBJ_ARRAY == 0 {
            return Err(Error::BadPointer { addr: a.addr() });
        }
        let bytes = h.count.checked_mul(size_of::<T>() as u64);
        if bytes.is_none_or(|b| b > loc.capacity()) {
            return Err(Error::corrupt(format!("array at {:#x}: {} elements overrun its slot", a.addr(), h.count)));
        }
        // Aligned and in the mapping as a whole, once: `elem_addr` and
        // array views then check only the index.
        self.check(a.addr(), bytes.unwrap_or(0), align_of::<T>())?;
        Ok((h.count, loc))
    }
}

/// An array validated by an earlier region of this thread (see the module docs).
#[derive(Clone, Copy, Default)]
pub(super) struct KeptArray {
    /// Heap id of the open pool (0: nothing kept; heap ids start at 1).
    heap: u64,
    addr: u64,
    /// Element size and alignment the validation was for.
    shape: (u64, u64),
    /// The heap's free count read before the validation.
    frees: u64,
    /// The array's element count.
    count: u64,
    /// Where the array lives (None: nothing kept).
    loc: Option<crate::alloc::Loc>,
}

impl KeptArray {
    /// A validation of the array at `addr` (at `loc`) with `count`
    /// elements of `shape`, begun when heap `heap`'s free count read `frees`.
    pub fn new(heap: u64, addr: u64, shape: (u64, u64), frees: u64, (count, loc): (u64, crate::alloc::Loc)) -> Self {
        KeptArray { heap, addr, shape, frees, count, loc: Some(loc) }
    }

    /// The element count and place, if this validation holds for the array
    /// at `addr` of heap `heap`, read as `shape`, while the heap's free
    /// count reads `frees_now`.
    #[inline]
    pub fn count(&self, heap: u64, addr: u64, shape: (u64, u64), frees_now: u64) -> Option<(u64, crate::alloc::Loc)> {
        let same_pool = self.heap == heap || crate::failpoint::planted("tx.kept_array_ignores_pool");
        let same_type = self.shape == shape || crate::failpoint::planted("tx.kept_array_ignores_type");
        let unfreed = self.frees == frees_now || crate::failpoint::planted("tx.kept_array_ignores_frees");
        let loc = self.loc.filter(|_| self.addr == addr && same_pool && same_type && unfreed)?;
        Some((self.count, loc))
    }
}

/// Rust type -> pool type id, for the types a thread's regions used on one
/// open pool (see the module docs).
#[derive(Default)]
pub(super) struct KeptTypes {
    /// Heap id of the pool the ids are of (0: none yet).
    heap: u64,
    ids: Vec<(std::any::TypeId, u32)>,
}

impl KeptTypes {
    /// The id of `key` in heap `heap`'s pool, if a region looked it up.
    #[inline]
    pub fn get(&self, heap: u64, key: std::any::TypeId) -> Option<u32> {
        if self.heap != heap && !crate::failpoint::planted("tx.kept_types_ignore_pool") {
            return None;
        }
        self.ids.iter().find(|(k, _)| *k == key).map(|&(_, id)| id)
    }

    /// Records `key`'s id `id` in heap `heap`'s pool (forgetting the ids of
    /// any other pool).
    pub fn put(&mut self, heap: u64, key: std::any::TypeId, id: u32) {
        if self.heap != heap {
            self.ids.clear();
            self.heap = heap;
        }
        // A program uses few types per pool; a region program that uses
        // very many would scan a long list, so the list is bounded.
        if self.ids.len() >= MAX_KEPT_TYPES {
            self.ids.clear();
        }
        self.ids.push((key, id));
    }
}

/// At most this many type ids are kept (a linear scan stays short).
const MAX_KEPT_TYPES: usize = 32;

#[cfg(test)]
mod tests {
    use crate::format::{ObjHeader, OBJ_HEADER};
    use crate::{CreateOptions, Durability, Error, OpenOptions, PArray, Pool};
    use std::path::PathBuf;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("engram-kept-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn create(d: &std::path::Path) -> Pool {
        Pool::create(d.join("p.pool"), CreateOptions::new("kept").durability(Durability::Process)).unwrap()
    }

    /// Runs `body` with planted bug `bug` (if any) on this thread; the
    /// plant is undone whatever `body` does.
    fn with_bug<R>(bug: Option<&str>, body: impl FnOnce() -> R) -> R {
        if let Some(b) = bug {
            crate::failpoint::plant(b);
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
        crate::failpoint::disarm_all();
        r.unwrap_or_else(|p| std::panic::resume_unwind(p))
    }

    /// In one region of `pool`, allocates with `alloc` until an object
    /// lands at `addr` (a slot just freed comes back within a batch);
    /// the others are freed when the region commits. Whether one did.
    fn alloc_at(pool: &Pool, addr: u64, alloc: impl Fn(&crate::Tx<'_>) -> Result<u64, Error>) -> bool {
        pool.txn(|tx| {
            for _ in 0..2 * crate::alloc::BATCH {
                let p = alloc(tx)?;
                if p == addr {
                    return Ok(true);
                }
                tx.free_addr(p)?;
            }
            Ok::<_, Error>(false)
        })
        .unwrap()
    }

    /// `len` of the array `a` in a new region of `pool`.
    fn len_now(pool: &Pool, a: PArray<u64>) -> Result<u64, Error> {
        pool.txn(|tx| tx.len(a))
    }

    /// An array a region validated, then freed by a later region: the
    /// next region's `len` must validate it again (and refuse it), not
    /// answer from what an earlier region kept. Returns that answer.
    fn len_after_free(bug: Option<&str>) -> Result<u64, Error> {
        let d = scratch(&format!("free-{}", bug.is_some()));
        let pool = create(&d);
        let a: PArray<u64> = pool.txn(|tx| tx.alloc_array::<u64>(5)).unwrap();
        let r = with_bug(bug, || {
            assert_eq!(len_now(&pool, a).unwrap(), 5);
            pool.txn(|tx| tx.free_array(a)).unwrap();
            len_now(&pool, a)
        });
        pool.close().unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        r
    }

    #[test]
    fn a_freed_array_is_validated_again() {
        assert!(matches!(len_after_free(None), Err(Error::BadPointer { .. })));
        // Planted "the free count is ignored": the stale count is answered.
        assert_eq!(len_after_free(Some("tx.kept_array_ignores_frees")).unwrap(), 5);
    }

    /// An array allocated by a region that rolled back, its slot then
    /// reused by a plain (non-array) object: not an array any more.
    fn len_after_rollback(bug: Option<&str>) -> Result<u64, Error> {
        let d = scratch(&format!("rollback-{}", bug.is_some()));
        let pool = create(&d);
        let r = with_bug(bug, || {
            let mut got = None;
            let r = pool.txn(|tx| {
                let a = tx.alloc_array::<u64>(5)?;
                got = Some(a);
                assert_eq!(tx.len(a)?, 5);
                Err::<(), _>(Error::Aborted)
            });
            assert!(matches!(r, Err(Error::Aborted)));
            let a = got.unwrap();
            let reused = alloc_at(&pool, a.addr(), |tx| tx.alloc([7u64; 5]).map(|p| p.addr()));
            assert!(reused, "the rolled-back array's slot is handed out again");
            len_now(&pool, a)
        });
        pool.close().unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        r
    }

    #[test]
    fn an_array_a_rollback_freed_is_validated_again() {
        assert!(matches!(len_after_rollback(None), Err(Error::BadPointer { .. })));
        assert_eq!(len_after_rollback(Some("tx.kept_array_ignores_frees")).unwrap(), 5);
    }

    /// A large array nothing links, validated, then swept by a collection.
    fn len_after_sweep(bug: Option<&str>) -> Result<u64, Error> {
        let d = scratch(&format!("sweep-{}", bug.is_some()));
        let pool = create(&d);
        let n = 20_000; // 160 KB: a large object, alone in its spans
        let a: PArray<u64> = pool.txn(|tx| tx.alloc_array::<u64>(n)).unwrap();
        let r = with_bug(bug, || {
            assert_eq!(len_now(&pool, a).unwrap(), n);
            pool.collect().unwrap();
            len_now(&pool, a)
        });
        pool.close().unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        r
    }

    #[test]
    fn a_swept_array_is_validated_again() {
        assert!(matches!(len_after_sweep(None), Err(Error::BadPointer { .. })));
        assert_eq!(len_after_sweep(Some("tx.kept_array_ignores_frees")).unwrap(), 20_000);
    }

    /// An array validated in one open of a pool, freed in the next open
    /// (the same file, mapped at the same base) when that heap's free
    /// count has come to the same value: only the heap id tells them apart.
    fn len_after_reopen(bug: Option<&str>) -> Result<u64, Error> {
        let d = scratch(&format!("reopen-{}", bug.is_some()));
        let pool = create(&d);
        let (a, b): (PArray<u64>, PArray<u64>) = pool.txn(|tx| Ok::<_, Error>((tx.alloc_array(5)?, tx.alloc_array(5)?))).unwrap();
        pool.txn(|tx| tx.free_array(b)).unwrap();
        let r = with_bug(bug, || {
            assert_eq!(len_now(&pool, a).unwrap(), 5);
            let seen = pool.inner().heap.frees_seen();
            pool.close().unwrap();
            let pool = Pool::open(d.join("p.pool"), OpenOptions::new("kept").durability(Durability::Process)).unwrap();
            pool.txn(|tx| tx.free_array(a)).unwrap();
            assert_eq!(pool.inner().heap.frees_seen(), seen, "both heaps counted the same frees");
            let r = len_now(&pool, a);
            pool.close().unwrap();
            r
        });
        std::fs::remove_dir_all(&d).unwrap();
        r
    }

    #[test]
    fn an_array_of_an_earlier_open_is_validated_again() {
        assert!(matches!(len_after_reopen(None), Err(Error::BadPointer { .. })));
        assert_eq!(len_after_reopen(Some("tx.kept_array_ignores_pool")).unwrap(), 5);
    }

    /// An array of 5 `u64`s read as 5 `[u64; 4]`s, after a region read it
    /// as `u64`s: 160 bytes do not fit its slot.
    fn len_as_another_type(bug: Option<&str>) -> Result<u64, Error> {
        let d = scratch(&format!("type-{}", bug.is_some()));
        let pool = create(&d);
        let a: PArray<u64> = pool.txn(|tx| tx.alloc_array::<u64>(5)).unwrap();
        let r = with_bug(bug, || {
            assert_eq!(len_now(&pool, a).unwrap(), 5);
            pool.txn(|tx| tx.len(PArray::<[u64; 4]>::from_addr(a.addr())))
        });
        pool.close().unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        r
    }

    #[test]
    fn an_array_read_as_another_type_is_validated_again() {
        assert!(matches!(len_as_another_type(None), Err(Error::Corrupt { .. })));
        assert_eq!(len_as_another_type(Some("tx.kept_array_ignores_type")).unwrap(), 5);
    }

    /// The type id in the header of a `T` a region of `pool` allocates.
    fn allocated_type_id<T: crate::Persistent>(pool: &Pool, v: T) -> u32 {
        let p = pool.txn(|tx| tx.alloc(v)).unwrap();
        // SAFETY: `p` is a live object of `pool`, whose header precedes it.
        let h = unsafe { std::ptr::read((p.addr() - OBJ_HEADER) as *const ObjHeader) };
        h.type_id
    }

    /// Two pools whose ids for `u64` differ, used in turn by one thread:
    /// each allocation carries its own pool's id. Returns whether both did.
    fn type_ids_follow_the_pool(bug: Option<&str>) -> bool {
        let (d1, d2) = (scratch(&format!("types1-{}", bug.is_some())), scratch(&format!("types2-{}", bug.is_some())));
        let (p1, p2) = (create(&d1), create(&d2));
        allocated_type_id(&p2, 1u32); // p2 registers u32 first: its u64 id differs
        let ok = with_bug(bug, || {
            let id1 = allocated_type_id(&p1, 1u64);
            let id2 = allocated_type_id(&p2, 1u64);
            id1 == p1.inner().types.id_of::<u64>(&p1.inner().space).unwrap()
                && id2 == p2.inner().types.id_of::<u64>(&p2.inner().space).unwrap()
        });
        assert_ne!(p1.inner().types.id_of::<u64>(&p1.inner().space).unwrap(), p2.inner().types.id_of::<u64>(&p2.inner().space).unwrap());
        p1.close().unwrap();
        p2.close().unwrap();
        std::fs::remove_dir_all(&d1).unwrap();
        std::fs::remove_dir_all(&d2).unwrap();
        ok
    }

    #[test]
    fn kept_type_ids_are_of_the_pool_in_use() {
        assert!(type_ids_follow_the_pool(None));
        assert!(!type_ids_follow_the_pool(Some("tx.kept_types_ignore_pool")));
    }

    /// The array one thread publishes, and whether the other has read it.
    #[derive(Default)]
    struct Published {
        addr: u64,
        count: u64,
        version: u64,
        seen: u64,
        done: bool,
    }

    /// Two threads: a writer frees the array it published and allocates
    /// another in its slot (counts 5 and 6 in turn, one size class),
    /// publishing each; the reader, in lock
    /// step, checks each one's `len` in a region (holding the lock, so
    /// nothing is freed meanwhile). The free count is the only thing that
    /// tells the reader's kept validation from the writer's new array.
    /// Returns how many stale counts the reader saw.
    fn stale_counts_across_threads(bug: Option<&str>) -> u64 {
        let d = scratch(&format!("threads-{}", bug.is_some()));
        let pool = create(&d);
        let shared = (std::sync::Mutex::new(Published::default()), std::sync::Condvar::new());
        let rounds = 300u64;
        let stale = std::thread::scope(|s| {
            s.spawn(|| {
                let addr = pool.txn(|tx| tx.alloc_array::<u64>(6)).unwrap().addr();
                for i in 0..rounds {
                    let mut g = shared.1.wait_while(shared.0.lock().unwrap(), |p| p.seen != p.version).unwrap();
                    pool.txn(|tx| tx.free_addr(addr)).unwrap();
                    let count = 5 + i % 2;
                    let again = alloc_at(&pool, addr, |tx| tx.alloc_array::<u64>(count).map(|a| a.addr()));
                    assert!(again, "the freed array's slot is handed out again");
                    (g.addr, g.count, g.version) = (addr, count, g.version + 1);
                    shared.1.notify_all();
                }
                shared.0.lock().unwrap().done = true;
                shared.1.notify_all();
            });
            with_bug(bug, || {
                let mut stale = 0;
                loop {
                    let mut g = shared.1.wait_while(shared.0.lock().unwrap(), |p| p.seen == p.version && !p.done).unwrap();
                    if g.seen == g.version {
                        return stale;
                    }
                    let n = len_now(&pool, PArray::from_addr(g.addr)).unwrap();
                    stale += u64::from(n != g.count);
                    g.seen = g.version;
                    shared.1.notify_all();
                }
            })
        });
        pool.close().unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        stale
    }

    #[test]
    fn another_threads_frees_void_a_kept_validation() {
        assert_eq!(stale_counts_across_threads(None), 0);
        assert!(stale_counts_across_threads(Some("tx.kept_array_ignores_frees")) > 0);
    }
}
