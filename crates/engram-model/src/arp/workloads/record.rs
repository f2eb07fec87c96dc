//! Recording a multi-threaded execution as an [`ArpTrace`]: real threads
//! whose instrumented operations take one global mutex, so the trace's order
//! is the order they happened in and every acquire knows the store it read.
//!
//! The interleaving is chosen by a seeded scheduler, not by the OS: a
//! thread may perform its next instrumented operation only when it holds
//! the turn, and after each operation the turn passes to a live thread
//! drawn from the seed (a thread spinning on a held lock gives its turn
//! away). The same seed therefore records the same trace on any machine,
//! however busy, and the interleaving is fine-grained (every operation is a
//! possible switch), which is what makes conflicting transactions, and so
//! the checker's mutants, show up in short runs.
//!
//! Only what the models need is recorded: persistent stores (8-byte words),
//! lock acquisitions (acquire RMWs on volatile lock words, reading from the
//! previous release), lock releases (release stores), sequence points.
//! Plain loads of persistent data are performed but not recorded (they order
//! nothing). Volatile data is kept by the benchmarks in ordinary memory.

use crate::arp::trace::{ArpTrace, MemOrder, Op, Space};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Condvar, Mutex};

/// How unlocks of locks that protect persistent data are (mis)annotated, to
/// show the checker catching a wrong program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mutation {
    /// The program as written: release unlocks, annotations only where legal.
    #[default]
    None,
    /// Unlocks of persistent-data locks are relaxed stores (missing release).
    MissingRelease,
    /// Unlocks of persistent-data locks carry the volatile annotation.
    ReleaseMarkedVolatile,
}

struct State {
    trace: ArpTrace,
    /// Current persistent memory (what loads see).
    mem: Vec<u8>,
    /// Volatile lock words: (held, last writer event).
    locks: HashMap<u64, (bool, Option<usize>)>,
    /// Threads that have not finished.
    live: BTreeSet<u32>,
    /// The thread allowed to perform the next operation.
    turn: u32,
    /// The scheduler's xorshift state.
    rng: u64,
}

impl State {
    /// Passes the turn to a live thread drawn from the seed.
    fn pass_turn(&mut self) {
        if self.live.is_empty() {
            return;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let k = (self.rng % self.live.len() as u64) as usize;
        self.turn = self.live.iter().nth(k).copied().unwrap_or(0);
    }
}

/// The shared recorder.
pub struct Recorder {
    state: Mutex<State>,
    /// One per thread: signalled when the turn passes to that thread.
    turn_changed: Vec<Condvar>,
    mutation: Mutation,
}

impl Recorder {
    /// A recorder over a persistent region whose initial content is `base`,
    /// for threads `0..threads`, interleaved by a scheduler seeded with `seed`.
    pub fn new(base: Vec<u8>, mutation: Mutation, threads: u32, seed: u64) -> Self {
        let mut st = State {
            trace: ArpTrace::new(base.clone()),
            mem: base,
            locks: HashMap::new(),
            live: (0..threads).collect(),
            turn: 0,
            rng: (seed ^ 0x2545_f491_4f6c_dd1d) | 1,
        };
        st.pass_turn();
        let turn_changed = (0..threads).map(|_| Condvar::new()).collect();
        Recorder { state: Mutex::new(st), turn_changed, mutation }
    }

    /// Waits for `thread`'s turn, runs `f`, passes the turn on.
    fn with<R>(&self, thread: u32, f: impl FnOnce(&mut State) -> R) -> R {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(mine) = self.turn_changed.get(thread as usize) else {
            return f(&mut g); // not a scheduled thread: no turn to wait for
        };
        while g.turn != thread && g.live.contains(&thread) {
            g = mine.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        let r = f(&mut g);
        g.pass_turn();
        let next = g.turn as usize;
        drop(g);
        if let Some(cv) = self.turn_changed.get(next) {
            cv.notify_one();
        }
        r
    }

    /// `thread` has finished: at its turn (so that the schedule does not
    /// depend on when the OS ran it), it leaves and never takes the turn again.
    pub fn exit(&self, thread: u32) {
        self.with(thread, |s| {
            s.live.remove(&thread);
        });
    }

    /// The recorded trace.
    pub fn finish(self) -> ArpTrace {
        self.state.into_inner().unwrap_or_else(|p| p.into_inner()).trace
    }
}

/// One thread's handle.
pub struct Ctx<'a> {
    rec: &'a Recorder,
    /// Thread id in the trace.
    pub thread: u32,
}

impl<'a> Ctx<'a> {
    /// A handle for thread `thread`.
    pub fn new(rec: &'a Recorder, thread: u32) -> Self {
        Ctx { rec, thread }
    }

    /// Persists the 8-byte word `v` at `addr`.
    pub fn store(&self, addr: u64, v: u64) {
        self.rec.with(self.thread, |s| {
            let a = addr as usize;
            s.mem[a..a + 8].copy_from_slice(&v.to_le_bytes());
            let op = Op::Store { addr, data: v.to_le_bytes().to_vec(), space: Space::Persistent, order: MemOrder::Relaxed };
            s.trace.push(self.thread, op, false);
        });
    }

    /// Reads the persistent word at `addr` (not recorded).
    pub fn load(&self, addr: u64) -> u64 {
        self.rec.with(self.thread, |s| word(&s.mem, addr))
    }

    /// `engram::sequence_point()`.
    pub fn sequence_point(&self) {
        self.rec.with(self.thread, |s| s.trace.push(self.thread, Op::SeqPoint, false));
    }

    /// Takes a turn and records nothing: where a variant of a program drops
    /// an event, so that the schedule (and so the execution) stays the same.
    pub fn skip(&self) {
        self.rec.with(self.thread, |_| ());
    }

    /// Spins until the volatile lock word `lock` is free, then takes it with
    /// an acquire RMW (recorded, reading from the last unlock). `va`: the
    /// lock protects only volatile data.
    pub fn lock(&self, lock: u64, va: bool) {
        loop {
            let got = self.rec.with(self.thread, |s| {
                let (held, last) = s.locks.get(&lock).copied().unwrap_or((false, None));
                if held {
                    return false;
                }
                let op = Op::Rmw { addr: lock, data: vec![1], space: Space::Volatile, order: MemOrder::Acquire, rf: last };
                let i = s.trace.push(self.thread, op, va);
                s.locks.insert(lock, (true, Some(i)));
                true
            });
            if got {
                return;
            }
        }
    }

    /// Releases `lock` with a release store. `va`: as for [`Ctx::lock`];
    /// locks protecting persistent data (`va == false`) are where the
    /// recorder's [`Mutation`] applies.
    pub fn unlock(&self, lock: u64, va: bool) {
        let (order, va) = match (va, self.rec.mutation) {
            (false, Mutation::MissingRelease) => (MemOrder::Relaxed, false),
            (false, Mutation::ReleaseMarkedVolatile) => (MemOrder::Release, true),
            _ => (MemOrder::Release, va),
        };
        self.rec.with(self.thread, |s| {
            let op = Op::Store { addr: lock, data: vec![0], space: Space::Volatile, order };
            let i = s.trace.push(self.thread, op, va);
            s.locks.insert(lock, (false, Some(i)));
        });
    }
}

/// The little-endian word at `addr` of `mem` (0 past the end).
pub fn word(mem: &[u8], addr: u64) -> u64 {
    let a = addr as usize;
    mem.get(a..a + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))).unwrap_or(0)
}

/// Writes the little-endian word `v` at `addr` of `mem` (ignored past the end).
pub fn set_word(mem: &mut [u8], addr: u64, v: u64) {
    let a = addr as usize;
    if let Some(b) = mem.get_mut(a..a + 8) {
        b.copy_from_slice(&v.to_le_bytes());
    }
}
