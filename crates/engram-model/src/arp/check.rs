//! The checker: for a trace, a model and a recovery invariant, enumerate the
//! crash images the model allows and report the ones the invariant rejects.
//!
//! A crash image is the base region plus a set of atoms closed under the
//! model's persist memory order (a down-set, or ideal). Every down-set is the
//! image of a crash at some point of the execution: PMO only points forward in
//! the trace, so a down-set is also a down-set of the trace prefix ending at
//! its last atom. Checking all down-sets therefore checks every crash point.
//!
//! Pruning, always reported (as the Px86 explorer does):
//! - ideals are counted by a depth-first walk with a step budget; when the
//!   count is exact and within `max_images`, every image is checked;
//! - otherwise the checker takes the two extremes (nothing / everything), for
//!   each atom the smallest image containing it (its down-closure) and the
//!   largest image lacking it (everything but its up-closure), then seeded
//!   random ideals (each allowed atom kept with a random probability), until
//!   `max_images` distinct images; the rest are counted as skipped.

use super::bits::BitSet;
use super::order::{pmo, Model, Pmo};
use super::trace::ArpTrace;
use std::collections::HashSet;

/// Checker settings.
#[derive(Clone, Debug)]
pub struct CheckConfig {
    /// Images checked per model at most.
    pub max_images: usize,
    /// Steps of the ideal-counting walk before the count becomes a lower bound.
    pub count_steps: u64,
    /// Seed for the random ideals.
    pub seed: u64,
    /// Stop after this many violations.
    pub max_violations: usize,
}

impl Default for CheckConfig {
    fn default() -> Self {
        CheckConfig { max_images: 2048, count_steps: 2_000_000, seed: 0x5eed, max_violations: 3 }
    }
}

/// How many crash images a model allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdealCount {
    /// Exactly this many.
    Exact(u128),
    /// At least this many (the counting walk ran out of steps).
    AtLeast(u128),
}

impl std::fmt::Display for IdealCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdealCount::Exact(n) => write!(f, "{n}"),
            IdealCount::AtLeast(n) => write!(f, "at least {n}"),
        }
    }
}

/// One crash image the invariant rejected.
#[derive(Clone, Debug)]
pub struct ArpViolation {
    /// The earliest crash point that can leave this image: after this event.
    pub after_event: Option<usize>,
    /// What the invariant said.
    pub message: String,
    /// Persists of the trace prefix that the image lost, readable.
    pub lost: String,
}

/// What the checker did for one model.
#[derive(Clone, Debug)]
pub struct CheckReport {
    /// The model.
    pub model: Model,
    /// Atoms (8-byte-atomic persists) in the trace.
    pub atoms: usize,
    /// Crash images the model allows.
    pub ideals: IdealCount,
    /// Images built and checked.
    pub images_checked: usize,
    /// Rejected images.
    pub violations: Vec<ArpViolation>,
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} atoms, {} crash images, {} checked, {} violations",
            self.model.name(),
            self.atoms,
            self.ideals,
            self.images_checked,
            self.violations.len()
        )
    }
}

/// Checks `trace` under `model`: `invariant` gets each crash image (it
/// typically runs recovery on a copy, then checks) and returns `Err` for a bad one.
pub fn check(trace: &ArpTrace, model: Model, cfg: &CheckConfig, invariant: &mut dyn FnMut(&[u8]) -> Result<(), String>) -> CheckReport {
    let p = pmo(trace, model);
    let ideals = count_ideals(&p, cfg.count_steps);
    let sets = match ideals {
        IdealCount::Exact(n) if n <= cfg.max_images as u128 => all_ideals(&p),
        _ => sample_ideals(&p, cfg.max_images, cfg.seed),
    };
    let mut r = CheckReport { model, atoms: p.atoms.len(), ideals, images_checked: 0, violations: Vec::new() };
    for s in &sets {
        r.images_checked += 1;
        if let Err(message) = invariant(&p.image(&trace.base, s)) {
            r.violations.push(violation(&p, trace, s, message));
            if r.violations.len() >= cfg.max_violations {
                break;
            }
        }
    }
    r
}

/// Every image of `trace` under `model` (exhaustive: keep traces small).
pub fn all_images(trace: &ArpTrace, model: Model) -> HashSet<Vec<u8>> {
    let p = pmo(trace, model);
    all_ideals(&p).iter().map(|s| p.image(&trace.base, s)).collect()
}

/// Counts ideals by a depth-first walk of include/exclude decisions in trace
/// order (an atom may be included only with all its predecessors; every leaf
/// is a distinct ideal).
pub fn count_ideals(p: &Pmo, max_steps: u64) -> IdealCount {
    let mut leaves: u128 = 0;
    let mut steps = 0u64;
    let mut exhausted = false;
    walk(p, &mut |_| leaves += 1, &mut || {
        steps += 1;
        exhausted = steps > max_steps;
        !exhausted
    });
    if exhausted {
        IdealCount::AtLeast(leaves)
    } else {
        IdealCount::Exact(leaves)
    }
}

/// Every ideal of `p`.
pub fn all_ideals(p: &Pmo) -> Vec<BitSet> {
    let mut out = Vec::new();
    walk(p, &mut |s| out.push(s.clone()), &mut || true);
    out
}

/// Iterative include/exclude walk; `go` returns false to stop.
fn walk(p: &Pmo, leaf: &mut dyn FnMut(&BitSet), go: &mut dyn FnMut() -> bool) {
    let n = p.atoms.len();
    // stack of (next atom to decide, atoms included so far): open include branches
    let mut stack: Vec<(usize, BitSet)> = vec![(0, BitSet::new(n))];
    while let Some((mut i, set)) = stack.pop() {
        loop {
            if !go() {
                return;
            }
            if i == n {
                leaf(&set);
                break;
            }
            if p.below[i].is_subset(&set) {
                let mut with = set.clone();
                with.insert(i);
                stack.push((i + 1, with));
            }
            i += 1;
        }
    }
}

/// Up to `max` distinct ideals chosen as the module docs describe.
pub fn sample_ideals(p: &Pmo, max: usize, seed: u64) -> Vec<BitSet> {
    let n = p.atoms.len();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut add = |s: BitSet, out: &mut Vec<BitSet>| {
        if out.len() < max && seen.insert(s.clone()) {
            out.push(s);
        }
    };
    let full = closed_walk(p, &mut |_| true);
    add(BitSet::new(n), &mut out);
    add(full, &mut out);
    let stride = (2 * n / max.max(1)).max(1);
    for i in (0..n).step_by(stride) {
        let mut down = p.below[i].clone();
        down.insert(i);
        add(down, &mut out);
        add(closed_walk(p, &mut |j| j != i && !p.below[j].contains(i)), &mut out);
    }
    let mut rng = seed | 1;
    let mut tries = 0;
    while out.len() < max && tries < max * 4 {
        tries += 1;
        let p_keep = (xorshift(&mut rng) % 1000) as f64 / 1000.0;
        let s = closed_walk(p, &mut |_| (xorshift(&mut rng) % 1000) as f64 / 1000.0 < p_keep);
        add(s, &mut out);
    }
    out
}

/// Walks atoms in order, keeping each whose predecessors are all kept and
/// that `want` accepts: always an ideal.
fn closed_walk(p: &Pmo, want: &mut dyn FnMut(usize) -> bool) -> BitSet {
    let mut s = BitSet::new(p.atoms.len());
    for i in 0..p.atoms.len() {
        if p.below[i].is_subset(&s) && want(i) {
            s.insert(i);
        }
    }
    s
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn violation(p: &Pmo, trace: &ArpTrace, set: &BitSet, message: String) -> ArpViolation {
    let after_event = set.iter().map(|a| p.atoms[a].event).max();
    let limit = after_event.unwrap_or(0);
    let lost: Vec<String> = (0..p.atoms.len())
        .filter(|&a| !set.contains(a) && p.atoms[a].event <= limit)
        .take(6)
        .map(|a| {
            let at = &p.atoms[a];
            format!("event {} (thread {}) {}B at {:#x}", at.event, trace.events[at.event].thread, at.data.len(), at.addr)
        })
        .collect();
    let lost = if lost.is_empty() { "nothing before it".to_string() } else { lost.join(", ") };
    ArpViolation { after_event, message, lost }
}
