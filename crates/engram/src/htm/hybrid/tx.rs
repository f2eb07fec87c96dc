//! A hybrid transaction ([`Tx`]) at one of the three levels: reads, writes,
//! `check`, `retry`, `or_else`, and the three commits.
//!
//! Commit pipelines (each writing commit ends by bumping `commits`, then,
//! after the writes are visible, scanning the wake-up list):
//! - level 1: (lazy) read the lock, abort `LOCKED` if held; bump `commits`
//!   in the transaction; `xend`;
//! - level 2, in a short hardware transaction: read the lock (elision:
//!   abort `LOCKED` if held); compare every logged read with memory (abort
//!   `VALIDATE` on a difference: the body runs again); store the writes;
//!   bump `commits`; `xend`. After `commit_attempts` failures: level 3;
//! - level 3: take the lock; validate the values; store the writes; bump
//!   `commits`; release.
//!
//! Read-only software transactions commit by a final validation, no lock.
//! Crash behaviour: none (volatile).

use super::super::abort::code;
use super::super::bloom::{Bloom64, Watch, WatchMode};
use super::super::{Abort, HwTx};
use super::{bump, HVar, Level, Mode, Runtime, Word};
use std::sync::atomic::AtomicU64;

/// Why a transaction body stopped.
#[derive(Debug)]
pub enum TxError {
    /// [`Tx::retry`]: block until something read changes, then run again.
    Retry,
    /// A software validation failed: run again (handled by the runtime).
    Conflict,
    /// The hardware transaction aborted (handled by the runtime).
    Abort(Abort),
    /// The body failed: the transaction is abandoned, the error returned.
    Failed(crate::Error),
}

impl From<Abort> for TxError {
    fn from(a: Abort) -> Self {
        TxError::Abort(a)
    }
}

impl From<crate::Error> for TxError {
    fn from(e: crate::Error) -> Self {
        TxError::Failed(e)
    }
}

/// Result of transactional operations.
pub type TxResult<T> = Result<T, TxError>;

/// A running transaction; variables it touches live for `'v`.
pub struct Tx<'v> {
    rt: &'v Runtime,
    level: Level,
    hw: Option<HwTx<'v>>,
    /// Software: logged reads (word, value seen).
    reads: Vec<(&'v AtomicU64, u64)>,
    /// Software: buffered writes (word, value).
    writes: Vec<(&'v AtomicU64, u64)>,
    /// Hardware: addresses written (precise wake-ups only).
    hw_written: Vec<usize>,
    hw_writes: u32,
    hw_reads: u32,
    rbloom: Bloom64,
    wbloom: Bloom64,
    /// Software: the `commits` value the reads are consistent with.
    snap: u64,
    checks: u32,
    serial: bool,
}

impl<'v> Tx<'v> {
    pub(super) fn hardware(rt: &'v Runtime, hw: HwTx<'v>) -> Tx<'v> {
        Tx::blank(rt, Level::Hardware, Some(hw), false)
    }

    pub(super) fn software(rt: &'v Runtime, mode: Mode, serial: bool) -> Tx<'v> {
        let level = if mode == Mode::Coarse || serial { Level::Lock } else { Level::HtmCommit };
        let mut tx = Tx::blank(rt, level, None, serial);
        tx.snap = rt.htm.nt_load(&rt.commits.0);
        tx
    }

    fn blank(rt: &'v Runtime, level: Level, hw: Option<HwTx<'v>>, serial: bool) -> Tx<'v> {
        Tx {
            rt,
            level,
            hw,
            reads: Vec::new(),
            writes: Vec::new(),
            hw_written: Vec::new(),
            hw_writes: 0,
            hw_reads: 0,
            rbloom: Bloom64::default(),
            wbloom: Bloom64::default(),
            snap: 0,
            checks: 0,
            serial,
        }
    }

    /// The level this attempt runs at.
    pub fn level(&self) -> Level {
        self.level
    }

    /// Reads `v`.
    pub fn read<T: Word>(&mut self, v: &'v HVar<T>) -> TxResult<T> {
        self.rbloom.add(v.addr());
        if let Some(hw) = &mut self.hw {
            let x = hw.load(&v.word)?;
            self.hw_reads = self.hw_reads.wrapping_add(1);
            let every = self.rt.policy.zombie_reads;
            if every != 0 && self.hw_reads % every == 0 {
                self.subscribe()?;
            }
            return Ok(T::from_word(x));
        }
        if let Some(&(_, x)) = self.writes.iter().rev().find(|(w, _)| std::ptr::eq(*w, &v.word)) {
            return Ok(T::from_word(x));
        }
        let x = self.rt.htm.nt_load(&v.word);
        self.reads.push((&v.word, x));
        self.validate_if_moved()?;
        Ok(T::from_word(x))
    }

    /// Writes `x` to `v`.
    pub fn write<T: Word>(&mut self, v: &'v HVar<T>, x: T) -> TxResult<()> {
        self.wbloom.add(v.addr());
        if let Some(hw) = &mut self.hw {
            hw.store(&v.word, x.into_word())?;
            self.hw_writes += 1;
            if self.rt.policy.watch == WatchMode::Precise {
                self.hw_written.push(v.addr());
            }
            return Ok(());
        }
        match self.writes.iter_mut().find(|(w, _)| std::ptr::eq(*w, &v.word)) {
            Some(e) => e.1 = x.into_word(),
            None => self.writes.push((&v.word, x.into_word())),
        }
        Ok(())
    }

    /// For loop back-edges: validates (software: if anything committed;
    /// emulated hardware: the read lines) and, in hardware, reads the
    /// commit lock every `zombie_checks` calls, so a zombie that loops on
    /// an inconsistent state aborts.
    pub fn check(&mut self) -> TxResult<()> {
        self.checks = self.checks.wrapping_add(1);
        let every = self.rt.policy.zombie_checks.max(1);
        match &mut self.hw {
            Some(hw) => {
                hw.check()?;
                if self.checks % every == 0 {
                    self.subscribe()?;
                }
                Ok(())
            }
            None => self.validate_if_moved(),
        }
    }

    /// Blocks until a variable read so far changes, then runs the
    /// transaction again.
    pub fn retry<T>(&mut self) -> TxResult<T> {
        Err(TxError::Retry)
    }

    /// Runs `a`; if it retries, drops its writes (keeping its reads, so a
    /// retry of both waits on both) and runs `b`. In hardware, `b` runs only
    /// if `a` wrote nothing; otherwise the transaction goes to software.
    pub fn or_else<R>(&mut self, a: impl FnOnce(&mut Self) -> TxResult<R>, b: impl FnOnce(&mut Self) -> TxResult<R>) -> TxResult<R> {
        let (saved, wbloom, hw_writes) = (self.writes.clone(), self.wbloom, self.hw_writes);
        match a(self) {
            Err(TxError::Retry) if self.hw.is_none() || self.hw_writes == hw_writes => {
                self.writes = saved;
                self.wbloom = wbloom;
                b(self)
            }
            r => r,
        }
    }

    /// Level 1: reads the lock; aborts `LOCKED` if held.
    pub(super) fn subscribe(&mut self) -> Result<(), Abort> {
        let hw = self.hw.as_mut().ok_or(Abort::explicit(code::DROPPED))?;
        if hw.load(&self.rt.lock.0)? != 0 {
            return Err(hw.abort(code::LOCKED));
        }
        Ok(())
    }

    pub(super) fn hw_abort(&mut self, c: u8) -> Abort {
        match &mut self.hw {
            Some(hw) => hw.abort(c),
            None => Abort::explicit(c),
        }
    }

    /// Level-1 commit (lazy subscription at commit).
    pub(super) fn commit_hardware(mut self) -> Result<(), Abort> {
        self.subscribe()?;
        let mut hw = self.hw.take().ok_or(Abort::explicit(code::DROPPED))?;
        if self.hw_writes > 0 {
            let c = hw.load(&self.rt.commits.0)?;
            hw.store(&self.rt.commits.0, c + 1)?;
        }
        hw.commit()?;
        bump(&self.rt.counters.commits[Level::Hardware as usize]);
        if self.hw_writes > 0 {
            let exact = std::mem::take(&mut self.hw_written);
            self.wake_after(exact);
        }
        Ok(())
    }

    /// Software: re-validates if a commit happened or the lock is held.
    fn validate_if_moved(&mut self) -> TxResult<()> {
        if self.serial {
            return Ok(());
        }
        let htm = &self.rt.htm;
        if htm.nt_load(&self.rt.lock.0) == 0 && htm.nt_load(&self.rt.commits.0) == self.snap {
            return Ok(());
        }
        loop {
            self.rt.wait_unlocked();
            let c = htm.nt_load(&self.rt.commits.0);
            if !self.values_hold() {
                return Err(TxError::Conflict);
            }
            if htm.nt_load(&self.rt.lock.0) == 0 && htm.nt_load(&self.rt.commits.0) == c {
                self.snap = c;
                return Ok(());
            }
        }
    }

    fn values_hold(&self) -> bool {
        self.reads.iter().all(|&(w, x)| self.rt.htm.nt_load(w) == x)
    }

    /// Levels 2 and 3 commit.
    pub(super) fn commit_software(&mut self) -> TxResult<()> {
        if self.writes.is_empty() {
            let r = self.validate_if_moved();
            self.release_serial();
            r?;
            bump(&self.rt.counters.commits[self.level as usize]);
            return Ok(());
        }
        if self.level == Level::HtmCommit {
            let attempts = self.rt.policy.resolve(self.rt.policy.commit_attempts);
            for _ in 0..attempts {
                self.rt.wait_unlocked();
                match self.hw_commit() {
                    Ok(()) => return self.finish(Level::HtmCommit),
                    Err(a) => {
                        self.rt.count_abort(&self.rt.counters.commit_aborts, a);
                        if a.code() == Some(code::VALIDATE) {
                            return Err(TxError::Conflict);
                        }
                        if a.capacity() && !a.may_retry() {
                            break;
                        }
                    }
                }
            }
        }
        if !self.serial {
            self.rt.lock_commit();
        }
        self.serial = true;
        if !self.values_hold() {
            self.release_serial();
            return Err(TxError::Conflict);
        }
        let htm = &self.rt.htm;
        for &(w, x) in &self.writes {
            htm.nt_store(w, x);
        }
        htm.nt_store(&self.rt.commits.0, htm.nt_load(&self.rt.commits.0) + 1);
        self.release_serial();
        self.finish(Level::Lock)
    }

    /// Level 2's short hardware transaction.
    fn hw_commit(&self) -> Result<(), Abort> {
        let rt = self.rt;
        let mut hw = rt.htm.begin()?;
        if hw.load(&rt.lock.0)? != 0 {
            return Err(hw.abort(code::LOCKED));
        }
        for &(w, x) in &self.reads {
            if hw.load(w)? != x {
                return Err(hw.abort(code::VALIDATE));
            }
        }
        for &(w, x) in &self.writes {
            hw.store(w, x)?;
        }
        let c = hw.load(&rt.commits.0)?;
        hw.store(&rt.commits.0, c + 1)?;
        hw.commit()
    }

    fn finish(&mut self, level: Level) -> TxResult<()> {
        bump(&self.rt.counters.commits[level as usize]);
        let exact = self.writes.iter().map(|(w, _)| *w as *const AtomicU64 as usize).collect();
        self.wake_after(exact);
        Ok(())
    }

    /// Releases the lock if this transaction holds it.
    pub(super) fn release_serial(&mut self) {
        if self.serial {
            self.serial = false;
            self.rt.unlock_commit();
        }
    }

    /// After a writing commit: buffered wake-ups of the waiters it meets.
    fn wake_after(&self, exact: Vec<usize>) {
        if self.rt.wake.waiting() == 0 {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            if self.rt.wake.waiting() == 0 {
                return;
            }
        }
        let precise = self.rt.policy.watch == WatchMode::Precise;
        let w = Watch { bloom: self.wbloom, exact: precise.then(|| sorted(exact)) };
        let mut out = Vec::new();
        self.rt.wake.collect(&w, &mut out);
        self.rt.wake.wake(&mut out);
    }

    /// `retry`: registers the read set, re-validates, sleeps until a commit
    /// meets it and a value changed (counting false wake-ups).
    pub(super) fn block(&self) {
        let watch = Watch::new(self.rt.policy.watch, self.reads.iter().map(|(w, _)| *w as *const AtomicU64 as usize));
        let ticket = self.rt.wake.register(watch);
        while self.values_hold() {
            self.rt.wake.sleep(&ticket);
            if self.values_hold() {
                self.rt.wake.note_false();
            }
        }
        self.rt.wake.unregister(ticket);
    }
}

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v.dedup();
    v
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        self.release_serial();
    }
}
