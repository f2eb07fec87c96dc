//! The crash-state explorer.
//!
//! It replays a trace through the [`Px86`] model and, at every crash point
//! ([`Trace::is_point`]: before each fence and locked RMW, right after each
//! CLFLUSH, and at the end: wherever the set of possible images can
//! shrink), builds the images a crash there may leave and hands each to the
//! caller's check (recover, then an invariant).
//!
//! Pruning, always reported:
//! - a point with no store since the last explored one is not explored
//!   again (`points_equivalent`): its images were all possible there;
//! - when a point has more images than `max_images_per_point`, the explorer
//!   takes, in order: the two extremes (nothing unflushed persisted /
//!   everything persisted); for the lines flushed longest ago without a
//!   fence since (one line per 12 images of budget), everything but what the line got
//!   in the step its flush was for, and that line alone up to its flush;
//!   for each of the newest steps, its stores alone (every line whose
//!   pending stores all come from that step or later persisted, every other
//!   line lost: a missing fence before the step shows however many lines
//!   each side wrote); round robin over the newest protocol steps (a step ends where a run of
//!   flushes ends, or at a fence, so a missing fence still separates two
//!   steps) and the lines each wrote, most recent first, everything but what
//!   the line got from that step on, and that line alone up to that step;
//!   every prefix of each line against either extreme (Jaaru-style per-line
//!   intervals); then seeded random choices. The rest are counted as
//!   skipped (`images_skipped`).

use crate::px86::{next_prefix, Atom, CrashState, Px86};
use crate::trace::{Event, Trace};
use std::collections::HashSet;

/// Explorer settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Images checked at one ordering point at most.
    pub max_images_per_point: usize,
    /// Seed for the random choices.
    pub seed: u64,
    /// Stop after this many violations.
    pub max_violations: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { max_images_per_point: 64, seed: 0x5eed, max_violations: 5 }
    }
}

/// One image that failed the check.
#[derive(Clone, Debug)]
pub struct Violation {
    /// Index of the event the crash happened before (`events.len()` = at the end).
    pub event_index: usize,
    /// The fence at that point, if any.
    pub fence: Option<&'static str>,
    /// What the check said.
    pub message: String,
    /// Which unflushed stores the image kept and lost, readable.
    pub image: String,
}

/// What the explorer did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Stores, flushes and fences in the trace.
    pub stores: usize,
    /// Flushes in the trace.
    pub flushes: usize,
    /// Fences in the trace.
    pub fences: usize,
    /// Ordering points in the trace.
    pub points: usize,
    /// Threads whose events the trace merges (1 for a single-threaded one).
    pub threads: usize,
    /// Points skipped because their state equals the previous point's.
    pub points_equivalent: usize,
    /// Images built and checked.
    pub images_checked: u64,
    /// Images possible but not checked (pruned).
    pub images_skipped: u128,
    /// Failed images.
    pub violations: Vec<Violation>,
}

impl Report {
    /// `images_skipped` for people: exact below 10^15, else a power of ten.
    pub fn skipped_text(&self) -> String {
        if self.images_skipped < 1_000_000_000_000_000 {
            self.images_skipped.to_string()
        } else {
            format!("more than 10^{}", self.images_skipped.ilog10())
        }
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{} stores, {} flushes, {} fences; {} ordering points ({} equivalent); {} images checked, {} skipped; {} violations",
            if self.threads > 1 { format!("{} threads: ", self.threads) } else { String::new() },
            self.stores,
            self.flushes,
            self.fences,
            self.points,
            self.points_equivalent,
            self.images_checked,
            self.skipped_text(),
            self.violations.len()
        )
    }
}

/// Explores every ordering point of `trace`. `check` gets each image and
/// returns `Err(description)` for a bad one; `progress(done, total)` is
/// called once per ordering point.
pub fn explore(
    trace: &Trace,
    cfg: &Config,
    check: &mut dyn FnMut(&[u8]) -> Result<(), String>,
    progress: &mut dyn FnMut(usize, usize),
) -> Report {
    explore_indexed(trace, cfg, &mut |_, img| check(img), progress)
}

/// [`explore`], with the crash point (the index of the event the crash
/// happened before) passed to `check` too: a check can then demand what
/// the traced program had been promised by then (a commit that returned
/// before that event must survive).
#[allow(clippy::type_complexity)] // one callback signature, spelled out once
pub fn explore_indexed(
    trace: &Trace,
    cfg: &Config,
    check: &mut dyn FnMut(usize, &[u8]) -> Result<(), String>,
    progress: &mut dyn FnMut(usize, usize),
) -> Report {
    let (stores, flushes, fences) = trace.counts();
    let points = trace.ordering_points();
    let threads =
        1 + trace.events.iter().filter_map(|e| if let Event::Thread { id } = e { Some(*id as usize) } else { None }).max().unwrap_or(0);
    let mut r = Report { stores, flushes, fences, points: points.len(), threads, ..Default::default() };
    let steps = steps(trace);
    let mut model = Px86::new(trace.base.clone());
    let mut rng = cfg.seed | 1;
    let mut stores_seen = 0usize;
    let mut last_explored: Option<usize> = None;
    let mut done = 0;
    for i in 0..=trace.events.len() {
        let e = trace.events.get(i);
        if trace.is_point(i) {
            done += 1;
            // Without a store since the last explored point, atoms were at
            // most folded: every image here was possible there too.
            if last_explored == Some(stores_seen) {
                r.points_equivalent += 1;
            } else {
                last_explored = Some(stores_seen);
                let fence = match e {
                    Some(Event::Fence { what }) => Some(*what),
                    Some(Event::Rmw { .. }) => Some("locked read-modify-write"),
                    _ if i > 0 && trace.events[i - 1].is_clflush() => Some("a CLFLUSH completing"),
                    _ => None,
                };
                let st = model.crash_state();
                let pending = model.pending_flushes();
                let chosen = choose(&st, &steps, &pending, cfg.max_images_per_point, &mut rng);
                explore_point(&st, chosen, cfg, &mut r, &mut |img, desc| {
                    check(i, img).map_err(|message| Violation { event_index: i, fence, message, image: desc() })
                });
            }
            progress(done, points.len());
            if r.violations.len() >= cfg.max_violations {
                break;
            }
        }
        if let Some(e) = e {
            if matches!(e, Event::Store { .. } | Event::Rmw { .. }) {
                stores_seen += 1;
            }
            model.apply(e);
        }
    }
    r
}

type PointCheck<'a> = dyn FnMut(&[u8], &dyn Fn() -> String) -> Result<(), Violation> + 'a;

fn explore_point(st: &CrashState<'_>, choices: Vec<Vec<usize>>, cfg: &Config, r: &mut Report, check: &mut PointCheck<'_>) {
    let total = st.count();
    r.images_skipped = r.images_skipped.saturating_add(total.saturating_sub(choices.len() as u128));
    // one copy of the durable bytes per point, each image rewrites its lines
    let mut img = st.durable.to_vec();
    for prefix in choices {
        r.images_checked += 1;
        st.image_over(&prefix, &mut img);
        if let Err(v) = check(&img, &|| describe(st, &prefix)) {
            r.violations.push(v);
            if r.violations.len() >= cfg.max_violations {
                return;
            }
        }
    }
}

/// `steps[i]`: the protocol step event `i` belongs to. A step ends where a
/// run of flushes ends (the place a fence goes) and at every fence or
/// locked RMW; so when a fence is missing, the stores before and after the
/// place it belonged still fall into different steps.
fn steps(trace: &Trace) -> Vec<u32> {
    let mut n = 0;
    let mut out = Vec::with_capacity(trace.events.len() + 1);
    let mut prev_flush = false;
    for e in &trace.events {
        if matches!(e, Event::Thread { .. }) {
            out.push(n);
            continue;
        }
        let flush = matches!(e, Event::Flush { .. });
        if prev_flush && !flush {
            n += 1;
        }
        out.push(n);
        if e.is_ordering_point() {
            n += 1;
        }
        prev_flush = flush;
    }
    out.push(n);
    out
}

/// How many of the newest steps get single-line images first.
const RECENT_STEPS: usize = 4;

/// How many of the newest steps get an image of their stores alone.
const RECENT_ALONE: usize = 1;

/// The prefix vectors to check at one point, best first (see the module
/// documentation for the order).
fn choose(st: &CrashState<'_>, steps: &[u32], pending: &[(u64, usize)], max: usize, rng: &mut u64) -> Vec<Vec<usize>> {
    let n = st.lines.len();
    if st.count() <= max as u128 {
        let mut out = Vec::new();
        let mut p = vec![0; n];
        loop {
            out.push(p.clone());
            if !next_prefix(&mut p, &st.lines) {
                return out;
            }
        }
    }
    let full: Vec<usize> = st.lines.iter().map(|(_, t)| t.len()).collect();
    let zero = vec![0; n];
    let step = |a: &Atom| steps.get(a.event).copied().unwrap_or(0);
    let mut c = Chooser { seen: HashSet::new(), out: Vec::new(), max };
    c.add(zero.clone());
    c.add(full.clone());
    // The newest steps, newest first, each with the lines it wrote, most
    // recently written first.
    let mut recent: Vec<u32> = st.lines.iter().flat_map(|(_, t)| t.iter().map(step)).collect();
    recent.sort_unstable_by(|a, b| b.cmp(a));
    recent.dedup();
    recent.truncate(RECENT_STEPS);
    // The lines flushed longest ago without a fence since, for one image
    // pair per 12 of the budget: everything persisted but what that line got in the step
    // its flush was for, and that line alone persisted up to its flush (a
    // fence missing after the flush shows at once).
    for &(line, covered) in pending.iter().take((max / 12).max(1)) {
        if let Ok(j) = st.lines.binary_search_by_key(&line, |(l, _)| *l) {
            let tail = st.lines[j].1;
            let s = step(&tail[covered - 1]);
            c.add(with(&full, j, tail.iter().take_while(|a| step(a) < s).count()));
            c.add(with(&zero, j, covered));
        }
    }
    // The newest steps' stores alone: every line whose pending stores all
    // come from step `s` or later persisted whole, every other line lost
    // whole (a fence missing before step `s` shows at once, however many
    // lines each side wrote).
    for &s in recent.iter().take(RECENT_ALONE) {
        c.add(st.lines.iter().map(|(_, t)| if t.first().is_some_and(|a| step(a) >= s) { t.len() } else { 0 }).collect());
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&j| std::cmp::Reverse(st.lines[j].1.last().map_or(0, |a| a.event)));
    let written: Vec<Vec<usize>> =
        recent.iter().map(|&s| order.iter().copied().filter(|&j| st.lines[j].1.iter().any(|a| step(a) == s)).collect()).collect();
    // Round robin over those steps: everything persisted but line `j`,
    // which lost what it got in step `s` and after (a flushed line missing
    // while later stores made it); and nothing persisted but line `j` up to
    // step `s` (a later store made it while earlier ones did not).
    let longest = written.iter().map(Vec::len).max().unwrap_or(0);
    for r in 0..longest {
        for (k, &s) in recent.iter().enumerate() {
            let Some(&j) = written[k].get(r) else { continue };
            if c.is_full() {
                return c.out;
            }
            let tail = st.lines[j].1;
            let before = tail.iter().take_while(|a| step(a) < s).count();
            let upto = tail.iter().take_while(|a| step(a) <= s).count();
            c.add(with(&full, j, before));
            c.add(with(&zero, j, upto));
        }
    }
    // Then every prefix of every line against either extreme.
    for &j in &order {
        if c.is_full() {
            return c.out;
        }
        for k in 1..=full[j] {
            c.add(with(&zero, j, k));
            c.add(with(&full, j, k - 1));
        }
    }
    let mut tries = 0;
    while c.out.len() < max && tries < max * 4 {
        tries += 1;
        let p: Vec<usize> = full.iter().map(|&f| (xorshift(rng) % (f as u64 + 1)) as usize).collect();
        c.add(p);
    }
    c.out
}

/// Collects distinct choices up to the budget.
struct Chooser {
    seen: HashSet<Vec<usize>>,
    out: Vec<Vec<usize>>,
    max: usize,
}

impl Chooser {
    fn is_full(&self) -> bool {
        self.out.len() >= self.max
    }

    fn add(&mut self, p: Vec<usize>) {
        if self.out.len() < self.max && self.seen.insert(p.clone()) {
            self.out.push(p);
        }
    }
}

/// `base` with line `j` at prefix `k`.
fn with(base: &[usize], j: usize, k: usize) -> Vec<usize> {
    let mut p = base.to_vec();
    p[j] = k;
    p
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// "line 0x40: kept 1 of 3 stores; lost 8 bytes at 0x48, ..." for the lines
/// where the image lost something (the first 6 such lines, then a count).
fn describe(st: &CrashState<'_>, prefix: &[usize]) -> String {
    const SHOWN: usize = 6;
    let mut parts = Vec::new();
    let mut more_lines = 0;
    for ((line, tail), &p) in st.lines.iter().zip(prefix) {
        if p < tail.len() {
            if parts.len() == SHOWN {
                more_lines += 1;
                continue;
            }
            let lost: Vec<String> = tail[p..].iter().take(4).map(|a| format!("{}B at {:#x}", a.data.len(), a.addr)).collect();
            let more = if tail.len() - p > 4 { ", ..." } else { "" };
            parts.push(format!("line {line:#x}: kept {p} of {} unflushed stores, lost {}{more}", tail.len(), lost.join(", ")));
        }
    }
    if parts.is_empty() {
        return "every store persisted".to_string();
    }
    if more_lines > 0 {
        parts.push(format!("and {more_lines} more lines lost stores"));
    }
    parts.join("; ")
}
