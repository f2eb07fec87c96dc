//! Reads and writes of volatile variables: `TVar`s (`tvar.rs`), `TWord`s
//! (`tword.rs`) and `TField`s of `Arc`-owned structs.
//!
//! What it keeps true: a volatile read is the seqlock read of its lock
//! word against the volatile domain's snapshot (`rv_v`, `domain.rs`) and
//! marks the attempt as having read the volatile domain (`read_v`). A
//! `TVar`'s or `TWord`'s value and lock word are reached only while the
//! attempt is pinned ([`STx::pin`]), so epoch reclamation keeps them
//! allocated until it unpins; a recorded `TField` read keeps its owner
//! alive in `keep`. Writes are buffered ([`STx::put`]) and installed by
//! commit.

use super::write::Kind;
use super::STx;
use crate::error::Error;
use crate::stm::engine::StmResult;
use crate::stm::tvar::TVarInner;
use crossbeam_epoch::Guard;
use std::any::Any;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// A volatile cell of any type.
pub(crate) trait VCell: Send + Sync {
    fn word(&self) -> &AtomicU64;
    /// Installs the buffered value `v` (an `Arc<T>`); the caller holds the
    /// word locked and is pinned by `g`.
    fn install(&self, v: &(dyn Any + Send + Sync), g: &Guard);
}

impl<T: Clone + Send + Sync + 'static> VCell for TVarInner<T> {
    fn word(&self) -> &AtomicU64 {
        &self.word
    }
    fn install(&self, v: &(dyn Any + Send + Sync), g: &Guard) {
        if let Some(v) = v.downcast_ref::<Arc<T>>() {
            TVarInner::install(self, v, g);
        }
    }
}

impl<'p> STx<'p> {
    /// Reads a `TVar` (`tvar.rs`): its buffered write if any, else the
    /// seqlock read of its lock word around its value word, then the value
    /// (inline bits, or cloned from behind the pointer; the attempt is
    /// pinned). No lock, no count taken, no allocation: the read set keeps
    /// the bare word, alive while the attempt is pinned.
    #[inline]
    pub(crate) fn read_tvar<T: Clone + Send + Sync + 'static>(&self, v: &Arc<TVarInner<T>>) -> StmResult<T> {
        if self.by_value {
            return self.read_tvar_arc(v).map(|a| (*a).clone());
        }
        let w = &v.word as *const AtomicU64 as usize;
        if let Some(x) = self.own_volatile::<T>(w) {
            return Ok(x);
        }
        let g = self.pin();
        if self.in_hw() {
            // SAFETY: loaded from `v` inside `value_of`'s closure while `g`
            // (pinned before the hardware transaction began) is pinned.
            return self.read_hw(&v.word, || unsafe { v.value_of(v.bits(), g) });
        }
        let b = self.read_bits(&v.word, || v.bits(), || v.clone() as Arc<dyn Any + Send + Sync>)?;
        // SAFETY: `b` was loaded from `v` while `g` is pinned (above).
        Ok(unsafe { v.value_of(b, g) })
    }

    /// The seqlock read of a volatile variable's lock word `word` around
    /// `load` (its value word), recorded in the read set as a bare word:
    /// the caller pinned the attempt first, and the variable's release is
    /// deferred past it. Only a keeping attempt (on its way to a `retry`'s
    /// unpinned wait) takes a count, `keep`.
    #[inline]
    fn read_bits(&self, word: &AtomicU64, load: impl Fn() -> u64, keep: impl FnOnce() -> Arc<dyn Any + Send + Sync>) -> StmResult<u64> {
        let mut b = 0u64;
        self.read_versioned_v(word as *const AtomicU64 as usize, || b = load())?;
        if self.keeping {
            self.st.borrow_mut().keep.push(keep());
        } else if self.rec.get() {
            self.unkept.set(true);
        }
        Ok(b)
    }

    /// Reads a `TWord` (`tword.rs`): its buffered write if any, else, with
    /// the attempt pinned, the seqlock read of its lock word around its
    /// value word (the bits returned). Under `Coarse` the bits read are
    /// recorded for validation by value, as a plain pool value's are.
    #[inline]
    pub(crate) fn read_word<T: crate::stm::WordValue>(&self, r: &crate::stm::TWordRef<'_, T>) -> StmResult<u64> {
        let c = r.cell();
        let w = &c.word as *const AtomicU64 as usize;
        if let Some(b) = self.own_word(w) {
            return Ok(b);
        }
        self.pin();
        if self.in_hw() {
            return self.read_hw(&c.word, || c.bits());
        }
        let b = self.read_bits(&c.word, || c.bits(), || r.keep())?;
        if self.by_value && self.rec.get() {
            self.saw_bytes::<u64>(&[b]);
        }
        Ok(b)
    }

    /// This attempt's buffered write of the `TWord` whose lock word is `w`.
    #[inline]
    fn own_word(&self, w: usize) -> Option<u64> {
        let st = self.st.borrow();
        if st.writes.is_empty() {
            return None;
        }
        match &st.writes[self.find(&st, w)?].kind {
            Kind::W { bits } => Some(*bits),
            _ => None,
        }
    }

    /// Buffers a write of the value word `bits` to the `TWord` whose lock
    /// word is `word`. The attempt is pinned first: the word's box is
    /// released only after it (`tword.rs`, 3), so the write set keeps the
    /// bare address until commit.
    #[inline]
    pub(crate) fn write_word(&self, word: &AtomicU64, bits: u64) {
        self.pin();
        self.put(word as *const AtomicU64 as usize, Kind::W { bits });
    }

    /// This attempt's buffered write of the volatile word `w`, if any.
    #[inline]
    fn own_volatile<T: Clone + 'static>(&self, w: usize) -> Option<T> {
        let st = self.st.borrow();
        if st.writes.is_empty() {
            return None;
        }
        match &st.writes[self.find(&st, w)?].kind {
            Kind::V { value, .. } => value.downcast_ref::<Arc<T>>().map(|a| (**a).clone()),
            Kind::P { .. } | Kind::W { .. } => None,
        }
    }

    /// Reads a `TField` inside an `Arc`-owned struct: its buffered write if
    /// any, else the seqlock read of `word` around `load`, with `keep` (the
    /// owner, which keeps `word` alive) in the read set so validation may
    /// dereference it. (`TVar`s take [`STx::read_tvar`]: no count.)
    pub(crate) fn read_volatile<T: Clone + Send + Sync + 'static, K: Any + Send + Sync>(
        &self,
        word: &AtomicU64,
        load: impl Fn() -> T,
        keep: impl FnOnce() -> Arc<K>,
    ) -> StmResult<T> {
        let w = word as *const AtomicU64 as usize;
        if let Some(x) = self.own_volatile::<T>(w) {
            return Ok(x);
        }
        if self.in_hw() {
            return self.read_hw(word, load);
        }
        let mut out = None;
        self.read_versioned_v(w, || out = Some(load()))?;
        if self.rec.get() {
            self.st.borrow_mut().keep.push(keep());
        }
        Ok(out.ok_or_else(|| Error::corrupt("volatile read produced nothing"))?)
    }

    pub(crate) fn write_tvar<T: Clone + Send + Sync + 'static>(&self, v: &Arc<TVarInner<T>>, x: T) -> StmResult<()> {
        let cell: Arc<dyn VCell> = v.clone();
        self.write_volatile(cell, x);
        Ok(())
    }

    /// Buffers a write of `x` to the volatile cell `cell` (installed at
    /// commit; `cell` keeps its lock word alive until then).
    pub(crate) fn write_volatile<T: Clone + Send + Sync + 'static>(&self, cell: Arc<dyn VCell>, x: T) {
        let word = cell.word() as *const AtomicU64 as usize;
        self.put(word, Kind::V { cell, value: Box::new(Arc::new(x)) });
    }
}
