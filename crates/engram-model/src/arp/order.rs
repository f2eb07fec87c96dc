//! Persist memory order (PMO) for SCP, epoch persistency, RCBSP, ARP and
//! ARP+VA, computed in one forward pass over a trace.
//!
//! Persists are split into 8-byte-atomic atoms ([`crate::px86::atoms`]). The
//! result, [`Pmo`], gives for every atom the set of atoms that must persist
//! before it (`below`, transitively closed): a crash image is a set of atoms
//! closed under `below`. The rules are listed in [`super`] (module docs);
//! here is how they are computed. Every PMO edge goes forward in the trace
//! (sequenced-before, synchronizes-with and coherence all do), so one pass in
//! trace order, with down-closed sets, suffices:
//!
//! - per thread, `sb_all`: the closure of everything sequenced before;
//!   `inherit`: the closure of every earlier event that orders all its
//!   program-order successors (a two-sided barrier; an acquire in ARP);
//! - an event's `below` is `inherit`, plus `sb_all` if it orders all its
//!   program-order predecessors (a two-sided barrier; a release in ARP),
//!   plus the closure of each release it synchronizes with (if counted),
//!   plus, per atom, the last earlier atom to the same 8-byte word
//!   (same-address coherence).
//!
//! Epoch persistency needs happens-before itself (a sequence point orders
//! everything that happens before it before everything that happens after
//! it), so it carries two sets along sequenced-before and synchronizes-with:
//! `hb` (every atom that happens before) and `bar` (every atom ordered
//! before whatever comes next).

use super::bits::BitSet;
use super::trace::{ArpEvent, ArpTrace, Op};
use crate::px86::atoms;
use std::collections::HashMap;

/// A persistency model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Model {
    /// Sequential (strict) persistency: persists in happens-before order.
    Scp,
    /// Epoch persistency: sequence points and full fences are two-sided
    /// barriers over happens-before; acquires and releases alone order nothing.
    Epoch,
    /// Release consistency with buffered strict persistency: every acquire,
    /// release, full fence and sequence point is a full persist barrier.
    Rcbsp,
    /// Acquire-release persistency (annotations ignored).
    Arp,
    /// ARP honouring volatile annotations.
    ArpVa,
}

impl Model {
    /// Every model, strongest first (except that Epoch sits beside RCBSP).
    pub const ALL: [Model; 5] = [Model::Scp, Model::Rcbsp, Model::Epoch, Model::Arp, Model::ArpVa];

    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Model::Scp => "SCP",
            Model::Epoch => "Epoch",
            Model::Rcbsp => "RCBSP",
            Model::Arp => "ARP",
            Model::ArpVa => "ARP+VA",
        }
    }

    /// Parses a name as printed by [`Model::name`] (case-insensitive).
    pub fn parse(s: &str) -> Option<Model> {
        Model::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(s) || (s.eq_ignore_ascii_case("arpva") && *m == Model::ArpVa))
    }

    /// The event orders everything sequenced before it before itself.
    fn orders_before(self, e: &ArpEvent) -> bool {
        e.is_barrier()
            || match self {
                Model::Scp => true,
                Model::Rcbsp => e.is_acquire() || e.is_release(),
                Model::Arp => e.is_release(),
                Model::ArpVa => e.is_release() && !e.va,
                Model::Epoch => false,
            }
    }

    /// The event is ordered before everything sequenced after it.
    fn orders_after(self, e: &ArpEvent) -> bool {
        e.is_barrier()
            || match self {
                Model::Scp => true,
                Model::Rcbsp => e.is_acquire() || e.is_release(),
                Model::Arp => e.is_acquire(),
                Model::ArpVa => e.is_acquire() && !e.va,
                Model::Epoch => false,
            }
    }

    /// The synchronization `rel →sw acq` is a PMO edge.
    fn counts_sw(self, rel: &ArpEvent, acq: &ArpEvent) -> bool {
        self != Model::ArpVa || !(rel.va || acq.va)
    }
}

/// An 8-byte-atomic piece of a persist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PAtom {
    /// The event that wrote it.
    pub event: usize,
    /// Offset of the first byte.
    pub addr: u64,
    /// 1 to 8 bytes.
    pub data: Vec<u8>,
}

/// Persist memory order over the atoms of a trace.
#[derive(Clone, Debug)]
pub struct Pmo {
    /// The model it was computed for.
    pub model: Model,
    /// Every atom, in trace order.
    pub atoms: Vec<PAtom>,
    /// For each atom, the atoms that must persist before it (transitive).
    pub below: Vec<BitSet>,
}

impl Pmo {
    /// Whether atom `a` is ordered before atom `b`.
    pub fn ordered(&self, a: usize, b: usize) -> bool {
        self.below[b].contains(a)
    }

    /// Whether `set` is a possible crash image (closed under `below`).
    pub fn is_down_closed(&self, set: &BitSet) -> bool {
        set.iter().all(|a| a < self.below.len() && self.below[a].is_subset(set))
    }

    /// The region after a crash that persisted exactly the atoms in `set`.
    pub fn image(&self, base: &[u8], set: &BitSet) -> Vec<u8> {
        let mut img = base.to_vec();
        for a in set.iter() {
            let at = &self.atoms[a];
            let end = at.addr as usize + at.data.len();
            if img.len() < end {
                img.resize(end, 0);
            }
            img[at.addr as usize..end].copy_from_slice(&at.data);
        }
        img
    }
}

#[derive(Clone, Default)]
struct Flow {
    /// Closure of everything sequenced before (rule-based models) / hb (epoch).
    all: BitSet,
    /// Closure passed to every later event.
    inherit: BitSet,
}

/// Computes the persist memory order of `trace` under `model`.
pub fn pmo(trace: &ArpTrace, model: Model) -> Pmo {
    let sw = trace.synchronizes_with();
    let mut atoms_v = Vec::new();
    let mut below = Vec::new();
    let mut threads: HashMap<u32, Flow> = HashMap::new();
    let mut released: HashMap<usize, Flow> = HashMap::new();
    let mut last_on_word: HashMap<u64, usize> = HashMap::new();
    for (i, e) in trace.events.iter().enumerate() {
        let mut fl = threads.remove(&e.thread).unwrap_or_default();
        for &r in &sw[i] {
            if let Some(src) = released.get(&r).filter(|_| model.counts_sw(&trace.events[r], e)) {
                if model == Model::Epoch {
                    fl.all.union_with(&src.all);
                    fl.inherit.union_with(&src.inherit);
                } else {
                    // rel ≤p acq: the acquire (and what it orders) follows the release
                    fl.inherit.union_with(&src.all);
                }
            }
        }
        let mut ev_below = fl.inherit.clone();
        if model.orders_before(e) || (model == Model::Epoch && e.is_barrier()) {
            ev_below.union_with(&fl.all);
        }
        let mut closure = ev_below.clone();
        if let Some((addr, data)) = e.persist() {
            for a in atoms(addr, data) {
                let id = atoms_v.len();
                let mut b = ev_below.clone();
                if let Some(&prev) = last_on_word.get(&(a.addr / 8)) {
                    b.insert(prev);
                    b.union_with(&below[prev]);
                }
                last_on_word.insert(a.addr / 8, id);
                closure.union_with(&b);
                closure.insert(id);
                below.push(b);
                atoms_v.push(PAtom { event: i, addr: a.addr, data: a.data });
            }
        }
        advance(model, e, &mut fl, &closure);
        if e.is_release() {
            released.insert(i, own_flow(model, &fl, &closure));
        }
        threads.insert(e.thread, fl);
    }
    Pmo { model, atoms: atoms_v, below }
}

/// Updates a thread's flow after event `e`, whose closure (its PMO
/// predecessors and its own atoms) is `closure`.
fn advance(model: Model, e: &ArpEvent, fl: &mut Flow, closure: &BitSet) {
    fl.all.union_with(closure);
    if model == Model::Epoch {
        if e.is_barrier() {
            fl.inherit = fl.all.clone();
        }
    } else if model.orders_after(e) {
        fl.inherit.union_with(closure);
    }
}

/// What a release passes to the acquires that synchronize with it: in the
/// rule-based models its closure (rel ≤p acq); in epoch persistency the
/// whole happens-before and barrier state.
fn own_flow(model: Model, fl: &Flow, closure: &BitSet) -> Flow {
    if model == Model::Epoch {
        fl.clone()
    } else {
        Flow { all: closure.clone(), inherit: BitSet::default() }
    }
}

/// Whether `op` is something the language-level models see at all.
pub fn is_model_event(op: &Op) -> bool {
    !matches!(op, Op::Clwb { .. } | Op::Sfence)
}
