//! Durability against the recorded history: a crash image, after recovery,
//! must keep every update of every transaction whose commit persisted
//! (unless a later write to the same word replaced it).
//!
//! The consistency invariants of `benches` (a permutation, a checksum per
//! record, stock plus deltas) cannot see a *lost* update: when every
//! transaction rewrites a whole record (pc, TATP, YCSB-A), rolling a record
//! back past a committed transaction leaves it consistent, only old. That
//! is exactly what a missing release allows: B's transaction, ordered after
//! A's on the same record by the lock, commits and persists while A's
//! commit does not, and recovery's undo of A then restores the value from
//! before both.
//!
//! What is read from the trace alone (no help from the workloads): a
//! persistent store to a log area's count word (below `DATA`, at a multiple
//! of `LOG_AREA`) with a non-zero entry count opens a transaction of its
//! thread; the thread's persistent stores to data (at or above `DATA`) until
//! the count word is set to `seq << 8` (entries 0) are that transaction's
//! writes, and that store is its commit. In a crash image, a count word
//! holding `seq << 8` with `seq > 0` says that commit persisted (the same
//! word's later values persist after it). The check: for each such
//! transaction and each word it wrote, the recovered value is one that some
//! store to that word at or after the transaction's own wrote. Traces whose
//! count words carry no sequence number (the C++ port) yield no commits, so
//! the check is then vacuous.

use super::record::word;
use super::{DATA, LOG_AREA};
use crate::arp::trace::{ArpTrace, Space};
use std::collections::HashMap;

/// The committed transactions of a recorded execution and every data word's
/// store history.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// (count word address, committed value) → the transaction's data
    /// writes as (word address, event index).
    commits: HashMap<(u64, u64), Vec<(u64, usize)>>,
    /// Data word → (event index, value) of every store to it, in trace order.
    stores: HashMap<u64, Vec<(usize, u64)>>,
}

impl History {
    /// Reads the transactions out of `trace` (8-byte aligned word stores).
    pub fn from_trace(trace: &ArpTrace) -> Self {
        let mut h = History::default();
        // thread → (count word, its writes so far)
        let mut open: HashMap<u32, (u64, Vec<(u64, usize)>)> = HashMap::new();
        for (i, e) in trace.events.iter().enumerate() {
            let Some((addr, data)) = e.persist() else { continue };
            if !matches!(e.op, crate::arp::trace::Op::Store { space: Space::Persistent, .. }) || data.len() != 8 {
                continue;
            }
            let v = word(data, 0);
            if addr >= DATA {
                h.stores.entry(addr).or_default().push((i, v));
                if let Some((_, w)) = open.get_mut(&e.thread) {
                    w.push((addr, i));
                }
            } else if addr % LOG_AREA == 0 {
                if v & 0xff != 0 {
                    open.insert(e.thread, (addr, Vec::new()));
                } else if v >> 8 != 0 {
                    if let Some((log, w)) = open.remove(&e.thread) {
                        if log == addr {
                            h.commits.insert((addr, v), w);
                        }
                    }
                }
            }
        }
        h
    }

    /// Committed transactions found.
    pub fn commits(&self) -> usize {
        self.commits.len()
    }

    /// Checks a recovered image (see the module docs).
    pub fn check(&self, img: &[u8]) -> Result<(), String> {
        for (&(log, v), writes) in &self.commits {
            if word(img, log) != v {
                continue;
            }
            for &(addr, at) in writes {
                let now = word(img, addr);
                let ok = self.stores.get(&addr).is_some_and(|s| s.iter().any(|&(i, x)| i >= at && x == now));
                if !ok {
                    return Err(format!(
                        "durability: transaction {} of log {log:#x} committed its write at event {at}, but recovery left {addr:#x} = {now:#x}, an older value",
                        v >> 8
                    ));
                }
            }
        }
        Ok(())
    }
}
