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
//!   the span `[lo, hi)` of its new objects). R's commit decides it, once
//!   its reads are validated, from its write set and the records the
//!   other logs *publish* ([`Published`]: read without a lock), and marks
//!   the half (`ThreadLog::touched`); the reuse of an unmarked half looks
//!   at nobody. A record R could write into was registered before R read
//!   the link to its objects (registration precedes the in-place stores
//!   that make them reachable), so R's commit sees it published, or
//!   already cleared. Only for a marked half does the thread *help*:
//!   every registered record of another log older than w, oldest first
//!   across all logs, is cleared under its log's lock after that log's
//!   unfenced in-place values are flushed and fenced, and each clear is
//!   fenced before the next. A record R that wrote into no such object may
//!   go: no retained record writes R's change back. (Until 2026-12-02 a
//!   thread helped whenever another log had a registered record older than
//!   w, touched or not: 1.18 fences per update commit at two threads on
//!   the hash table; until 2026-12-03 every reuse, while any record was
//!   registered, locked the list of logs and every log to find out, and
//!   each registration wrote one shared count: the lines both threads
//!   wrote on every insert, issue 14's two-thread scaling.)
//!   Then no record with new objects can be retained while a record of a
//!   later change to those objects is gone.
//! - Online GC and close clear every record (quiesce) and the map.
//!
//! Lock order: the pool's list of logs, then a log; a helper holds no
//! log of its own while it helps. Registering and unregistering take no
//! lock besides the log's own (held anyway): the records live in the
//! logs' slots and in their [`Published`] lines, written by one writer at
//! a time (the log's lock holder); a log's first registration lists its
//! line in the pool's [`Young`] (once per log).
//!
//! Crash behaviour: a crash at any point leaves either C's record with
//! M's bytes (replayed whole, then every retained later record) or no
//! record of C and M durable in place (C's in-place values, and M's flush,
//! made durable by T's next fence or by a helper's fence, before C's
//! record was overwritten or cleared).

use super::pool_state::{PoolCtx, ThreadLog};
use crate::error::Result;
use crate::stm::redo::{self, HALF};
use parking_lot::Mutex;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

/// A registered record: its timestamp and the span `[lo, hi)` (pool
/// offsets) of the new objects it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct YoungRec {
    pub(super) wv: u64,
    pub(super) lo: u64,
    pub(super) hi: u64,
}

/// The logs that have registered a record with new objects, per pool: each
/// one's [`Published`] line, listed at its first registration and never
/// removed (a log outlives its thread: the next thread adopts it). On a
/// line of its own: committers read `gen` on every commit, and nothing
/// writes it after the logs are linked.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct Young {
    listed: Mutex<Vec<Arc<Published>>>,
    /// Bumped when `listed` grows (each commit compares its copy's).
    gen: AtomicU64,
}

/// What one log publishes of its registered records, for other threads'
/// commits to read without its lock: per half, `(wv, lo, hi)` (`wv` 0:
/// none). A seqlock (`seq` odd while a write is under way), written only
/// under the log's lock, so by one writer at a time; on a cache line of
/// its own, written only when its log registers or drops a record.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct Published {
    seq: AtomicU64,
    slots: [[AtomicU64; 3]; 2],
}

impl Published {
    /// Half `h`'s record is `r` now. The caller holds the log's lock.
    fn set(&self, h: usize, r: Option<YoungRec>) {
        let r = r.unwrap_or(YoungRec { wv: 0, lo: 0, hi: 0 });
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        for (a, v) in self.slots[h].iter().zip([r.wv, r.lo, r.hi]) {
            a.store(v, Ordering::Relaxed);
        }
        self.seq.store(s + 2, Ordering::Release);
    }

    /// Both halves' records, as one consistent snapshot.
    #[inline]
    fn get(&self) -> [YoungRec; 2] {
        let load = |h: usize, i: usize| self.slots[h][i].load(Ordering::Relaxed);
        loop {
            let s = self.seq.load(Ordering::Acquire);
            let r0 = YoungRec { wv: load(0, 0), lo: load(0, 1), hi: load(0, 2) };
            let r1 = YoungRec { wv: load(1, 0), lo: load(1, 1), hi: load(1, 2) };
            fence(Ordering::Acquire);
            if s % 2 == 0 && self.seq.load(Ordering::Relaxed) == s {
                return [r0, r1];
            }
            std::hint::spin_loop();
        }
    }
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
    /// Registers half `h` of `log` (its record `rec` carries new objects).
    /// The caller holds the log's lock.
    pub(super) fn register(&self, log: &mut ThreadLog, h: usize, rec: YoungRec) {
        log.young[h] = Some(rec);
        if !log.listed {
            self.listed.lock().push(log.published.clone());
            self.gen.fetch_add(1, Ordering::Release);
            log.listed = true;
        }
        log.published.set(h, Some(rec));
    }

    /// Half `h` of `log` was overwritten and fenced, or cleared. The caller
    /// holds the log's lock.
    #[inline]
    pub(super) fn unregister(&self, log: &mut ThreadLog, h: usize) {
        if log.young[h].take().is_some() {
            log.published.set(h, None);
        }
    }

    /// Whether a record of timestamp `w` that writes the cells `cells`
    /// (pool offsets), being committed from `log` (locked by the caller)
    /// after its reads were validated, writes into the new objects of a
    /// record older than `w` that another log has registered: its half's
    /// reuse must help first (the module comment). Reads the other logs'
    /// [`Published`] lines, and the list of them only when it grew.
    pub(super) fn touches_older(&self, log: &mut ThreadLog, w: u64, cells: impl Iterator<Item = u64> + Clone) -> bool {
        if crate::failpoint::planted("stm.young_touch_missed") {
            return false;
        }
        let gen = self.gen.load(Ordering::Acquire);
        if log.others.0 != gen {
            let mine = &log.published;
            let others = self.listed.lock().iter().filter(|p| !Arc::ptr_eq(p, mine)).cloned().collect();
            log.others = (gen, others);
        }
        let always = crate::failpoint::planted("stm.young_help_always");
        for p in &log.others.1 {
            for r in p.get() {
                if r.wv != 0 && r.wv < w && (always || cells.clone().any(|off| off >= r.lo && off < r.hi)) {
                    return true;
                }
            }
        }
        false
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

/// Whether the record in the half `log` (this thread's, locked by the
/// caller) overwrites next wrote into another log's older new objects
/// (its commit marked it: [`Young::touches_older`]): the only case
/// [`help_before_reuse`] can help.
#[inline]
pub(super) fn must_help(log: &ThreadLog) -> bool {
    log.touched[(log.commits % 2) as usize]
}

/// Before this thread overwrites its next log half: if the record there
/// wrote into the new objects of another log's registered record older
/// than it, helps every such older record (see the module comment).
/// Takes and drops this thread's log lock; holds none while helping.
pub(super) fn help_before_reuse(ctx: &PoolCtx<'_>) -> Result<()> {
    if crate::failpoint::planted("stm.young_not_helped") {
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
    super::commit::flush_unfenced(space, &log);
    space.persist.fence(crate::fences::STM_HELP_VALUES)?;
    log.fenced();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader of a [`Published`] line never sees one half's `wv` with
    /// another record's span, however the writer's updates interleave (a
    /// torn read could let a commit miss a record it wrote into).
    #[test]
    fn published_records_are_read_whole() {
        let p = Arc::new(Published::default());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (p, stop) = (p.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut wv = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    let h = (wv % 2) as usize;
                    p.set(h, (wv % 3 != 0).then_some(YoungRec { wv, lo: wv * 10, hi: wv * 10 + 5 }));
                    wv += 1;
                }
            })
        };
        let mut seen = 0;
        for _ in 0..200_000 {
            for r in p.get() {
                assert!(r == YoungRec { wv: 0, lo: 0, hi: 0 } || (r.lo == r.wv * 10 && r.hi == r.wv * 10 + 5), "torn: {r:?}");
                seen += (r.wv != 0) as u64;
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        assert!(seen > 0, "the reader never saw a record");
    }

    /// A commit's test: a record of another log older than the commit,
    /// whose span holds one of the commit's cells, marks it; a younger
    /// record, a span beside the cells, or the commit's own log's record
    /// does not.
    #[test]
    fn touches_older_needs_an_older_record_of_another_log_around_a_cell() {
        let young = Young::default();
        let (mut mine, mut other) = (ThreadLog::default(), ThreadLog::default());
        young.register(&mut other, 0, YoungRec { wv: 5, lo: 100, hi: 200 });
        young.register(&mut mine, 1, YoungRec { wv: 3, lo: 300, hi: 400 });
        let cells = |c: &'static [u64]| c.iter().copied();
        assert!(young.touches_older(&mut mine, 6, cells(&[50, 150])));
        assert!(!young.touches_older(&mut mine, 5, cells(&[150])), "not older");
        assert!(!young.touches_older(&mut mine, 6, cells(&[200, 99])), "outside the span");
        assert!(!young.touches_older(&mut mine, 6, cells(&[350])), "the commit's own log");
        young.unregister(&mut other, 0);
        assert!(!young.touches_older(&mut mine, 6, cells(&[150])), "cleared");
    }
}
