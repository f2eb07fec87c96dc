//! Read-only transactions ([`RTx`], `Pool::atomically_read`): TL2's
//! read-only protocol with nothing else around it (issue 14).
//!
//! What it keeps true: a body that returns `Ok` saw the pool's committed
//! state at one instant, the snapshot `rv`. The protocol, per attempt:
//!
//! 1. enter the pool's GC gate through this thread's slot (`pool/gate.rs`),
//!    so the GC frees nothing the attempt may still read;
//! 2. take the snapshot `rv`: a clock value this thread already sampled
//!    or stamped, reused (`snapshot.rs`), or a fresh sample of the pool
//!    domain's clock (`domain.rs`);
//! 3. every read is the seqlock read: the lock word (acquire), refused if
//!    locked by a live committer or newer than `rv`; the value; an acquire
//!    fence; the lock word again, refused unless unchanged;
//! 4. a refused read ends the attempt with a conflict; the next attempt
//!    starts again at 1 with a fresh `rv`, after a back-off (at once, and
//!    not counted as a conflict, if the refused attempt's `rv` was a
//!    reused one: an old snapshot is not contention).
//!
//! Why that suffices (the argument of `domain.rs`): a writer takes its
//! timestamp only after it holds the locks of everything it writes, and
//! stores its values in place before unlocking each word with its
//! timestamp as the version. A value some writer U stored is seen only
//! with U's version, at most `rv`, so U held all its locks before the
//! attempt sampled `rv`, and every other variable of U the attempt reads
//! is seen locked or newer than `rv` (refused) or already with U's value.
//! A writer that commits after the sample is invisible, or refused. The
//! argument needs no more of `rv` than that the clock had reached it
//! before the attempt began, which a reused value meets
//! (`snapshot.rs` says why the result is still current). That
//! holds beside hardware commits too (`FineHtm` locks and validates in one
//! hardware transaction and takes its timestamp after; Hybrid level 1 runs
//! volatile-only transactions, which touch no pool variable), so the lean
//! path runs there. Under the `Coarse` runtime, whose transactions record
//! the values they read, the body runs on the full path instead.
//!
//! What an attempt does not do: no `State` box, no read set, no heap
//! allocation, no write to any shared line (the gate's slot is the
//! thread's own), no flush, no fence, no commit. There is no write
//! method, so a write does not compile. Fallback to the full path
//! (`Pool::atomically` with the same body, through [`RTx::over`]): after
//! [`LEAN_ATTEMPTS`] conflicts in a row (the full path extends its
//! snapshot and, if it keeps losing, runs serially, so the reader makes
//! progress under any writer pressure), on [`RTx::retry`] (which needs a
//! read set to wait on), and under `Coarse`.
//!
//! What it reads: `PTVar`s, `PTField`s, array headers and committed
//! immutable arrays (the HAMT's slot arrays, [`RTx::slice_of`]: their
//! address is read inside a stable read, and a committed array is written
//! before the commit that links it unlocks its variable). Volatile
//! `TVar`s in a volatile-only transaction ([`atomically_read`]: the same
//! steps on the volatile clock, with no pool and so no gate); a `TVar`
//! read in a pool's lean attempt ends it for the full path, which has
//! both domains' snapshots.
//!
//! The thread's entry for the pool comes from a one-entry cache
//! (`pool_state::local_ref`: no count taken). The per-read bounds check
//! stays per read: every address a read uses was itself read from the
//! pool (a link, a slot array), so no check made once per attempt can
//! cover it.
//!
//! Crash behaviour: none; a read-only transaction writes nothing.

use super::domain::VOLATILE;
use super::pool_state::{local_ref, Local};
use super::run::{backoff, count_stat, IN_TX};
use super::tx::{array_len_in, array_len_within, cell_fits, check_cell_in};
use super::{word_at, STx, StmError, StmResult, MAX_VALUE};
use crate::error::{Error, Result};
use crate::format::{ObjHeader, OBJ_ARRAY, OBJ_HEADER, OBJ_TAG, OBJ_TAG_MASK};
use crate::pool::PoolInner;
use crate::ptr::PArray;
use crate::stm::tvar::TVarInner;
use crate::stm::word;
use crate::{Persistent, Pool};
use crossbeam_epoch::Guard;
use std::cell::{Cell, OnceCell};
use std::mem::size_of;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

/// Conflicts in a row after which a read-only transaction runs on the full
/// path (snapshot extension, then serial mode).
pub const LEAN_ATTEMPTS: u32 = 4;

/// A read-only transaction: reads `PTVar`s, `PTField`s (mutable and
/// `#[immutable]`) and what the collections' lookups need, and nothing
/// else. Obtained in [`Pool::atomically_read`]; the body may run several
/// times. It has no `write`:
///
/// ```compile_fail,E0599
/// use engram::stm::{PTVar, RTx, StmResult};
/// fn bump(tx: &RTx<'_>, v: &PTVar<u64>) -> StmResult<()> {
///     let x = tx.read(v)?;
///     tx.write(v, x + 1) // a read-only transaction cannot write
/// }
/// ```
pub struct RTx<'t> {
    /// What the reads go through: a pool's or the volatile domain's lean
    /// path, or the full transaction (fallback). One field, so a `TVar`
    /// read's test of the volatile lean path is one compare.
    via: Via<'t>,
    /// The snapshot of the pool's clock (at most `word::MAX_VERSION`).
    rv: u64,
    /// The pool's epoch (a lock word of a live committer carries it).
    epoch: u16,
    /// The heap's bounds when the attempt began: `[lo, hi)`.
    lo: u64,
    hi: u64,
    /// The one-compare bounds check's limit ([`in_span`]): the number of
    /// 8-byte steps from `lo` at which a cell of up to [`MAX_CELL`] bytes
    /// still ends by `hi`.
    lim: u64,
    /// The attempt's epoch pin, taken at its first boxed `TVar` read (a
    /// value it clones stays allocated until the attempt ends).
    pin: OnceCell<Guard>,
}

/// What a read-only transaction's reads go through.
#[derive(Clone, Copy)]
enum Via<'t> {
    /// The lean path over volatile `TVar`s only ([`atomically_read`]).
    Volatile,
    /// The lean path over this pool (`Pool::atomically_read`).
    Pool(&'t PoolInner),
    /// The full transaction (the fallback, [`RTx::over`]).
    Full(&'t STx<'t>),
}

/// Something a read-only transaction can read: [`crate::stm::PTVar`],
/// [`crate::stm::FieldRef`], [`crate::stm::ImmutableRef`].
pub trait ReadOnlyVar: crate::stm::ReadVar {
    /// Reads it in `tx`.
    fn read_ro(&self, tx: &RTx<'_>) -> StmResult<Self::Out>;
}

/// A transaction that can read (an [`STx`] or an [`RTx`]): what lookups
/// generic over both need. Sealed.
pub trait ReadTx: sealed::Sealed {
    /// Reads `v`.
    fn get<V: ReadOnlyVar>(&self, v: &V) -> StmResult<V::Out>;
    /// The element count of array `a` from its header (`STx::array_len`).
    #[doc(hidden)]
    fn array_len_of<T: Persistent>(&self, a: PArray<T>) -> Result<u64>;
    /// The elements of the immutable committed array `a` (reached through
    /// a variable this transaction read), borrowed for its life: the
    /// HAMT's slot arrays.
    #[doc(hidden)]
    fn elements_of<T: Persistent>(&self, a: PArray<T>) -> Result<&[T]>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::STx<'_> {}
    impl Sealed for super::RTx<'_> {}
}

impl ReadTx for STx<'_> {
    #[inline]
    fn get<V: ReadOnlyVar>(&self, v: &V) -> StmResult<V::Out> {
        v.read_var(self)
    }
    #[inline]
    fn array_len_of<T: Persistent>(&self, a: PArray<T>) -> Result<u64> {
        self.array_len(a)
    }
    fn elements_of<T: Persistent>(&self, a: PArray<T>) -> Result<&[T]> {
        self.slice_of(a)
    }
}

impl ReadTx for RTx<'_> {
    #[inline]
    fn get<V: ReadOnlyVar>(&self, v: &V) -> StmResult<V::Out> {
        v.read_ro(self)
    }
    #[inline]
    fn array_len_of<T: Persistent>(&self, a: PArray<T>) -> Result<u64> {
        self.array_len(a)
    }
    #[inline]
    fn elements_of<T: Persistent>(&self, a: PArray<T>) -> Result<&[T]> {
        self.slice_of(a)
    }
}

impl<'t> RTx<'t> {
    /// A read-only view of the full transaction `tx` (the fallback path:
    /// every read is `tx`'s, with its read set and validation).
    pub fn over(tx: &'t STx<'t>) -> Self {
        RTx { via: Via::Full(tx), rv: 0, epoch: 0, lo: 0, hi: 0, lim: 0, pin: OnceCell::new() }
    }

    /// Reads `var`.
    #[inline]
    pub fn read<V: ReadOnlyVar>(&self, var: &V) -> StmResult<V::Out> {
        var.read_ro(self)
    }

    /// Runs the body again on the full path, where it blocks until a
    /// variable read so far changes (a read-only attempt keeps no read set
    /// to wait on).
    pub fn retry<R>(&self) -> StmResult<R> {
        Err(StmError::Retry)
    }

    /// Whether this is the lean path (not a view of a full transaction).
    pub fn is_lean(&self) -> bool {
        !matches!(self.via, Via::Full(_))
    }

    /// The bounds check of a cell of `P` at `addr` (inline: `P`'s size is
    /// a constant, so it is [`in_span`]'s one compare; the full check
    /// against the current mapping when it fails: the pool may have grown,
    /// or the cell lies in the heap's last [`MAX_CELL`] bytes).
    #[inline]
    fn check<P: Persistent>(&self, addr: u64, max: usize) -> StmResult<()> {
        if cell_size_ok::<P>(max) && in_span(addr, self.lo, self.lim) {
            return Ok(());
        }
        self.check_slow::<P>(addr, max)
    }

    #[cold]
    fn check_slow<P: Persistent>(&self, addr: u64, max: usize) -> StmResult<()> {
        if cell_fits::<P>(addr, max, (self.lo, self.hi)) {
            return Ok(());
        }
        check_cell_in::<P>(&self.pool()?.space, addr, max)
    }

    /// The pool of a lean attempt (a view of a full transaction has none:
    /// its reads go through `full`).
    fn pool(&self) -> Result<&'t PoolInner> {
        match self.via {
            Via::Pool(p) => Ok(p),
            _ => Err(Error::invalid("a read-only transaction without a pool")),
        }
    }

    /// Step 3, the seqlock read of the cell whose lock word is at `addr`
    /// (checked): `load` copies the value while the word is unlocked, not
    /// newer than `rv`, and unchanged around it.
    #[inline]
    fn stable(&self, addr: u64, load: impl FnOnce()) -> StmResult<()> {
        // SAFETY: `check` proved [addr, addr + 8) inside the mapping and
        // addr 8-aligned; the pool is borrowed for 't and the GC waits for
        // the gate this attempt holds.
        self.stable_word(unsafe { word_at(addr as usize) }, load)
    }

    /// Step 3 on lock word `w` (a pool cell's, or a `TVar`'s in a
    /// volatile-only attempt, whose epoch is 0).
    #[inline]
    fn stable_word(&self, w: &AtomicU64, load: impl FnOnce()) -> StmResult<()> {
        let w1 = w.load(Ordering::Acquire);
        // (The common word, unlocked and not newer than `rv`, passes in one
        // compare; any other is looked at in full.)
        if !word::clean_at_most(planted_fast(w1), self.rv) && refused(w1, self.rv, self.epoch) {
            return Err(StmError::Conflict);
        }
        if crate::failpoint::planted("stm.ro_slow_read") {
            std::thread::yield_now();
        }
        load();
        fence(Ordering::Acquire);
        if w.load(Ordering::Relaxed) != w1 && !planted_recheck() {
            return Err(StmError::Conflict);
        }
        Ok(())
    }

    /// Reads a volatile `TVar` (`tvar.rs`). In a volatile-only attempt
    /// ([`crate::stm::atomically_read`]): the seqlock read against the
    /// volatile clock's snapshot, then the value (inline: from the bits
    /// alone; boxed: cloned under the attempt's epoch pin, taken at its
    /// first boxed read, as on the full path). In a pool's
    /// lean attempt a `TVar` is not read (the attempt has the pool's
    /// snapshot only): the attempt ends and the body runs on the full
    /// path, which reads both domains.
    #[inline]
    pub(crate) fn read_tvar<T: Clone + Send + Sync + 'static>(&self, v: &Arc<TVarInner<T>>) -> StmResult<T> {
        match self.via {
            Via::Volatile => {}
            Via::Full(tx) => return tx.read_tvar(v),
            Via::Pool(_) => return Err(StmError::Retry),
        }
        let mut b = 0u64;
        if TVarInner::<T>::inline() {
            self.stable_word(&v.word, || b = v.bits())?;
            return TVarInner::<T>::inline_value(b).ok_or_else(|| StmError::Failed(Error::invalid("an inline TVar without its value")));
        }
        let g = self.pin.get_or_init(crossbeam_epoch::pin);
        self.stable_word(&v.word, || b = v.bits())?;
        // SAFETY: `b` was loaded from `v` while `g` is pinned.
        Ok(unsafe { v.value_of(b, g) })
    }

    /// Reads a `TWord` (`tword.rs`), its value word's bits. In a
    /// volatile-only attempt: the seqlock read against the volatile clock's
    /// snapshot, no pin (the bits are the value; the word's box is borrowed
    /// for the read). A pool's lean attempt ends for the full path, as for
    /// a `TVar`; on the full path the `STx`'s read.
    #[inline]
    pub(crate) fn read_word<T: crate::stm::WordValue>(&self, r: &crate::stm::TWordRef<'_, T>) -> StmResult<u64> {
        if !matches!(self.via, Via::Volatile) {
            // (The handle's parts in registers, so the lean loop stores
            // nothing for this path.)
            let (w, owner, keep) = r.parts();
            return self.read_word_elsewhere(w, owner, keep);
        }
        let c = r.cell();
        let mut b = 0u64;
        self.stable_word(&c.word, || b = c.bits())?;
        Ok(b)
    }

    /// [`RTx::read_word`] off the volatile lean path, out of line; the
    /// word's handle in parts ([`crate::stm::TWordRef::parts`]).
    #[cold]
    #[inline(never)]
    fn read_word_elsewhere<T: crate::stm::WordValue>(
        &self,
        w: &crate::stm::TWord<T>,
        owner: *const (),
        keep: crate::stm::tword::Keep,
    ) -> StmResult<u64> {
        match self.via {
            Via::Full(tx) => tx.read_word(&crate::stm::TWordRef::from_parts(w, owner, keep)),
            _ => Err(StmError::Retry),
        }
    }

    /// Reads an embedded volatile field (`TField`, `tfield.rs`): its lock
    /// word `word`, its value by `load`. In a volatile-only attempt the
    /// seqlock read against the volatile clock's snapshot (no read set, so
    /// `keep` is not called: the caller holds the field's owner for the
    /// attempt); in a pool's lean attempt, as for a `TVar`, the attempt
    /// ends for the full path; on the full path the `STx`'s read.
    #[inline]
    pub(crate) fn read_field<T, K>(&self, word: &AtomicU64, load: impl Fn() -> T, keep: impl FnOnce() -> Arc<K>) -> StmResult<T>
    where
        T: Clone + Send + Sync + 'static,
        K: std::any::Any + Send + Sync,
    {
        match self.via {
            Via::Volatile => {}
            Via::Full(tx) => return tx.read_volatile(word, load, keep),
            Via::Pool(_) => return Err(StmError::Retry),
        }
        let mut out = None;
        self.stable_word(word, || out = Some(load()))?;
        out.ok_or_else(|| StmError::Failed(Error::invalid("a field read produced nothing")))
    }

    /// Reads the cell at `addr` (value of at most `max` bytes).
    #[inline]
    pub(crate) fn read_cell<P: Persistent>(&self, addr: u64, max: usize) -> StmResult<P> {
        if let Via::Full(tx) = self.via {
            return read_cell_full(tx, addr, max);
        }
        self.check::<P>(addr, max)?;
        let n = size_of::<P>().div_ceil(8);
        let mut words = [0u64; MAX_VALUE / 8];
        self.stable(addr, || {
            for (i, w) in words.iter_mut().enumerate().take(n) {
                // SAFETY: `check` proved [addr, addr + 8 + 8n) inside the
                // mapping and addr 8-aligned.
                *w = unsafe { word_at(addr as usize + 8 + 8 * i) }.load(Ordering::Relaxed);
            }
        })?;
        // SAFETY: `words` holds at least size_of::<P>() bytes of a stable
        // snapshot of the cell's value; every bit pattern is a valid P.
        Ok(unsafe { std::ptr::read_unaligned(words.as_ptr() as *const P) })
    }

    /// Reads an `#[immutable]` field: the same seqlock read (on the full
    /// path, without a read-set entry: `STx::read_immutable`).
    #[inline]
    pub(crate) fn read_immutable<T: Persistent + crate::stm::Persist<P = T>>(&self, f: &crate::stm::FieldRef<T>) -> StmResult<T> {
        if let Via::Full(tx) = self.via {
            return tx.read_immutable(f);
        }
        self.read_cell::<T>(f.addr(), 8)
    }

    /// Reads a boxed variable (`boxed.rs`): the cell's pointer and the box
    /// copied inside one seqlock read (a box freed and reused meanwhile is
    /// read torn, and the re-check refuses it). On the stack up to 256
    /// bytes.
    pub(crate) fn read_boxed<P: Persistent>(&self, addr: u64) -> StmResult<P> {
        if let Via::Full(tx) = self.via {
            return tx.read_boxed(addr);
        }
        self.check::<crate::ptr::PPtr<P>>(addr, 8)?;
        let space = &self.pool()?.space;
        let n = size_of::<P>().div_ceil(8);
        let mut small = [0u64; 32];
        let mut big = Vec::new();
        let buf: &mut [u64] = if n <= small.len() {
            &mut small[..n]
        } else {
            big.resize(n, 0);
            &mut big
        };
        let (mut at, mut ok) = (0, false);
        self.stable(addr, || {
            // SAFETY: `check` proved [addr, addr + 16) inside the mapping.
            at = unsafe { word_at(addr as usize + 8) }.load(Ordering::Relaxed);
            ok = super::boxed::copy_box(space, at, buf);
        })?;
        if !ok {
            return Err(StmError::Failed(Error::BadPointer { addr: at }));
        }
        // SAFETY: `buf` holds at least size_of::<P>() bytes of a box read
        // whole inside a stable read; every bit pattern is a valid P.
        Ok(unsafe { std::ptr::read_unaligned(buf.as_ptr() as *const P) })
    }

    /// The element count of array `a` from its header alone (as
    /// `STx::array_len`: each element read is bounds-checked itself).
    #[inline]
    pub(crate) fn array_len<T: Persistent>(&self, a: PArray<T>) -> Result<u64> {
        if let Via::Full(tx) = self.via {
            return array_len_full(tx, a);
        }
        let addr = a.addr();
        // The header and the 32 bytes after it inside the heap, 8-aligned
        // (one compare); the count's elements end by `hi` (no overflow:
        // `addr + 32 <= hi`); the object tag and the array flag.
        if in_span(addr.wrapping_sub(OBJ_HEADER), self.lo, self.lim) {
            // SAFETY: [addr - 16, addr + 32) lies inside the heap's bounds
            // seen when the attempt began, which stay mapped while the pool
            // is borrowed; an ObjHeader is plain data, any bit pattern valid.
            let h: ObjHeader = unsafe { std::ptr::read_unaligned((addr - OBJ_HEADER) as *const ObjHeader) };
            let fits = (self.hi - addr).checked_div(size_of::<T>() as u64).is_none_or(|m| h.count <= m);
            if h.flags & (OBJ_TAG_MASK | OBJ_ARRAY) == OBJ_TAG | OBJ_ARRAY && fits {
                return Ok(h.count);
            }
        }
        self.array_len_slow::<T>(addr)
    }

    /// [`RTx::array_len`]'s exact check against the pool's current mapping
    /// (it may have grown), with the error.
    #[cold]
    #[inline(never)]
    fn array_len_slow<T: Persistent>(&self, addr: u64) -> Result<u64> {
        array_len_in::<T>(&self.pool()?.space, addr)
    }

    /// The elements of array `a`, an immutable committed array whose
    /// address this attempt read inside a stable read (a HAMT node's slot
    /// array). Checked from the header alone (object tag, array flag,
    /// elements inside the mapped heap; [`STx::slice_of`] also asks the
    /// allocator for the object's slot): a committed array is written
    /// before the commit that links it unlocks its variable, so a stable
    /// read at or below `rv` sees its final bytes, and the GC frees none
    /// while the attempt holds the gate.
    #[inline]
    pub(crate) fn slice_of<T: Persistent>(&self, a: PArray<T>) -> Result<&[T]> {
        if let Via::Full(tx) = self.via {
            return tx.slice_of(a);
        }
        let n = match array_len_within::<T>(a.addr(), (self.lo, self.hi)) {
            Some(n) => n,
            None => array_len_in::<T>(&self.pool()?.space, a.addr())?,
        };
        if a.addr() % std::mem::align_of::<T>() as u64 != 0 {
            return Err(Error::BadPointer { addr: a.addr() });
        }
        // SAFETY: header and elements lie inside the mapping (checked
        // above), which stays while the pool is borrowed for 't; the array
        // is committed and immutable, and the GC waits for the gate this
        // attempt holds (see above). Every bit pattern is a valid T.
        Ok(unsafe { std::slice::from_raw_parts(a.addr() as *const T, n as usize) })
    }
}

/// [`RTx::read_cell`] on the full path (`RTx::over`), out of line: the
/// lean read, inlined into every lookup, then carries none of the full
/// read's code (read set, validation), so it stays small enough to inline.
#[inline(never)]
fn read_cell_full<P: Persistent>(tx: &STx<'_>, addr: u64, max: usize) -> StmResult<P> {
    tx.read_cell(addr, max)
}

/// [`RTx::array_len`] on the full path, out of line (as [`read_cell_full`]).
#[inline(never)]
fn array_len_full<T: Persistent>(tx: &STx<'_>, a: PArray<T>) -> Result<u64> {
    tx.array_len(a)
}

/// The largest cell (lock word and value) a read-only read checks inline.
const MAX_CELL: u64 = 8 + MAX_VALUE as u64;

/// Whether a cell of `P` (its value at most `max` bytes) is one the inline
/// check covers: a constant once `P` and `max` are known.
#[inline(always)]
fn cell_size_ok<P: Persistent>(max: usize) -> bool {
    size_of::<P>() <= max && size_of::<P>() <= MAX_VALUE && std::mem::align_of::<P>() <= 8
}

/// [`RTx::lim`] for heap bounds `[lo, hi)`: a cell of at most [`MAX_CELL`]
/// bytes at `lo + 8k` ends by `hi` for every `k < lim` (`8k < hi - lo -
/// MAX_CELL`).
#[inline]
fn span_limit(lo: u64, hi: u64) -> u64 {
    hi.saturating_sub(lo + MAX_CELL) / 8
}

/// Whether a cell of at most [`MAX_CELL`] bytes at `addr` lies 8-aligned
/// inside `[lo, hi)` (`lim` from [`span_limit`]), in one compare: the
/// offset from `lo` rotated right by 3 is its 8-byte step when aligned;
/// a misaligned offset carries its low bits to the top (at least 2^61),
/// and an address below `lo` wraps to at least 2^63 (user addresses are
/// below 2^63) and so to at least 2^60 rotated; `lim` is below 2^60
/// (`hi - lo < 2^63`). False in the heap's last `MAX_CELL` bytes, where
/// the exact check decides (`RTx::check_slow`).
#[inline(always)]
fn in_span(addr: u64, lo: u64, lim: u64) -> bool {
    addr.wrapping_sub(lo).rotate_right(3) < lim
}

/// Whether step 3 refuses lock word `w1`: locked by a live committer (of
/// `epoch`), or newer than the snapshot `rv` (a word locked by an earlier
/// epoch, left by a crash, reads as unlocked). Out of line: the common
/// word is accepted by `word::clean_at_most` before this is asked.
#[cold]
#[inline(never)]
fn refused(w1: u64, rv: u64, epoch: u16) -> bool {
    word::is_locked(w1, epoch) || (word::version(w1) > rv && !planted_rv())
}

/// Planted bug `stm.ro_no_rv_check`: a version newer than the snapshot is
/// accepted (tests prove the stress test catches it).
#[inline(always)]
fn planted_rv() -> bool {
    crate::failpoint::planted("stm.ro_no_rv_check")
}

/// Planted bug `stm.ro_fast_check_ignores_lock`: the one-compare test sees
/// `w` with its lock bits cleared (a live committer's locked word passes).
#[inline(always)]
fn planted_fast(w: u64) -> u64 {
    if crate::failpoint::planted("stm.ro_fast_check_ignores_lock") {
        return w & !0xFFFF;
    }
    w
}

/// Planted bug `stm.ro_no_recheck`: the lock word is not read again after
/// the value.
#[inline(always)]
fn planted_recheck() -> bool {
    crate::failpoint::planted("stm.ro_no_recheck")
}

/// Whether this thread's read-only transactions must take the full path
/// (the `Coarse` runtime validates by value).
#[inline]
fn full_path_only() -> bool {
    crate::stm::runtime::coarse_possible() && crate::stm::runtime::current() == crate::stm::runtime::Runtime::Coarse
}

/// The thread's in-transaction mark, set for the lean loop and cleared
/// when it ends.
struct InTx;

impl InTx {
    #[inline]
    fn enter() -> Self {
        IN_TX.with(|t| t.set(true));
        InTx
    }
}

impl Drop for InTx {
    #[inline]
    fn drop(&mut self) {
        IN_TX.with(|t| t.set(false));
    }
}

impl Pool {
    /// Runs `f` as a read-only STM transaction over this pool's variables
    /// (see [`RTx`]): no read set, no allocation, no shared write, no flush
    /// or fence. `f` may run more than once; after [`LEAN_ATTEMPTS`]
    /// conflicts in a row, on [`RTx::retry`], or under the `Coarse` runtime
    /// it runs as [`Pool::atomically`] would.
    ///
    /// ```
    /// use engram::{Pool, CreateOptions, Durability};
    /// use engram::stm::PTVar;
    /// # let path = std::env::temp_dir().join(format!("engram-rtx-doc-{}.pool", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let pool = Pool::create(&path, CreateOptions::new("bank").durability(Durability::Process))?;
    /// let a: PTVar<u64> = pool.root("a", || 70)?;
    /// let b: PTVar<u64> = pool.root("b", || 30)?;
    /// assert_eq!(pool.atomically_read(|tx| Ok(tx.read(&a)? + tx.read(&b)?))?, 100);
    /// # pool.close()?; std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), engram::Error>(())
    /// ```
    pub fn atomically_read<R>(&self, mut f: impl FnMut(&RTx<'_>) -> StmResult<R>) -> Result<R> {
        if !IN_TX.with(Cell::get) && !full_path_only() {
            if let Some(r) = self.lean(&mut f)? {
                return Ok(r);
            }
        }
        self.read_full(f)
    }

    /// The full path of [`Pool::atomically_read`] (also its nesting
    /// error), out of line: the lean path's function then saves and
    /// restores fewer registers.
    #[cold]
    #[inline(never)]
    fn read_full<R>(&self, mut f: impl FnMut(&RTx<'_>) -> StmResult<R>) -> Result<R> {
        self.atomically(|tx| f(&RTx::over(tx)))
    }

    /// The lean attempts (steps 1-4 of the module doc); `None`: take the
    /// full path. The first attempt inline, the others (after a conflict)
    /// out of line.
    #[inline(always)]
    fn lean<R>(&self, f: &mut impl FnMut(&RTx<'_>) -> StmResult<R>) -> Result<Option<R>> {
        let local = local_ref(self)?;
        let _in_tx = InTx::enter();
        let (rv, reused) = local.snap.take(&local.stm.domain);
        match self.attempt(local, f, rv) {
            Ok(v) => Ok(Some(v)),
            Err(StmError::Conflict) => self.lean_again(local, f, reused),
            Err(e) => ended(e),
        }
    }

    /// Attempts 2 to [`LEAN_ATTEMPTS`], each after step 4's back-off; when
    /// the first attempt's snapshot was reused (`snapshot.rs`), first one
    /// more at once with a fresh snapshot (an old snapshot is not
    /// contention).
    #[cold]
    #[inline(never)]
    fn lean_again<R>(&self, local: &Local, f: &mut impl FnMut(&RTx<'_>) -> StmResult<R>, reused: bool) -> Result<Option<R>> {
        if reused {
            local.snap.stale();
            count_stat(|s| s.stale += 1);
            if let Some(done) = outcome(self.attempt(local, f, local.snap.sample(&local.stm.domain))) {
                return done;
            }
        }
        for attempt in 1..LEAN_ATTEMPTS {
            // 4. run again with a fresh snapshot (the gate left first).
            conflicted(attempt);
            if let Some(done) = outcome(self.attempt(local, f, local.snap.sample(&local.stm.domain))) {
                return done;
            }
        }
        conflicted(LEAN_ATTEMPTS);
        Ok(None)
    }

    /// One lean attempt at snapshot `rv`: steps 1-3, the gate left when it
    /// returns.
    #[inline(always)]
    fn attempt<R>(&self, local: &Local, f: &mut impl FnMut(&RTx<'_>) -> StmResult<R>, rv: u64) -> StmResult<R> {
        let inner = self.inner();
        let stm = &local.stm;
        // 1. the GC gate, through this thread's slot (not held here:
        // `IN_TX` was clear, and only a transaction's attempt holds it).
        let _gate = inner.gate.enter_outermost(&local.gate);
        // 2. the snapshot (`rv`: this thread's reused one, `snapshot.rs`,
        // or a fresh sample); the heap's bounds for the inline checks.
        let space = &inner.space;
        let (lo, hi) = (space.base() + crate::format::HEAP_OFF, space.base() + space.size());
        let tx = RTx {
            rv: rv.min(word::MAX_VERSION),
            epoch: stm.epoch,
            lo,
            hi,
            lim: span_limit(lo, hi),
            via: Via::Pool(inner),
            pin: OnceCell::new(),
        };
        // 3. the body's reads.
        let r = f(&tx);
        // (No epoch pin to drop: `read_tvar` ends a pool's lean attempt
        // before it could take one.)
        debug_assert!(tx.pin.get().is_none());
        std::mem::forget(tx);
        r
    }
}

/// What a lean attempt's body returned means for the loop: `Some` ends it
/// (a value, an error, or `Ok(None)`: the full path), `None` runs again.
#[inline]
fn outcome<R>(r: StmResult<R>) -> Option<Result<Option<R>>> {
    match r {
        Ok(v) => Some(Ok(Some(v))),
        Err(StmError::Failed(e)) => Some(Err(e)),
        Err(StmError::Retry) => Some(Ok(None)),
        Err(StmError::Conflict) => None,
    }
}

/// What a lean attempt that ended with `e` (not a conflict) returns:
/// `Err` for a failure, `Ok(None)` (the full path) for a retry. Out of
/// line, so the attempt's `Ok` path moves no error.
#[cold]
#[inline(never)]
fn ended<R>(e: StmError) -> Result<Option<R>> {
    match e {
        StmError::Failed(e) => Err(e),
        _ => Ok(None),
    }
}

/// Runs `f` as a read-only transaction over volatile [`crate::stm::TVar`]s
/// only (see [`RTx`]): the volatile clock's snapshot and each read's
/// seqlock read, nothing else — no pool, no gate, no read set, no
/// allocation, no shared write. `f` may run more than once; after
/// [`LEAN_ATTEMPTS`] conflicts in a row, on [`RTx::retry`], or under the
/// `Coarse` runtime it runs as [`crate::stm::atomically`] would. A pool
/// variable read in it is an error (use `Pool::atomically_read`).
///
/// ```
/// use engram::stm::{atomically, atomically_read, TVar};
/// let (a, b) = (TVar::new(70u64), TVar::new(30u64));
/// atomically(|tx| tx.write(&a, 60).and(tx.write(&b, 40)))?;
/// assert_eq!(atomically_read(|tx| Ok(tx.read(&a)? + tx.read(&b)?))?, 100);
/// # Ok::<(), engram::Error>(())
/// ```
pub fn atomically_read<R>(mut f: impl FnMut(&RTx<'_>) -> StmResult<R>) -> Result<R> {
    if !IN_TX.with(Cell::get) && !full_path_only() {
        if let Some(r) = lean_volatile(&mut f)? {
            return Ok(r);
        }
    }
    volatile_full(f)
}

/// The full path of [`atomically_read`] (also its nesting error), out of
/// line.
#[cold]
#[inline(never)]
fn volatile_full<R>(mut f: impl FnMut(&RTx<'_>) -> StmResult<R>) -> Result<R> {
    super::run::atomically(|tx| f(&RTx::over(tx)))
}

/// The lean attempts of a volatile-only read-only transaction: steps 2-4
/// of the module doc on the volatile clock (no pool: no gate, step 1).
#[inline(always)]
fn lean_volatile<R>(f: &mut impl FnMut(&RTx<'_>) -> StmResult<R>) -> Result<Option<R>> {
    let _in_tx = InTx::enter();
    for attempt in 1..=LEAN_ATTEMPTS {
        let tx =
            RTx { via: Via::Volatile, rv: VOLATILE.now().min(word::MAX_VERSION), epoch: 0, lo: 0, hi: 0, lim: 0, pin: OnceCell::new() };
        if let Some(done) = outcome(f(&tx)) {
            return done;
        }
        conflicted(attempt);
    }
    Ok(None)
}

/// Step 4's count and back-off, out of line (the lean loop's rare path).
#[cold]
#[inline(never)]
fn conflicted(attempt: u32) {
    count_stat(|s| s.conflicts += 1);
    backoff(attempt);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-compare check passes only cells the exact check passes
    /// (8-aligned, at or above `lo`, ending by `hi`), and every such cell
    /// that ends by `hi - MAX_CELL`.
    #[test]
    fn in_span_is_the_exact_check_in_one_compare() {
        for (lo, hi) in
            [(0x1000_0040_0000u64, 0x1000_0080_0000u64), (0x7fff_0000_0000, 0x7fff_0000_0100), (0x1000, 0x1030), (0x1000, 0x1000)]
        {
            let lim = span_limit(lo, hi);
            let probes = (0..2 * (MAX_CELL + 16)).flat_map(|d| [lo.wrapping_sub(d), lo + d, hi.wrapping_sub(d), hi + d]);
            for addr in probes.chain([0, 7, u64::MAX, u64::MAX - 7, 1 << 63, (1 << 63) + 8]) {
                let exact = addr % 8 == 0 && addr >= lo && addr.checked_add(MAX_CELL).is_some_and(|e| e <= hi);
                let fast = in_span(addr, lo, lim);
                assert!(!fast || exact, "{addr:#x} in [{lo:#x}, {hi:#x}) passed the one-compare check but not the exact one");
                if exact && addr + MAX_CELL < hi {
                    assert!(fast, "{addr:#x} in [{lo:#x}, {hi:#x}) fits but failed the one-compare check");
                }
            }
        }
    }
}
