//! The update protocol shared by thunks, streams and the trie memo: a value
//! is *staged* (copied into fresh pool objects), made durable with one
//! fence, then *linked* by one 8-byte compare-and-swap of an indirection
//! word from 0 to the copy's address.
//!
//! 1. [`stage`]: copy the value (and what it reaches) with the STM's
//!    copy-on-commit machinery ([`Persist`]); nothing links the copies yet.
//! 2. [`make_durable`]: flush the copies, then the fence [`FENCE_RESULT`]:
//!    the copies, their headers and the allocator metadata that makes them
//!    objects (flushed when it was written) are on the media.
//! 3. [`link`]: CAS the word 0 → copy, flush it (no fence: the thread's
//!    next fence makes it durable; losing it only re-evaluates).
//!
//! Invariants: an indirection word is 0 or the address of a complete,
//! durable, immutable copy; it changes at most once. The caller holds the
//! pool's GC gate shared (a [`super::Cx`]) from staging to linking, so the
//! unlinked copies are not collected meanwhile; a copy whose link loses a
//! race is freed ([`discard`]). On a crash: an unlinked copy is garbage for
//! recovery's GC; a lost link leaves the thunk unevaluated.

use crate::alloc::cache::CacheCell;
use crate::error::Result;
use crate::pool::PoolInner;
use crate::stm::{CopyCx, Persist};
use crate::Persistent;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The fence of step 2 (named, so a crash test can drop it).
pub const FENCE_RESULT: &str = crate::fences::LAZY_RESULT;

/// Makes the calling thread's last links durable now (one fence), instead
/// of at its next update or the clean close. Call it on the
/// thread that forced: a fence orders that thread's flushes.
pub fn sync(pool: &crate::Pool) -> Result<()> {
    pool.inner().space.persist.fence(crate::fences::LAZY_SYNC)
}

/// Counts kept by the calling thread since it started (take deltas).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LazyStats {
    /// Indirection words linked (thunk updates, memo entries, trie nodes
    /// linked together with an entry count once).
    pub updates: u64,
    /// Bytes of the copies linked (object headers included).
    pub bytes_copied: u64,
    /// Links that lost a race to another thread (their copy was freed).
    pub lost_races: u64,
}

thread_local! {
    static STATS: Cell<LazyStats> = const { Cell::new(LazyStats { updates: 0, bytes_copied: 0, lost_races: 0 }) };
}

/// The calling thread's [`LazyStats`].
pub fn stats() -> LazyStats {
    STATS.with(Cell::get)
}

fn count(f: impl FnOnce(&mut LazyStats)) {
    STATS.with(|c| {
        let mut s = c.get();
        f(&mut s);
        c.set(s);
    });
}

/// Copies made for one update, not yet linked.
pub(crate) struct Staged<'p> {
    inner: &'p PoolInner,
    cache: Arc<CacheCell>,
    made: Vec<crate::stm::persist::Made>,
}

/// Step 1: copies `v` into the pool, boxed; returns the staging and the
/// address of the boxed `T::P`.
pub(crate) fn stage<'p, T: Persist>(inner: &'p PoolInner, v: &T) -> Result<(Staged<'p>, u64)> {
    // Staged copies and the link set no region cards (pool/deferred.rs).
    inner.before_unregioned_writes()?;
    let mut s = Staged { inner, cache: inner.heap.cache(), made: Vec::new() };
    let r = s.with_cx(|cx| {
        let p = v.persist(cx)?;
        cx.alloc(p).map(|b| b.addr())
    });
    r.map(|addr| (s, addr))
}

impl<'p> Staged<'p> {
    /// Runs `f` with a copy context whose objects join this staging.
    pub(crate) fn with_cx<R>(&mut self, f: impl FnOnce(&mut CopyCx<'_>) -> Result<R>) -> Result<R> {
        let mut cx = CopyCx::new(self.inner, &self.cache);
        let r = f(&mut cx);
        self.made.append(&mut cx.made);
        if r.is_err() {
            self.discard();
        }
        r
    }

    /// Allocates an array (a trie node) in this staging.
    pub(crate) fn alloc_slice<N: Persistent>(&mut self, items: &[N]) -> Result<u64> {
        self.with_cx(|cx| cx.alloc_slice(items).map(|p| p.addr()))
    }

    /// Bytes staged so far.
    fn bytes(&self) -> u64 {
        self.made.iter().map(|m| m.len).sum()
    }

    /// 2. Flushes every staged object, then the one fence.
    pub(crate) fn make_durable(&self) -> Result<()> {
        make_durable(self.inner, &self.made)
    }

    /// Step 3: links `target` into the indirection word at `word`;
    /// `Ok(Err(current))` if the word was no longer 0 (nothing linked).
    fn link(&self, word: u64, target: u64) -> Result<std::result::Result<(), u64>> {
        if let Err(cur) = link(self.inner, word, target)? {
            return Ok(Err(cur));
        }
        let bytes = self.bytes();
        count(|s| {
            s.updates += 1;
            s.bytes_copied += bytes;
        });
        Ok(Ok(()))
    }

    /// Steps 2 and 3: makes the staging durable and links `target` into
    /// `word`. `Ok(None)` when linked; `Ok(Some(current))` when another
    /// thread linked `current` first (the staging is freed).
    pub(crate) fn commit(mut self, word: u64, target: u64) -> Result<Option<u64>> {
        if let Err(e) = self.make_durable() {
            self.discard();
            return Err(e);
        }
        match self.link(word, target) {
            Ok(Ok(())) => Ok(None),
            Ok(Err(cur)) => {
                self.lost();
                Ok(Some(cur))
            }
            Err(e) => {
                self.discard();
                Err(e)
            }
        }
    }

    /// Step 2 alone, for a caller that links by other means (an STM
    /// commit, [`Staged::linked`]). The staging is freed on failure.
    pub(crate) fn durable(&mut self) -> Result<()> {
        let r = self.make_durable();
        if r.is_err() {
            self.discard();
        }
        r
    }

    /// Counts an update the caller linked itself (after [`Staged::durable`]).
    pub(crate) fn linked(self) {
        let bytes = self.bytes();
        count(|s| {
            s.updates += 1;
            s.bytes_copied += bytes;
        });
    }

    /// Frees every staged object (never linked).
    pub(crate) fn discard(&mut self) {
        for m in self.made.drain(..) {
            let _ = self.inner.heap.free(&self.inner.space, &self.cache, m.loc);
        }
    }

    /// Frees the staged objects after a lost race.
    pub(crate) fn lost(mut self) {
        count(|s| s.lost_races += 1);
        self.discard();
    }
}

/// 2. Flushes `made`, then fences once.
fn make_durable(inner: &PoolInner, made: &[crate::stm::persist::Made]) -> Result<()> {
    let space = &inner.space;
    for m in made {
        space.flush(m.off, m.len);
    }
    space.persist.fence(FENCE_RESULT)
}

/// The indirection word at absolute address `word`.
fn word_at(inner: &PoolInner, word: u64) -> Result<&AtomicU64> {
    if word % 8 != 0 || !inner.space.contains(word, 8) || word < inner.space.base() + crate::format::HEAP_OFF {
        return Err(crate::Error::BadPointer { addr: word });
    }
    // SAFETY: an 8-aligned word inside the live mapping (checked); the
    // mapping outlives `inner`, and pool words are only accessed atomically
    // or by single-threaded recovery.
    Ok(unsafe { &*(word as *const AtomicU64) })
}

/// Loads an indirection word (acquire: the copy it points to is visible).
pub(crate) fn load(inner: &PoolInner, word: u64) -> Result<u64> {
    Ok(word_at(inner, word)?.load(Ordering::Acquire))
}

/// Step 3: CAS 0 → `target` at `word`, traced and flushed;
/// `Ok(Err(current))` when the word was not 0.
fn link(inner: &PoolInner, word: u64, target: u64) -> Result<std::result::Result<(), u64>> {
    let w = word_at(inner, word)?;
    let space = &inner.space;
    if let Some(t) = space.persist.tracer() {
        t.before_store(word, 8);
    }
    if let Err(cur) = w.compare_exchange(0, target, Ordering::AcqRel, Ordering::Acquire) {
        return Ok(Err(cur));
    }
    space.traced(word, 8);
    space.flush(word - space.base(), 8);
    Ok(Ok(()))
}
