//! A volatile hybrid TM runtime after Yates & Scott (PPoPP'19), over its own
//! transactional words ([`HVar`]), with the STM's interface: [`Runtime::atomically`],
//! [`Tx::retry`], [`Tx::or_else`]. The prototype the next session merges into
//! `crate::stm` (docs/hybrid.md has the plan).
//!
//! Three levels, tried in order ([`Mode::Hybrid`]):
//! 1. **all hardware**: the body runs in one hardware transaction ([`super::HwTx`]);
//!    the fallback lock is read only at commit (*lazy subscription*), or at
//!    begin ([`Subscription::Early`]). Attempts: [`Policy::hw_attempts`]
//!    (two by default, as in the paper); an abort without the retry hint
//!    (capacity) or an explicit one (retry, user error) goes down at once;
//! 2. **software body, hardware commit**: reads are logged with their values,
//!    writes buffered; the commit validates the values and publishes the
//!    writes inside one short hardware transaction that *elides* the commit
//!    lock (reads it, finds it free). Attempts: [`Policy::commit_attempts`]
//!    (proportional to threads by default);
//! 3. **commit lock**: the same software transaction commits holding the
//!    global commit lock (value-based validation, then in-place writes).
//!    A transaction that keeps failing validation takes the lock for its
//!    whole body ([`Policy::serial_after`]).
//!
//! Invariants:
//! - every commit that writes bumps `commits` (inside its hardware
//!   transaction, or under the lock); software reads re-validate every
//!   logged value whenever `commits` moved or the lock is held, so a
//!   software body never sees an inconsistent state (opacity, as NOrec);
//! - a hardware body may (lazy subscription): a lock holder's writes are not
//!   atomic. It is contained: every access goes through [`super::HwTx`] (the
//!   emulated backend validates the read lines on each access and `check`;
//!   RTM aborts on the conflicting write itself), [`Tx::check`] on loop
//!   back-edges subscribes to the lock every [`Policy::zombie_checks`]
//!   calls (and reads every [`Policy::zombie_reads`]), and the commit reads
//!   the lock, so a zombie aborts, never commits and never loops forever in
//!   a loop that checks or reads;
//! - `retry` blocks on the wake-up list ([`super::wakeup`]) with the read
//!   set as a 64-bit Bloom filter (or precise); every writing commit scans
//!   the list after its writes are visible and wakes outside any lock.
//!
//! [`treap::Treap`], [`rbtree::RbTree`] and [`trie::HashTrie`] are the
//! paper's treap, red-black tree and HAMT (without bitmap compression) with
//! their fields embedded in the nodes, written for zombie containment (bounds-checked indices, `check`
//! on every step, bounded depth).
//!
//! Crash behaviour: none; volatile words only. No counter is written inside
//! a hardware transaction (counters are bumped after the outcome).

pub mod rbtree;
pub mod treap;
pub mod trie;
mod tx;

pub use tx::{Tx, TxError, TxResult};

use super::abort::{code, Cause};
use super::bloom::WatchMode;
use super::wakeup::{WakeList, WakeStats};
use super::Htm;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering::*};

/// A value that fits a transactional word.
pub trait Word: Copy {
    /// The word.
    fn into_word(self) -> u64;
    /// Back from the word.
    fn from_word(w: u64) -> Self;
}

macro_rules! int_word {
    ($($t:ty)*) => {$(
        impl Word for $t {
            fn into_word(self) -> u64 { self as u64 }
            fn from_word(w: u64) -> Self { w as $t }
        }
    )*};
}
int_word!(u64 i64 u32 i32 u16 i16 u8 i8 usize isize);

impl Word for bool {
    fn into_word(self) -> u64 {
        u64::from(self)
    }
    fn from_word(w: u64) -> Self {
        w != 0
    }
}

impl Word for f64 {
    fn into_word(self) -> u64 {
        self.to_bits()
    }
    fn from_word(w: u64) -> Self {
        f64::from_bits(w)
    }
}

/// A transactional variable of one word (the hybrid's `TVar`).
#[derive(Debug, Default)]
pub struct HVar<T: Word> {
    word: AtomicU64,
    _t: PhantomData<T>,
}

impl<T: Word> HVar<T> {
    /// A variable holding `x`.
    pub fn new(x: T) -> Self {
        HVar { word: AtomicU64::new(x.into_word()), _t: PhantomData }
    }
    /// The value, read outside any transaction (one word: atomic).
    pub fn get(&self) -> T {
        T::from_word(self.word.load(SeqCst))
    }
    fn addr(&self) -> usize {
        &self.word as *const AtomicU64 as usize
    }
}

/// Which levels a runtime uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Levels 1, 2, 3 (the paper's Hybrid).
    Hybrid,
    /// Levels 2, 3: software body, hardware commit eliding the lock.
    HtmCommit,
    /// Level 3 only: coarse-grain commit lock (the paper's fallback STM).
    Coarse,
}

/// When a hardware transaction reads the fallback lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subscription {
    /// At commit (and every `zombie_checks` [`Tx::check`]s).
    Lazy,
    /// At begin: a later lock acquisition aborts the transaction.
    Early,
}

/// How many attempts a level gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempts {
    /// Exactly this many.
    Fixed(u32),
    /// This many per thread ([`Policy::threads`]).
    PerThread(u32),
}

/// The configurable retry policy.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Which levels run.
    pub mode: Mode,
    /// Lazy or early subscription of level 1.
    pub subscription: Subscription,
    /// Level-1 attempts (default: two).
    pub hw_attempts: Attempts,
    /// Level-2 hardware commit attempts (default: one per thread).
    pub commit_attempts: Attempts,
    /// Threads, for [`Attempts::PerThread`] (default: available parallelism).
    pub threads: u32,
    /// Bloom filters or precise sets for `retry` wake-ups.
    pub watch: WatchMode,
    /// Level 1 reads the lock every this many [`Tx::check`]s.
    pub zombie_checks: u32,
    /// Level 1 also reads the lock every this many variable reads (0: only
    /// at commit and on `check`), so a loop that reads but never calls
    /// `check` is bounded too; a transaction that long then aborts on a
    /// lock acquisition, as with early subscription.
    pub zombie_reads: u32,
    /// Software validation failures in a row before a transaction runs its
    /// whole body holding the commit lock.
    pub serial_after: u32,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            mode: Mode::Hybrid,
            subscription: Subscription::Lazy,
            hw_attempts: Attempts::Fixed(2),
            commit_attempts: Attempts::PerThread(1),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            watch: WatchMode::Bloom,
            zombie_checks: 64,
            zombie_reads: 4096,
            serial_after: 8,
        }
    }
}

impl Policy {
    fn resolve(&self, a: Attempts) -> u32 {
        match a {
            Attempts::Fixed(n) => n,
            Attempts::PerThread(k) => k.saturating_mul(self.threads.max(1)),
        }
    }
}

/// A level that committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// 1: all hardware.
    Hardware = 0,
    /// 2: software body, hardware commit.
    HtmCommit = 1,
    /// 3: commit lock.
    Lock = 2,
}

/// Counters of a runtime (monotonic; take deltas).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HybridStats {
    /// Commits per [`Level`].
    pub commits: [u64; 3],
    /// Level-1 aborts by [`Cause::index`].
    pub hw_aborts: [u64; Cause::COUNT],
    /// Level-2 hardware-commit aborts by [`Cause::index`].
    pub commit_aborts: [u64; Cause::COUNT],
    /// Explicit aborts (both levels) by code (`abort::code`, 0..=15).
    pub explicit: [u64; 16],
    /// Software bodies restarted after a failed value validation.
    pub sw_conflicts: u64,
    /// Transactions that ran their whole body under the lock.
    pub serial: u64,
    /// The wake-up list's counters.
    pub wake: WakeStats,
}

#[derive(Default)]
struct Counters {
    commits: [AtomicU64; 3],
    hw_aborts: [AtomicU64; Cause::COUNT],
    commit_aborts: [AtomicU64; Cause::COUNT],
    explicit: [AtomicU64; 16],
    sw_conflicts: AtomicU64,
    serial: AtomicU64,
}

#[repr(align(128))]
#[derive(Default)]
struct Padded(AtomicU64);

/// A hybrid TM runtime: a backend, a policy, the commit lock, the commit
/// counter, the wake-up list and the counters. Variables are not tied to a
/// runtime, but all transactions over a variable must use the same one.
pub struct Runtime {
    htm: Htm,
    policy: Policy,
    /// The fallback commit lock: 0 free, 1 held.
    lock: Padded,
    /// Writing commits so far (software reads validate when it moves).
    commits: Padded,
    wake: WakeList,
    counters: Counters,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

impl Runtime {
    /// A runtime over `htm` with `policy`.
    pub fn new(htm: Htm, policy: Policy) -> Runtime {
        Runtime { htm, policy, lock: Padded::default(), commits: Padded::default(), wake: WakeList::new(), counters: Counters::default() }
    }
    /// Its backend.
    pub fn htm(&self) -> &Htm {
        &self.htm
    }
    /// Its policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
    /// The counters.
    pub fn stats(&self) -> HybridStats {
        let c = &self.counters;
        let load = |a: &[AtomicU64]| a.iter().map(|x| x.load(Relaxed)).collect::<Vec<_>>();
        let mut s = HybridStats {
            sw_conflicts: c.sw_conflicts.load(Relaxed),
            serial: c.serial.load(Relaxed),
            wake: self.wake.stats(),
            ..Default::default()
        };
        s.commits.copy_from_slice(&load(&c.commits));
        s.hw_aborts.copy_from_slice(&load(&c.hw_aborts));
        s.commit_aborts.copy_from_slice(&load(&c.commit_aborts));
        s.explicit.copy_from_slice(&load(&c.explicit));
        s
    }

    /// Runs `body` as a transaction with the policy's mode until it commits
    /// (blocking on `retry`); returns its value, or the error it failed with.
    pub fn atomically<'v, R>(&'v self, body: impl FnMut(&mut Tx<'v>) -> TxResult<R>) -> Result<R, crate::Error> {
        self.atomically_in(self.policy.mode, body)
    }

    /// [`Runtime::atomically`] with another mode (mixing modes on one runtime
    /// is safe: every level obeys the same lock and counter).
    pub fn atomically_in<'v, R>(&'v self, mode: Mode, mut body: impl FnMut(&mut Tx<'v>) -> TxResult<R>) -> Result<R, crate::Error> {
        if mode == Mode::Hybrid {
            for _ in 0..self.policy.resolve(self.policy.hw_attempts) {
                self.wait_unlocked();
                match self.try_hardware(&mut body) {
                    Ok(r) => return Ok(r),
                    Err(a) => {
                        self.count_abort(&self.counters.hw_aborts, a);
                        let down = matches!(a.code(), Some(c) if c != code::LOCKED);
                        if down || (a.capacity() && !a.may_retry()) {
                            break;
                        }
                    }
                }
            }
        }
        self.run_software(mode, body)
    }

    fn count_abort(&self, by_cause: &[AtomicU64; Cause::COUNT], a: super::Abort) {
        bump(&by_cause[a.cause().index()]);
        if let Some(c) = a.code() {
            bump(&self.counters.explicit[usize::from(c.min(15))]);
        }
    }

    /// Level 1. With RTM an abort returns here a second time, from `begin`.
    fn try_hardware<'v, R>(&'v self, body: &mut impl FnMut(&mut Tx<'v>) -> TxResult<R>) -> Result<R, super::Abort> {
        let hw = self.htm.begin()?;
        let mut tx = Tx::hardware(self, hw);
        if self.policy.subscription == Subscription::Early {
            tx.subscribe()?;
        }
        let r = match body(&mut tx) {
            Ok(r) => r,
            Err(TxError::Abort(a)) => return Err(a),
            Err(TxError::Retry) => return Err(tx.hw_abort(code::RETRY)),
            Err(TxError::Conflict) => return Err(tx.hw_abort(code::VALIDATE)),
            Err(TxError::Failed(_)) => return Err(tx.hw_abort(code::USER)),
        };
        tx.commit_hardware()?;
        Ok(r)
    }

    /// Levels 2 and 3: software bodies until one commits.
    fn run_software<'v, R>(&'v self, mode: Mode, mut body: impl FnMut(&mut Tx<'v>) -> TxResult<R>) -> Result<R, crate::Error> {
        let mut conflicts = 0u32;
        loop {
            let serial = conflicts >= self.policy.serial_after;
            if serial {
                bump(&self.counters.serial);
                self.lock_commit();
            }
            let mut tx = Tx::software(self, mode, serial);
            let out = body(&mut tx).and_then(|r| tx.commit_software().map(|()| r));
            match out {
                Ok(r) => return Ok(r),
                Err(TxError::Failed(e)) => {
                    tx.release_serial();
                    return Err(e);
                }
                Err(TxError::Retry) => {
                    tx.release_serial();
                    tx.block();
                    conflicts = 0;
                }
                Err(TxError::Conflict | TxError::Abort(_)) => {
                    tx.release_serial();
                    bump(&self.counters.sw_conflicts);
                    conflicts += 1;
                    backoff(conflicts);
                }
            }
        }
    }

    fn wait_unlocked(&self) {
        let mut spins = 0u32;
        while self.htm.nt_load(&self.lock.0) != 0 {
            spins += 1;
            if spins > 64 {
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
    }

    fn lock_commit(&self) {
        while !self.htm.nt_cas(&self.lock.0, 0, 1) {
            self.wait_unlocked();
        }
    }

    fn unlock_commit(&self) {
        self.htm.nt_store(&self.lock.0, 0);
    }
}

fn backoff(n: u32) {
    for _ in 0..(1u32 << n.min(10)) {
        std::hint::spin_loop();
    }
    if n > 4 {
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests;
