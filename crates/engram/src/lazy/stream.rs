//! [`PStream`]: a persistent lazy stream whose cells are thunks — the
//! paper's restartable computation. A stream is an unfold: a registered
//! step function maps a state `S` to `None` (the end) or `(head, next
//! state)`. Each cell is a [`PLazy`] over its state; forcing it runs the
//! step once and publishes the head together with a new, unevaluated
//! thunk for the tail (both staged in the same update, so one fence makes
//! them durable and one 8-byte link publishes them).
//!
//! Iterating ([`PStream::iter`]) forces cell after cell. Killed and
//! restarted, an iteration walks the evaluated prefix (loading, never
//! recomputing) and resumes at the first unevaluated cell. On a crash: the
//! evaluated prefix is whatever links reached the media; each cell is whole
//! or unevaluated (`publish.rs`).

use super::publish;
use super::reader::{Cx, Load};
use super::registry;
use super::thunk::{PLazy, ThunkObj};
use crate::error::{Error, Result};
use crate::ptr::PPtr;
use crate::stm::{CopyCx, POption, Persist};
use crate::{Persistent, Pool};

/// An evaluated cell: its head and the thunk of the rest.
pub struct StreamCell<T, S> {
    /// The element.
    pub head: T,
    tail: Tail<S>,
}

enum Tail<S> {
    /// Made by a step, copied with the cell: a new thunk of `func` over `state`.
    New { func: String, state: S },
    /// Loaded from the pool.
    Thunk(PPtr<ThunkObj<S>>),
}

/// The pool copy of a [`StreamCell`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PCell<P, S> {
    head: P,
    tail: PPtr<ThunkObj<S>>,
}

// SAFETY: two Persistent fields; pointers are the head's and the tail's.
unsafe impl<P: Persistent, S: Persistent> Persistent for PCell<P, S> {
    fn type_name() -> String {
        format!("engram::lazy::StreamCell<{},{}>", P::type_name(), S::type_name())
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        P::pointer_offsets(out, at + std::mem::offset_of!(PCell<P, S>, head) as u32);
        out.push(at + std::mem::offset_of!(PCell<P, S>, tail) as u32);
    }
}

impl<T: Persist, S: Persistent> Persist for StreamCell<T, S> {
    type P = PCell<T::P, S>;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Self::P> {
        let head = self.head.persist(cx)?;
        let tail = match &self.tail {
            Tail::New { func, state } => PLazy::<Option<StreamCell<T, S>>, S>::stage(cx, func, *state)?.ptr(),
            Tail::Thunk(p) => *p,
        };
        Ok(PCell { head, tail })
    }
}

impl<T: Load, S: Persistent> Load for StreamCell<T, S> {
    fn load(p: &Self::P, cx: &Cx<'_>) -> Result<Self> {
        Ok(StreamCell { head: T::load(&p.head, cx)?, tail: Tail::Thunk(p.tail) })
    }
}

/// A cell's thunk: `None` at the end of the stream.
type CellThunk<T, S> = PLazy<Option<StreamCell<T, S>>, S>;

/// A persistent lazy stream of `T`s unfolded from states `S`.
pub struct PStream<T, S> {
    head: CellThunk<T, S>,
}

impl<T, S> Clone for PStream<T, S> {
    fn clone(&self) -> Self {
        PStream { head: self.head }
    }
}

impl<T: Load, S: Persistent> PStream<T, S> {
    /// Registers the step function of streams named `func`: `step(cx, s)`
    /// is `None` at the end, else the element and the next state.
    pub fn register<F>(func: &str, step: F) -> Result<()>
    where
        F: Fn(&Cx<'_>, S) -> Result<Option<(T, S)>> + Send + Sync + 'static,
    {
        let name = func.to_string();
        registry::register::<S, Option<StreamCell<T, S>>, _>(func, move |cx, s| {
            Ok(step(cx, s)?.map(|(head, state)| StreamCell { head, tail: Tail::New { func: name.clone(), state } }))
        })
    }

    /// The stream under the named root `root`, unfolded by `func` from
    /// `seed`; created (unevaluated) if absent.
    pub fn root(pool: &Pool, root: &str, func: &str, seed: S) -> Result<Self> {
        Ok(PStream { head: PLazy::root(pool, root, func, seed)? })
    }

    /// Iterates from the first cell: evaluated cells are loaded, the others
    /// evaluated (and published) as the iteration reaches them.
    pub fn iter<'a>(&self, pool: &'a Pool) -> StreamIter<'a, T, S> {
        StreamIter { pool, next: Some(self.head) }
    }

    /// Cells evaluated so far (the prefix a restart reuses), and whether
    /// the stream's end was reached.
    pub fn evaluated(&self, pool: &Pool) -> Result<(u64, bool)> {
        let cx = Cx::new(pool);
        let mut cell = self.head.ptr();
        let mut n = 0;
        loop {
            let v = publish::load(cx.inner, cell.addr())?;
            if v == 0 {
                return Ok((n, false));
            }
            let c: POption<PCell<T::P, S>> = cx.read(PPtr::from_addr(v))?;
            match c.get() {
                None => return Ok((n, true)),
                Some(c) => (cell, n) = (c.tail, n + 1),
            }
        }
    }
}

/// Iterator over a [`PStream`] (see [`PStream::iter`]).
pub struct StreamIter<'a, T, S> {
    pool: &'a Pool,
    next: Option<CellThunk<T, S>>,
}

impl<T: Load, S: Persistent> Iterator for StreamIter<'_, T, S> {
    type Item = Result<T>;
    fn next(&mut self) -> Option<Result<T>> {
        let cell = self.next.take()?;
        match cell.force(self.pool) {
            Ok(None) => None,
            Ok(Some(StreamCell { head, tail: Tail::Thunk(t) })) => {
                self.next = Some(PLazy::from_ptr(t));
                Some(Ok(head))
            }
            Ok(Some(StreamCell { head, tail: Tail::New { .. } })) => {
                // Just evaluated by us: its tail is linked in the pool now.
                match self.tail_of(cell) {
                    Ok(t) => self.next = Some(t),
                    Err(e) => return Some(Err(e)),
                }
                Some(Ok(head))
            }
            Err(e) => Some(Err(e)),
        }
    }
}

impl<T: Load, S: Persistent> StreamIter<'_, T, S> {
    /// The tail thunk of an evaluated cell, read from the pool.
    fn tail_of(&self, cell: CellThunk<T, S>) -> Result<CellThunk<T, S>> {
        let cx = Cx::new(self.pool);
        let v = publish::load(cx.inner, cell.ptr().addr())?;
        let c: POption<PCell<T::P, S>> = cx.read(PPtr::from_addr(v))?;
        c.get().map(|c| PLazy::from_ptr(c.tail)).ok_or_else(|| Error::corrupt("stream cell lost its tail"))
    }
}
