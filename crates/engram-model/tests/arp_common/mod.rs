//! Random small multi-threaded traces shared by the ARP test suites.
#![allow(dead_code)]

use engram_model::arp::{ArpTrace, MemOrder, Op, Space};
use proptest::prelude::*;

/// One step of a random program: (thread, kind, operand, flag).
pub fn program() -> impl Strategy<Value = Vec<(u32, u8, u8, bool)>> {
    prop::collection::vec((0u32..3, 0u8..9, 0u8..4, any::<bool>()), 1..14)
}

/// Builds a trace; persists are single bytes (one atom each) at four words
/// across two lines; synchronization on two volatile variables, each load
/// reading from the latest store to its variable.
pub fn build(steps: &[(u32, u8, u8, bool)], shared: bool) -> ArpTrace {
    let mut t = ArpTrace::new(vec![0; 1024]);
    let mut last: [Option<usize>; 2] = [None, None];
    let mut persists = 0;
    for &(th, kind, k, flag) in steps {
        let var = (k % 2) as usize;
        let vaddr = 0x1000 + 8 * var as u64;
        let order = if flag { MemOrder::Release } else { MemOrder::Relaxed };
        match kind {
            0..=2 if persists < 10 => {
                persists += 1;
                let addr = if shared { [0u64, 8, 64, 72][k as usize] } else { 256 * th as u64 + [0u64, 8, 64, 72][k as usize] };
                t.push(
                    th,
                    Op::Store { addr, data: vec![t.events.len() as u8 + 1], space: Space::Persistent, order: MemOrder::Relaxed },
                    false,
                );
            }
            3 | 4 => {
                last[var] = Some(t.push(
                    th,
                    Op::Store { addr: vaddr, data: vec![1], space: Space::Volatile, order: MemOrder::Release },
                    flag && k > 1,
                ));
            }
            5 | 6 => {
                let ord = if kind == 5 { MemOrder::Acquire } else { order };
                t.push(th, Op::Load { addr: vaddr, len: 1, space: Space::Volatile, order: ord, rf: last[var] }, flag && k > 1);
            }
            7 => {
                let rf = last[var];
                last[var] =
                    Some(t.push(th, Op::Rmw { addr: vaddr, data: vec![2], space: Space::Volatile, order: MemOrder::AcqRel, rf }, false));
            }
            _ => {
                t.push(th, if flag { Op::SeqPoint } else { Op::Fence }, false);
            }
        }
    }
    t
}
