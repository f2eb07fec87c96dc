//! The read path of pool cells: the inline one-word read, the full
//! seqlock read with its spin and snapshot extension, the read set, and
//! validation of the reads (at extension and at commit).
//!
//! What it keeps true: a value returned was loaded while its lock word
//! was unlocked (or this attempt's own write set answered), the same
//! before and after the load, and of a version at or below the snapshot
//! `rv` (`rv_v` for volatile words). The snapshot moves forward only when
//! every recorded read is still current, and never for an attempt with
//! unrecorded reads (`unrec`: it conflicts instead). A recorded attempt
//! pushes one read-set entry per read, except [`STx::read_immutable`]'s.
//! Nothing here writes shared memory.

use super::{cell_fits, wbit, Read, STx};
use crate::stm::engine::domain::VOLATILE;
use crate::stm::engine::{word_at, StmError, StmResult, MAX_VALUE};
use crate::stm::persist::Persist;
use crate::stm::word;
use crate::Persistent;
use std::cell::Cell;
use std::mem::size_of;
use std::sync::atomic::{fence, Ordering};

impl<'p> STx<'p> {
    /// Reads the cell at `addr` (value of at most `max` bytes). A value of
    /// at most [`MAX_VALUE`] bytes (a `PTField`, a link, a counter, a
    /// red-black tree node's five words) that this attempt has not written
    /// takes the inlined path: bounds check, the write filter's bit
    /// (`STx::wbits`: clear for a cell not written, so an update's reads
    /// after its first write scan nothing), then [`STx::stable_words`]'s
    /// one pass of the seqlock read. Anything else (a locked word, a
    /// version newer than the snapshot, a word that moved, a cell outside
    /// the bounds seen at begin) takes the full read,
    /// [`STx::read_cell_any`], out of line.
    #[inline]
    pub(crate) fn read_cell<P: Persistent>(&self, addr: u64, max: usize) -> StmResult<P> {
        if size_of::<P>() <= MAX_VALUE
            && !self.by_value
            && self.wbits.get() & wbit(addr as usize) == 0
            && cell_fits::<P>(addr, max, self.bounds)
        {
            let mut words = [0u64; MAX_VALUE / 8];
            if let Some(version) = self.stable_words(addr, &mut words[..size_of::<P>().div_ceil(8)]) {
                self.record_read(addr as usize, version, self.epoch);
                // SAFETY: `words` holds at least size_of::<P>() bytes (P is
                // at most MAX_VALUE, above) of one stable pass over the
                // cell's value; every bit pattern is a valid P.
                return Ok(unsafe { std::ptr::read_unaligned(words.as_ptr() as *const P) });
            }
        }
        self.read_cell_any(addr, max)
    }

    /// One pass of the seqlock read of the cell at `addr` (checked by the
    /// caller to lie, with `out.len()` value words, inside the bounds seen
    /// at begin, 8-aligned): the lock word, unlocked and not newer than
    /// the snapshot; the value words into `out`; the lock word again,
    /// unchanged. Returns the version, or None for the full read to decide
    /// (spin, extend the snapshot, or conflict). Planted bugs:
    /// `stm.fast_read_ignores_snapshot`, `stm.fast_read_no_recheck` (the
    /// second load's verdict ignored), and `stm.fast_read_slow` (a yield
    /// before the value: not a bug, it widens the window for the others).
    #[inline(always)]
    fn stable_words(&self, addr: u64, out: &mut [u64]) -> Option<u64> {
        // SAFETY: the caller checked [addr, addr + 8 + 8 * out.len()) against
        // the heap's bounds seen at begin (mapped while the pool is borrowed
        // for 'p), and addr 8-aligned.
        let w = unsafe { word_at(addr as usize) };
        let w1 = w.load(Ordering::Acquire);
        if word::is_locked(w1, self.epoch) {
            return None;
        }
        if word::version(w1) > self.rv.get() && !crate::failpoint::planted("stm.fast_read_ignores_snapshot") {
            return None;
        }
        if crate::failpoint::planted("stm.fast_read_slow") {
            std::thread::yield_now();
        }
        for (i, v) in out.iter_mut().enumerate() {
            // SAFETY: as above, value word i at addr + 8 + 8i.
            *v = unsafe { word_at(addr as usize + 8 + 8 * i) }.load(Ordering::Relaxed);
        }
        fence(Ordering::Acquire);
        (w.load(Ordering::Relaxed) == w1 || crate::failpoint::planted("stm.fast_read_no_recheck")).then_some(word::version(w1))
    }

    /// [`STx::read_cell`] for any value size, own writes and `Coarse`.
    #[inline(never)]
    fn read_cell_any<P: Persistent>(&self, addr: u64, max: usize) -> StmResult<P> {
        self.check_cell::<P>(addr, max)?;
        if let Some(b) = self.own_write(addr as usize)? {
            return Ok(b.get());
        }
        let epoch = self.epoch();
        let n = size_of::<P>().div_ceil(8);
        let mut words = [0u64; MAX_VALUE / 8];
        self.read_versioned(addr as usize, epoch, || {
            for (i, w) in words.iter_mut().enumerate().take(n) {
                // SAFETY: check_cell proved [addr, addr+8+8n) is inside the
                // mapping and addr 8-aligned; the pool is borrowed for 'p.
                *w = unsafe { word_at(addr as usize + 8 + 8 * i) }.load(Ordering::Relaxed);
            }
        })?;
        if self.by_value {
            self.saw_bytes::<P>(&words[..n]);
        }
        // SAFETY: `words` holds at least size_of::<P>() bytes of a consistent
        // snapshot of the cell's value; every bit pattern is a valid P.
        Ok(unsafe { std::ptr::read_unaligned(words.as_ptr() as *const P) })
    }

    /// Reads a field that is written only while its object is private to
    /// the transaction that made it (a tree node's key, set when the node
    /// is allocated): the value as of the snapshot, with no read-set entry,
    /// so neither later reads nor commit validate it again. It costs the
    /// seqlock read alone. A field that committed transactions do write
    /// must be read with [`STx::read`]: a change to it after this read is
    /// not noticed (memory stays safe, serialisability of that field does
    /// not).
    ///
    /// A field this attempt has not written takes `STx::stable_words`'s
    /// inline pass; anything else the full read, out of line.
    #[inline]
    pub fn read_immutable<T: Persistent + Persist<P = T>>(&self, field: &crate::stm::FieldRef<T>) -> StmResult<T> {
        let addr = field.addr();
        if size_of::<T>() <= 8 && self.wbits.get() & wbit(addr as usize) == 0 && cell_fits::<T>(addr, 8, self.bounds) {
            let mut v = [0u64];
            if self.stable_words(addr, &mut v).is_some() {
                let v = v[0];
                // SAFETY: T is at most 8 bytes (above); `v` holds its bytes
                // as read, and every bit pattern is a valid T.
                return Ok(unsafe { std::ptr::read_unaligned(&v as *const u64 as *const T) });
            }
        }
        self.read_immutable_any(addr)
    }

    /// [`STx::read_immutable`]'s full read: bounds, own writes, the
    /// seqlock read with its spin and snapshot extension.
    #[inline(never)]
    fn read_immutable_any<T: Persistent>(&self, addr: u64) -> StmResult<T> {
        self.check_cell::<T>(addr, 8)?;
        if let Some(b) = self.own_write(addr as usize)? {
            return Ok(b.get());
        }
        let mut v = 0u64;
        self.read_stable(addr as usize, self.epoch, || {
            // SAFETY: check_cell proved [addr, addr+16) is inside the
            // mapping and addr 8-aligned; the pool is borrowed for 'p.
            v = unsafe { word_at(addr as usize + 8) }.load(Ordering::Relaxed);
        })?;
        // SAFETY: T is at most 8 bytes (check_cell); `v` holds its bytes
        // as read, and every bit pattern is a valid T.
        Ok(unsafe { std::ptr::read_unaligned(&v as *const u64 as *const T) })
    }

    /// The seqlock read of one variable: `load` copies the value while the
    /// word is stable and not newer than the snapshot.
    #[inline]
    pub(in crate::stm::engine) fn read_versioned(&self, word: usize, epoch: u16, load: impl FnMut()) -> StmResult<()> {
        let version = self.read_stable(word, epoch, load)?;
        self.record_read(word, version, epoch);
        Ok(())
    }

    /// [`STx::read_versioned`] of a volatile variable (epoch 0, checked
    /// against the volatile domain's snapshot).
    #[inline]
    pub(in crate::stm::engine) fn read_versioned_v(&self, word: usize, load: impl FnMut()) -> StmResult<()> {
        self.read_v.set(true);
        let version = self.read_stable_in(word, 0, &self.rv_v, load)?;
        self.record_read(word, version, 0);
        Ok(())
    }

    #[inline]
    fn record_read(&self, word: usize, version: u64, epoch: u16) {
        if self.rec.get() {
            self.st.borrow_mut().reads.push(Read { word, version, epoch });
        } else {
            self.unrec.set(true);
        }
    }

    /// The seqlock read without a read-set entry: returns the version read.
    #[inline]
    fn read_stable(&self, word: usize, epoch: u16, load: impl FnMut()) -> StmResult<u64> {
        self.read_stable_in(word, epoch, &self.rv, load)
    }

    /// The seqlock read against snapshot `rv` (the variable's domain's).
    #[inline]
    fn read_stable_in(&self, word: usize, epoch: u16, rv: &Cell<u64>, mut load: impl FnMut()) -> StmResult<u64> {
        // SAFETY: callers pass a checked pool cell's word (check_cell) or a
        // TVar's word kept alive by `keep` and by the caller's Arc.
        let w = unsafe { word_at(word) };
        let mut spins = 0u32;
        loop {
            let w1 = w.load(Ordering::Acquire);
            if word::is_locked(w1, epoch) {
                spins += 1;
                if spins > 256 {
                    return Err(StmError::Conflict);
                }
                std::hint::spin_loop();
                continue;
            }
            if word::version(w1) > rv.get() {
                if self.unrec.get() {
                    // Unrecorded reads cannot be revalidated: run again.
                    return Err(StmError::Conflict);
                }
                self.extend()?;
                continue;
            }
            load();
            fence(Ordering::Acquire);
            if w.load(Ordering::Relaxed) == w1 {
                return Ok(word::version(w1));
            }
        }
    }

    /// Moves both snapshots forward if everything read is still current
    /// (both clocks sampled before the reads are checked).
    pub(in crate::stm::engine) fn extend(&self) -> StmResult<()> {
        let now_v = VOLATILE.now();
        let now = self.ctx.as_ref().map_or(now_v, |c| c.domain().now());
        if !self.reads_valid(false) {
            return Err(StmError::Conflict);
        }
        self.rv.set(now);
        self.rv_v.set(now_v);
        Ok(())
    }

    /// Whether every read is still current. `locked_own`: this transaction
    /// holds its write locks (commit), so a locked word of its write set is
    /// its own; before commit, any locked word is someone else's.
    pub(in crate::stm::engine) fn reads_valid(&self, locked_own: bool) -> bool {
        let st = self.st.borrow();
        // Through the emulated HTM when routed (`runtime::word_load`).
        let via = crate::stm::runtime::route();
        st.reads.iter().all(|r| {
            // SAFETY: a read-set word: a checked pool cell, or a TVar whose
            // Arc the read holds (`_keep`).
            let w = crate::stm::runtime::word_load(via, unsafe { word_at(r.word) });
            let mine = locked_own && self.find(&st, r.word).is_some();
            word::version(w) == r.version && (!word::is_locked(w, r.epoch) || mine)
        })
    }
}
