//! [`PLazy`]: a persistent thunk — a registered function's stable name and
//! its persistent arguments, and an indirection word that becomes the
//! address of the result's copy when the thunk is forced.
//!
//! Layout ([`ThunkObj`], one pool object): the indirection word first (0 =
//! unevaluated; a pointer the GC follows and relocation rewrites), the
//! function's stable id (hash of the name), the name itself (NUL-padded,
//! at most [`NAME_MAX`] bytes, for the error when it is not registered),
//! then the arguments (any [`Persistent`] value: integers, pointers to other
//! thunks or pool data).
//!
//! Forcing: load the word; if set, load the copy. Otherwise claim the thunk
//! (blackhole; others wait and share), look the function up, evaluate,
//! stage, fence, link (`publish.rs`). A crash anywhere before the link is
//! durable leaves the thunk unevaluated; after, evaluated. A thunk is
//! created inside an STM transaction or a region, and must be reachable
//! from a root (or from something reachable) to survive a collection.

use super::blackhole::{self, Entered};
use super::publish::{self, Staged};
use super::reader::{Cx, Load};
use super::registry;
use crate::error::{Error, Result};
use crate::ptr::PPtr;
use crate::stm::{CopyCx, Persist, STx, StmError, StmResult};
use crate::{Persistent, Pool};
use std::marker::PhantomData;

/// Longest function name a thunk records, bytes.
pub const NAME_MAX: usize = 40;

/// The pool object behind a [`PLazy`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ThunkObj<A> {
    /// 0 while unevaluated, then the address of the result's copy.
    pub result: u64,
    /// Stable id of the function (hash of `name`).
    pub func: u64,
    /// The function's stable name, NUL-padded.
    pub name: [u8; NAME_MAX],
    /// The arguments.
    pub args: A,
}

// SAFETY: integers, a byte array and a Persistent value; the indirection
// word (offset 0) is a pool pointer or 0, and the arguments' pointers are
// theirs, shifted by their offset.
unsafe impl<A: Persistent> Persistent for ThunkObj<A> {
    fn type_name() -> String {
        format!("engram::lazy::Thunk<{}>", A::type_name())
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        out.push(at);
        A::pointer_offsets(out, at + std::mem::offset_of!(ThunkObj<A>, args) as u32);
    }
}

impl<A: Persistent> ThunkObj<A> {
    /// An unevaluated thunk of `func` applied to `args`.
    pub fn new(func: &str, args: A) -> Result<Self> {
        if func.is_empty() || func.len() > NAME_MAX {
            return Err(Error::invalid(format!("function name {func:?} must have 1 to {NAME_MAX} bytes")));
        }
        let mut name = [0u8; NAME_MAX];
        name[..func.len()].copy_from_slice(func.as_bytes());
        Ok(ThunkObj { result: 0, func: registry::id_of(func), name, args })
    }

    /// The recorded function name.
    pub fn name(&self) -> Result<&str> {
        let n = self.name.iter().position(|&b| b == 0).unwrap_or(NAME_MAX);
        std::str::from_utf8(&self.name[..n]).map_err(|_| Error::corrupt("thunk function name is not UTF-8"))
    }
}

/// A persistent thunk whose value is a `T`, computed by a registered
/// function from arguments `A`. A handle: one pool pointer, `Copy`, storable
/// in other persistent structures, in `PTVar`s and in roots.
#[repr(transparent)]
pub struct PLazy<T, A = u64> {
    obj: PPtr<ThunkObj<A>>,
    _t: PhantomData<fn() -> T>,
}

impl<T, A> Clone for PLazy<T, A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, A> Copy for PLazy<T, A> {}
impl<T, A> PartialEq for PLazy<T, A> {
    fn eq(&self, o: &Self) -> bool {
        self.obj == o.obj
    }
}
impl<T, A> std::fmt::Debug for PLazy<T, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PLazy({:#x})", self.obj.addr())
    }
}

// SAFETY: a PLazy is a PPtr: one pointer at offset 0.
unsafe impl<T: 'static, A: Persistent> Persistent for PLazy<T, A> {
    fn type_name() -> String {
        format!("engram::lazy::PLazy<{}>", A::type_name())
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        out.push(at);
    }
}

impl<T: 'static, A: Persistent> Persist for PLazy<T, A> {
    type P = Self;
    fn persist(&self, _: &mut CopyCx<'_>) -> Result<Self> {
        Ok(*self)
    }
    fn plain(&self) -> Option<Self> {
        Some(*self)
    }
}

impl<T: 'static, A: Persistent> Load for PLazy<T, A> {
    fn load(p: &Self, _: &Cx<'_>) -> Result<Self> {
        Ok(*p)
    }
}

impl<T: 'static, A: Persistent> PLazy<T, A> {
    /// A new thunk staged with an update (a stream's tail): linked and made
    /// durable together with the result that reaches it.
    pub(crate) fn stage(cx: &mut CopyCx<'_>, func: &str, args: A) -> Result<Self> {
        let p = cx.alloc(ThunkObj::new(func, args)?)?;
        Ok(Self::from_ptr(p))
    }

    /// The handle of the thunk object at `obj`.
    pub fn from_ptr(obj: PPtr<ThunkObj<A>>) -> Self {
        PLazy { obj, _t: PhantomData }
    }

    /// The thunk object.
    pub fn ptr(self) -> PPtr<ThunkObj<A>> {
        self.obj
    }
}

impl<T: Load, A: Persistent> PLazy<T, A> {
    /// A new unevaluated thunk, private to `tx` until it commits.
    pub fn new(tx: &STx<'_>, func: &str, args: A) -> StmResult<Self> {
        let obj = tx.alloc(ThunkObj::new(func, args)?)?;
        Ok(Self::from_ptr(obj))
    }

    /// The thunk under the named root `root`, created (unevaluated) by a
    /// failure-atomic region if there is none.
    pub fn root(pool: &Pool, root: &str, func: &str, args: A) -> Result<Self> {
        let t = ThunkObj::new(func, args)?;
        pool.txn(|tx| {
            if let Some(p) = tx.root::<ThunkObj<A>>(root)? {
                return Ok(Self::from_ptr(p));
            }
            let p = tx.alloc(t)?;
            tx.set_root(root, p).map(|_| Self::from_ptr(p))
        })
    }

    /// Whether the thunk has been evaluated (its result linked).
    pub fn is_evaluated(&self, pool: &Pool) -> Result<bool> {
        let cx = Cx::new(pool);
        Ok(publish::load(cx.inner, self.obj.addr())? != 0)
    }

    /// Forces the thunk outside any transaction: its value, evaluated now
    /// (once, by one thread; the result is durable when this returns,
    /// except for the 8-byte link, durable at the thread's next fence).
    pub fn force(&self, pool: &Pool) -> Result<T> {
        self.force_with(&Cx::new(pool))
    }

    /// Forces the thunk inside the STM transaction `tx`. The evaluation and
    /// its link are not part of `tx` (a pure function's result does not
    /// depend on it): a `tx` that aborts leaves the thunk evaluated. The
    /// function must not call `atomically`.
    pub fn force_in(&self, tx: &STx<'_>) -> StmResult<T> {
        let inner = tx.pool_inner().ok_or_else(|| StmError::Failed(Error::invalid("forcing a thunk needs Pool::atomically")))?;
        self.force_with(&Cx::of_inner(inner)).map_err(StmError::Failed)
    }

    /// Forces the thunk from a registered function's context (a thunk whose
    /// value needs another's).
    pub fn force_with(&self, cx: &Cx<'_>) -> Result<T> {
        let word = self.obj.addr();
        loop {
            let v = publish::load(cx.inner, word)?;
            if v != 0 {
                return cx.load::<T>(PPtr::from_addr(v));
            }
            match blackhole::enter((cx.inner.heap.id, word, 0))? {
                Entered::Waited => continue,
                Entered::Owner(hole) => {
                    let r = self.evaluate(cx);
                    drop(hole);
                    return r;
                }
            }
        }
    }

    /// Evaluates (this thread holds the blackhole) and publishes.
    fn evaluate(&self, cx: &Cx<'_>) -> Result<T> {
        let t: ThunkObj<A> = cx.read(self.obj)?;
        if t.result != 0 {
            return cx.load::<T>(PPtr::from_addr(t.result));
        }
        let name = t.name()?;
        if t.func != registry::id_of(name) {
            return Err(Error::corrupt(format!("thunk at {:#x}: id does not match function name {name:?}", self.obj.addr())));
        }
        let f = registry::lookup::<A, T>(t.func, name)?;
        let v = f(cx, t.args)?;
        let (st, addr): (Staged<'_>, u64) = publish::stage(cx.inner, &v)?;
        st.commit(self.obj.addr(), addr)?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_recorded_with_their_id() {
        let t = ThunkObj::new("fib", 7u64).unwrap();
        assert_eq!(t.name().unwrap(), "fib");
        assert_eq!(t.func, registry::id_of("fib"));
        assert_eq!(t.result, 0);
        assert!(ThunkObj::new("", 0u64).is_err());
        assert!(ThunkObj::new(&"x".repeat(NAME_MAX + 1), 0u64).is_err());
        assert_eq!(ThunkObj::new(&"x".repeat(NAME_MAX), 0u64).unwrap().name().unwrap().len(), NAME_MAX);
    }
}
