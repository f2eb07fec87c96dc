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
//! - Each log half whose record carries inits is registered in the pool's
//!   [`Young`] map as (log, half) -> wv, from C's in-place stores (under
//!   T's log lock, so a helper sees them in T's unfenced list) until the
//!   fence of the commit that overwrites that half.
//! - Before a thread overwrites its half holding a record of timestamp w,
//!   it *helps* every other log with a registered record older than w:
//!   under that log's lock it flushes the log's unfenced in-place values,
//!   fences, and clears its registered records, older first, each clear
//!   fenced (two or three fences, only when another thread created objects
//!   and made no commit since; the common case costs one atomic load).
//!   Then no record of T can be retained while a record of a later change
//!   to T's objects is gone.
//! - Online GC and close clear every record (quiesce) and the map.
//!
//! Lock order: a log, then the map; the map is never held while a log is
//! taken, and a helper holds no log of its own while it helps.
//!
//! Crash behaviour: a crash at any point leaves either C's record with
//! M's bytes (replayed whole, then every retained later record) or no
//! record of C and M durable in place (C's in-place values, and M's flush,
//! made durable by T's next fence or by a helper's fence, before C's
//! record was overwritten or cleared).

use super::pool_state::{PoolCtx, ThreadLog};
use crate::error::Result;
use crate::hash::FastMap;
use crate::stm::redo::HALF;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The retained records that carry new objects, per pool.
#[derive(Default)]
pub(crate) struct Young {
    /// (log offset, half) -> the record's timestamp.
    map: Mutex<FastMap<(u64, usize), u64>>,
    /// Entries in `map` (read without the lock on every commit).
    n: AtomicUsize,
}

impl Young {
    /// All records were cleared (quiesce).
    pub(crate) fn clear(&self) {
        self.map.lock().clear();
        self.n.store(0, Ordering::Release);
    }

    /// Registers half `h` of `log` (its record, of timestamp `wv`, carries
    /// new objects). The caller holds the log's lock.
    pub(super) fn register(&self, log: &mut ThreadLog, h: usize, wv: u64) {
        let mut m = self.map.lock();
        if m.insert((log.log_off, h), wv).is_none() {
            self.n.fetch_add(1, Ordering::Release);
        }
        log.young[h] = true;
    }

    /// Half `h` of `log` was overwritten and fenced, or cleared. The caller
    /// holds the log's lock.
    pub(super) fn unregister(&self, log: &mut ThreadLog, h: usize) {
        if !std::mem::take(&mut log.young[h]) {
            return;
        }
        if self.map.lock().remove(&(log.log_off, h)).is_some() {
            self.n.fetch_sub(1, Ordering::Release);
        }
    }

    /// Logs other than `me` with a registered record older than `w`.
    fn older_than(&self, me: u64, w: u64) -> Vec<u64> {
        if self.n.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let mut v: Vec<u64> = self.map.lock().iter().filter(|(&(l, _), &wv)| l != me && wv < w).map(|(&(l, _), _)| l).collect();
        v.dedup();
        v
    }
}

/// Before this thread overwrites its next log half: helps every other log
/// whose retained record with new objects is older than the one overwritten.
/// Takes and drops this thread's log lock; holds none while helping.
pub(super) fn help_before_reuse(ctx: &PoolCtx<'_>) -> Result<()> {
    let young = &ctx.stm().young;
    if young.n.load(Ordering::Acquire) == 0 || crate::failpoint::planted("stm.young_not_helped") {
        return Ok(());
    }
    let (me, w) = {
        let l = ctx.log().lock();
        (l.log_off, l.half_wv[(l.commits % 2) as usize])
    };
    if w == 0 {
        return Ok(());
    }
    for other in young.older_than(me, w) {
        let log = ctx.stm().logs.lock().iter().find(|l| l.lock().log_off == other).cloned();
        if let Some(log) = log {
            help(ctx, &mut log.lock())?;
        }
    }
    Ok(())
}

/// Makes `log`'s in-place values durable, then clears its registered
/// records, the older first, each clear fenced before the next: a record
/// with new objects must never be retained while a later one (which may
/// have changed them) is gone, not even for a moment. Only registered
/// halves are cleared: a record the log's thread has fenced but not yet
/// applied (its values not in place, so not in `unfenced`) is not
/// registered yet, and must stay (nobody can reach its objects yet).
fn help(ctx: &PoolCtx<'_>, log: &mut ThreadLog) -> Result<()> {
    let mut halves: Vec<usize> = (0..2).filter(|&h| log.young[h]).collect();
    if halves.is_empty() {
        return Ok(()); // it fenced and overwrote them meanwhile
    }
    halves.sort_by_key(|&h| log.half_wv[h]);
    let space = &ctx.inner.space;
    for &(off, len) in &log.unfenced {
        space.flush(off, len);
    }
    space.persist.fence("another thread's in-place STM values before its records with new objects are cleared")?;
    log.unfenced.clear();
    for h in halves {
        clear_half(space, log, h)?;
        space.persist.fence("records with new objects cleared before a later record is overwritten")?;
        ctx.stm().young.unregister(log, h);
    }
    HELPS.fetch_add(1, Ordering::Relaxed);
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

/// How many times a committing thread has cleared another thread's
/// records with new objects (process-wide; each cost two fences).
pub fn young_helps() -> u64 {
    HELPS.load(Ordering::Relaxed)
}
