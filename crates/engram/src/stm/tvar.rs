//! The volatile transactional variable ([`TVar`]) on the versioned-lock
//! design of the persistent cells: a lock word and one value word side by
//! side (`TVarInner`, 16 bytes), read by the seqlock of `engine/tx/read.rs`
//! (word, value word, acquire fence, word again) with no lock, no atomic
//! read-modify-write and no allocation.
//!
//! The value word holds either the value itself or a pointer to it:
//!
//! - *Inline* ([`TVarInner::INLINE`]): a primitive of at most 8 bytes with
//!   no padding (`u64`, `i32`, `bool`, `char`, `f64`, ...), its bytes in the
//!   word. A read is two loads of one line; nothing is ever freed.
//! - *Boxed*: any other `T`, as `Arc::into_raw` of an `Arc<T>` that owns
//!   one strong count (the variable's). An `Arc<T>`'s value is never
//!   changed in place, so a reader that loaded the pointer clones a whole
//!   value (old or new; the re-check of the word says which).
//!
//! What it keeps true:
//!
//! 1. The value word changes only in [`TVarInner::install`], called by a
//!    commit that holds the lock word locked; the commit then stores the
//!    word unlocked with its new version (`commit.rs`, `apply`).
//! 2. A replaced boxed value's count is released through crossbeam-epoch
//!    (`Guard::defer_unchecked`), after every thread pinned at that time
//!    has unpinned. A transaction pins once per attempt, at its first
//!    volatile read or install (`STx::pin`), so a pointer it loaded stays
//!    valid for the whole attempt.
//! 3. A [`TVar`] handle's own reference to its `TVarInner` is released
//!    through the epoch too (`Drop for TVar`). A transaction reaches a
//!    variable only through a handle it borrows, so the variable's lock
//!    word outlives every pinned attempt that read it: its read set keeps
//!    bare word addresses, which validation and commit dereference, with
//!    no reference count taken per read. (Only a `retry`, which waits
//!    unpinned, takes counts: `run.rs` runs such an attempt again with
//!    `keep` on, as before.)
//!
//! Crash behaviour: volatile, nothing survives the process.

use super::engine::{RTx, STx, StmResult};
use super::vars::Var;
use crossbeam_epoch::Guard;
use std::any::TypeId;
use std::marker::PhantomData;
use std::mem::{needs_drop, size_of, ManuallyDrop, MaybeUninit};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The state behind a [`TVar`]: the versioned lock word, then the value
/// word (inline bits or a boxed value's pointer; see the module doc).
/// `repr(C)`: the value word is at `word + 8`, as in a persistent cell, so
/// `Coarse`'s byte comparison (`values.rs`) reads it the same way.
#[repr(C)]
pub(crate) struct TVarInner<T: 'static> {
    pub word: AtomicU64,
    bits: AtomicU64,
    /// Owns a `T` (inline) or an `Arc<T>` (boxed): auto traits, drop check.
    _owns: PhantomData<Arc<T>>,
}

/// Whether `T` is a primitive of at most 8 bytes whose every byte is
/// initialised (no padding), so its bytes may live in a `u64`.
fn plain_word<T: 'static>() -> bool {
    let t = TypeId::of::<T>();
    [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i8>(),
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<isize>(),
        TypeId::of::<bool>(),
        TypeId::of::<char>(),
        TypeId::of::<f32>(),
        TypeId::of::<f64>(),
        TypeId::of::<()>(),
    ]
    .contains(&t)
}

impl<T: 'static> TVarInner<T> {
    /// Whether `T` lives in the value word itself (see the module doc).
    #[inline(always)]
    pub(crate) fn inline() -> bool {
        size_of::<T>() <= 8 && !needs_drop::<T>() && plain_word::<T>()
    }

    fn new(v: T) -> Self {
        TVarInner { word: AtomicU64::new(0), bits: AtomicU64::new(Self::encode(v)), _owns: PhantomData }
    }

    /// The value word for `v`, which it now owns.
    fn encode(v: T) -> u64 {
        if Self::inline() {
            let mut b = 0u64;
            let v = ManuallyDrop::new(v);
            // SAFETY: inline: T is a padding-free primitive of at most 8
            // bytes (`plain_word`), so all its bytes are initialised and
            // fit in `b`; T has no drop glue, so not dropping `v` is fine.
            unsafe { std::ptr::copy_nonoverlapping(&*v as *const T as *const u8, &mut b as *mut u64 as *mut u8, size_of::<T>()) };
            b
        } else {
            Arc::into_raw(Arc::new(v)) as usize as u64
        }
    }

    /// The value word now (within a seqlock read, or alone: one atomic
    /// load is never torn). Acquire: a boxed pointer's value was written
    /// before the install that published it.
    #[inline(always)]
    pub(crate) fn bits(&self) -> u64 {
        crate::failpoint::read_gap();
        self.bits.load(Ordering::Acquire)
    }

    /// The value an inline variable's value word `b` stands for (no pin
    /// needed: nothing lies behind it); `None` for a boxed `T`.
    #[inline(always)]
    pub(crate) fn inline_value(b: u64) -> Option<T> {
        if !Self::inline() {
            return None;
        }
        let mut v = MaybeUninit::<T>::uninit();
        // SAFETY: inline: every store to `bits` is an `encode` of a T (one
        // atomic word, never torn), so the first size_of::<T>() bytes of a
        // word loaded from it are a valid T, copied whole; T has no drop
        // glue (`inline`).
        unsafe {
            std::ptr::copy_nonoverlapping(&b as *const u64 as *const u8, v.as_mut_ptr() as *mut u8, size_of::<T>());
            Some(v.assume_init())
        }
    }

    /// The value a value word `b` loaded from this variable stands for.
    ///
    /// # Safety
    ///
    /// `b` was loaded by [`TVarInner::bits`] from `self` while `_g` was
    /// pinned, and `_g` is still pinned.
    #[inline(always)]
    pub(crate) unsafe fn value_of(&self, b: u64, _g: &Guard) -> T
    where
        T: Clone,
    {
        if let Some(v) = Self::inline_value(b) {
            v
        } else {
            // SAFETY: `b` is `Arc::into_raw` of a value this variable held
            // while `_g` was pinned: its count is released only by a
            // function deferred at its replacement (run after every guard
            // pinned then is dropped) or by `Drop` of `self` (borrowed
            // here), so the value is alive and never mutated.
            unsafe { (*(b as usize as *const T)).clone() }
        }
    }

    /// The value a value word `b` stands for, as a shared `Arc` (boxed:
    /// the very allocation, one more count; inline: a new one).
    ///
    /// # Safety
    ///
    /// As [`TVarInner::value_of`].
    pub(crate) unsafe fn arc_of(&self, b: u64, g: &Guard) -> Arc<T>
    where
        T: Clone,
    {
        if Self::inline() {
            // SAFETY: the caller's contract.
            return Arc::new(unsafe { self.value_of(b, g) });
        }
        let p = b as usize as *const T;
        // SAFETY: `p` is a live `Arc::into_raw` pointer (see `value_of`),
        // so taking one more count and an `Arc` owning it is sound.
        unsafe {
            Arc::increment_strong_count(p);
            Arc::from_raw(p)
        }
    }

    /// Whether the variable holds `seen` now (`Coarse`'s validation by
    /// value): boxed, the same allocation (an `Arc<T>` is never changed in
    /// place; `seen` is kept alive, so no other value can reuse its
    /// address); inline, the same bytes.
    pub(crate) fn holds(&self, seen: &Arc<T>) -> bool
    where
        T: Clone,
    {
        let now = self.bits.load(Ordering::Acquire);
        if Self::inline() {
            now == Self::encode((**seen).clone())
        } else {
            now == Arc::as_ptr(seen) as usize as u64
        }
    }

    /// Replaces the value with the buffered `v` (step 1 of the module doc:
    /// the caller holds `word` locked, so installs are serialised). A
    /// replaced boxed value is released once no thread pinned now can
    /// still be reading it.
    pub(crate) fn install(&self, v: &Arc<T>, g: &Guard)
    where
        T: Clone,
    {
        if Self::inline() {
            self.bits.store(Self::encode((**v).clone()), Ordering::Release);
            return;
        }
        // A load and a store, not a swap: installs are serialised by the
        // locked word, so nothing changes the value word in between.
        let old = self.bits.load(Ordering::Relaxed);
        self.bits.store(Arc::into_raw(v.clone()) as usize as u64, Ordering::Release);
        let old = Retired(old as usize as *const T);
        // SAFETY: `old` owned the variable's strong count, now given to the
        // deferred function alone (nobody else releases it); readers that
        // loaded it are pinned, so crossbeam-epoch runs the function after
        // them. It may run on another thread: a TVar is only built for
        // `T: Send + Sync`, whose `Arc` may be dropped anywhere.
        unsafe { g.defer_unchecked(move || old.release()) };
    }
}

/// A replaced boxed value's `Arc::into_raw` pointer, waiting for release.
struct Retired<T>(*const T);

impl<T> Retired<T> {
    fn release(self) {
        // SAFETY: the pointer owns one strong count (see `install`), given
        // back exactly once, here.
        unsafe { drop(Arc::from_raw(self.0)) }
    }
}

impl<T: 'static> Drop for TVarInner<T> {
    fn drop(&mut self) {
        if Self::inline() {
            return;
        }
        let b = *self.bits.get_mut();
        // SAFETY: boxed: the variable's own strong count on its current
        // value. The last handle's release was deferred past every pinned
        // reader (module doc, 3), so nobody can be reading it now.
        unsafe { drop(Arc::from_raw(b as usize as *const T)) }
    }
}

/// A volatile transactional variable (lost at exit, never persisted).
///
/// A read in a transaction takes no lock and writes nothing shared: it
/// loads the variable's lock word, its value word and the lock word again,
/// and clones the value (see the module doc for the layout and for how
/// replaced values and the variable itself are reclaimed).
pub struct TVar<T: 'static>(pub(crate) ManuallyDrop<Arc<TVarInner<T>>>);

impl<T: 'static> Clone for TVar<T> {
    fn clone(&self) -> Self {
        TVar(ManuallyDrop::new(Arc::clone(&self.0)))
    }
}

impl<T: 'static> Drop for TVar<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `self.0` is not used again.
        let inner = unsafe { ManuallyDrop::take(&mut self.0) };
        let g = crossbeam_epoch::pin();
        // SAFETY: released after every thread pinned now has unpinned
        // (module doc, 3). It may run on another thread: a TVar is only
        // built (`TVar::new`) for `T: Send + Sync + 'static`, so its
        // `Arc<TVarInner<T>>` may be dropped anywhere.
        unsafe { g.defer_unchecked(move || drop(inner)) };
    }
}

impl<T: Clone + Send + Sync + 'static> TVar<T> {
    /// A variable holding `v`.
    pub fn new(v: T) -> Self {
        TVar(ManuallyDrop::new(Arc::new(TVarInner::new(v))))
    }

    /// The current value, outside any transaction.
    pub fn load(&self) -> T {
        let g = crossbeam_epoch::pin();
        let b = self.0.bits();
        // SAFETY: `b` was loaded from this variable while `g` is pinned.
        unsafe { self.0.value_of(b, &g) }
    }
}

/// In a read-only transaction: a volatile-only one
/// ([`crate::stm::atomically_read`]) reads it on its lean path; a pool's
/// (`Pool::atomically_read`) runs the body on the full path instead.
impl<T: Clone + Send + Sync + 'static> crate::stm::ReadOnlyVar for TVar<T> {
    #[inline]
    fn read_ro(&self, tx: &RTx<'_>) -> StmResult<T> {
        tx.read_tvar(&self.0)
    }
}

impl<T: Clone + Send + Sync + 'static> Var for TVar<T> {
    type In = T;
    type Out = T;
    fn read_in(&self, tx: &STx<'_>) -> StmResult<T> {
        tx.read_tvar(&self.0)
    }
    fn write_in(&self, tx: &STx<'_>, v: T) -> StmResult<()> {
        tx.write_tvar(&self.0, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stm::atomically;

    #[test]
    fn primitives_are_inline_and_others_boxed() {
        assert!(TVarInner::<u64>::inline() && TVarInner::<bool>::inline() && TVarInner::<char>::inline());
        assert!(!TVarInner::<(u8, u16)>::inline(), "padding");
        assert!(!TVarInner::<Option<Arc<u64>>>::inline() && !TVarInner::<String>::inline());
        assert_eq!(size_of::<TVarInner<u64>>(), 16);
        let (a, b, c) = (TVar::new(u64::MAX - 3), TVar::new(true), TVar::new((7u8, 300u16)));
        assert_eq!((a.load(), b.load(), c.load()), (u64::MAX - 3, true, (7, 300)));
    }

    /// A read takes no count on its variable (no read-modify-write of the
    /// variable's line), inline or boxed, recorded or not.
    #[test]
    fn reads_take_no_count() {
        let (a, b, w) = (TVar::new(5u64), TVar::new(String::from("s")), TVar::new(0u64));
        atomically(|tx| {
            tx.write(&w, 1)?; // from here on, reads are recorded
            for _ in 0..100 {
                tx.read(&a)?;
                tx.read(&b)?;
            }
            assert_eq!((Arc::strong_count(&a.0), Arc::strong_count(&b.0)), (1, 1));
            Ok(())
        })
        .unwrap();
    }
}
