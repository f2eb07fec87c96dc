//! Hardware transactional memory for the hybrid TM of Yates & Scott
//! (PPoPP'19), and the hybrid runtime prototype built on it.
//!
//! - [`Htm`]: one backend type over real Intel RTM (`rtm.rs`: `xbegin`,
//!   `xend`, `xabort`, `xtest` by inline assembly; selected only when CPUID
//!   advertises RTM *and* a probe of 100,000 transactions mostly commits) and
//!   an emulated HTM (`emu.rs`) that runs transactions for real but aborts on
//!   a seeded schedule (capacity, conflicts random or real, forced statuses,
//!   nesting). The levels above see [`HwTx`] and an [`Abort`] status decoded
//!   the same way for both.
//! - [`bloom`]: 64-bit Bloom filters and precise watch sets over variable
//!   addresses; [`wakeup`]: the chunked global wake-up list for `retry`.
//! - [`hybrid`]: a self-contained volatile hybrid TM over [`hybrid::HVar`]
//!   words with the paper's three levels (all-hardware with lazy
//!   subscription, software body with a hardware commit, coarse-grain commit
//!   lock), retry policies, per-level counters, `retry`/`or_else`.
//!
//! Invariants: with the RTM backend, every [`HwTx`] ends in a commit
//! (`xend`) or an abort (dropping an uncommitted handle executes `xabort`),
//! and no RTM instruction runs unless [`rtm::available`]. Memory touched
//! inside a hardware transaction by the runtime is volatile (`AtomicU64`
//! words); non-transactional writers go through [`Htm::nt_store`] so the
//! emulated backend sees them as conflicts.
//!
//! Crash behaviour: this module touches no pool. For PSTM, flushes
//! (`clwb`/`clflushopt`/`clflush`) abort RTM transactions, so persistence
//! stays outside them (docs/hybrid.md).

pub mod abort;
pub mod bloom;
pub mod emu;
pub mod hybrid;

#[cfg(target_arch = "x86_64")]
pub mod rtm;
pub mod wakeup;

pub use abort::{Abort, Cause};
pub use emu::{Emu, EmuConfig};

use emu::EmuTx;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::Arc;

/// A hardware-TM backend.
#[derive(Clone, Debug)]
pub enum Htm {
    /// Intel RTM (only constructed by [`Htm::rtm`], when
    /// [`rtm::available`]: the token cannot be made elsewhere, so no RTM
    /// instruction runs on a CPU without it).
    #[cfg(target_arch = "x86_64")]
    Rtm(RtmToken),
    /// The emulated backend with its schedule.
    Emulated(Arc<Emu>),
}

/// Proof that RTM was detected (private field: made only by [`Htm::rtm`]).
#[derive(Clone, Copy, Debug)]
pub struct RtmToken(());

/// Whether real RTM is usable here (CPUID and the probe).
pub fn rtm_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return rtm::available();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

impl Htm {
    /// Real RTM, if CPUID advertises it and the probe commits.
    pub fn rtm() -> Option<Htm> {
        #[cfg(target_arch = "x86_64")]
        if rtm::available() {
            return Some(Htm::Rtm(RtmToken(())));
        }
        None
    }
    /// An emulated backend with schedule `cfg`.
    pub fn emulated(cfg: EmuConfig) -> Htm {
        Htm::Emulated(Emu::new(cfg))
    }
    /// Real RTM when available and `ENGRAM_HTM` is not `emulated`, else
    /// the emulated backend with `cfg`.
    pub fn auto(cfg: EmuConfig) -> Htm {
        if std::env::var("ENGRAM_HTM").as_deref() == Ok("emulated") {
            return Htm::emulated(cfg);
        }
        Htm::rtm().unwrap_or_else(|| Htm::emulated(cfg))
    }
    /// Whether this is real RTM.
    pub fn is_rtm(&self) -> bool {
        !matches!(self, Htm::Emulated(_))
    }
    /// "rtm" or "emulated".
    pub fn name(&self) -> &'static str {
        if self.is_rtm() {
            "rtm"
        } else {
            "emulated"
        }
    }
    /// The emulated backend, if this is one.
    pub fn emu(&self) -> Option<&Arc<Emu>> {
        match self {
            Htm::Emulated(e) => Some(e),
            #[cfg(target_arch = "x86_64")]
            Htm::Rtm(_) => None,
        }
    }

    /// Starts a hardware transaction. With RTM this returns a second time,
    /// with `Err(status)`, when the transaction aborts.
    #[inline(always)]
    pub fn begin<'v>(&self) -> Result<HwTx<'v>, Abort> {
        let inner = match self {
            #[cfg(target_arch = "x86_64")]
            Htm::Rtm(_) => {
                // SAFETY: `Htm::Rtm` is only built when RTM is available;
                // the handle ends the transaction (commit, or abort on drop).
                let s = unsafe { rtm::xbegin() };
                if s != rtm::STARTED {
                    return Err(Abort(s));
                }
                Inner::Rtm
            }
            Htm::Emulated(e) => Inner::Emu(Box::new(e.begin())),
        };
        Ok(HwTx { inner: Some(inner), _v: PhantomData })
    }

    /// A non-transactional load (atomic with respect to emulated commits).
    pub fn nt_load(&self, w: &AtomicU64) -> u64 {
        match self {
            Htm::Emulated(e) => e.nt_load(w),
            #[cfg(target_arch = "x86_64")]
            Htm::Rtm(_) => w.load(SeqCst),
        }
    }
    /// A non-transactional store (a conflict for emulated transactions).
    pub fn nt_store(&self, w: &AtomicU64, x: u64) {
        match self {
            Htm::Emulated(e) => e.nt_store(w, x),
            #[cfg(target_arch = "x86_64")]
            Htm::Rtm(_) => w.store(x, SeqCst),
        }
    }
    /// A non-transactional compare-and-swap.
    pub fn nt_cas(&self, w: &AtomicU64, old: u64, new: u64) -> bool {
        match self {
            Htm::Emulated(e) => e.nt_cas(w, old, new),
            #[cfg(target_arch = "x86_64")]
            Htm::Rtm(_) => w.compare_exchange(old, new, SeqCst, SeqCst).is_ok(),
        }
    }
}

enum Inner {
    #[cfg(target_arch = "x86_64")]
    Rtm,
    Emu(Box<EmuTx>),
}

/// A running hardware transaction over words that live for `'v`. Ends in
/// [`HwTx::commit`]; dropped uncommitted, it aborts (RTM: `xabort`).
pub struct HwTx<'v> {
    inner: Option<Inner>,
    _v: PhantomData<&'v AtomicU64>,
}

impl<'v> HwTx<'v> {
    /// A transactional load.
    #[inline]
    pub fn load(&mut self, w: &'v AtomicU64) -> Result<u64, Abort> {
        match &mut self.inner {
            Some(Inner::Emu(t)) => t.load(w),
            #[cfg(target_arch = "x86_64")]
            Some(Inner::Rtm) => Ok(w.load(Relaxed)),
            None => Err(Abort::explicit(abort::code::DROPPED)),
        }
    }
    /// A transactional store.
    #[inline]
    pub fn store(&mut self, w: &'v AtomicU64, x: u64) -> Result<(), Abort> {
        match &mut self.inner {
            Some(Inner::Emu(t)) => t.store(w, x),
            #[cfg(target_arch = "x86_64")]
            Some(Inner::Rtm) => {
                w.store(x, Relaxed);
                Ok(())
            }
            None => Err(Abort::explicit(abort::code::DROPPED)),
        }
    }
    /// Validates now (emulated: every read line unchanged; RTM: the
    /// hardware already aborts on a conflict, so nothing to do).
    pub fn check(&mut self) -> Result<(), Abort> {
        match &mut self.inner {
            Some(Inner::Emu(t)) => t.validate(),
            #[cfg(target_arch = "x86_64")]
            Some(Inner::Rtm) => Ok(()),
            None => Err(Abort::explicit(abort::code::DROPPED)),
        }
    }
    /// Aborts explicitly with `code` (≤ [`abort::code::MAX`] on RTM). With
    /// RTM this does not return; the status reaches the `begin` caller.
    /// Emulated, the handle is spent: later accesses and `commit` do nothing.
    pub fn abort(&mut self, code: u8) -> Abort {
        #[cfg(target_arch = "x86_64")]
        if let Some(Inner::Rtm) = self.inner.take() {
            // SAFETY: RTM is available (the handle exists); inside the
            // transaction this never returns.
            unsafe { rtm::xabort(code) };
        }
        self.inner = None;
        Abort::explicit(code)
    }
    /// Runs `f` as a nested transaction (flattened, as RTM does: an abort
    /// inside aborts the whole transaction, with the nested bit).
    pub fn nest<R>(&mut self, f: impl FnOnce(&mut Self) -> Result<R, Abort>) -> Result<R, Abort> {
        match &mut self.inner {
            Some(Inner::Emu(t)) => t.enter().map_err(Abort::in_nested)?,
            #[cfg(target_arch = "x86_64")]
            // SAFETY: RTM is available and a transaction is active, so this
            // xbegin nests (an abort resumes at the outermost xbegin).
            Some(Inner::Rtm) => unsafe {
                rtm::xbegin();
            },
            None => {}
        }
        let r = f(self).map_err(Abort::in_nested);
        match &mut self.inner {
            Some(Inner::Emu(t)) => t.leave(),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the nested xbegin above is still active.
            Some(Inner::Rtm) if r.is_ok() => unsafe { rtm::xend() },
            _ => {}
        }
        r
    }
    /// Commits.
    pub fn commit(mut self) -> Result<(), Abort> {
        match self.inner.take() {
            Some(Inner::Emu(t)) => t.commit(),
            #[cfg(target_arch = "x86_64")]
            Some(Inner::Rtm) => {
                // SAFETY: this handle's transaction is active.
                unsafe { rtm::xend() };
                Ok(())
            }
            None => Err(Abort::explicit(abort::code::DROPPED)),
        }
    }
    /// Lines read and written so far (emulated; `(0, 0)` for RTM).
    pub fn footprint(&self) -> (usize, usize) {
        match &self.inner {
            Some(Inner::Emu(t)) => t.footprint(),
            _ => (0, 0),
        }
    }
}

impl Drop for HwTx<'_> {
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if let Some(Inner::Rtm) = self.inner.take() {
            // SAFETY: RTM is available and this handle's transaction is
            // active; xabort does not return.
            unsafe { rtm::xabort(abort::code::DROPPED) };
        }
    }
}

#[cfg(test)]
mod tests;
