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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arp::trace::{MemOrder, Op};
    use crate::arp::workloads::record::set_word;

    fn st(t: &mut ArpTrace, th: u32, addr: u64, v: u64) {
        t.push(th, Op::Store { addr, data: v.to_le_bytes().to_vec(), space: Space::Persistent, order: MemOrder::Relaxed }, false);
    }

    /// Thread 0 commits `w = 5` (transaction 1 of area 0), thread 1 then
    /// commits `w = 6` (transaction 1 of its area).
    fn two_commits() -> (ArpTrace, u64) {
        let w = DATA;
        let mut t = ArpTrace::new(vec![0; (DATA + 64) as usize]);
        let (a0, a1) = (0, 2 * LOG_AREA);
        st(&mut t, 0, a0, 1 << 8 | 1);
        st(&mut t, 0, w, 5);
        st(&mut t, 0, a0, 1 << 8);
        st(&mut t, 1, a1, 1 << 8 | 1);
        st(&mut t, 1, w, 6);
        st(&mut t, 1, a1, 1 << 8);
        (t, w)
    }

    #[test]
    fn reads_commits_and_rejects_a_lost_update() {
        let (t, w) = two_commits();
        let h = History::from_trace(&t);
        assert_eq!(h.commits(), 2);
        let mut img = t.base.clone();
        // both commits persisted, the newest value survived
        set_word(&mut img, 0, 1 << 8);
        set_word(&mut img, 2 * LOG_AREA, 1 << 8);
        set_word(&mut img, w, 6);
        assert_eq!(h.check(&img), Ok(()));
        // thread 1's commit persisted but w was rolled back to thread 0's
        // value (or to the initial one): a lost update
        set_word(&mut img, w, 5);
        assert!(h.check(&img).is_err());
        set_word(&mut img, w, 0);
        assert!(h.check(&img).is_err());
        // only thread 0's commit persisted: 5 or any later value is fine
        set_word(&mut img, 2 * LOG_AREA, 0);
        set_word(&mut img, w, 5);
        assert_eq!(h.check(&img), Ok(()));
    }

    #[test]
    fn plain_counts_yield_no_commits() {
        let mut t = ArpTrace::new(vec![0; (DATA + 64) as usize]);
        st(&mut t, 0, 0, 1);
        st(&mut t, 0, DATA, 5);
        st(&mut t, 0, 0, 0);
        assert_eq!(History::from_trace(&t).commits(), 0);
    }
}
