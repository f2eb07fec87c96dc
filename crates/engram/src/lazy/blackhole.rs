//! Blackholing: at most one thread evaluates a given thunk (or memo entry)
//! at a time; the others wait for it and then read its result.
//!
//! The table maps a key (the pool's heap id and the indirection word's
//! address, or a memo's word and argument) to the evaluating thread. A
//! [`Hole`] guard removes the entry and wakes the waiters when it drops,
//! also when the evaluation fails or panics, so a waiter never sleeps on a
//! dead evaluator: it finds the thunk still unevaluated and evaluates it
//! itself. Re-entering a key the current thread holds is a cycle (`<<loop>>`).
//!
//! Volatile only: a crash loses the table, and the thunks it covered are
//! simply unevaluated in the pool.

use crate::error::{Error, Result};
use crate::hash::FastMap;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::thread::ThreadId;

/// Identifies one evaluation: (heap id, word address, argument).
pub(crate) type Key = (u64, u64, u64);

struct Waiters {
    owner: ThreadId,
    done: Mutex<bool>,
    cv: Condvar,
}

static TABLE: Mutex<Option<FastMap<Key, Arc<Waiters>>>> = parking_lot::const_mutex(None);

/// Held while this thread evaluates `key`.
pub(crate) struct Hole {
    key: Key,
    w: Arc<Waiters>,
}

/// What [`enter`] found.
pub(crate) enum Entered {
    /// This thread evaluates; drop the guard when the result is linked.
    Owner(Hole),
    /// Another thread evaluated (or gave up); look again.
    Waited,
}

/// Claims `key` for this thread, or waits for the thread that has it.
pub(crate) fn enter(key: Key) -> Result<Entered> {
    let me = std::thread::current().id();
    let w = {
        let mut t = TABLE.lock();
        let t = t.get_or_insert_with(FastMap::default);
        match t.get(&key) {
            Some(w) if w.owner == me => {
                return Err(Error::invalid("a thunk's evaluation needs its own value (<<loop>>)"));
            }
            Some(w) => w.clone(),
            None => {
                let w = Arc::new(Waiters { owner: me, done: Mutex::new(false), cv: Condvar::new() });
                t.insert(key, w.clone());
                return Ok(Entered::Owner(Hole { key, w }));
            }
        }
    };
    let mut done = w.done.lock();
    while !*done {
        w.cv.wait(&mut done);
    }
    Ok(Entered::Waited)
}

impl Drop for Hole {
    fn drop(&mut self) {
        if let Some(t) = TABLE.lock().as_mut() {
            t.remove(&self.key);
        }
        *self.w.done.lock() = true;
        self.w.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reentering_is_a_loop_and_dropping_frees_the_key() {
        let key = (u64::MAX, 1, 2);
        let Entered::Owner(h) = enter(key).unwrap() else { panic!("fresh key was held") };
        assert!(enter(key).is_err());
        drop(h);
        assert!(matches!(enter(key).unwrap(), Entered::Owner(_)));
    }
}
