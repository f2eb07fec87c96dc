//! OneFile-LF's algorithm (Ramalhete, Correia, Felber, Cohen, *OneFile: A
//! Wait-Free Persistent Transactional Memory*, DSN'19: its lock-free PTM),
//! reimplemented here from the paper's description, as an in-run peer of
//! PSTM beside RomulusLog's ([`super::romulus`]): the published C++ cannot
//! be fetched on this machine, and its figures quoted in issue 14 were
//! measured on another day (`peers.rs`).
//!
//! The file (one per map, in the pool directory, mmapped shared):
//!
//! ```text
//! [ header: magic | heap bytes | ... | curTx (own line) ]    4 KiB
//! [ logs: two write-set buffers per thread slot          ]  2 × SLOTS × LOG_BYTES
//! [ heap: one tmtype {value, seq} of 16 bytes per word   ]  2 × heap bytes
//! ```
//!
//! Every heap word is a `tmtype` (`dcas`): a value and the sequence
//! number of the transaction that wrote it, changed only by a double-width
//! CAS that installs (value, seq) if the word's seq is older. `curTx` is
//! one word: the sequence number of the last committed transaction and the
//! log buffer (thread slot, buffer) that holds its write-set.
//!
//! An update transaction ([`OneFile::update`]) starts at `s`, the seq of
//! `curTx` (after helping apply that transaction if it is not yet
//! applied), and runs its closure: a load returns the transaction's own
//! store if it made one, else the word's value if the word's seq is at
//! most `s` (a newer one means a newer commit: the transaction restarts);
//! a store goes to the volatile write-set (`wset`). Commit:
//!
//! 1. the write-set is copied into the thread's next log buffer
//!    (`log`), pwb of its lines; the transaction `s` it started from is
//!    made durable too (pwb of its words, if this thread did not apply it
//!    itself); pfence;
//! 2. CAS `curTx` from `s` to `s + 1` naming this buffer (on failure the
//!    transaction restarts, helping the winner first);
//! 3. pwb of `curTx`; pfence: the transaction is durable (recovery
//!    re-applies the buffer `curTx` names);
//! 4. every entry applied with the DCAS rule at seq `s + 1`, pwb of each
//!    line (ordered by this thread's next fence 1 or by a helper's).
//!
//! Two fences per update commit; a read-only transaction reads `curTx`
//! once, validates every load against it, and stores and fences nothing.
//!
//! Keeps true: words are only ever overwritten by a newer seq, so applying
//! a write-set again (helpers, recovery) changes nothing; whenever `curTx`
//! names `s` durably, every transaction before `s` is durable in the heap
//! (step 1 of `s`) and `s`'s buffer holds its write-set, which no thread
//! overwrites until `s` is durable in the heap (`log`); a log buffer is
//! applied only if its header names `curTx` and its checksum matches.
//! Recovery at open ([`OneFile::open`]) re-applies the buffer `curTx`
//! names. Offsets are clamped into the heap.
//!
//! Simplified against the paper (docs/stm.md, "OneFile-LF as an in-run
//! peer"): lock-free, not wait-free (no operation announcement or
//! aggregation of other threads' requests); the pfence sits between the
//! CAS and the apply, and step 4's pwbs are fenced by the next commit,
//! which is why a thread keeps two log buffers; the allocator is ours
//! ([`super::wordheap::alloc`]); at most [`SLOTS`] threads.

mod dcas;
mod log;
mod wset;

use std::cell::{Cell, UnsafeCell};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use engram::pmem::Persister;
use engram::Durability;

use super::romulus::lock::{slot, SLOTS};
use super::wordheap::map::WordMap;
use super::wordheap::{alloc, create_file, map_shared, open_file, HeapError, Mem, Peer, Tx};
use dcas::Word;
use wset::WriteSet;

/// Bytes before the logs: the header, alone on its page.
const HEADER: u64 = 4096;
/// First header word: what the file is (the layout's version).
const MAGIC: u64 = u64::from_le_bytes(*b"ONEFLF01");
const H_MAGIC: u64 = 0;
const H_HEAP: u64 = 8;
/// `curTx`, on a line of its own.
const H_CURTX: u64 = 64;

/// `curTx` and log tags: `seq << 8 | buffer`, buffer = `2 * slot + b`.
const SEQ_SHIFT: u32 = 8;
fn seq_of(tag: u64) -> u64 {
    tag >> SEQ_SHIFT
}
fn buffer_of(tag: u64) -> usize {
    (tag & 0xff) as usize
}
const _: () = assert!(2 * SLOTS <= 1 << SEQ_SHIFT);

/// Why a OneFile file operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OfError {
    /// The file could not be created, sized or mapped.
    #[error("OneFile file: {0}")]
    Io(#[from] std::io::Error),
    /// The file is not a OneFile file of this layout.
    #[error("not a OneFile-LF file of layout ONEFLF01, or a damaged header: {0}")]
    NotOneFile(String),
    /// The heap or a log buffer has no room, or too many threads.
    #[error("OneFile: {0}")]
    Full(String),
    /// A fence failed (never in pmem mode).
    #[error("{0}")]
    Engram(#[from] engram::Error),
    /// A structure found its invariants broken, or a closure failed.
    #[error("{0}")]
    Broken(String),
}

impl From<HeapError> for OfError {
    fn from(e: HeapError) -> Self {
        match e {
            HeapError::Full(n) => OfError::Full(format!("heap of {n} bytes is full")),
            HeapError::Broken(s) => OfError::Broken(s),
        }
    }
}

/// A planted bug, for the tests that prove the crash tests can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plant {
    /// Step 1 skipped: the write-set never reaches the log, so a crash in
    /// step 4 leaves a half-applied transaction that recovery cannot
    /// finish.
    NoLog,
}

/// Where a test's transaction stops, as if the process died there (every
/// store made so far reaches the file: tmpfs keeps a dead process's
/// stores).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashAt {
    /// After step 1: logged and fenced, `curTx` not swapped.
    BeforeCas,
    /// In step 4: half of the entries applied.
    MidApply,
}

/// A thread slot's volatile state (only the slot's thread touches it).
#[derive(Default)]
struct Local {
    ws: WriteSet,
    /// A log buffer copied by a helper.
    copy: Vec<(u64, u64)>,
    /// Which of the slot's two buffers the next commit uses.
    next_buf: usize,
    /// The seq of this slot's last commit whose step-4 pwbs no fence has
    /// ordered yet (0: none), and the thread that issued them.
    unfenced: (u64, u64),
}

#[repr(align(128))]
struct Padded<T>(T);

thread_local! {
    /// An id of the calling thread, never reused (slots are).
    static THREAD: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

/// One OneFile file, open.
pub struct OneFile {
    base: *mut u8,
    map_len: usize,
    /// Bytes of the heap as the structures see it (8-byte words).
    heap: u64,
    pwb: Persister,
    /// Every transaction up to this seq is applied (volatile).
    visible: Padded<AtomicU64>,
    /// Every transaction up to this seq is durable in the heap (volatile).
    durable: Padded<AtomicU64>,
    locals: Box<[Padded<UnsafeCell<Local>>]>,
    plant: Option<Plant>,
}

// SAFETY: the mapping is shared memory, valid until `drop`; heap words,
// log buffers and `curTx` are only accessed atomically (`dcas`, `log`);
// a slot's `Local` is only touched by the thread that holds the slot.
unsafe impl Send for OneFile {}
// SAFETY: as for `Send`.
unsafe impl Sync for OneFile {}

impl OneFile {
    fn mapped(file: &std::fs::File, heap: u64) -> Result<Self, OfError> {
        if !std::arch::is_x86_feature_detected!("cmpxchg16b") {
            return Err(OfError::Broken("OneFile needs cmpxchg16b, which this CPU lacks".into()));
        }
        let map_len = HEADER + log::region() + 2 * heap;
        Ok(OneFile {
            base: map_shared(file, map_len)?,
            map_len: map_len as usize,
            heap,
            pwb: Persister::new(Durability::Pmem, None),
            visible: Padded(AtomicU64::new(0)),
            durable: Padded(AtomicU64::new(0)),
            locals: (0..SLOTS).map(|_| Padded(UnsafeCell::new(Local::default()))).collect(),
            plant: None,
        })
    }

    /// Arms a planted bug (tests).
    pub fn plant(&mut self, p: Plant) {
        self.plant = Some(p);
    }

    /// `curTx`'s sequence number: transactions committed since creation, plus one.
    pub fn seq(&self) -> u64 {
        seq_of(self.cur_tx().load(Ordering::Acquire))
    }

    // ---- memory -------------------------------------------------------

    fn header(&self, off: u64) -> &AtomicU64 {
        // SAFETY: an aligned word of the header page, inside the mapping;
        // only ever accessed atomically.
        unsafe { &*self.base.add(off as usize).cast::<AtomicU64>() }
    }

    fn cur_tx(&self) -> &AtomicU64 {
        self.header(H_CURTX)
    }

    /// The tmtype of heap word `off` (clamped into the heap, 8-aligned).
    #[inline(always)]
    fn word(&self, off: u64) -> &Word {
        let off = off.min(self.heap - 8) & !7;
        let at = HEADER + log::region() + 2 * off;
        // SAFETY: `at + 16 <= map_len`: a 16-aligned tmtype of the heap.
        unsafe { &*self.base.add(at as usize).cast::<Word>() }
    }

    /// Log buffer `b` (`2 * slot + which`).
    fn log(&self, b: usize) -> log::Buffer<'_> {
        // SAFETY: buffer `b < 2 * SLOTS` lies inside the log region.
        unsafe { log::Buffer::at(self.base.add((HEADER + log::region_offset(b)) as usize)) }
    }

    /// pwb of `len` bytes at `p` (inside the mapping).
    fn persist(&self, p: *const u8, len: usize) {
        // SAFETY: callers pass a range of the mapping.
        unsafe { self.pwb.flush(p, len) }
    }

    /// The calling thread's slot and its state.
    #[allow(clippy::mut_from_ref)]
    fn local(&self) -> Result<(usize, &mut Local), OfError> {
        let s = slot();
        if s >= SLOTS {
            return Err(OfError::Full(format!("more than {SLOTS} threads")));
        }
        // SAFETY: slot `s` belongs to the calling thread alone for its
        // lifetime (`romulus::lock::slot`), and no other borrow of its
        // `Local` is alive (transactions do not nest).
        Ok((s, unsafe { &mut *self.locals[s].0.get() }))
    }

    // ---- helping and recovery -----------------------------------------

    /// Applies every entry at `seq` (the DCAS rule), pwb of each line if
    /// `pwb`.
    fn apply(&self, entries: &[(u64, u64)], seq: u64, pwb: bool) {
        let mut last_line = u64::MAX;
        for &(off, v) in entries {
            let w = self.word(off);
            w.install(v, seq);
            let line = w.addr() as u64 / 64;
            if pwb && line != last_line {
                self.persist(w.addr(), 16);
                last_line = line;
            }
        }
    }

    /// Helps the transaction `cur` names: copies its write-set (if its
    /// buffer still holds it) and applies it, pwb of its lines if `pwb`.
    /// False if the buffer was reused: then `cur` is already durable.
    fn help(&self, cur: u64, copy: &mut Vec<(u64, u64)>, pwb: bool) -> bool {
        if !self.log(buffer_of(cur)).copy_if(cur, copy) {
            return false;
        }
        self.apply(copy, seq_of(cur), pwb);
        self.visible.0.fetch_max(seq_of(cur), Ordering::AcqRel);
        true
    }

    /// Re-applies the write-set `curTx` names, if its buffer is whole.
    fn recover(&self) -> Result<(), OfError> {
        let cur = self.cur_tx().load(Ordering::Acquire);
        let mut copy = Vec::new();
        if self.log(buffer_of(cur)).recoverable(cur, &mut copy) {
            self.apply(&copy, seq_of(cur), true);
            self.pwb.fence("onefile.recover")?;
        }
        self.visible.0.store(seq_of(cur), Ordering::Release);
        self.durable.0.store(seq_of(cur), Ordering::Release);
        Ok(())
    }

    // ---- transactions -------------------------------------------------

    /// `curTx` once every transaction up to it is applied (helping).
    fn begin(&self, copy: &mut Vec<(u64, u64)>) -> u64 {
        loop {
            let cur = self.cur_tx().load(Ordering::Acquire);
            if self.visible.0.load(Ordering::Acquire) >= seq_of(cur) {
                return cur;
            }
            // Not applied yet: help. (If its buffer was reused, it was
            // applied meanwhile: the next round sees it.)
            self.help(cur, copy, false);
        }
    }

    /// Steps 1-4 for the write-set of slot `s` started at `cur`; false if
    /// the CAS failed. With `crash`, stops where it says.
    fn commit(&self, s: usize, local: &mut Local, cur: u64, crash: Option<CrashPoint>) -> Result<bool, OfError> {
        let seq = seq_of(cur);
        if local.ws.len() > log::ENTRIES {
            return Err(OfError::Full(format!("a write-set of {} entries (the log holds {})", local.ws.len(), log::ENTRIES)));
        }
        let b = 2 * s + local.next_buf;
        local.next_buf ^= 1;
        let tag = (seq + 1) << SEQ_SHIFT | b as u64;
        // 1. the write-set into buffer b, pwb; `seq` durable in the heap.
        if self.plant != Some(Plant::NoLog) {
            let buf = self.log(b);
            buf.write(tag, local.ws.entries());
            self.persist(buf.addr(), buf.bytes(local.ws.len()));
        }
        let me = THREAD.with(|t| *t);
        let mine = local.unfenced == (seq, me);
        let mut helped = false;
        if !mine && self.durable.0.load(Ordering::Acquire) < seq {
            helped = self.help(cur, &mut local.copy, true);
        }
        self.pwb.fence("onefile.log")?;
        if mine || helped {
            self.durable.0.fetch_max(seq, Ordering::AcqRel);
        }
        if local.unfenced.1 == me && local.unfenced.0 != 0 {
            self.durable.0.fetch_max(local.unfenced.0, Ordering::AcqRel);
        }
        local.unfenced = (0, 0);
        if crash == Some(CrashPoint::BeforeCas) {
            return Ok(true);
        }
        // 2. CAS curTx.
        if self.cur_tx().compare_exchange(cur, tag, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Ok(false);
        }
        // 3. curTx durable: so is the transaction.
        self.persist(self.cur_tx().as_ptr().cast(), 8);
        self.pwb.fence("onefile.committed")?;
        // 4. apply, pwb (fenced by this thread's next step 1).
        let n = if crash == Some(CrashPoint::MidApply) { local.ws.len() / 2 } else { local.ws.len() };
        self.apply(&local.ws.entries()[..n], seq + 1, true);
        if crash.is_none() {
            self.visible.0.fetch_max(seq + 1, Ordering::AcqRel);
            local.unfenced = (seq + 1, me);
        }
        Ok(true)
    }

    /// As [`OneFile::update`] with one thread, but the process "dies" at
    /// `at` (the caller then drops this handle and reopens the file).
    #[cfg(test)]
    pub fn update_then_crash(&self, at: CrashAt, f: impl FnOnce(&mut WTx<'_>) -> Result<(), OfError>) -> Result<(), OfError> {
        let (s, local) = self.local()?;
        let cur = self.begin(&mut local.copy);
        local.ws.clear();
        let mut tx = WTx { of: self, seq: seq_of(cur), ws: &mut local.ws, aborted: Cell::new(false) };
        f(&mut tx)?;
        let point = match at {
            CrashAt::BeforeCas => CrashPoint::BeforeCas,
            CrashAt::MidApply => CrashPoint::MidApply,
        };
        assert!(self.commit(s, local, cur, Some(point))?, "one thread: the CAS cannot fail");
        Ok(())
    }
}

/// The benchmark's map in a OneFile file.
pub type OneFileMap = WordMap<OneFile>;

impl Peer for OneFile {
    const NAME: &'static str = "OneFile";
    type Error = OfError;
    type View<'a> = View<'a>;
    type Tx<'a> = WTx<'a>;

    /// A fresh file at `path` (overwriting an old one) with a heap of
    /// `heap` bytes, empty ([`alloc`]'s metadata zero but the bump pointer).
    fn create(path: &Path, heap: u64) -> Result<Self, OfError> {
        let heap = heap.max(alloc::DATA_START * 2).next_multiple_of(HEADER);
        let file = create_file(path, HEADER + log::region() + 2 * heap)?;
        let of = OneFile::mapped(&file, heap)?;
        of.word(alloc::BUMP).init(alloc::DATA_START);
        of.persist(of.word(0).addr(), 2 * alloc::DATA_START as usize);
        of.header(H_HEAP).store(heap, Ordering::Relaxed);
        of.header(H_CURTX).store(1 << SEQ_SHIFT, Ordering::Relaxed);
        of.persist(of.header(0).as_ptr().cast(), 128);
        of.pwb.fence("onefile.create")?;
        of.header(H_MAGIC).store(MAGIC, Ordering::Relaxed);
        of.persist(of.header(0).as_ptr().cast(), 8);
        of.pwb.fence("onefile.create_magic")?;
        of.visible.0.store(1, Ordering::Relaxed);
        of.durable.0.store(1, Ordering::Relaxed);
        Ok(of)
    }

    fn open(path: &Path) -> Result<Self, OfError> {
        let (file, len) = open_file(path)?;
        let fixed = HEADER + log::region();
        if len < fixed + 2 * HEADER || (len - fixed) % 2 != 0 {
            return Err(OfError::NotOneFile(format!("{} bytes", len)));
        }
        let of = OneFile::mapped(&file, (len - fixed) / 2)?;
        if of.header(H_MAGIC).load(Ordering::Relaxed) != MAGIC || of.header(H_HEAP).load(Ordering::Relaxed) != of.heap {
            return Err(OfError::NotOneFile(format!("{}", path.display())));
        }
        of.recover()?;
        Ok(of)
    }

    /// Restarts `f` until its loads are consistent (no store newer than
    /// the transaction's start).
    fn read<R>(&self, f: impl Fn(&View<'_>) -> R) -> Result<R, OfError> {
        let (_, local) = self.local()?;
        loop {
            let cur = self.begin(&mut local.copy);
            let v = View { of: self, seq: seq_of(cur), aborted: Cell::new(false) };
            let r = f(&v);
            if !v.aborted.get() {
                return Ok(r);
            }
        }
    }

    /// Runs `f` as an update transaction: committed if it returns `Ok`,
    /// nothing of it kept if it returns `Err`. `f` runs again each time
    /// the transaction restarts (a conflicting commit); its last run's
    /// result is returned.
    fn update<R>(&self, mut f: impl FnMut(&mut WTx<'_>) -> Result<R, OfError>) -> Result<R, OfError> {
        let (s, local) = self.local()?;
        loop {
            let cur = self.begin(&mut local.copy);
            local.ws.clear();
            let mut tx = WTx { of: self, seq: seq_of(cur), ws: &mut local.ws, aborted: Cell::new(false) };
            let r = f(&mut tx);
            if tx.aborted.get() {
                continue;
            }
            let r = r?;
            if local.ws.is_empty() || self.commit(s, local, cur, None)? {
                return Ok(r);
            }
        }
    }
}

/// Where [`OneFile::commit`] stops for a crash test.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CrashPoint {
    #[cfg_attr(not(test), allow(dead_code))]
    BeforeCas,
    #[cfg_attr(not(test), allow(dead_code))]
    MidApply,
}

impl Drop for OneFile {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `mapped`, unmapped once; `&mut self`
        // means no reference into it is alive.
        unsafe { libc::munmap(self.base.cast(), self.map_len) };
    }
}

/// A heap word as a transaction started at `seq` may read it: its value
/// if no newer transaction wrote it, else `None`.
#[inline(always)]
fn read_at(of: &OneFile, off: u64, seq: u64, aborted: &Cell<bool>) -> u64 {
    if aborted.get() {
        return 0;
    }
    match of.word(off).read_if_at_most(seq) {
        Some(v) => v,
        None => {
            // A newer commit: the transaction restarts; until its closure
            // returns, every load reads 0 (null), so every loop ends.
            aborted.set(true);
            0
        }
    }
}

/// A read-only transaction's view of the heap as of `curTx` = `seq`.
pub struct View<'a> {
    of: &'a OneFile,
    seq: u64,
    aborted: Cell<bool>,
}

impl Mem for View<'_> {
    #[inline(always)]
    fn load(&self, off: u64) -> u64 {
        read_at(self.of, off, self.seq, &self.aborted)
    }
    fn heap_bytes(&self) -> u64 {
        self.of.heap
    }
}

/// An update transaction started at `curTx` = `seq`.
pub struct WTx<'a> {
    of: &'a OneFile,
    seq: u64,
    ws: &'a mut WriteSet,
    aborted: Cell<bool>,
}

impl Mem for WTx<'_> {
    #[inline(always)]
    fn load(&self, off: u64) -> u64 {
        let off = off.min(self.of.heap - 8) & !7;
        match self.ws.get(off) {
            Some(v) => v,
            None => read_at(self.of, off, self.seq, &self.aborted),
        }
    }
    fn heap_bytes(&self) -> u64 {
        self.of.heap
    }
}

impl Tx for WTx<'_> {
    type Error = OfError;

    /// Records the store in the write-set (nothing reaches the heap
    /// before commit).
    #[inline]
    fn store(&mut self, off: u64, v: u64) -> Result<(), OfError> {
        if !self.aborted.get() {
            self.ws.put(off.min(self.of.heap - 8) & !7, v);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
