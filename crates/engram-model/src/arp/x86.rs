//! The x86 mapping of each language-level model, as a trace transformation
//! (the same table `cpp/include/engram/arp.hpp` implements), and the bridge
//! to [`crate::px86`], which stays the ground truth for what x86 persists.
//!
//! | model  | after a persist | before a release      | after an acquire | sequence point | full fence |
//! |--------|-----------------|-----------------------|------------------|----------------|------------|
//! | SCP    | CLWB; SFENCE    | —                     | —                | SFENCE         | MFENCE     |
//! | Epoch  | CLWB            | SFENCE                | —                | SFENCE         | MFENCE     |
//! | RCBSP  | CLWB            | SFENCE                | SFENCE           | SFENCE         | MFENCE     |
//! | ARP    | CLWB            | SFENCE                | — (TSO)          | SFENCE         | MFENCE     |
//! | ARP+VA | CLWB            | SFENCE unless annotated | — (TSO)        | SFENCE         | MFENCE     |
//!
//! and, in every model, an acquire or release that is itself a persist (an
//! atomic on persistent memory, not annotated under ARP+VA) gets
//! `CLWB; SFENCE` after it.
//!
//! [`to_px86`] turns a mapped trace, one thread or several (merged, with
//! `Event::Thread` at each switch), into a Px86 [`Trace`]: the tests
//! (`tests/arp_sim.rs` on one thread, `tests/arp_x86_mt.rs` on two and three)
//! check that every image Px86 allows at any point is one the
//! language-level model allows (the mapping is sound).
//!
//! Two rows were wrong before the multi-threaded check, each found by it
//! with a four-to-six-event trace (kept as tests in `tests/arp_x86_mt.rs`):
//! - Epoch had no SFENCE before a release. Epoch persistency orders
//!   `X ≤hb S ≤hb Y` through a sequence point `S` of *another* thread, but
//!   that thread's SFENCE does not complete this thread's CLWB of `X`; the
//!   release must wait for it. On x86 epoch persistency therefore costs
//!   what ARP costs.
//! - No model fenced after a persistent acquire or release. ARP orders the
//!   release (or acquire) itself before what follows it (`R ≤p A ≤p Y`), but
//!   its CLWB was left pending: a later persist of the acquiring thread
//!   could become durable first. (One thread suffices for an acquiring RMW
//!   on persistent memory; the old one-thread check never generated one.)

use super::order::Model;
use super::trace::{ArpEvent, ArpTrace, Op, Space};
use crate::trace::{Event, FlushKind, Trace};

/// Inserts the CLWBs and SFENCEs of `model`'s x86 mapping.
pub fn map(trace: &ArpTrace, model: Model) -> ArpTrace {
    map_with(trace, |e| {
        let release_fence = match model {
            Model::Rcbsp | Model::Arp | Model::Epoch => e.is_release(),
            Model::ArpVa => e.is_release() && !e.va,
            Model::Scp => false,
        };
        // a persistent acquire or release is itself ordered before what
        // follows it: its own write-back must complete here
        let sync = (e.is_acquire() || e.is_release()) && !(model == Model::ArpVa && e.va);
        Fences {
            before: release_fence || e.op == Op::SeqPoint,
            after_persist: model == Model::Scp || sync,
            after: model == Model::Rcbsp && e.is_acquire(),
        }
    })
}

/// Where a mapping puts SFENCEs around one event.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fences {
    /// An SFENCE before the event.
    pub before: bool,
    /// An SFENCE after the CLWB that follows the event, if it is a persist.
    pub after_persist: bool,
    /// An SFENCE after the event (and its CLWB).
    pub after: bool,
}

/// Rewrites `trace` with a CLWB after every persist and the SFENCEs `rule`
/// asks for around each event, keeping every load's reads-from link on the
/// same store. [`map`] is this with the table above as its rule; the tests
/// keep the mapping as it was before the multi-threaded check as another.
pub fn map_with(trace: &ArpTrace, rule: impl Fn(&ArpEvent) -> Fences) -> ArpTrace {
    let mut out = ArpTrace::new(trace.base.clone());
    let mut renumber = vec![0usize; trace.events.len()];
    for (i, e) in trace.events.iter().enumerate() {
        let f = rule(e);
        let fence = |out: &mut ArpTrace| out.push(e.thread, Op::Sfence, false);
        if f.before {
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
            if f.after_persist {
                fence(&mut out);
            }
        }
        if f.after {
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
    let mut thread = 0;
    for e in &trace.events {
        if e.thread != thread {
            thread = e.thread;
            t.push(Event::Thread { id: thread });
        }
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
