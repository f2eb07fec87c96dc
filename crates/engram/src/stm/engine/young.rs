//! One fence for commits that create transactional objects (issue 14):
//! the redo record carries the new objects' initial bytes ("init" entries),
//! and recovery writes them back, whole, before the record's values.
//!
//! Why that is sound. A new object M (a `PTVar` cell, a node with
//! `PTField`s) of commit C changes in place in later commits, so recovery
//! cannot check it by checksum, and what is on the media of M cannot tell
//! "C's fence never completed" from "a later commit changed M" (a freed
//! slot keeps arbitrary bytes). Writing M's initial bytes back blindly is
//! right in both cases, *provided every later commit that changed M is
//! replayed after it*: recovery replays retained records in timestamp
//! order, and a later commit C' can only change M after C's values were
//! visible, so wv(C') > wv(C). The danger is a C' whose record is gone
//! while C's is retained: C' (thread T') reused its log half, its change
//! durable in place, while C's thread T stayed idle. The rule here:
//!
//! - Each log half whose record carries inits is registered (its
//!   [`YoungRec`] kept in the log's slot for the half, `ThreadLog::young`,
//!   and counted in the pool's [`Young`]), from C's in-place stores (under
//!   T's log lock, so a helper sees them in T's unfenced list) until the
//!   fence of the commit that overwrites that half.
//! - Before a thread overwrites its half holding a record R of timestamp
//!   w, it checks whether R wrote a cell inside the objects of another
//!   log's registered record older than w (each registered record keeps
//!   the span `[lo, hi)` of its new objects; R's cell offsets are read
//!   back from the half itself, so the common path records nothing). Only
//!   then does it *help*: every registered record of another log older
//!   than w, oldest first across all logs, is cleared under its log's
//!   lock after that log's unfenced in-place values are flushed and
//!   fenced, and each clear is fenced before the next. A record R that
//!   wrote into no such object may go: no retained record writes R's
//!   change back. (Until 2026-12-02 a thread helped whenever another log
//!   had a registered record older than w, touched or not: 1.18 fences per
//!   update commit at two threads on the hash table; now helping needs a
//!   write into another thread's newest objects.)
//!   Then no record with new objects can be retained while a record of a
//!   later change to those objects is gone.
//! - Online GC and close clear every record (quiesce) and the map.
//!
//! Lock order: the pool's list of logs, then a log; a helper holds no
//! log of its own while it helps. Registering and unregistering take no
//! lock besides the log's own (held anyway): the records live in the
//! logs' slots, and only the count is shared.
//!
//! Crash behaviour: a crash at any point leaves either C's record with
//! M's bytes (replayed whole, then every retained later record) or no
//! record of C and M durable in place (C's in-place values, and M's flush,
//! made durable by T's next fence or by a helper's fence, before C's
//! record was overwritten or cleared).

use super::pool_state::{PoolCtx, ThreadLog};
use crate::error::Result;
use crate::stm::redo::{self, HALF};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A registered record: its timestamp and the span `[lo, hi)` (pool
/// offsets) of the new objects it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct YoungRec {
    pub(super) wv: u64,
    pub(super) lo: u64,
    pub(super) hi: u64,
}

/// The retained records that carry new objects, per pool: how many (the
/// records themselves are in their logs' slots, `ThreadLog::young`).
#[derive(Default)]
pub(crate) struct Young {
    /// Registered records (read without a lock on every commit).
    n: AtomicUsize,
}

/// A registered record of another log that a helper may have to clear.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Older {
    wv: u64,
    log_off: u64,
    h: usize,
    lo: u64,
    hi: u64,
}

impl Young {
    /// All records were cleared (quiesce; the caller empties the slots).
    pub(crate) fn clear(&self) {
        self.n.store(0, Ordering::Release);
    }

    /// Registers half `h` of `log` (its record `rec` carries new objects).
    /// The caller holds the log's lock.
    pub(super) fn register(&self, log: &mut ThreadLog, h: usize, rec: YoungRec) {
        if log.young[h].replace(rec).is_none() {
            self.n.fetch_add(1, Ordering::Release);
        }
    }

    /// Half `h` of `log` was overwritten and fenced, or cleared. The caller
    /// holds the log's lock.
    #[inline]
    pub(super) fn unregister(&self, log: &mut ThreadLog, h: usize) {
        if log.young[h].take().is_some() {
            self.n.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Registered records of logs other than `me` older than `w`, oldest
/// first: each log's slots read under its lock (the pool's list of logs
/// held, then one log at a time).
fn older_than(ctx: &PoolCtx<'_>, me: u64, w: u64) -> Vec<Older> {
    let mut v = Vec::new();
    for l in ctx.stm().logs.lock().iter() {
        let l = l.lock();
        if l.log_off == me {
            continue;
        }
        for (h, r) in l.young.iter().enumerate() {
            if let Some(r) = r.filter(|r| r.wv < w) {
                v.push(Older { wv: r.wv, log_off: l.log_off, h, lo: r.lo, hi: r.hi });
            }
        }
    }
    v.sort_unstable();
    v
}

/// The span `[lo, hi)` of the objects `(off, len)` a record carries.
pub(super) fn span_of(objects: impl Iterator<Item = (u64, u64)>) -> (u64, u64) {
    objects.fold((u64::MAX, 0), |(lo, hi), (off, len)| (lo.min(off), hi.max(off + len)))
}

/// Whether a log other than `log` (this thread's, locked by the caller)
/// has a registered record: the only case [`help_before_reuse`] can help.
/// One atomic load. A record registered after it cannot hold objects that
/// this thread's earlier records wrote into: they were unreachable until
/// after its registration.
#[inline]
pub(super) fn others_registered(ctx: &PoolCtx<'_>, log: &ThreadLog) -> bool {
    ctx.stm().young.n.load(Ordering::Acquire) > log.young.iter().filter(|y| y.is_some()).count()
}

/// Before this thread overwrites its next log half: if the record there
/// wrote into the new objects of another log's registered record older
/// than it, helps every such older record (see the module comment).
/// Takes and drops this thread's log lock; holds none while helping.
pub(super) fn help_before_reuse(ctx: &PoolCtx<'_>) -> Result<()> {
    let young = &ctx.stm().young;
    if young.n.load(Ordering::Acquire) == 0 || crate::failpoint::planted("stm.young_not_helped") {
        return Ok(());
    }
    let (me, h, w) = {
        let l = ctx.log().lock();
        let h = (l.commits % 2) as usize;
        (l.log_off, h, l.half_wv[h])
    };
    if w == 0 {
        return Ok(());
    }
    let older = older_than(ctx, me, w);
    if older.is_empty() {
        return Ok(());
    }
    // The record is read back from the half under this log's lock (a
    // helper may clear it, if it carries new objects itself: then it is
    // gone, and its helper kept the order).
    let boxes = older.iter().map(|o| (o.lo, o.hi));
    let touched = {
        let l = ctx.log().lock();
        l.half_wv[h] == w
            && (crate::failpoint::planted("stm.young_help_always")
                || redo::record_writes_into(&ctx.inner.space, me + h as u64 * HALF, boxes)?)
    };
    if !touched {
        return Ok(());
    }
    for o in older {
        help(ctx, o)?;
    }
    HELPS.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Clears `o` (another log's registered record), if still registered:
/// under its log's lock, that log's unfenced in-place values flushed and
/// fenced first (the record's own values among them: it was registered
/// before they were stored), then the clear, fenced before the next.
/// A record the log's thread has fenced but not yet applied is not
/// registered yet, and is left alone (nobody can reach its objects yet).
fn help(ctx: &PoolCtx<'_>, o: Older) -> Result<()> {
    let log = ctx.stm().logs.lock().iter().find(|l| l.lock().log_off == o.log_off).cloned();
    let Some(log) = log else { return Ok(()) };
    let mut log = log.lock();
    if log.young[o.h].is_none() || log.half_wv[o.h] != o.wv {
        return Ok(()); // its thread overwrote it meanwhile
    }
    let space = &ctx.inner.space;
    for &(off, len) in &log.unfenced {
        space.flush(off, len);
    }
    space.persist.fence(crate::fences::STM_HELP_VALUES)?;
    log.unfenced.clear();
    clear_half(space, &mut log, o.h)?;
    space.persist.fence(crate::fences::STM_HELP_CLEARED)?;
    ctx.stm().young.unregister(&mut log, o.h);
    Ok(())
}

/// Zeroes the magic of half `h` of `log` (flushed, not fenced).
fn clear_half(space: &crate::pool::space::Space, log: &mut ThreadLog, h: usize) -> Result<()> {
    space.write(log.log_off + h as u64 * HALF, &0u32)?;
    space.flush(log.log_off + h as u64 * HALF, 4);
    log.half_wv[h] = 0;
    Ok(())
}

static HELPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many times a committing thread has cleared other threads'
/// records with new objects before overwriting a record that changed
/// their objects (process-wide; each cleared record cost two fences).
pub fn young_helps() -> u64 {
    HELPS.load(Ordering::Relaxed)
}
