//! The redo path of a region (issue 13: one fence per short region).
//!
//! The engine chooses per region. A region starts on the redo path when the
//! pool's mode allows it (`Persister::commits_by_redo`: pmem and trace);
//! while it only writes by value (`Tx::write`, `Tx::set`, `Tx::write_slice`),
//! each write appends a redo entry with the NEW bytes to the slot's log
//! (`log/redo.rs`) and stores nothing in place. Its reads by value
//! (`Tx::read`, `Tx::get`, `Tx::read_slice`) see its own writes: the bytes
//! are read in place, then every pending entry that overlaps them is
//! copied over, oldest first (at most `retires::MAX_RANGES` entries and
//! `LOG_REDO_MAX` bytes, so a read costs at most 16 range tests more).
//!
//! The first call that needs the bytes in place leaves the path for good
//! ([`Tx::leave_redo`]): a log-then-store call (`log_range` and friends,
//! hence roots and every front end), an allocation, a free, an array view,
//! or a write past those bounds. Leaving writes the redo entries back (so
//! a recovery scan reads past them), logs each range's old bytes as an undo
//! entry, fences once ("undo entries of a region leaving redo"), and stores
//! the new bytes in place; from there the region is undo-logged as before,
//! and recovery ignores its redo entries (no redo record follows them).
//!
//! Where a region stands is a plain cell in the `Tx` ([`RedoState`]: `Off`
//! from the start in msync, wal and process modes, `Open`, `Pending` once
//! an entry is written), so the code every undo region runs (reads by
//! value, allocations, frees, by-value writes off the path) tests one byte
//! and borrows nothing.
//!
//! A region still on the path at commit commits by redo record
//! ([`Tx::commit_redo`], steps R1-R4 of `log/redo.rs`): one fence. Crash
//! behaviour is that of `log/redo.rs` and `retires.rs`.

use super::{Tx, TxState};
use crate::error::Result;
use crate::format::LOG_REDO_MAX;
use crate::log::ENTRY_BYTES;
use crate::retires::MAX_RANGES;

/// A pending redo entry: (pool offset of the range, its length, pool
/// offset of the entry in the log).
pub(super) type Pending = (u64, u32, u64);

/// Where a region stands on the redo path (`Tx::redo`, a plain cell beside
/// the region's state, so that what runs off the path tests one byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RedoState {
    /// Off the path for good: the mode has none, or the region left it.
    Off,
    /// On the path, no entry written yet.
    Open,
    /// On the path with entries pending (`RegionSets::redo` not empty).
    Pending,
}

impl RedoState {
    /// A new region's state in pool `pool`.
    #[inline]
    pub(super) fn first(pool: &crate::pool::PoolInner) -> Self {
        if pool.space.persist.commits_by_redo() {
            RedoState::Open
        } else {
            RedoState::Off
        }
    }
}

/// The bytes of a slice of plain values.
pub(super) fn bytes_of<T: crate::Persistent>(vals: &[T]) -> &[u8] {
    // SAFETY: `T: Persistent` is plain data with no padding requirement on
    // reading (every bit pattern valid, stored as is in the pool); the
    // slice covers exactly `size_of_val(vals)` initialised bytes.
    unsafe { std::slice::from_raw_parts(vals.as_ptr() as *const u8, std::mem::size_of_val(vals)) }
}

impl Tx<'_> {
    /// Whether region state `st` may log a write of `len` more bytes as
    /// redo: the mode allows it, nothing is logged in place yet, nothing
    /// allocated or freed, and the bounds hold.
    fn redo_open(&self, st: &TxState, len: u64) -> bool {
        self.redo.get() != RedoState::Off
            && st.log.entries() == 0
            && !st.log.spilled()
            && st.sets.mag.handed_out_count() == 0
            && st.sets.large.is_empty()
            && st.sets.frees.is_empty()
            && st.sets.redo.len() < MAX_RANGES
            && st.sets.redo_bytes + len <= LOG_REDO_MAX
    }

    /// A write by value of `data` to absolute address `addr` (checked to
    /// lie in the pool by the caller): logged as redo if the region is on
    /// the redo path (Ok(true): nothing stored in place). Ok(false): the
    /// caller logs undo and stores, as before (the region left the path,
    /// or was never on it).
    #[inline]
    pub(super) fn write_redo(&self, addr: u64, data: &[u8]) -> Result<bool> {
        if self.redo.get() == RedoState::Off {
            return Ok(false);
        }
        let len = data.len() as u64;
        if !self.redo_open(&self.st.borrow(), len) {
            self.leave_redo()?;
            return Ok(false);
        }
        self.loggable(addr, len)?;
        let space = &self.pool.space;
        let off = addr - space.base();
        let mut st = self.st.borrow_mut();
        let Some(at) = st.log.append_redo(space, off, data)? else {
            drop(st);
            self.leave_redo()?;
            return Ok(false);
        };
        st.sets.redo.push((off, len as u32, at));
        st.sets.redo_bytes += len;
        self.redo.set(RedoState::Pending);
        Ok(true)
    }

    /// `v`, read in place at absolute address `addr`, with the region's
    /// pending redo bytes copied over it. Off the path (or with nothing
    /// pending) one byte is tested and `v` stays in registers: reads by
    /// value are inlined into their callers, and a read of a known object
    /// costs what it did before the redo path.
    #[inline]
    pub(super) fn overlaid<T: crate::Persistent>(&self, addr: u64, v: T) -> T {
        if self.redo.get() != RedoState::Pending {
            return v;
        }
        self.overlaid_pending(addr, v)
    }

    /// [`Tx::overlaid`] with entries pending.
    #[inline(never)]
    fn overlaid_pending<T: crate::Persistent>(&self, addr: u64, mut v: T) -> T {
        // SAFETY: `v` is plain data (every bit pattern a valid T), seen as
        // its bytes for the copy.
        let bytes = unsafe { std::slice::from_raw_parts_mut(&mut v as *mut T as *mut u8, std::mem::size_of::<T>()) };
        self.overlay_pending(addr, bytes);
        v
    }

    /// Copies the region's pending redo bytes over `out`, which holds the
    /// in-place bytes of absolute address `addr` onward (its own writes,
    /// oldest first, so the newest wins).
    #[inline]
    pub(super) fn overlay(&self, addr: u64, out: &mut [u8]) {
        if self.redo.get() == RedoState::Pending {
            self.overlay_pending(addr, out);
        }
    }

    /// [`Tx::overlay`] with entries pending (kept out of line: every read
    /// by value inlines the test above, and only redo regions get here).
    #[inline(never)]
    fn overlay_pending(&self, addr: u64, out: &mut [u8]) {
        let st = self.st.borrow();
        if crate::failpoint::planted("tx.redo_read_misses_own_writes") {
            return;
        }
        let base = self.pool.space.base();
        let (start, end) = (addr - base, addr - base + out.len() as u64);
        for &(off, len, at) in &st.sets.redo {
            let (s, e) = (off.max(start), (off + len as u64).min(end));
            if s < e {
                let src = base + at + ENTRY_BYTES + (s - off);
                // SAFETY: [src, src+e-s) lies in the entry's data in the log
                // (inside the mapping); `out` is volatile memory.
                unsafe { std::ptr::copy_nonoverlapping(src as *const u8, out[(s - start) as usize..].as_mut_ptr(), (e - s) as usize) };
            }
        }
    }

    /// Leaves the redo path (module docs): the redo entries written back,
    /// the old bytes of their ranges logged as undo under one fence, the
    /// new bytes stored in place. Nothing to do off the path.
    #[inline]
    pub(super) fn leave_redo(&self) -> Result<()> {
        if self.redo_leave_quietly() {
            return Ok(());
        }
        self.redo.set(RedoState::Off);
        self.leave_redo_now()
    }

    /// Leaves the redo path if no entry is pending (true: the region is
    /// off it for good, having borrowed nothing); false if entries are
    /// pending (the caller must [`Tx::leave_redo`]).
    #[inline]
    pub(super) fn redo_leave_quietly(&self) -> bool {
        match self.redo.get() {
            RedoState::Off => true,
            RedoState::Open => {
                // For good: a view or a pointer may read in place from now on.
                self.redo.set(RedoState::Off);
                true
            }
            RedoState::Pending => false,
        }
    }

    #[cold]
    fn leave_redo_now(&self) -> Result<()> {
        let space = &self.pool.space;
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        // 1. the redo entries written back: the scan reads past them to the
        //    undo entries that follow.
        st.log.flush_written(space);
        // 2. each range's old bytes logged (unfenced), then one fence: the
        //    undo entries are durable before any range changes.
        let pending = std::mem::take(&mut st.sets.redo);
        for &(off, len, _) in &pending {
            if !st.sets.words.covered(off, len as u64) {
                st.log.append_unfenced(space, self, off, len)?;
                st.sets.logged.push((off, len));
                st.sets.words.mark(off, len as u64);
                self.note_changed(&mut st.sets.dirty, off, len as u64);
            }
        }
        space.persist.fence(crate::fences::REDO_LEAVING)?;
        // 3. the new bytes stored in place, oldest first.
        for &(off, len, at) in &pending {
            // SAFETY: the entry's data and its target lie in the mapping
            // (appended by this region; the target checked by `loggable`)
            // and do not overlap (logs are never targets).
            unsafe {
                std::ptr::copy_nonoverlapping((space.base() + at + ENTRY_BYTES) as *const u8, (space.base() + off) as *mut u8, len as usize)
            };
        }
        st.sets.redo_bytes = 0;
        let mut pending = pending;
        pending.clear();
        st.sets.redo = pending;
        Ok(())
    }

    /// Steps R1-R3 of `log/redo.rs` for a region still on the redo path.
    /// Returns the generation the slot's next region logs under.
    pub(super) fn commit_redo(&self, st: &TxState) -> Result<u64> {
        let space = &self.pool.space;
        let persist = &space.persist;
        // 0. other slots' retires settled in full: their records must be
        //    dead before this one can be durable (`retires.rs`).
        if persist.retires().listed(Some(st.slot)).is_some() && !crate::failpoint::planted("tx.redo_other_slots_not_settled") {
            persist.fence(crate::fences::REDO_OTHER_RETIRES)?;
        }
        // 0'. new objects of earlier regions that this record may link,
        //     durable before it is written (`fresh.rs`).
        persist.settle_fresh(crate::fences::FRESH_BEFORE_RECORD)?;
        // R1. the record after the entries; entries and record written back.
        st.log.redo_record(space)?;
        if crate::failpoint::planted("tx.redo_in_place_before_fence") {
            self.store_redo(st);
        }
        crate::failpoint::Failpoint::TxBeforeCommit.hit();
        // R2. one fence: the region is committed (and the slot's previous
        //     record, chained, has its bytes durable, or covered by this
        //     record; its word moves).
        let base = space.base();
        let ranges = st.sets.redo.iter().map(|&(off, len, _)| (base + off, len as u64));
        persist.fence_redo(st.slot, ranges.clone(), crate::fences::REDO_RECORD)?;
        crate::failpoint::Failpoint::TxRedoAfterRecord.hit();
        // R3. the new bytes in place, not written back; the retire listed.
        self.store_redo(st);
        persist.retires().publish(st.slot, st.log.gen(), ranges);
        Ok((st.log.gen() + 1) & crate::format::LOG_GEN_MASK)
    }

    /// Step R3's stores: the new bytes of every pending entry in place,
    /// oldest first, not written back.
    fn store_redo(&self, st: &TxState) {
        let space = &self.pool.space;
        for &(off, len, at) in &st.sets.redo {
            // SAFETY: as in `leave_redo_now`.
            unsafe {
                std::ptr::copy_nonoverlapping((space.base() + at + ENTRY_BYTES) as *const u8, (space.base() + off) as *mut u8, len as usize)
            };
            self.pool.deferred.card(off, len as u64);
        }
    }

    /// Before a rollback: the retires listed are settled if the slot's own
    /// is among them (the word then holds this region's generation, which
    /// the undo reads) or if the region wrote redo entries and no undo
    /// entry; such a region stored nothing in place, and its generation is
    /// moved so its entries are dead. Otherwise nothing to do.
    pub(super) fn rollback_redo(&self) -> Result<()> {
        let st = self.st.borrow();
        let (redo, undo) = (st.log.redo_entries(), st.log.entries());
        let space = &self.pool.space;
        let own = space.persist.retires().of(st.slot).is_some();
        if (redo > 0 || undo > 0) && (own || undo == 0) {
            space.persist.settle_bumps(crate::fences::REDO_ROLLBACK)?;
        }
        if redo > 0 && undo == 0 {
            crate::log::invalidate(space, st.slot)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::pmem::counters;
    use crate::{CreateOptions, Durability, Error, OpenOptions, PArray, Pool};

    /// A pool on tmpfs in `mode`, removed when dropped.
    struct Temp(Option<Pool>, std::path::PathBuf);

    impl Drop for Temp {
        fn drop(&mut self) {
            drop(self.0.take());
            let _ = std::fs::remove_file(&self.1);
        }
    }

    fn pool(tag: &str, mode: Durability) -> Temp {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        let path = dir.join(format!("engram-unit-redo-{tag}-{}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        Temp(Some(Pool::create(&path, CreateOptions::new("redo").durability(mode)).unwrap()), path)
    }

    /// `Pool::txn` with the engine's error type.
    fn txn<R>(p: &Pool, f: impl FnOnce(&crate::Tx<'_>) -> crate::Result<R>) -> crate::Result<R> {
        p.txn(f)
    }

    fn array(p: &Pool, n: u64) -> PArray<u64> {
        txn(p, |tx| {
            let a = tx.alloc_array::<u64>(n)?;
            tx.set_root_array("a", a)?;
            Ok(a)
        })
        .unwrap()
    }

    /// The n-body shape: read a slice, write it back changed. On the redo
    /// path each region costs ONE fence, and writes back its record's lines
    /// and the previous region's data lines (5 + 5 lines here: 40 bytes of
    /// entry and record headers with 280 data bytes, and 280 data bytes).
    #[test]
    fn a_by_value_region_commits_with_one_fence() {
        let t = pool("one-fence", Durability::Pmem);
        let p = t.0.as_ref().unwrap();
        let a = array(p, 35);
        let step = |k: u64| {
            txn(p, |tx| {
                let mut b = [0u64; 35];
                tx.read_slice(a, 0, &mut b)?;
                b.iter_mut().for_each(|x| *x += k);
                tx.write_slice(a, 0, &b)
            })
            .unwrap()
        };
        step(1);
        let before = counters();
        for k in 0..10 {
            step(k);
        }
        let after = counters();
        assert_eq!(after.fences - before.fences, 10, "one fence per region");
        assert!(after.flushes - before.flushes <= 10 * 12, "{} lines for 10 regions", after.flushes - before.flushes);
        let mut b = [0u64; 35];
        txn(p, |tx| tx.read_slice(a, 0, &mut b)).unwrap();
        assert_eq!(b[0], 1 + (0..10).sum::<u64>());
    }

    /// The subsumed retire: a region whose ranges cover every byte of the
    /// slot's previous redo region writes back only its own record (at most
    /// 6 lines: 40 header bytes and 280 data bytes) and the pending word (1
    /// line), leaving the previous region's in-place lines to its own
    /// retire; a region that leaves out one word its predecessor wrote (on
    /// a line it writes itself) also writes the predecessor's 5 data lines
    /// back. The bytes are right either way.
    #[test]
    fn a_covered_predecessor_is_not_written_back() {
        covered_lines("cover");
    }

    /// The planted bug (every predecessor taken for covered) fails the
    /// test above: the uncovered predecessor's lines are not written back.
    #[test]
    fn an_uncovered_predecessor_taken_for_covered_is_caught() {
        crate::failpoint::plant("retires.uncovered_as_covered");
        let r = std::panic::catch_unwind(|| covered_lines("cover-planted"));
        crate::failpoint::disarm_all();
        assert!(r.is_err(), "the planted bug went unnoticed");
    }

    fn covered_lines(tag: &str) {
        let t = pool(tag, Durability::Pmem);
        let p = t.0.as_ref().unwrap();
        let a = array(p, 35);
        let step = |k: u64, n: usize| {
            txn(p, |tx| {
                let mut b = [0u64; 35];
                tx.read_slice(a, 0, &mut b)?;
                b.iter_mut().for_each(|x| *x += k);
                tx.write_slice(a, 0, &b[..n])
            })
            .unwrap();
        };
        let lines = |k: u64, n: usize| {
            let before = counters();
            step(k, n);
            let after = counters();
            assert_eq!(after.fences - before.fences, 1, "one fence");
            after.flushes - before.flushes
        };
        step(1, 35);
        for k in 0..4 {
            let n = lines(k, 35);
            assert!(n <= 7, "a covered predecessor: {n} lines");
        }
        for k in 0..4 {
            // 34 words after 35: not covered; 35 after 34: covered
            let (short, whole) = (lines(k, 34), lines(k, 35));
            assert!(short >= 11, "the predecessor's word 34 is not covered, yet {short} lines");
            assert!(whole <= 7, "a covered predecessor: {whole} lines");
        }
        let mut b = [0u64; 35];
        txn(p, |tx| tx.read_slice(a, 0, &mut b)).unwrap();
        // 1, then 0 + 1 + 2 + 3 to every word twice and once more to all but word 34
        assert_eq!((b[0], b[33], b[34]), (19, 19, 13));
    }

    /// Stress: two threads' redo chains on one array (two-phase locking
    /// serialises them; each region covers its thread's previous region
    /// but every 7th, which writes 20 of the 35 words), and every 13th
    /// region also an undo region on a second word (its entry fence
    /// settles the other slot's listed retire in full, racing with that
    /// thread's chain), then an ordered pair of regions (below). After a
    /// process crash (memory kept) the open
    /// replays whatever records are still valid, slot by slot: a record
    /// left valid over a later commit of the other slot would put an older
    /// count back. Checked: word 0 counts every commit, and the undo word
    /// every undo region. Planted `tx.redo_other_slots_not_settled` (a
    /// redo commit that does not settle the other slots' retires first)
    /// fails it.
    #[test]
    fn concurrent_covering_chains_and_settles_keep_the_last_values() {
        covering_chains("stress");
    }

    /// The planted bug above is caught (by the ordered pair at the end).
    #[test]
    fn a_redo_commit_that_leaves_other_retires_is_caught() {
        crate::failpoint::plant("tx.redo_other_slots_not_settled");
        let r = std::panic::catch_unwind(|| covering_chains("stress-planted"));
        crate::failpoint::disarm_all();
        assert!(r.is_err(), "the planted bug went unnoticed");
    }

    fn covering_chains(tag: &str) {
        const N: u64 = 300;
        let mut t = pool(tag, Durability::Pmem);
        let p = t.0.take().unwrap();
        let (a, undo) = txn(&p, |tx| {
            let a = tx.alloc_array::<u64>(35)?;
            tx.set_root_array("a", a)?;
            let s = tx.alloc_array::<u64>(1)?;
            tx.set_root_array("s", s)?;
            Ok((a, s))
        })
        .unwrap();
        let switches = crate::failpoint::switches();
        std::thread::scope(|sc| {
            for _ in 0..2 {
                let (p, switches) = (&p, &switches);
                sc.spawn(move || {
                    crate::failpoint::adopt_switches(switches);
                    for k in 1..=N {
                        txn(p, |tx| {
                            tx.lock_ptr(crate::PPtr::<u64>::from_addr(a.addr()))?;
                            if k % 13 == 0 {
                                let v = tx.get(undo, 0)?;
                                tx.log_range(undo.addr(), 8)?;
                                tx.set(undo, 0, v + 1)?;
                            }
                            let b = [tx.get(a, 0)? + 1; 35];
                            let n = if k % 7 == 0 { 20 } else { 35 };
                            tx.write_slice(a, 0, &b[..n])
                        })
                        .unwrap();
                    }
                });
            }
        });
        // Last, an ordered pair (as `mt-redo`'s first two): the region that
        // began first holds the lower slot and commits after the other, so
        // recovery would replay the older record last if it were still valid.
        let (began, committed) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        let count = |tx: &crate::Tx<'_>| -> crate::Result<()> {
            tx.lock_ptr(crate::PPtr::<u64>::from_addr(a.addr()))?;
            let b = [tx.get(a, 0)? + 1; 35];
            tx.write_slice(a, 0, &b)
        };
        std::thread::scope(|sc| {
            let (p, switches, began, committed, count) = (&p, &switches, &began, &committed, &count);
            sc.spawn(move || {
                crate::failpoint::adopt_switches(switches);
                txn(p, |tx| {
                    began.wait();
                    committed.wait();
                    count(tx)
                })
                .unwrap();
            });
            sc.spawn(move || {
                crate::failpoint::adopt_switches(switches);
                began.wait();
                txn(p, count).unwrap();
                committed.wait();
            });
        });
        p.simulate_crash();
        let p = Pool::open(&t.1, OpenOptions::new("redo")).unwrap();
        let a = txn(&p, |tx| tx.root_array::<u64>("a")).unwrap().unwrap();
        let s = txn(&p, |tx| tx.root_array::<u64>("s")).unwrap().unwrap();
        t.0 = Some(p);
        let p = t.0.as_ref().unwrap();
        assert_eq!(txn(p, |tx| tx.get(a, 0)).unwrap(), 2 * N + 2, "commits counted");
        assert_eq!(txn(p, |tx| tx.get(s, 0)).unwrap(), 2 * (N / 13), "undo regions counted");
    }

    /// Reads by value see the region's own pending writes, newest first,
    /// also where writes overlap part of what is read; and the bytes are in
    /// place once the region commits.
    #[test]
    fn a_region_reads_its_own_pending_writes() {
        reads_own_writes("reads");
    }

    /// The planted bug: reads that miss the region's pending writes fail
    /// the test above.
    #[test]
    fn a_read_that_misses_its_own_writes_is_caught() {
        crate::failpoint::plant("tx.redo_read_misses_own_writes");
        let r = std::panic::catch_unwind(|| reads_own_writes("reads-planted"));
        crate::failpoint::disarm_all();
        assert!(r.is_err(), "the planted bug went unnoticed");
    }

    fn reads_own_writes(tag: &str) {
        let t = pool(tag, Durability::Trace);
        let p = t.0.as_ref().unwrap();
        let a = array(p, 8);
        txn(p, |tx| {
            tx.write_slice(a, 0, &[1, 2, 3, 4, 5, 6, 7, 8])?;
            tx.set(a, 2, 30)?;
            tx.write_slice(a, 5, &[60, 70])?;
            assert_eq!(tx.get(a, 2)?, 30);
            assert_eq!(tx.get(a, 6)?, 70);
            let mut b = [0u64; 6];
            tx.read_slice(a, 1, &mut b)?;
            assert_eq!(b, [2, 30, 4, 5, 60, 70]);
            let p0 = crate::PPtr::<u64>::from_addr(a.addr());
            tx.write(p0, 10)?;
            assert_eq!(tx.read(p0)?, 10);
            // nothing is in place yet
            // SAFETY: element 0 of a live array of 8 words.
            assert_eq!(unsafe { std::ptr::read(a.addr() as *const u64) }, 0);
            Ok(())
        })
        .unwrap();
        let mut b = [0u64; 8];
        txn(p, |tx| tx.read_slice(a, 0, &mut b)).unwrap();
        assert_eq!(b, [10, 2, 30, 4, 5, 60, 70, 8]);
    }

    /// A log-then-store call, an allocation or a view leaves the path: the
    /// pending bytes are in place when it returns, and the region then
    /// commits (or rolls back) as an undo-logged one.
    #[test]
    fn the_first_in_place_call_leaves_the_path() {
        let t = pool("leave", Durability::Trace);
        let p = t.0.as_ref().unwrap();
        let a = array(p, 4);
        let in_place = |i: u64| {
            // SAFETY: element `i` (< 4) of a live array of 4 words.
            unsafe { std::ptr::read((a.addr() + 8 * i) as *const u64) }
        };
        for (k, leave) in ["log_range", "alloc", "view"].into_iter().enumerate() {
            let k = k as u64 + 1;
            let prev = in_place(0);
            let r = txn(p, |tx| {
                tx.set(a, 0, k)?;
                assert_eq!(in_place(0), prev, "{leave}: stored before its commit");
                match leave {
                    "log_range" => tx.log_range(a.addr() + 8, 8)?,
                    "alloc" => drop(tx.alloc(7u64)?),
                    _ => {
                        tx.array(a)?;
                    }
                }
                assert_eq!(in_place(0), k, "{leave}: not in place after leaving");
                tx.set(a, 1, 100 * k)?;
                assert_eq!(in_place(1), 100 * k, "{leave}: a write after leaving is not in place");
                if k == 2 {
                    return Err(Error::Aborted);
                }
                Ok(())
            });
            let want = if k == 2 { (1, 100) } else { (k, 100 * k) };
            assert_eq!(r.is_ok(), k != 2);
            assert_eq!((in_place(0), in_place(1)), want, "{leave}");
        }
    }

    /// A rolled-back redo region changed nothing; the slot's next regions
    /// (both paths) commit and roll back as usual.
    #[test]
    fn a_rolled_back_redo_region_changes_nothing() {
        let t = pool("rollback", Durability::Pmem);
        let p = t.0.as_ref().unwrap();
        let a = array(p, 4);
        let set = |v: u64, fail: bool| {
            txn(p, |tx| {
                tx.set(a, 1, v)?;
                if fail {
                    return Err(Error::Aborted);
                }
                Ok(())
            })
        };
        set(1, false).unwrap();
        assert!(set(2, true).is_err());
        assert_eq!(txn(p, |tx| tx.get(a, 1)).unwrap(), 1);
        set(3, false).unwrap();
        set(4, false).unwrap();
        assert!(set(5, true).is_err());
        assert_eq!(txn(p, |tx| tx.get(a, 1)).unwrap(), 4);
    }

    /// A crash after the record's fence, before any byte is in place (a
    /// process crash: memory kept): the open replays the record.
    #[test]
    fn a_crash_after_the_record_is_replayed_at_open() {
        let mut t = pool("replay", Durability::Trace);
        let p = t.0.take().unwrap();
        let a = array(&p, 4);
        txn(&p, |tx| tx.set(a, 0, 5)).unwrap();
        crate::failpoint::arm(crate::failpoint::Failpoint::TxRedoAfterRecord, 0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| txn(&p, |tx| tx.write_slice(a, 0, &[6, 7]))));
        crate::failpoint::disarm_failpoints();
        assert!(r.is_err(), "the failpoint fired");
        // SAFETY: element 1 of a live array of 4 words.
        assert_eq!(unsafe { std::ptr::read((a.addr() + 8) as *const u64) }, 0, "nothing in place yet");
        drop(p);
        let p = Pool::open(&t.1, OpenOptions::new("redo")).unwrap();
        let a = txn(&p, |tx| tx.root_array::<u64>("a")).unwrap().unwrap();
        let mut b = [0u64; 2];
        txn(&p, |tx| tx.read_slice(a, 0, &mut b)).unwrap();
        assert_eq!(b, [6, 7]);
        t.0 = Some(p);
    }
}
