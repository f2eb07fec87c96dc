//! Embedded transactional fields for the volatile STM (Yates & Scott's
//! mutable constructor fields, GHC's `TStruct`): a [`TField<T>`] is a
//! versioned lock word and a value, inline in an ordinary Rust struct, so a
//! node with five mutable fields is one allocation instead of one `TVar`
//! (an `Arc` each, then the value behind a second `Arc`) per field.
//!
//! A struct holding `TField`s is shared as an `Arc<S>` (its *owner*): a
//! transaction that reads or writes a field keeps the owner alive until it
//! commits or aborts (the read set validates the field's lock word, the
//! write set installs the value), so a field never dangles even if every
//! other reference to the struct goes away meanwhile. `#[derive(TStruct)]`
//! writes the accessors (`x(tx)`, `set_x(tx, v)`) for every field; fields
//! marked `#[immutable]` are plain Rust values, set before the struct is
//! shared and read with no transaction at all (no lock word, no read-set
//! entry): keys, hashes, priorities.
//!
//! [`TCell`] is what both a `TVar` and a `TField` are, so one algorithm can
//! be written once over both layouts (`stm::vcollections` does).
//!
//! Invariants: a field's value changes only at a commit that holds its
//! lock word (the same protocol as `TVar`: the commit path cannot tell them
//! apart, it sees a `VCell`); an owner given with a field must contain it
//! (checked: a typed error otherwise). Crash behaviour: volatile, nothing
//! survives the process.
//!
//! ```
//! use engram::stm::{atomically, TField, TStruct};
//! use std::sync::Arc;
//!
//! #[derive(TStruct)]
//! struct Account {
//!     #[immutable]
//!     id: u64,
//!     balance: TField<i64>,
//!     history: TField<Vec<i64>>,
//! }
//!
//! let a = Arc::new(Account { id: 7, balance: TField::new(100), history: TField::new(vec![]) });
//! atomically(|tx| {
//!     let b = a.balance(tx)?;
//!     a.set_balance(tx, b - 30)?;
//!     let mut h = a.history(tx)?;
//!     h.push(-30);
//!     a.set_history(tx, h)
//! })
//! .unwrap();
//! assert_eq!(a.id, 7); // immutable: a plain read
//! assert_eq!(a.balance.load(), 70);
//! assert_eq!(atomically(|tx| a.history(tx)).unwrap(), vec![-30]);
//! ```
//!
//! A mutable field must be a transactional cell (mark plain ones
//! `#[immutable]`), and only structs with named fields derive it:
//!
//! ```compile_fail
//! #[derive(engram::stm::TStruct)]
//! struct Plain {
//!     x: u64, // neither a TField nor #[immutable]: does not compile
//! }
//! ```
//!
//! ```compile_fail
//! #[derive(engram::stm::TStruct)]
//! enum NotAStruct {
//!     A,
//! }
//! ```

use super::engine::{RTx, STx, StmError, StmResult, VCell};
use super::tvar::TVar;
use crate::error::Error;
use parking_lot::RwLock;
use std::any::Any;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// A transactional field embedded in a struct shared as `Arc<S>` (see the
/// module doc). Read and write it with [`TCell::get`] / [`TCell::set`], or
/// the accessors `#[derive(TStruct)]` writes.
pub struct TField<T> {
    word: AtomicU64,
    value: RwLock<T>,
}

impl<T: Default> Default for TField<T> {
    fn default() -> Self {
        TField::new(T::default())
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for TField<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TField({:?})", &*self.value.read())
    }
}

impl<T> TField<T> {
    /// A field holding `v` (for building a struct before it is shared).
    pub fn new(v: T) -> Self {
        TField { word: AtomicU64::new(0), value: RwLock::new(v) }
    }
}

impl<T: Clone> TField<T> {
    /// The committed value, outside any transaction.
    pub fn load(&self) -> T {
        self.value.read().clone()
    }
}

/// A transactional variable read and written through the `Arc` that owns
/// it: [`TField`] (inside the owner) and [`TVar`] (its own owner; the
/// `owner` argument is unused).
pub trait TCell: Send + Sync {
    /// The value type.
    type Value;
    /// A cell holding `v`.
    fn make(v: Self::Value) -> Self
    where
        Self::Value: Clone + Send + Sync + 'static;
    /// Reads it in `tx`; `owner` is the `Arc` of the struct holding it.
    fn get<O: Send + Sync + 'static>(&self, tx: &STx<'_>, owner: &Arc<O>) -> StmResult<Self::Value>
    where
        Self::Value: Clone + Send + Sync + 'static;
    /// Reads it in a read-only transaction (`stm::atomically_read`: the
    /// seqlock read, no read-set entry; through [`RTx::over`], the full
    /// transaction's read); `owner` as in [`TCell::get`].
    fn get_ro<O: Send + Sync + 'static>(&self, tx: &RTx<'_>, owner: &Arc<O>) -> StmResult<Self::Value>
    where
        Self::Value: Clone + Send + Sync + 'static;
    /// Buffers a write of `v` in `tx`.
    fn set<O: Send + Sync + 'static>(&self, tx: &STx<'_>, owner: &Arc<O>, v: Self::Value) -> StmResult<()>
    where
        Self::Value: Clone + Send + Sync + 'static;
    /// The committed value, outside any transaction.
    fn peek(&self) -> Self::Value
    where
        Self::Value: Clone + Send + Sync + 'static;
}

impl<T: Send + Sync + 'static> TCell for TField<T> {
    type Value = T;
    fn make(v: T) -> Self {
        TField::new(v)
    }
    fn get<O: Send + Sync + 'static>(&self, tx: &STx<'_>, owner: &Arc<O>) -> StmResult<T>
    where
        T: Clone,
    {
        self.check_inside(owner)?;
        tx.read_volatile(&self.word, || self.value.read().clone(), || owner.clone())
    }
    fn get_ro<O: Send + Sync + 'static>(&self, tx: &RTx<'_>, owner: &Arc<O>) -> StmResult<T>
    where
        T: Clone,
    {
        self.check_inside(owner)?;
        tx.read_field(&self.word, || self.value.read().clone(), || owner.clone())
    }
    fn set<O: Send + Sync + 'static>(&self, tx: &STx<'_>, owner: &Arc<O>, v: T) -> StmResult<()>
    where
        T: Clone,
    {
        self.check_inside(owner)?;
        let owner: Arc<dyn Any + Send + Sync> = owner.clone();
        let field: *const TField<T> = self;
        tx.write_volatile(Arc::new(Owned { owner, field }), v);
        Ok(())
    }
    fn peek(&self) -> T
    where
        T: Clone,
    {
        self.load()
    }
}

impl<T> TField<T> {
    /// Whether this field lies inside `owner`'s value (the only way the
    /// pointer kept by a write stays valid).
    fn check_inside<O>(&self, owner: &Arc<O>) -> StmResult<()> {
        let base = Arc::as_ptr(owner) as usize;
        let at = self as *const TField<T> as usize;
        if at >= base && at + std::mem::size_of::<TField<T>>() <= base + std::mem::size_of::<O>() {
            Ok(())
        } else {
            Err(StmError::Failed(Error::invalid("a TField was used with an owner Arc that does not contain it")))
        }
    }
}

impl<T: Send + Sync + 'static> TCell for TVar<T> {
    type Value = T;
    fn make(v: T) -> Self
    where
        T: Clone,
    {
        TVar::new(v)
    }
    fn get<O: Send + Sync + 'static>(&self, tx: &STx<'_>, _owner: &Arc<O>) -> StmResult<T>
    where
        T: Clone,
    {
        tx.read(self)
    }
    fn get_ro<O: Send + Sync + 'static>(&self, tx: &RTx<'_>, _owner: &Arc<O>) -> StmResult<T>
    where
        T: Clone,
    {
        tx.read(self)
    }
    fn set<O: Send + Sync + 'static>(&self, tx: &STx<'_>, _owner: &Arc<O>, v: T) -> StmResult<()>
    where
        T: Clone,
    {
        tx.write(self, v)
    }
    fn peek(&self) -> T
    where
        T: Clone,
    {
        self.load()
    }
}

/// A written field as the commit path sees it: the field, and its owner
/// keeping it alive.
struct Owned<T> {
    owner: Arc<dyn Any + Send + Sync>,
    field: *const TField<T>,
}

// SAFETY: `field` points into `owner` (checked by `check_inside` before one
// is made), which is Send + Sync and kept alive by this struct; a TField<T>
// with T: Send + Sync is Sync (atomic word, RwLock value).
unsafe impl<T: Send + Sync> Send for Owned<T> {}
// SAFETY: as above: shared access only goes through the field's atomics and
// lock.
unsafe impl<T: Send + Sync> Sync for Owned<T> {}

impl<T> Owned<T> {
    fn field(&self) -> &TField<T> {
        let _alive = &self.owner;
        // SAFETY: `field` lies inside the value `owner` keeps alive (see the
        // Send impl); the reference does not outlive `self`.
        unsafe { &*self.field }
    }
}

impl<T: Clone + Send + Sync + 'static> VCell for Owned<T> {
    fn word(&self) -> &AtomicU64 {
        &self.field().word
    }
    fn install(&self, v: &(dyn Any + Send + Sync), _g: &crossbeam_epoch::Guard) {
        if let Some(v) = v.downcast_ref::<Arc<T>>() {
            *self.field().value.write() = (**v).clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stm::atomically;

    struct Pair {
        a: TField<u64>,
        b: TField<u64>,
    }

    #[test]
    fn fields_commit_and_read_back() {
        let p = Arc::new(Pair { a: TField::new(1), b: TField::new(2) });
        atomically(|tx| {
            let a = p.a.get(tx, &p)?;
            p.b.set(tx, &p, a + 10)?;
            assert_eq!(p.b.get(tx, &p)?, 11, "a transaction reads its own write");
            Ok(())
        })
        .unwrap();
        assert_eq!((p.a.load(), p.b.load()), (1, 11));
    }

    #[test]
    fn a_foreign_owner_is_a_typed_error() {
        let p = Arc::new(Pair { a: TField::new(1), b: TField::new(2) });
        let other = Arc::new(0u64);
        let r = atomically(|tx| p.a.get(tx, &other));
        assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
        let r = atomically(|tx| p.a.set(tx, &other, 3));
        assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
    }

    #[test]
    fn four_threads_keep_a_sum() {
        let p = Arc::new(Pair { a: TField::new(2000), b: TField::new(0) });
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..500 {
                        atomically(|tx| {
                            let (a, b) = (p.a.get(tx, &p)?, p.b.get(tx, &p)?);
                            p.a.set(tx, &p, a - 1)?;
                            p.b.set(tx, &p, b + 1)
                        })
                        .unwrap();
                    }
                });
            }
        });
        assert_eq!((p.a.load(), p.b.load()), (0, 2000));
    }
}
