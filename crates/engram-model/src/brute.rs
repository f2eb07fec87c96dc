//! An independent, exhaustive reference semantics for tiny traces.
//!
//! Where [`crate::px86`] reasons about prefixes axiomatically, this module
//! runs an operational machine and explores every interleaving:
//! - a store appends its atoms to its line's queue;
//! - CLWB/CLFLUSHOPT append a marker to the line's queue; a fence may only
//!   execute once no marker is left anywhere (every flushed prefix persisted);
//! - CLFLUSH appends a strong marker: no later event executes until it is gone;
//! - a locked RMW waits like a fence, then stores;
//! - at any moment, the oldest atom of any line may persist (eviction), and a
//!   marker at the head of its queue disappears.
//!
//! The images reachable with the program counter at point `k` are exactly
//! what a crash before event `k` may leave. Exponential: keep traces tiny.

use crate::px86::{atoms, Atom, LINE};
use crate::trace::{Event, FlushKind, Trace};
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Item {
    Atom(u64, Vec<u8>),
    Mark { strong: bool },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    pc: usize,
    mem: Vec<u8>,
    queues: BTreeMap<u64, VecDeque<Item>>,
}

impl State {
    fn any_mark(&self, strong_only: bool) -> bool {
        self.queues.values().flatten().any(|i| matches!(i, Item::Mark { strong } if *strong || !strong_only))
    }

    fn drop_head_marks(&mut self) {
        for q in self.queues.values_mut() {
            while matches!(q.front(), Some(Item::Mark { .. })) {
                q.pop_front();
            }
        }
        self.queues.retain(|_, q| !q.is_empty());
    }
}

/// For each point `k` in `points`, the set of images a crash before event
/// `k` may leave.
pub fn reachable(trace: &Trace, points: &[usize]) -> BTreeMap<usize, BTreeSet<Vec<u8>>> {
    let want: BTreeSet<usize> = points.iter().copied().collect();
    let mut out: BTreeMap<usize, BTreeSet<Vec<u8>>> = want.iter().map(|&k| (k, BTreeSet::new())).collect();
    let start = State { pc: 0, mem: trace.base.clone(), queues: BTreeMap::new() };
    let mut seen = HashSet::new();
    let mut todo = vec![start];
    while let Some(s) = todo.pop() {
        if !seen.insert(s.clone()) {
            continue;
        }
        if want.contains(&s.pc) {
            out.get_mut(&s.pc).map(|set| set.insert(s.mem.clone()));
        }
        // eviction of the oldest atom of each line
        for (&line, q) in &s.queues {
            if let Some(Item::Atom(addr, data)) = q.front() {
                let mut n = s.clone();
                let a = Atom { addr: *addr, data: data.clone(), event: 0 };
                let end = a.addr as usize + a.data.len();
                if n.mem.len() < end {
                    n.mem.resize(end, 0);
                }
                n.mem[a.addr as usize..end].copy_from_slice(&a.data);
                n.queues.get_mut(&line).map(|q| q.pop_front());
                n.drop_head_marks();
                todo.push(n);
            }
        }
        // the next event
        if let Some(e) = trace.events.get(s.pc) {
            if s.any_mark(true) {
                continue;
            }
            let mut n = s.clone();
            n.pc += 1;
            match e {
                Event::Store { addr, data } => push_atoms(&mut n, *addr, data),
                Event::Flush { addr, kind } => {
                    let line = addr / LINE * LINE;
                    n.queues.entry(line).or_default().push_back(Item::Mark { strong: *kind == FlushKind::Clflush });
                    n.drop_head_marks();
                }
                // A fence waits until no flush is pending: explored only then.
                Event::Fence { .. } if s.any_mark(false) => continue,
                Event::Rmw { addr, data } => {
                    if s.any_mark(false) {
                        continue;
                    }
                    push_atoms(&mut n, *addr, data);
                }
                Event::Extend { len } if (n.mem.len() as u64) < *len => n.mem.resize(*len as usize, 0),
                _ => {}
            }
            todo.push(n);
        }
    }
    out
}

fn push_atoms(s: &mut State, addr: u64, data: &[u8]) {
    for a in atoms(addr, data) {
        s.queues.entry(a.addr / LINE * LINE).or_default().push_back(Item::Atom(a.addr, a.data));
    }
}
