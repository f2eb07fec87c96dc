//! The x86 mapping of each language-level model, as a trace transformation
//! (the same table `cpp/include/engram/arp.hpp` implements), and the bridge
//! to [`crate::px86`], which stays the ground truth for what x86 persists.
//!
//! | model  | after a persist | before a release      | after an acquire | sequence point | full fence |
//! |--------|-----------------|-----------------------|------------------|----------------|------------|
//! | SCP    | CLWB; SFENCE    | —                     | —                | SFENCE         | MFENCE     |
//! | Epoch  | CLWB            | —                     | —                | SFENCE         | MFENCE     |
//! | RCBSP  | CLWB            | SFENCE                | SFENCE           | SFENCE         | MFENCE     |
//! | ARP    | CLWB            | SFENCE                | — (TSO)          | SFENCE         | MFENCE     |
//! | ARP+VA | CLWB            | SFENCE unless annotated | — (TSO)        | SFENCE         | MFENCE     |
//!
//! [`to_px86`] turns a one-thread mapped trace into a Px86 [`Trace`]: the
//! tests check that every image Px86 allows at any point is one the
//! language-level model allows (the mapping is sound). Multi-threaded traces
//! cannot be checked this way: Px86 here serialises one thread's fences.

use super::order::Model;
use super::trace::{ArpTrace, Op, Space};
use crate::trace::{Event, FlushKind, Trace};

/// Inserts the CLWBs and SFENCEs of `model`'s x86 mapping.
pub fn map(trace: &ArpTrace, model: Model) -> ArpTrace {
    let mut out = ArpTrace::new(trace.base.clone());
    let mut renumber = vec![0usize; trace.events.len()];
    for (i, e) in trace.events.iter().enumerate() {
        let fence = |out: &mut ArpTrace| out.push(e.thread, Op::Sfence, false);
        let release_fence = match model {
            Model::Rcbsp | Model::Arp => e.is_release(),
            Model::ArpVa => e.is_release() && !e.va,
            Model::Scp | Model::Epoch => false,
        };
        if release_fence || e.op == Op::SeqPoint {
            fence(&mut out);
        }
        let mut ev = e.clone();
        if let Op::Load { rf, .. } | Op::Rmw { rf, .. } = &mut ev.op {
            *rf = rf.map(|r| renumber[r]);
        }
        renumber[i] = out.events.len();
        out.events.push(ev);
        if let Some((addr, _)) = e.persist() {
            out.push(e.thread, Op::Clwb { addr }, false);
            if model == Model::Scp {
                fence(&mut out);
            }
        }
        if model == Model::Rcbsp && e.is_acquire() {
            fence(&mut out);
        }
    }
    out
}

/// A one-thread mapped trace as a Px86 trace: persistent stores, CLWB,
/// SFENCE; a full fence or any locked read-modify-write (persistent or not)
/// is a fence; volatile plain accesses and sequence points (already mapped
/// to SFENCE) are dropped.
pub fn to_px86(trace: &ArpTrace) -> Trace {
    let mut t = Trace::new(trace.base.clone());
    for e in &trace.events {
        match &e.op {
            Op::Store { addr, data, space: Space::Persistent, .. } => t.push(Event::Store { addr: *addr, data: data.clone() }),
            Op::Rmw { addr, data, space: Space::Persistent, .. } => t.push(Event::Rmw { addr: *addr, data: data.clone() }),
            Op::Rmw { space: Space::Volatile, .. } => t.push(Event::Fence { what: "locked rmw" }),
            Op::Clwb { addr } => t.push(Event::Flush { addr: *addr, kind: FlushKind::Clwb }),
            Op::Sfence => t.push(Event::Fence { what: "sfence" }),
            Op::Fence => t.push(Event::Fence { what: "mfence" }),
            _ => {}
        }
    }
    t
}
