//! `PTVar` values of any size (issue 14): a value whose pool form is more
//! than `PTVAR_MAX_VALUE` (40) bytes, or aligned to more than 8, lives in a
//! *box*, a pool object of its own, and the variable's cell (a
//! `BoxCell<P>`: lock word and pointer) holds the box's address.
//!
//! - A write buffers the value; at commit (or when the transaction reads
//!   its own write) it is copied into a new box, an ordinary immutable copy:
//!   flushed before the commit fence and listed with its checksum in the
//!   redo record, so the commit keeps its one fence. The record carries the
//!   8-byte pointer as the cell's new value. An aborted attempt frees the
//!   box with its other allocations.
//! - A read is the seqlock read of the cell with the box copied inside it
//!   (word by word, atomic loads): a box freed and reused while a reader
//!   copies it is read torn but inside the mapping, and the re-check of the
//!   lock word then fails, so user code never sees the torn value.
//! - The old box is freed by the commit that replaces it, after its fence,
//!   when no redo record can still list it: recovery drops a record whose
//!   copies fail their checksums, so a box listed by a retained record must
//!   not be reused. The record that lists box B is the one of the commit
//!   that created B (commit number N of thread log L); it is harmless to
//!   drop once L's commit N + 1 has fenced (N's in-place values are durable
//!   then). [`BoxBook`] remembers (L, N) for every box created since the
//!   records were last cleared: a box not in it, or created by this
//!   thread's log, is freed at once; another log's box is deferred until
//!   that log has fenced again (checked by later commits that free boxes),
//!   and boxes still deferred when the records are cleared (online GC,
//!   clean close) are left to the GC, like every other unreachable object.
//!
//! Crash behaviour: frees are volatile (small slots) or take effect after
//! the commit's fence; after a crash the recovery GC rebuilds the heap from
//! what is reachable, so a box is never lost (the recovered cell points to
//! a box the replayed or in-place record made durable) nor leaked.

use super::pool_state::PoolCtx;
use super::tx::{Bytes, Kind, Pending, STx};
use super::{word_at, StmError, StmResult};
use crate::error::{Error, Result};
use crate::hash::FastMap;
use crate::pool::space::Space;
use crate::ptr::PPtr;
use crate::stm::persist::{CopyCx, Persist};
use crate::Persistent;
use std::mem::size_of;
use std::sync::atomic::Ordering;

/// Where the boxes created since the records were last cleared came from,
/// and replaced boxes waiting for their creator's next fence (per pool).
#[derive(Default)]
pub(crate) struct BoxBook {
    /// Box payload offset -> (creator's log offset, commit number).
    made: FastMap<u64, (u64, u64)>,
    /// Replaced boxes whose creating record may still be retained.
    deferred: Vec<(u64, u64, u64)>,
}

impl BoxBook {
    /// The records were cleared (quiesce): every box is free to go; those
    /// still deferred are unreachable, for the GC.
    pub(crate) fn clear(&mut self) {
        self.made.clear();
        self.deferred.clear();
    }
}

/// A buffered write of a boxed variable.
struct PendingBox<T>(T);

impl<T: Persist> Pending for PendingBox<T> {
    fn materialize(&self, cx: &mut CopyCx<'_>) -> Result<Bytes> {
        Ok(Bytes::of(&new_box(&self.0, cx)?))
    }
}

/// Copies `v` into a new box (an immutable copy of the commit).
fn new_box<T: Persist>(v: &T, cx: &mut CopyCx<'_>) -> Result<PPtr<T::P>> {
    let p = match v.plain() {
        Some(p) => p,
        None => v.persist(cx)?,
    };
    cx.alloc(p)
}

/// Copies the box at `at` into `buf` with atomic word loads; false if `at`
/// is not an object of at least `buf`'s size.
pub(super) fn copy_box(space: &Space, at: u64, buf: &mut [u64]) -> bool {
    let need = buf.len() as u64 * 8;
    if crate::alloc::locate(space, at).is_none_or(|loc| loc.capacity() < need) || !space.contains(at, need) {
        return false;
    }
    for (i, w) in buf.iter_mut().enumerate() {
        // SAFETY: [at, at + need) is inside one object's slot in the mapping
        // (checked above), `at` is 16-aligned (`locate`); pool memory is
        // only accessed atomically or by its private owner.
        *w = unsafe { word_at(at as usize + 8 * i) }.load(Ordering::Relaxed);
    }
    true
}

impl STx<'_> {
    /// Allocates a boxed variable's cell and its first box (`PTVar::new`).
    pub(crate) fn new_boxed_cell<T: Persist>(&self, init: &T) -> StmResult<u64> {
        let made = std::cell::Cell::new(0);
        let addr = self.new_cell_with(|cx| {
            let b = new_box(init, cx)?;
            made.set(b.addr());
            Ok(b)
        })?;
        let base = self.ctx()?.inner.space.base();
        let mut st = self.st.borrow_mut();
        st.new_boxes.push(made.get() - base);
        Ok(addr)
    }

    /// Reads a boxed variable: the value in the box its cell points to.
    pub(crate) fn read_boxed<P: Persistent>(&self, addr: u64) -> StmResult<P> {
        self.check_cell::<PPtr<P>>(addr, 8)?;
        let space = &self.ctx()?.inner.space;
        let mut buf = vec![0u64; size_of::<P>().div_ceil(8)];
        let (at, ok) = match self.own_write(addr as usize)? {
            // The transaction's own box: private until it commits.
            Some(b) => {
                let at = b.get::<u64>();
                (at, copy_box(space, at, &mut buf))
            }
            None => {
                let (mut at, mut ok) = (0, false);
                self.read_versioned(addr as usize, self.epoch(), || {
                    // SAFETY: check_cell proved [addr, addr + 16) is inside
                    // the mapping and addr 8-aligned.
                    at = unsafe { word_at(addr as usize + 8) }.load(Ordering::Relaxed);
                    ok = copy_box(space, at, &mut buf);
                })?;
                (at, ok)
            }
        };
        if !ok {
            return Err(StmError::Failed(Error::BadPointer { addr: at }));
        }
        // SAFETY: `buf` holds at least size_of::<P>() bytes of a box read
        // whole (stable word around it, or private); every bit pattern is a
        // valid P.
        Ok(unsafe { std::ptr::read_unaligned(buf.as_ptr() as *const P) })
    }

    /// Buffers a write of a boxed variable (boxed at commit).
    pub(crate) fn write_boxed<T: Persist>(&self, addr: u64, v: T) -> StmResult<()> {
        self.check_cell::<PPtr<T::P>>(addr, 8)?;
        let off = self.cell_offset(addr, 8)?;
        self.put(addr as usize, Kind::P { off, value: None, pending: Some(Box::new(PendingBox(v))), boxed: true });
        Ok(())
    }

    /// The payload offsets of the boxes this commit replaces (the write set
    /// is locked, so the cells' pointers are stable).
    pub(super) fn old_boxes(&self) -> Vec<u64> {
        let st = self.st.borrow();
        let base = self.ctx.as_ref().map_or(0, |c| c.inner.space.base());
        st.writes
            .iter()
            .filter(|w| matches!(w.kind, Kind::P { boxed: true, value: Some(_), .. }))
            // SAFETY: a boxed cell's value word, checked by write_boxed.
            .map(|w| unsafe { word_at(w.word + 8) }.load(Ordering::Relaxed).wrapping_sub(base))
            .collect()
    }

    /// After the commit (fenced and applied): records the boxes it created
    /// and frees the ones it replaced that no retained record can list.
    pub(super) fn settle_boxes(&self, old: &[u64]) {
        let Some(ctx) = self.ctx.as_ref() else { return };
        let base = ctx.inner.space.base();
        let (log, n) = {
            let l = ctx.log().lock();
            (l.log_off, l.commits.saturating_sub(1))
        };
        let mut free = Vec::new();
        {
            let st = self.st.borrow();
            let mut book = ctx.stm().boxes.lock();
            let new: Vec<u64> = st
                .writes
                .iter()
                .filter_map(|w| match &w.kind {
                    Kind::P { boxed: true, value: Some(b), .. } => Some(b.get::<u64>().wrapping_sub(base)),
                    _ => None,
                })
                .chain(st.new_boxes.iter().copied())
                .collect();
            let early = crate::failpoint::planted("stm.box_freed_early");
            for &o in old {
                // A box this very commit created (a cell made and written in
                // one transaction) is listed by this commit's record.
                let creator = if new.contains(&o) { Some((log, n)) } else { book.made.remove(&o) };
                match creator {
                    Some((l, c)) if (l != log || c == n) && !early => book.deferred.push((o, l, c)),
                    _ => free.push(o),
                }
            }
            for &b in &new {
                if !old.contains(&b) {
                    book.made.insert(b, (log, n));
                }
            }
            if !book.deferred.is_empty() {
                let fenced = fenced_logs(ctx);
                book.deferred.retain(|&(o, l, c)| {
                    let done = fenced.get(&l).is_some_and(|&k| k >= c + 2);
                    if done {
                        free.push(o);
                    }
                    !done
                });
            }
        }
        free_boxes(ctx, &free);
    }
}

/// Every thread log's commit count, by log offset (a log with count k has
/// fenced its commits below k - 1's successor: commit c's record is
/// harmless to drop once k >= c + 2).
fn fenced_logs(ctx: &PoolCtx<'_>) -> FastMap<u64, u64> {
    let logs = ctx.stm().logs.lock().clone();
    logs.iter()
        .map(|l| {
            let l = l.lock();
            (l.log_off, l.commits)
        })
        .collect()
}

fn free_boxes(ctx: &PoolCtx<'_>, offs: &[u64]) {
    let space = &ctx.inner.space;
    for &o in offs {
        if let Some(loc) = crate::alloc::locate(space, space.base() + o) {
            // A failed free leaves the box to the GC.
            let _ = ctx.inner.heap.free(space, ctx.cache(), loc);
        }
    }
}
