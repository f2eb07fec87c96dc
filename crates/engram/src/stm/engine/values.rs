//! Value-based validation for `Coarse` commits (Yates & Scott's coarse
//! level, GHC's original STM): a read is valid at commit if the variable
//! still holds the *value* read, even if a commit rewrote it since (its
//! version moved). A `Coarse` transaction records what it saw ([`Seen`]);
//! its commit, under the exclusive coarse lock, compares.
//!
//! - A boxed volatile `TVar` (`tvar.rs`) holds an `Arc<T>`: the record
//!   keeps the very `Arc` read, and validation asks whether the variable's
//!   current `Arc` is the same allocation (pointer equality), as GHC
//!   compares heap-closure pointers. A write always installs the `Arc` it
//!   was given (`STx::write` a fresh one, [`TVar::write_arc`] a shared
//!   one). An inline `TVar` (a primitive in its value word) is compared by
//!   its bytes, as a plain pool value is.
//! - A persistent cell (`PTVar`, `PTField`) holds plain bytes inline: the
//!   record keeps the bytes read, and validation compares them with the
//!   cell's bytes now — only for values without pool pointers.
//!
//! Invariants. *No ABA for boxed `TVar`s*: the record holds a strong count on the
//! `Arc` read, so its allocation cannot be freed and reused while the
//! transaction can still validate; a current `Arc` at the same address is
//! therefore that allocation, and an `Arc<T>`'s value is never mutated in
//! place (a write installs another `Arc`), so pointer equality implies
//! the same value. *Pool pointers are compared by version*: an object a
//! pointer value refers to can be freed and a new one allocated at the
//! same offset, so equal bytes would not mean the same data behind them
//! (what the transaction read through the pointer, e.g. with
//! `read_immutable`, would be stale); such cells, `TField`s (values
//! inline under a lock, nothing to compare by identity) and reads without
//! a record (Hybrid's level-3 commits) are validated by version as before.
//! *Stable under the lock*: while a coarse committer holds the lock no
//! other commit can lock a word (`coarse.rs`), and a word locked by a
//! level-1 commit still installing fails validation; the word is loaded
//! before and after the value is compared, so an unchanged unlocked word
//! brackets a stable value. Reads during the body are still validated by
//! version (TL2), so the body sees a consistent snapshot; only the commit
//! is more permissive: all values read equal the current ones, so the
//! transaction serialises at its commit.
//!
//! Crash behaviour: none; the records are volatile, and the durable commit
//! protocol after validation is unchanged.

use super::tx::{Kind, Read, STx, State};
use super::{word_at, StmResult, MAX_VALUE};
use crate::htm::Htm;
use crate::stm::runtime;
use crate::stm::tvar::{TVar, TVarInner};
use crate::stm::word;
use crate::Persistent;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

/// What a `Coarse` transaction saw of one read (read-set index `at`).
pub(super) struct Seen {
    at: usize,
    what: What,
}

enum What {
    /// A `TVar`'s value `Arc`, kept alive.
    Ptr(Box<dyn SameArc>),
    /// A plain pool value's words.
    Bytes { n: usize, words: [u64; MAX_VALUE / 8] },
}

/// Whether a `TVar` still holds the `Arc` seen.
trait SameArc: Send + Sync {
    fn same(&self) -> bool;
}

struct ArcSeen<T: 'static> {
    var: Arc<TVarInner<T>>,
    seen: Arc<T>,
}

impl<T: Clone + Send + Sync + 'static> SameArc for ArcSeen<T> {
    fn same(&self) -> bool {
        self.var.holds(&self.seen)
    }
}

/// Counts of the calling thread's value-based validations: reads
/// whose version had moved but whose value was the one seen (accepted), and
/// reads whose value had changed (rejected).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ValueChecks {
    /// Reads with a new version and the same value: valid by value.
    pub same_value: u64,
    /// Reads with a new version and another value.
    pub changed: u64,
}

thread_local! {
    static CHECKS: std::cell::Cell<ValueChecks> = const { std::cell::Cell::new(ValueChecks { same_value: 0, changed: 0 }) };
}

/// The calling thread's [`ValueChecks`] (take deltas).
pub fn value_checks() -> ValueChecks {
    CHECKS.with(std::cell::Cell::get)
}

fn count(same: bool) {
    CHECKS.with(|c| {
        let mut v = c.get();
        if same {
            v.same_value += 1;
        } else {
            v.changed += 1;
        }
        c.set(v);
    });
}

impl<T: Clone + Send + Sync + 'static> TVar<T> {
    /// Reads the variable's value as the shared `Arc` it holds (no clone of
    /// the `T`). Under `Coarse`, writing this `Arc` back (or leaving it)
    /// keeps readers that saw it valid by value.
    pub fn read_arc(&self, tx: &STx<'_>) -> StmResult<Arc<T>> {
        tx.read_tvar_arc(&self.0)
    }

    /// Writes `v` itself (the variable will hold this very `Arc`): a
    /// `Coarse` transaction that read the variable when it held `v` still
    /// validates after this commit.
    pub fn write_arc(&self, tx: &STx<'_>, v: Arc<T>) -> StmResult<()> {
        let cell: Arc<dyn super::tx::VCell> = Arc::<TVarInner<T>>::clone(&self.0);
        let word = cell.word() as *const AtomicU64 as usize;
        tx.put(word, Kind::V { cell, value: Box::new(v) });
        Ok(())
    }
}

impl STx<'_> {
    /// A `TVar` read as its `Arc`: the buffered write if any, level 1's
    /// read in hardware, else the seqlock read, recorded for value-based
    /// validation when this is a `Coarse` transaction.
    pub(super) fn read_tvar_arc<T: Clone + Send + Sync + 'static>(&self, v: &Arc<TVarInner<T>>) -> StmResult<Arc<T>> {
        let w = &v.word as *const AtomicU64 as usize;
        {
            let st = self.st.borrow();
            if let Some(i) = self.find(&st, w) {
                if let Kind::V { value, .. } = &st.writes[i].kind {
                    if let Some(a) = value.downcast_ref::<Arc<T>>() {
                        return Ok(a.clone());
                    }
                }
            }
        }
        let g = self.pin();
        if self.in_hw() {
            // SAFETY: loaded from `v` while `g` is pinned.
            return self.read_hw(&v.word, || unsafe { v.arc_of(v.bits(), g) });
        }
        let mut b = 0u64;
        self.read_versioned_v(w, || b = v.bits())?;
        // SAFETY: loaded from `v` while `g` is pinned.
        let a = unsafe { v.arc_of(b, g) };
        let mut st = self.st.borrow_mut();
        st.keep.push(v.clone());
        if self.by_value {
            let at = st.reads.len() - 1;
            st.seen.push(Seen { at, what: What::Ptr(Box::new(ArcSeen { var: v.clone(), seen: a.clone() })) });
        }
        Ok(a)
    }

    /// Records a pool cell's value words just read (the last read-set
    /// entry), if `P` holds no pool pointer.
    pub(super) fn saw_bytes<P: Persistent>(&self, read: &[u64]) {
        let mut ptrs = Vec::new();
        P::pointer_offsets(&mut ptrs, 0);
        if !ptrs.is_empty() || read.len() > MAX_VALUE / 8 {
            return;
        }
        let mut words = [0u64; MAX_VALUE / 8];
        words[..read.len()].copy_from_slice(read);
        let mut st = self.st.borrow_mut();
        let at = st.reads.len() - 1;
        st.seen.push(Seen { at, what: What::Bytes { n: read.len(), words } });
    }

    /// Commit-time validation of a coarse commit (the lock held
    /// exclusively, the write set locked): every read's word unlocked (or
    /// locked by this commit), and its version unchanged — or, for a read
    /// with a record, its value unchanged.
    pub(super) fn reads_valid_by_value(&self) -> bool {
        let st = self.st.borrow();
        let via = runtime::route();
        let mut seen = st.seen.iter().peekable();
        st.reads.iter().enumerate().all(|(i, r)| {
            while seen.next_if(|s| s.at < i).is_some() {}
            let rec = seen.next_if(|s| s.at == i);
            self.read_valid(&st, r, rec.map(|s| &s.what), via)
        })
    }

    fn read_valid(&self, st: &State, r: &Read, rec: Option<&What>, via: Option<&Htm>) -> bool {
        // SAFETY: a read-set word: a checked pool cell, or a TVar the read
        // set keeps alive (`keep`).
        let w = unsafe { word_at(r.word) };
        let x = runtime::word_load(via, w);
        if word::is_locked(x, r.epoch) && self.find(st, r.word).is_none() {
            return false;
        }
        if word::version(x) == r.version {
            return true;
        }
        let Some(what) = rec else { return false };
        let same = match what {
            What::Ptr(p) => p.same(),
            What::Bytes { n, words } => (0..*n).all(|k| {
                // SAFETY: the value words of the pool cell read (checked
                // by check_cell to lie inside the mapping, for `n` words).
                unsafe { word_at(r.word + 8 + 8 * k) }.load(Ordering::Relaxed) == words[k]
            }),
        };
        fence(Ordering::Acquire);
        let same = same && runtime::word_load(via, w) == x;
        count(same);
        same
    }
}
