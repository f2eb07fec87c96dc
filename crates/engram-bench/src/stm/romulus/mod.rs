//! RomulusLog's algorithm (Correia, Felber, Ramalhete, *Romulus: Efficient
//! Algorithms for Persistent Transactional Memory*, SPAA'18), reimplemented
//! here from the paper's description, as an in-run peer of PSTM: the
//! published C++ cannot be fetched on this machine, and its figures quoted
//! in issue 14 were measured on another day (`peers.rs`).
//!
//! The file (one per map, in the pool directory, mmapped shared):
//!
//! ```text
//! [ header: magic | state | half size ]  4 KiB
//! [ main: the program's data           ]  half
//! [ back: a copy of main's last commit ]  half
//! ```
//!
//! Programs read and write `main` only, as plain loads and stores of 8-byte
//! words at offsets into the half (so links survive copying between
//! halves). Readers and writers synchronise with a C-RW-WP lock
//! ([`lock`]). An update transaction ([`Romulus::update`]):
//!
//! 1. state = MUTATING, pwb, pfence (at the transaction's first store, so
//!    an update that stores nothing costs no fence);
//! 2. every store: plain store to `main`, pwb of its line, its range
//!    appended to a volatile log;
//! 3. pfence; state = COPYING; pwb; pfence;
//! 4. every logged range copied `main` → `back`, pwb of each line; pfence;
//! 5. state = IDLE; pwb (the next transaction's first fence orders it).
//!
//! pwb is a CLWB (or CLFLUSHOPT/CLFLUSH) and pfence an SFENCE, both through
//! Engram's persistence seam ([`engram::pmem::Persister`] in
//! `Durability::Pmem`), so the benchmark's flush and fence counters see
//! them. Four fences per update commit, none per read-only one.
//!
//! Keeps true: whenever the state word is IDLE or MUTATING, `back` holds a
//! consistent image (the last committed one); whenever it is COPYING,
//! `main` does. Recovery at open ([`Romulus::open`]): MUTATING → `back`
//! copied over `main`; COPYING → `main` copied over `back`; then IDLE. A
//! transaction whose closure fails is rolled back the same way (its logged
//! ranges copied `back` → `main`). Offsets are clamped into the half, so a
//! corrupt link reads or writes garbage inside the mapping, never outside.
//!
//! Writers are flat-combined (`combine`): the holder of the write lock
//! runs every operation other writers published, in one transaction.
//!
//! Simplified against the paper (docs/stm.md, "RomulusLog as an in-run
//! peer"): the header keeps no used size (recovery copies up to the bump
//! pointer of the half it copies from, [`alloc`]); the allocator is a
//! simple one of ours, not the paper's.

mod combine;
pub mod lock;

use super::wordheap::map::WordMap;
use super::wordheap::{alloc, create_file, open_file, HeapError, Mem, Peer, Tx};

use std::path::Path;

use engram::pmem::Persister;
use engram::Durability;

/// Bytes before `main`: the header, alone on its page.
const HEADER: u64 = 4096;
/// First header word: what the file is.
const MAGIC: u64 = u64::from_le_bytes(*b"ROMLOG01");
/// Header word offsets.
const H_MAGIC: u64 = 0;
const H_STATE: u64 = 8;
const H_HALF: u64 = 16;

/// The persistent state word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// `main` and `back` are equal (both consistent).
    Idle = 0,
    /// `main` is being changed; `back` is consistent.
    Mutating = 1,
    /// `back` is being brought up to `main`; `main` is consistent.
    Copying = 2,
}

impl State {
    fn of(w: u64) -> Option<State> {
        [State::Idle, State::Mutating, State::Copying].into_iter().find(|s| *s as u64 == w)
    }
}

/// Which half.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Half {
    Main,
    Back,
}

/// Why a RomulusLog file operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RomError {
    /// The file could not be created, sized or mapped.
    #[error("RomulusLog file: {0}")]
    Io(#[from] std::io::Error),
    /// The file is not a RomulusLog file of this layout, or its state word
    /// is unknown.
    #[error("not a RomulusLog file of layout ROMLOG01, or a damaged header: {0}")]
    NotRomulus(String),
    /// `main` has no room for the allocation.
    #[error("RomulusLog half of {0} bytes is full")]
    Full(u64),
    /// A fence failed (never in pmem mode).
    #[error("{0}")]
    Engram(#[from] engram::Error),
    /// A structure found its invariants broken.
    #[error("{0}")]
    Broken(String),
}

impl From<HeapError> for RomError {
    fn from(e: HeapError) -> Self {
        match e {
            HeapError::Full(n) => RomError::Full(n),
            HeapError::Broken(s) => RomError::Broken(s),
        }
    }
}

/// A planted bug, for the tests that prove the crash tests can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plant {
    /// Step 1 skipped: the state stays IDLE while `main` changes, so a
    /// crash in the middle leaves a torn `main` that recovery keeps.
    NoMutatingState,
}

/// Where a test's transaction stops, as if the process died there (every
/// store made so far reaches the file: tmpfs keeps a dead process's
/// stores).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashAt {
    /// After step 2: state MUTATING, `main` changed.
    AfterStores,
    /// In step 4: state COPYING, half of the logged ranges copied.
    MidCopy,
}

/// One RomulusLog file, open.
pub struct Romulus {
    base: *mut u8,
    map_len: usize,
    half: u64,
    pwb: Persister,
    lock: lock::CRwWp,
    /// Ranges (offset, length) the writer stored to; only the writer (the
    /// holder of the write lock) touches it.
    log: std::cell::UnsafeCell<Vec<(u64, u64)>>,
    /// Writers' published operations (flat combining).
    fc: combine::Combiner,
    plant: Option<Plant>,
}

// SAFETY: the mapping is shared memory, valid until `drop`; `log` and the
// combiner's batch are only touched by the holder of the write lock, a
// published request only by its owner and that holder (`combine.rs`), and
// every access to the halves is ordered by the lock (writers alone,
// readers with no writer).
unsafe impl Send for Romulus {}
// SAFETY: as for `Send`.
unsafe impl Sync for Romulus {}

impl Romulus {
    fn mapped(file: &std::fs::File, half: u64) -> Result<Self, RomError> {
        let map_len = HEADER + 2 * half;
        Ok(Romulus {
            base: super::wordheap::map_shared(file, map_len)?,
            map_len: map_len as usize,
            half,
            pwb: Persister::new(Durability::Pmem, None),
            lock: lock::CRwWp::default(),
            log: Default::default(),
            fc: Default::default(),
            plant: None,
        })
    }

    /// Arms a planted bug (tests).
    pub fn plant(&mut self, p: Plant) {
        self.plant = Some(p);
    }

    /// Bytes of one half.
    pub fn half(&self) -> u64 {
        self.half
    }

    /// The persistent state word.
    pub fn state(&self) -> Option<State> {
        State::of(self.header_load(H_STATE))
    }

    // ---- memory -------------------------------------------------------

    /// The address of word `off` (clamped into the half, 8-aligned) of `h`.
    #[inline(always)]
    fn word(&self, h: Half, off: u64) -> *mut u64 {
        let off = off.min(self.half - 8) & !7;
        let at = HEADER + off + if h == Half::Back { self.half } else { 0 };
        // SAFETY: `at + 8 <= HEADER + 2 * half == map_len`: inside the mapping.
        unsafe { self.base.add(at as usize).cast() }
    }

    #[inline(always)]
    fn load_in(&self, h: Half, off: u64) -> u64 {
        // SAFETY: an aligned word of the mapping (`word`); no store to it
        // races: writers hold the lock alone, readers hold it with no writer.
        unsafe { self.word(h, off).read() }
    }

    #[inline(always)]
    fn store_in(&self, h: Half, off: u64, v: u64) {
        // SAFETY: as in `load_in`; only the writer (or recovery, alone)
        // stores.
        unsafe { self.word(h, off).write(v) }
    }

    fn header_load(&self, off: u64) -> u64 {
        // SAFETY: a header word, inside the mapping's first page.
        unsafe { self.base.add(off as usize).cast::<u64>().read() }
    }

    fn header_store(&self, off: u64, v: u64) {
        // SAFETY: as in `header_load`; header stores are the writer's or
        // recovery's, alone.
        unsafe { self.base.add(off as usize).cast::<u64>().write(v) };
        // SAFETY: the header word is inside the mapping.
        unsafe { self.pwb.flush(self.base.add(off as usize), 8) };
    }

    /// pwb of `len` bytes at `off` of `h` (clamped into the half).
    fn persist_range(&self, h: Half, off: u64, len: u64) {
        let off = off.min(self.half);
        let len = len.min(self.half - off);
        if len > 0 {
            // SAFETY: the range lies inside half `h` of the mapping.
            unsafe { self.pwb.flush(self.word(h, off).cast::<u8>(), len as usize) };
        }
    }

    fn pfence(&self, what: &'static str) -> Result<(), RomError> {
        Ok(self.pwb.fence(what)?)
    }

    /// Copies `len` bytes at `off` from half `from` to the other, pwb of
    /// the destination's lines.
    fn copy_range(&self, from: Half, off: u64, len: u64) {
        let to = if from == Half::Main { Half::Back } else { Half::Main };
        let off = off.min(self.half);
        let len = len.min(self.half - off);
        if len == 0 {
            return;
        }
        // SAFETY: both ranges lie inside their halves (clamped above), the
        // halves do not overlap, and only the writer or recovery copies.
        unsafe { std::ptr::copy_nonoverlapping(self.word(from, off).cast::<u8>(), self.word(to, off).cast::<u8>(), len as usize) };
        self.persist_range(to, off, len);
    }

    /// Writes an empty heap's metadata into half `h` (a fresh file, before
    /// anyone reads it).
    fn format(&self, h: Half) {
        for off in (0..alloc::DATA_START).step_by(8) {
            self.store_in(h, off, 0);
        }
        self.store_in(h, alloc::BUMP, alloc::DATA_START);
    }

    /// Bytes of half `h` in use: up to its bump pointer.
    fn used(&self, h: Half) -> u64 {
        self.load_in(h, alloc::BUMP).clamp(alloc::DATA_START, self.half)
    }

    // ---- recovery -----------------------------------------------------

    /// Brings the halves back to one consistent image after a crash.
    fn recover(&self) -> Result<(), RomError> {
        let from = match self.state() {
            Some(State::Idle) => return Ok(()),
            Some(State::Mutating) => Half::Back,
            Some(State::Copying) => Half::Main,
            None => return Err(RomError::NotRomulus(format!("state word {}", self.header_load(H_STATE)))),
        };
        // 1. the consistent half's used bytes over the other's (what lies
        // beyond its bump pointer is unreachable from it).
        self.copy_range(from, 0, self.used(from));
        self.pfence("romulus.recover_copy")?;
        // 2. both halves equal: IDLE.
        self.header_store(H_STATE, State::Idle as u64);
        self.pfence("romulus.recover_idle")
    }

    // ---- transactions -------------------------------------------------

    /// As [`Romulus::update`], but the process "dies" at `at`: the
    /// transaction is left where it is (the caller then drops this handle
    /// and reopens the file).
    #[cfg(test)]
    pub fn update_then_crash(&self, at: CrashAt, f: impl FnOnce(&mut WTx<'_>) -> Result<(), RomError>) -> Result<(), RomError> {
        self.lock.write_lock();
        let _g = WriteGuard(self);
        // SAFETY: as in `update`.
        let log = unsafe { &mut *self.log.get() };
        log.clear();
        let mut tx = WTx { rom: self, log, begun: false };
        f(&mut tx)?;
        if at == CrashAt::MidCopy {
            tx.commit_steps(tx.log.len() / 2)?;
        }
        Ok(())
    }
}

/// The benchmark's map in a RomulusLog file.
pub type RomulusMap = WordMap<Romulus>;

impl Peer for Romulus {
    const NAME: &'static str = "RomulusLog";
    type Error = RomError;
    type View<'a> = View<'a>;
    type Tx<'a> = WTx<'a>;

    /// A fresh file at `path` (overwriting an old one) with halves of
    /// `half` bytes, holding an empty heap (`Romulus::format`).
    fn create(path: &Path, half: u64) -> Result<Self, RomError> {
        let half = half.max(alloc::DATA_START * 2).next_multiple_of(HEADER);
        let file = create_file(path, HEADER + 2 * half)?;
        let rom = Romulus::mapped(&file, half)?;
        rom.format(Half::Main);
        rom.format(Half::Back);
        rom.persist_range(Half::Main, 0, alloc::DATA_START);
        rom.persist_range(Half::Back, 0, alloc::DATA_START);
        rom.header_store(H_HALF, half);
        rom.header_store(H_STATE, State::Idle as u64);
        rom.pfence("romulus.create")?;
        rom.header_store(H_MAGIC, MAGIC);
        rom.pfence("romulus.create_magic")?;
        Ok(rom)
    }

    fn open(path: &Path) -> Result<Self, RomError> {
        let (file, len) = open_file(path)?;
        if len < HEADER * 3 {
            return Err(RomError::NotRomulus(format!("{} bytes", len)));
        }
        let rom = Romulus::mapped(&file, (len - HEADER) / 2)?;
        if rom.header_load(H_MAGIC) != MAGIC || rom.header_load(H_HALF) != rom.half || len != HEADER + 2 * rom.half {
            return Err(RomError::NotRomulus(format!("{}", path.display())));
        }
        rom.recover()?;
        Ok(rom)
    }

    /// Runs `f` once, under the read lock; never fails.
    #[inline]
    fn read<R>(&self, f: impl Fn(&View<'_>) -> R) -> Result<R, RomError> {
        let slot = self.lock.read_lock();
        let _g = ReadGuard(self, slot);
        Ok(f(&View(self)))
    }

    /// Runs `f` as an update transaction, flat-combined
    /// (`combine`): committed if it returns `Ok` (possibly in one
    /// transaction with other threads' operations), rolled back if it
    /// returns `Err`. `f` may run more than once (again when another
    /// operation of its batch failed); its last run's result is returned.
    fn update<R>(&self, mut f: impl FnMut(&mut WTx<'_>) -> Result<R, RomError>) -> Result<R, RomError> {
        let mut out = None;
        let mut op = |tx: &mut WTx<'_>| {
            out = Some(f(tx)?);
            Ok(())
        };
        let req = combine::Request::new(&mut op);
        self.combine(&req)?;
        out.ok_or_else(|| RomError::Broken("a combined RomulusLog operation did not run".into()))
    }
}

impl Drop for Romulus {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `mapped`, unmapped once; `&mut self`
        // means no reference into it is alive.
        unsafe { libc::munmap(self.base.cast(), self.map_len) };
    }
}

struct ReadGuard<'a>(&'a Romulus, usize);

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        self.0.lock.read_unlock(self.1);
    }
}

struct WriteGuard<'a>(&'a Romulus);

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        self.0.lock.write_unlock();
    }
}

/// A read-only transaction's view of `main` (the read lock is held).
pub struct View<'a>(&'a Romulus);

impl Mem for View<'_> {
    #[inline(always)]
    fn load(&self, off: u64) -> u64 {
        self.0.load_in(Half::Main, off)
    }
    fn heap_bytes(&self) -> u64 {
        self.0.half
    }
}

/// An update transaction (the write lock is held).
pub struct WTx<'a> {
    rom: &'a Romulus,
    log: &'a mut Vec<(u64, u64)>,
    begun: bool,
}

impl Mem for WTx<'_> {
    #[inline(always)]
    fn load(&self, off: u64) -> u64 {
        self.rom.load_in(Half::Main, off)
    }
    fn heap_bytes(&self) -> u64 {
        self.rom.half
    }
}

impl Tx for WTx<'_> {
    type Error = RomError;

    /// Step 2: stores `v` at `off` of `main`, pwb of its line, the range
    /// logged (merged with the last range when they touch).
    #[inline]
    fn store(&mut self, off: u64, v: u64) -> Result<(), RomError> {
        if !self.begun {
            self.begin()?;
        }
        let off = off.min(self.rom.half - 8) & !7;
        self.rom.store_in(Half::Main, off, v);
        self.rom.persist_range(Half::Main, off, 8);
        match self.log.last_mut() {
            Some((o, l)) if off >= *o && off <= *o + *l => *l = (*l).max(off + 8 - *o),
            _ => self.log.push((off, 8)),
        }
        Ok(())
    }
}

impl WTx<'_> {
    /// Step 1, at the first store: state = MUTATING, pwb, pfence (which
    /// also orders the previous transaction's IDLE).
    fn begin(&mut self) -> Result<(), RomError> {
        self.begun = true;
        if self.rom.plant == Some(Plant::NoMutatingState) {
            return Ok(());
        }
        self.rom.header_store(H_STATE, State::Mutating as u64);
        self.rom.pfence("romulus.mutating")
    }

    /// Steps 3-5.
    fn commit(&mut self) -> Result<(), RomError> {
        self.commit_steps(self.log.len())?;
        // 5. IDLE; its pwb is ordered by the next transaction's first fence.
        self.rom.header_store(H_STATE, State::Idle as u64);
        Ok(())
    }

    /// Steps 3 and 4, copying the first `ranges` logged ranges.
    fn commit_steps(&mut self, ranges: usize) -> Result<(), RomError> {
        // 3. main's stores durable before COPYING, COPYING before back changes.
        self.rom.pfence("romulus.stores")?;
        self.rom.header_store(H_STATE, State::Copying as u64);
        self.rom.pfence("romulus.copying")?;
        // 4. main → back for every logged range.
        for &(off, len) in &self.log[..ranges] {
            self.rom.copy_range(Half::Main, off, len);
        }
        self.rom.pfence("romulus.copied")
    }

    /// Undoes the transaction's stores from `back`, then IDLE.
    fn roll_back(&mut self) -> Result<(), RomError> {
        for &(off, len) in self.log.iter() {
            self.rom.copy_range(Half::Back, off, len);
        }
        self.rom.pfence("romulus.rolled_back")?;
        self.rom.header_store(H_STATE, State::Idle as u64);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
