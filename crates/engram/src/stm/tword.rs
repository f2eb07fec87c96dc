//! Transactional words inline in a volatile struct: a [`TWord<T>`] is a
//! versioned lock word and a value word (16 bytes, the layout of a
//! `TVar`'s cell and of a `PTField`), embedded in a user's struct, so a
//! node with six transactional fields is one allocation and a field read
//! touches the node's own line: load the lock word, load the value word,
//! re-check the lock word. The struct is shared as a [`TBox<S>`] (an `Arc`
//! whose release is deferred through crossbeam-epoch, as a `TVar`'s is),
//! and a word is reached through the box: [`TRef::word`] projects a
//! borrowed box onto one of its words, giving a [`TWordRef`] that
//! transactions read and write like any variable.
//!
//! What it keeps true:
//!
//! 1. A word's value changes only at a commit that holds its lock word
//!    locked (`commit.rs`, `apply`: value word, then the word unlocked with
//!    the commit's volatile timestamp), the protocol of a `TVar`.
//! 2. A [`TWordRef`] is made only from a [`TRef`] (a borrowed [`TBox`]) and a
//!    projection `for<'b> Fn(&'b S) -> &'b TWord<T>`, which can only
//!    return a word inside the boxed value or owned by it (or a `'static`
//!    one): so the word lives as long as the boxed value.
//! 3. A box's allocation outlives every attempt that reached it: a
//!    [`TBox`] handle's release is deferred past every thread pinned at
//!    that time (`Drop for TBox`), and a full transaction's attempt pins
//!    before its first word read or buffered write (`STx::pin`), so the
//!    read and write sets may keep bare word addresses (no count, no
//!    allocation per access). A `retry` waits unpinned: such an attempt runs again with
//!    `keeping` on and each read takes a count on its box (`run.rs`).
//! 4. Values are plain words ([`WordValue`]: integers, `bool`, `char`),
//!    inline, so nothing is ever freed at a write and a read needs no pin
//!    on the read-only path.
//!
//! Crash behaviour: volatile, nothing survives the process.
//!
//! ```
//! use engram::stm::{atomically, atomically_read, TBox, TWord};
//!
//! struct Account {
//!     id: u64, // plain: set before the box is shared
//!     balance: TWord<i64>,
//!     frozen: TWord<bool>,
//! }
//!
//! let a = TBox::new(Account { id: 1, balance: TWord::new(100), frozen: TWord::new(false) });
//! let b = TBox::new(Account { id: 2, balance: TWord::new(0), frozen: TWord::new(false) });
//! atomically(|tx| {
//!     let (from, to) = (a.as_ref().word(|s| &s.balance), b.as_ref().word(|s| &s.balance));
//!     if tx.read(&a.as_ref().word(|s| &s.frozen))? {
//!         return Ok(());
//!     }
//!     let x = tx.read(&from)?;
//!     tx.write(&from, x - 30)?;
//!     let y = tx.read(&to)?;
//!     tx.write(&to, y + 30)
//! })?;
//! let total = atomically_read(|tx| Ok(tx.read(&a.as_ref().word(|s| &s.balance))? + tx.read(&b.as_ref().word(|s| &s.balance))?))?;
//! assert_eq!((total, a.balance.load(), b.id), (100, 70, 2));
//! # Ok::<(), engram::Error>(())
//! ```
//!
//! The projection cannot hand out a word that does not live in the box (a
//! word on the stack, say, which a commit would write after it is gone):
//!
//! ```compile_fail,E0597
//! use engram::stm::{atomically, TBox, TWord};
//! let b = TBox::new(0u64);
//! atomically(|tx| {
//!     let local = TWord::new(1u64);
//!     tx.write(&b.as_ref().word(|_| &local), 2) // `local` is not in the box
//! })
//! .unwrap();
//! ```

use super::engine::{RTx, STx, StmResult};
use super::vars::Var;
use std::any::Any;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A value that lives in a [`TWord`]'s value word: its bits, and back.
/// Implemented for the integers, `bool` and `char` (sealed: a word is read
/// back only from bits some `to_bits` of the same type wrote).
pub trait WordValue: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The value word for `self`.
    fn to_bits(self) -> u64;
    /// The value `to_bits` gave `b` for.
    fn from_bits(b: u64) -> Self;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! int_words {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl WordValue for $t {
            #[inline(always)]
            fn to_bits(self) -> u64 {
                self as u64
            }
            #[inline(always)]
            fn from_bits(b: u64) -> Self {
                b as $t
            }
        }
    )*};
}
int_words!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

impl sealed::Sealed for bool {}
impl WordValue for bool {
    #[inline(always)]
    fn to_bits(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn from_bits(b: u64) -> Self {
        b != 0
    }
}

impl sealed::Sealed for char {}
impl WordValue for char {
    #[inline(always)]
    fn to_bits(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn from_bits(b: u64) -> Self {
        char::from_u32(b as u32).unwrap_or('\0')
    }
}

/// A transactional word inline in a struct (see the module doc): the
/// versioned lock word, then the value word. Read and write it in a
/// transaction through [`TRef::word`]; [`TWord::load`] outside one.
#[repr(C, align(16))]
pub struct TWord<T: WordValue> {
    pub(crate) word: AtomicU64,
    pub(crate) bits: AtomicU64,
    _t: PhantomData<T>,
}

impl<T: WordValue> TWord<T> {
    /// A word holding `v` (for building a struct before it is boxed).
    pub fn new(v: T) -> Self {
        TWord { word: AtomicU64::new(0), bits: AtomicU64::new(v.to_bits()), _t: PhantomData }
    }

    /// The value word now (inside a seqlock read; the gap before the load
    /// is widened by `failpoint::stretch_reads` in tests). Acquire, as a
    /// `TVar`'s.
    #[inline(always)]
    pub(crate) fn bits(&self) -> u64 {
        crate::failpoint::read_gap();
        self.bits.load(Ordering::Acquire)
    }

    /// The committed value, outside any transaction (one atomic load: a
    /// word is never torn).
    pub fn load(&self) -> T {
        T::from_bits(self.bits.load(Ordering::Acquire))
    }
}

impl<T: WordValue + Default> Default for TWord<T> {
    fn default() -> Self {
        TWord::new(T::default())
    }
}

impl<T: WordValue + std::fmt::Debug> std::fmt::Debug for TWord<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TWord({:?})", self.load())
    }
}

/// A volatile struct with [`TWord`] fields, shared like an `Arc<S>`; the
/// last handle's release is deferred through crossbeam-epoch past every
/// transaction attempt that may still reach its words (module doc, 3).
/// Plain fields are read through `Deref` (set them before boxing).
///
/// Nodes linked by address, as a pointer-linked structure holds them (an
/// arena owns the boxes, so every link stays valid while it is borrowed):
///
/// ```
/// use engram::stm::{atomically, atomically_read, TBox, TRef, TWord};
///
/// struct Node {
///     key: u64,
///     next: TWord<usize>, // the next node's `as_ptr`, 0 for none
/// }
/// let arena: Vec<TBox<Node>> = (0..3).map(|k| TBox::new(Node { key: k, next: TWord::new(0) })).collect();
/// atomically(|tx| {
///     for w in arena.windows(2) {
///         tx.write(&w[0].as_ref().word(|n| &n.next), w[1].as_ptr() as usize)?;
///     }
///     Ok(())
/// })?;
/// let keys = atomically_read(|tx| {
///     let (mut keys, mut at) = (vec![], arena[0].as_ptr() as usize);
///     while at != 0 {
///         // SAFETY: every link is a box of `arena`, alive while borrowed here.
///         let n = unsafe { TRef::from_raw(at as *const Node) };
///         keys.push(n.get().key);
///         at = tx.read(&n.word(|n| &n.next))?;
///     }
///     Ok(keys)
/// })?;
/// assert_eq!(keys, [0, 1, 2]);
/// # Ok::<(), engram::Error>(())
/// ```
pub struct TBox<S: Send + Sync + 'static>(ManuallyDrop<Arc<S>>);

impl<S: Send + Sync + 'static> TBox<S> {
    /// Boxes `s`.
    pub fn new(s: S) -> Self {
        TBox(ManuallyDrop::new(Arc::new(s)))
    }

    /// The box borrowed, to reach its words ([`TRef::word`]).
    #[inline(always)]
    pub fn as_ref(&self) -> TRef<'_, S> {
        TRef(&self.0)
    }

    /// The boxed value's address: what [`TRef::from_raw`] takes back (a
    /// link in a pointer-linked structure, say).
    #[inline(always)]
    pub fn as_ptr(&self) -> *const S {
        Arc::as_ptr(&self.0)
    }
}

impl<S: Send + Sync + 'static> Clone for TBox<S> {
    fn clone(&self) -> Self {
        TBox(ManuallyDrop::new(Arc::clone(&self.0)))
    }
}

impl<S: Send + Sync + 'static> std::ops::Deref for TBox<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.0
    }
}

impl<S: Send + Sync + 'static> Drop for TBox<S> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `self.0` is not used again.
        let inner = unsafe { ManuallyDrop::take(&mut self.0) };
        let g = crossbeam_epoch::pin();
        // SAFETY: released after every thread pinned now has unpinned
        // (module doc, 3); `S: Send + Sync + 'static`, so its `Arc` may be
        // dropped on another thread, later.
        unsafe { g.defer_unchecked(move || drop(inner)) };
    }
}

/// A borrowed [`TBox`]: its words are reached with [`TRef::word`]. Copy,
/// one pointer.
pub struct TRef<'a, S: Send + Sync + 'static>(&'a S);

impl<S: Send + Sync + 'static> Clone for TRef<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: Send + Sync + 'static> Copy for TRef<'_, S> {}

impl<'a, S: Send + Sync + 'static> TRef<'a, S> {
    /// The box whose value is at `p` ([`TBox::as_ptr`]).
    ///
    /// # Safety
    ///
    /// `p` is the `as_ptr` of a [`TBox`] whose allocation stays alive for
    /// `'a`: a handle to it is held (by an arena that frees nothing while
    /// it is borrowed, say), or its last handle is dropped only after
    /// every transaction that may reach it through `p` has ended.
    #[inline(always)]
    pub unsafe fn from_raw(p: *const S) -> Self {
        // SAFETY: the caller's contract: `p` points to a live `S` for 'a.
        TRef(unsafe { &*p })
    }

    /// The boxed value's address ([`TBox::as_ptr`]).
    #[inline(always)]
    pub fn as_ptr(self) -> *const S {
        self.0
    }

    /// The boxed value (its plain fields).
    #[inline(always)]
    pub fn get(self) -> &'a S {
        self.0
    }

    /// The word `pick` selects in the boxed value, as a variable. `pick`
    /// must give a word for any borrow of the value, so it can only return
    /// one inside it (or a `'static` one): see the module doc, 2.
    #[inline(always)]
    pub fn word<T: WordValue>(self, pick: impl for<'b> Fn(&'b S) -> &'b TWord<T>) -> TWordRef<'a, T> {
        TWordRef { w: pick(self.0), owner: self.0 as *const S as *const (), keep: keep_box::<S> }
    }
}

/// A count on the box at `owner` (an `S` inside a [`TBox`]'s `Arc`), for a
/// `retry`'s unpinned wait.
///
/// # Safety
///
/// `owner` is the value of a live `TBox<S>`.
unsafe fn keep_box<S: Send + Sync + 'static>(owner: *const ()) -> Arc<dyn Any + Send + Sync> {
    let p = owner as *const S;
    // SAFETY: `p` is `Arc::as_ptr` of a live `Arc<S>` (the caller's
    // contract), so one more strong count and an `Arc` owning it is sound.
    unsafe {
        Arc::increment_strong_count(p);
        Arc::from_raw(p)
    }
}

/// A [`TWord`] inside a borrowed [`TBox`]: a variable for
/// `tx.read` / `tx.write` (and read-only transactions' `tx.read`).
pub struct TWordRef<'a, T: WordValue> {
    w: &'a TWord<T>,
    /// The box's value, and how to take a count on it ([`keep_box`]).
    owner: *const (),
    keep: Keep,
}

/// How a [`TWordRef`] takes a count on its box ([`keep_box`] of its type).
pub(crate) type Keep = unsafe fn(*const ()) -> Arc<dyn Any + Send + Sync>;

impl<T: WordValue> Clone for TWordRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: WordValue> Copy for TWordRef<'_, T> {}

impl<'a, T: WordValue> TWordRef<'a, T> {
    /// A count on the word's box (a `retry` waits unpinned on its word).
    pub(crate) fn keep(&self) -> Arc<dyn Any + Send + Sync> {
        // SAFETY: `owner` is the value of the box `self` borrows (made by
        // `TRef::word`, or put back from its parts, `from_parts`), alive
        // for this borrow, and `keep` is `keep_box` of its type.
        unsafe { (self.keep)(self.owner) }
    }

    /// The word itself.
    #[inline(always)]
    pub(crate) fn cell(&self) -> &TWord<T> {
        self.w
    }

    /// The handle's parts, to pass in registers ([`TWordRef::from_parts`]
    /// puts them back).
    #[inline(always)]
    pub(crate) fn parts(&self) -> (&'a TWord<T>, *const (), Keep) {
        (self.w, self.owner, self.keep)
    }

    /// The handle whose [`TWordRef::parts`] these are (and only those: the
    /// owner and its `keep` must be a box's, as `TRef::word` made them).
    #[inline(always)]
    pub(crate) fn from_parts(w: &'a TWord<T>, owner: *const (), keep: Keep) -> Self {
        TWordRef { w, owner, keep }
    }
}

impl<T: WordValue> Var for TWordRef<'_, T> {
    type In = T;
    type Out = T;
    #[inline]
    fn read_in(&self, tx: &STx<'_>) -> StmResult<T> {
        tx.read_word(self).map(T::from_bits)
    }
    #[inline]
    fn write_in(&self, tx: &STx<'_>, v: T) -> StmResult<()> {
        tx.write_word(&self.w.word, v.to_bits());
        Ok(())
    }
}

impl<T: WordValue> crate::stm::ReadOnlyVar for TWordRef<'_, T> {
    #[inline]
    fn read_ro(&self, tx: &RTx<'_>) -> StmResult<T> {
        tx.read_word(self).map(T::from_bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stm::{atomically, atomically_read};

    struct Pair {
        a: TWord<u64>,
        b: TWord<i32>,
        c: TWord<bool>,
    }

    fn pair() -> TBox<Pair> {
        TBox::new(Pair { a: TWord::new(1), b: TWord::new(-2), c: TWord::new(false) })
    }

    #[test]
    fn words_commit_and_read_back() {
        let p = pair();
        let r = p.as_ref();
        atomically(|tx| {
            let a = tx.read(&r.word(|s| &s.a))?;
            tx.write(&r.word(|s| &s.b), -(a as i32) - 10)?;
            tx.write(&r.word(|s| &s.c), true)?;
            assert_eq!(tx.read(&r.word(|s| &s.b))?, -11, "a transaction reads its own write");
            Ok(())
        })
        .unwrap();
        assert_eq!((p.a.load(), p.b.load(), p.c.load()), (1, -11, true));
        let seen = atomically_read(|tx| Ok((tx.read(&r.word(|s| &s.a))?, tx.read(&r.word(|s| &s.b))?))).unwrap();
        assert_eq!(seen, (1, -11));
        assert_eq!(std::mem::size_of::<TWord<u8>>(), 16);
    }

    #[test]
    fn values_round_trip() {
        for c in ['a', 'é', char::MAX] {
            assert_eq!(char::from_bits(c.to_bits()), c);
        }
        assert_eq!(i64::from_bits((-5i64).to_bits()), -5);
        assert_eq!(i8::from_bits((-5i8).to_bits()), -5);
        assert!(bool::from_bits(true.to_bits()) && !bool::from_bits(false.to_bits()));
    }

    #[test]
    fn a_raw_link_reaches_the_same_words() {
        let p = pair();
        // SAFETY: `p` is alive for the whole test.
        let r = unsafe { TRef::from_raw(p.as_ptr()) };
        atomically(|tx| tx.write(&r.word(|s| &s.a), 9)).unwrap();
        assert_eq!((p.a.load(), r.get().a.load()), (9, 9));
    }

    /// A retry waits on its words with a count on their box, taken by the
    /// rerun that keeps (the box's handle may go meanwhile).
    #[test]
    fn retry_wakes_on_a_word() {
        let p = pair();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                atomically(|tx| {
                    let r = p.as_ref();
                    if !tx.read(&r.word(|s| &s.c))? {
                        return tx.retry();
                    }
                    tx.read(&r.word(|s| &s.a))
                })
                .unwrap()
            });
            std::thread::sleep(std::time::Duration::from_millis(20));
            atomically(|tx| {
                let r = p.as_ref();
                tx.write(&r.word(|s| &s.a), 42)?;
                tx.write(&r.word(|s| &s.c), true)
            })
            .unwrap();
            assert_eq!(waiter.join().unwrap(), 42);
        });
    }
}
