//! The emulated HTM backend: a transaction that really runs (loads see
//! committed memory, stores are buffered and published atomically at commit)
//! but aborts the way RTM does, on a configurable, seeded schedule — so every
//! fallback path above it is exercised on machines without RTM.
//!
//! Abort causes it produces:
//! - **capacity**: more distinct cache lines read than `read_lines`, or
//!   written than `write_lines` (RTM tracks writes in L1, reads further out);
//! - **conflict, real**: a per-stripe version table (a cache line hashes to
//!   one of [`STRIPES`] versioned locks; odd = being written). A load records
//!   its stripe's version; any later change of a recorded stripe (another
//!   emulated commit, or a non-transactional store through [`Emu::nt_store`])
//!   aborts the transaction at its next access, `check` or commit — like the
//!   eager conflict detection of real HTM, so a zombie is caught at its next
//!   access to shared memory;
//! - **conflict, random**: each access aborts with probability
//!   `conflict_ppm` / 10^6 (with the retry hint, as RTM reports conflicts);
//! - **forced**: statuses queued with [`Emu::inject`] abort the next
//!   transactions at commit, after their body ran (explicit, nested, debug,
//!   anything);
//! - **explicit**: `HwTx::abort(code)`; **nested**: an abort inside
//!   `HwTx::nest`, or nesting deeper than `max_nest`.
//!
//! Invariants: a stripe's version only grows; it is odd exactly while one
//! writer (an emulated commit, or `nt_store`) holds it. A commit locks every
//! stripe it writes (CAS even -> odd, giving up on a held one: no waiting, so
//! no deadlock), validates every stripe it read, writes, then releases; so
//! emulated commits are atomic to emulated transactions and to [`Emu::nt_load`].
//! Deterministic under a seed for a single thread (each transaction's random
//! stream is derived from the seed and the transaction's number).
//!
//! Crash behaviour: none; volatile memory only.

use super::abort::{Abort, CAPACITY, CONFLICT, NESTED, RETRY};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::Arc;

/// Versioned locks that cache lines hash to (per backend).
pub const STRIPES: usize = 4096;

fn stripe_of(addr: usize) -> usize {
    let line = (addr >> 6) as u64;
    (line.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize % STRIPES
}

fn lock_stripe(versions: &[AtomicU64], s: usize) -> u64 {
    loop {
        let v = versions[s].load(Acquire);
        if v & 1 == 0 && versions[s].compare_exchange_weak(v, v + 1, AcqRel, Relaxed).is_ok() {
            return v;
        }
        std::hint::spin_loop();
        std::thread::yield_now();
    }
}

/// The schedule of an emulated backend.
#[derive(Clone, Debug)]
pub struct EmuConfig {
    /// Seed of the random schedule.
    pub seed: u64,
    /// Distinct cache lines a transaction may read before a capacity abort.
    pub read_lines: usize,
    /// Distinct cache lines a transaction may write before a capacity abort.
    pub write_lines: usize,
    /// Probability, per access, of a spurious conflict abort, in ppm.
    pub conflict_ppm: u32,
    /// Nesting depth beyond which `nest` aborts (RTM's is 7 on Skylake).
    pub max_nest: u32,
}

impl Default for EmuConfig {
    fn default() -> Self {
        EmuConfig { seed: 1, read_lines: 4096, write_lines: 512, conflict_ppm: 0, max_nest: 7 }
    }
}

/// An emulated HTM: its schedule and the queue of forced aborts.
/// Each backend has its own stripe table, so independent runtimes (and
/// tests) do not conflict with each other.
#[derive(Debug)]
pub struct Emu {
    cfg: EmuConfig,
    forced: Mutex<VecDeque<Abort>>,
    txs: AtomicU64,
    versions: Box<[AtomicU64]>,
    /// Bumped by every emulated commit and non-transactional store: a
    /// transaction re-validates its read stripes only when this moved.
    writes: AtomicU64,
}

impl Emu {
    /// A backend with schedule `cfg`.
    pub fn new(cfg: EmuConfig) -> Arc<Emu> {
        let versions = (0..STRIPES).map(|_| AtomicU64::new(0)).collect();
        Arc::new(Emu { cfg, forced: Mutex::new(VecDeque::new()), txs: AtomicU64::new(0), versions, writes: AtomicU64::new(0) })
    }
    /// A non-transactional load that is atomic with respect to emulated commits
    /// (waits out a stripe being written).
    pub fn nt_load(&self, w: &AtomicU64) -> u64 {
        let s = stripe_of(w as *const _ as usize);
        loop {
            let v1 = self.versions[s].load(Acquire);
            if v1 & 1 == 0 {
                let x = w.load(SeqCst);
                if self.versions[s].load(Acquire) == v1 {
                    return x;
                }
            }
            std::hint::spin_loop();
        }
    }

    /// A non-transactional store: bumps the line's stripe so emulated
    /// transactions that read or will commit over it see a conflict.
    pub fn nt_store(&self, w: &AtomicU64, x: u64) {
        let s = stripe_of(w as *const _ as usize);
        let v = lock_stripe(&self.versions, s);
        w.store(x, SeqCst);
        self.versions[s].store(v + 2, Release);
        self.writes.fetch_add(1, SeqCst);
    }

    /// A non-transactional compare-and-swap, visible as a write to emulated
    /// transactions when it succeeds.
    pub fn nt_cas(&self, w: &AtomicU64, old: u64, new: u64) -> bool {
        let s = stripe_of(w as *const _ as usize);
        let v = lock_stripe(&self.versions, s);
        let ok = w.compare_exchange(old, new, SeqCst, SeqCst).is_ok();
        self.versions[s].store(if ok { v + 2 } else { v }, Release);
        if ok {
            self.writes.fetch_add(1, SeqCst);
        }
        ok
    }

    /// Its schedule.
    pub fn config(&self) -> &EmuConfig {
        &self.cfg
    }
    /// The next `statuses.len()` transactions to reach commit abort with
    /// these statuses instead (in order, whichever thread they run on).
    pub fn inject(&self, statuses: impl IntoIterator<Item = Abort>) {
        self.forced.lock().extend(statuses);
    }
    /// Forced aborts not yet delivered.
    pub fn pending(&self) -> usize {
        self.forced.lock().len()
    }
    /// Starts a transaction.
    pub(super) fn begin(self: &Arc<Self>) -> EmuTx {
        let n = self.txs.fetch_add(1, Relaxed);
        EmuTx {
            emu: self.clone(),
            rng: splitmix(self.cfg.seed ^ n.wrapping_mul(0xD1B5_4A32_D192_ED03)),
            sets: SPARE.with(|c| c.borrow_mut().take()).unwrap_or_default(),
            seen: self.writes.load(SeqCst),
            depth: 0,
            doomed: None,
        }
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A multiplicative hash for word and line addresses (SipHash would cost
/// more than the rest of an emulated access).
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|&b| self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01B3));
    }
    fn write_usize(&mut self, x: usize) {
        self.0 = (x as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        // Fold the high bits down: the table indexes by the low ones.
        self.0 ^ (self.0 >> 29)
    }
}

type Fast = BuildHasherDefault<AddrHasher>;

/// A transaction's sets; kept per thread between transactions, so an
/// emulated transaction allocates nothing once warm.
#[derive(Debug, Default)]
struct Sets {
    /// Stripe -> version when first read.
    reads: HashMap<usize, u64, Fast>,
    /// Lines read (capacity).
    rlines: HashSet<usize, Fast>,
    /// Word address -> buffered value.
    writes: HashMap<usize, u64, Fast>,
    /// Lines written (capacity).
    wlines: HashSet<usize, Fast>,
}

thread_local! {
    static SPARE: RefCell<Option<Sets>> = const { RefCell::new(None) };
}

/// One emulated transaction: recorded stripe versions, footprint, and the
/// write buffer (address -> value).
#[derive(Debug)]
pub struct EmuTx {
    emu: Arc<Emu>,
    rng: u64,
    sets: Sets,
    seen: u64,
    depth: u32,
    /// The first abort reported: real hardware aborts asynchronously, so a
    /// body that ignores an `Err` must not go on to commit.
    doomed: Option<Abort>,
}

impl Drop for EmuTx {
    fn drop(&mut self) {
        let mut sets = std::mem::take(&mut self.sets);
        sets.reads.clear();
        sets.rlines.clear();
        sets.writes.clear();
        sets.wlines.clear();
        SPARE.with(|c| *c.borrow_mut() = Some(sets));
    }
}

fn conflict() -> Abort {
    Abort(CONFLICT | RETRY)
}

impl EmuTx {
    /// Records the first abort; every later operation reports it.
    fn doom<T>(&mut self, r: Result<T, Abort>) -> Result<T, Abort> {
        if let Some(a) = self.doomed {
            return Err(a);
        }
        if let Err(a) = &r {
            self.doomed = Some(*a);
        }
        r
    }

    /// Re-validates the recorded stripes if any write happened since the
    /// last validation.
    pub(super) fn validate(&mut self) -> Result<(), Abort> {
        let r = if self.doomed.is_some() { Ok(()) } else { self.validate_inner() };
        self.doom(r)
    }

    /// A transactional load of `w`.
    pub(super) fn load(&mut self, w: &AtomicU64) -> Result<u64, Abort> {
        let r = if self.doomed.is_some() { Ok(0) } else { self.load_inner(w) };
        self.doom(r)
    }

    /// A transactional (buffered) store to `w`.
    pub(super) fn store(&mut self, w: &AtomicU64, x: u64) -> Result<(), Abort> {
        let r = if self.doomed.is_some() { Ok(()) } else { self.store_inner(w, x) };
        self.doom(r)
    }

    /// Enters a nested transaction (flattened, as RTM does).
    pub(super) fn enter(&mut self) -> Result<(), Abort> {
        let r = if self.doomed.is_some() { Ok(()) } else { self.enter_inner() };
        self.doom(r)
    }

    fn roll(&mut self) -> Result<(), Abort> {
        let ppm = self.emu.cfg.conflict_ppm;
        if ppm == 0 {
            return Ok(());
        }
        self.rng = splitmix(self.rng);
        if self.rng % 1_000_000 < u64::from(ppm) {
            return Err(conflict());
        }
        Ok(())
    }

    /// Re-validates the recorded stripes if any write happened since the
    /// last validation.
    fn validate_inner(&mut self) -> Result<(), Abort> {
        let now = self.emu.writes.load(SeqCst);
        if now == self.seen {
            return Ok(());
        }
        for (&s, &v) in &self.sets.reads {
            if self.emu.versions[s].load(Acquire) != v {
                return Err(conflict());
            }
        }
        self.seen = now;
        Ok(())
    }

    /// A transactional load of `w`.
    fn load_inner(&mut self, w: &AtomicU64) -> Result<u64, Abort> {
        self.roll()?;
        let addr = w as *const _ as usize;
        if let Some(&x) = self.sets.writes.get(&addr) {
            return Ok(x);
        }
        if self.sets.rlines.insert(addr >> 6) && self.sets.rlines.len() > self.emu.cfg.read_lines {
            return Err(Abort(CAPACITY));
        }
        let s = stripe_of(addr);
        let v1 = self.emu.versions[s].load(Acquire);
        let x = w.load(SeqCst);
        if v1 & 1 != 0 || self.emu.versions[s].load(Acquire) != v1 || *self.sets.reads.entry(s).or_insert(v1) != v1 {
            return Err(conflict());
        }
        self.validate_inner()?;
        Ok(x)
    }

    /// A transactional (buffered) store to `w`.
    fn store_inner(&mut self, w: &AtomicU64, x: u64) -> Result<(), Abort> {
        self.roll()?;
        let addr = w as *const _ as usize;
        if self.sets.wlines.insert(addr >> 6) && self.sets.wlines.len() > self.emu.cfg.write_lines {
            return Err(Abort(CAPACITY));
        }
        self.sets.writes.insert(addr, x);
        self.validate_inner()
    }

    /// Enters a nested transaction (flattened, as RTM does).
    fn enter_inner(&mut self) -> Result<(), Abort> {
        self.depth += 1;
        if self.depth > self.emu.cfg.max_nest {
            return Err(Abort(CAPACITY | NESTED));
        }
        Ok(())
    }

    /// Leaves a nested transaction.
    pub(super) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Commits: a forced abort if one is queued, else lock the written
    /// stripes, validate the read ones, publish the buffer, release.
    pub(super) fn commit(self) -> Result<(), Abort> {
        if let Some(a) = self.doomed {
            return Err(a);
        }
        if let Some(a) = self.emu.forced.lock().pop_front() {
            return Err(a);
        }
        let mut ws: Vec<usize> = self.sets.writes.keys().map(|&a| stripe_of(a)).collect();
        ws.sort_unstable();
        ws.dedup();
        let mut held: Vec<(usize, u64)> = Vec::with_capacity(ws.len());
        let versions = &self.emu.versions;
        let release = |held: &[(usize, u64)], bump: u64| {
            for &(s, v) in held {
                versions[s].store(v + bump, Release);
            }
        };
        for &s in &ws {
            let v = self.emu.versions[s].load(Acquire);
            if v & 1 != 0 || self.emu.versions[s].compare_exchange(v, v + 1, AcqRel, Relaxed).is_err() {
                release(&held, 0);
                return Err(conflict());
            }
            held.push((s, v));
        }
        // The write stripes held before the read stripes are checked, and a
        // non-transactional store (`nt_store`: the coarse lock's word) is
        // followed by a SeqCst fence before its writer loads a word this
        // commit publishes: store-buffering, so both sides fence. Either
        // this commit sees the store and aborts, or the writer sees the
        // held stripe and `nt_load` waits for the publication.
        std::sync::atomic::fence(SeqCst);
        let ok = self.sets.reads.iter().all(|(&s, &v)| match held.binary_search_by_key(&s, |h| h.0) {
            Ok(i) => held[i].1 == v,
            Err(_) => self.emu.versions[s].load(Acquire) == v,
        });
        if !ok {
            release(&held, 0);
            return Err(conflict());
        }
        for (&a, &x) in &self.sets.writes {
            // SAFETY: `a` came from a `&AtomicU64` the caller stored through
            // within this transaction; the hybrid runtime keeps every
            // variable a transaction touched borrowed until it commits.
            unsafe { &*(a as *const AtomicU64) }.store(x, SeqCst);
        }
        release(&held, 2);
        if !held.is_empty() {
            self.emu.writes.fetch_add(1, SeqCst);
        }
        Ok(())
    }

    /// Lines read and written so far.
    pub fn footprint(&self) -> (usize, usize) {
        (self.sets.rlines.len(), self.sets.wlines.len())
    }
}
