//! The persistent-memory controller of the paper's hardware evaluation, as a
//! trace-driven simulator: epoch allocation (Algorithm 1 and its baselines),
//! then a simple timing model of a PM controller draining epochs.
//!
//! ## Epoch allocation ([`epochs`])
//!
//! Each thread tags its persists with an epoch; the controller may persist
//! the writes of one epoch in any order, but not before every epoch it
//! depends on has fully persisted (the thread's previous epoch, and the
//! epochs of the releases its acquires synchronized with).
//! - **SCP**: a new epoch for every persist (and at every acquire that
//!   synchronizes, which then depends on the releasing epoch).
//! - **RCBSP**: a new epoch at every acquire, release, full fence and
//!   sequence point (each compiled to a full persist barrier).
//! - **ARP** (Algorithm 1, `waitForAcq`): a release marks its epoch as the one
//!   acquirers must wait for and sets `waitForAcq`; the epoch stays open, so
//!   persists after the release join it (they are not ordered after the
//!   release). The first acquire after a release opens a new epoch and
//!   clears the flag; a full fence or sequence point always opens one. An
//!   acquire that synchronizes adds a dependency of the (possibly new)
//!   current epoch on the release's epoch. An epoch that was released from
//!   never takes an acquire dependency afterwards, so the graph is acyclic.
//! - **ARP+VA** / **RCBSP+VA**: as ARP / RCBSP, but acquires and releases
//!   with the volatile annotation never reach the controller.
//! - **Ideal**: 64 persists per epoch per thread, no dependencies.
//!
//! ## Timing model ([`simulate`])
//!
//! - Each thread executes one trace event every `cpu_ns` nanoseconds of its
//!   own clock; a persist then arrives at the controller. Threads run in
//!   parallel; cross-thread waits are not modelled on the CPU side (the
//!   trace already is a valid execution; the controller enforces the
//!   persist dependencies).
//! - The controller has one write queue of `queue` entries (64). A persist
//!   arriving at a full queue stalls its thread until an entry frees; the
//!   thread's later events shift by the stall.
//! - `banks` banks (8); 64-byte lines are interleaved across banks, and each
//!   bank's rows hold `row_bytes` (2 KiB) of its lines ([`Timing::place`]);
//!   each bank keeps one open row. A
//!   write takes `hit_ns` (row-buffer hit) or `miss_ns` (miss: the row is
//!   written back and the new one opened) — the stated PM write latency is
//!   `miss_ns` = 300 ns, a row hit 60 ns. A queue entry frees when its write
//!   completes.
//! - Scheduling is FR-FCFS within the ready epochs: a write is eligible when
//!   every epoch its epoch depends on has completed; a free bank takes the
//!   oldest eligible row-hit write, else the oldest eligible write.
//! - Execution time is when the last thread has issued its last event and
//!   every write has completed; the page-miss rate is misses / writes.

use super::trace::{ArpEvent, ArpTrace, Op};
use std::collections::{BTreeMap, HashMap};

/// An epoch-allocation policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SimModel {
    /// An epoch per persist.
    Scp,
    /// An epoch per acquire, release, fence or sequence point.
    Rcbsp,
    /// RCBSP ignoring volatile-annotated acquires and releases.
    RcbspVa,
    /// Algorithm 1.
    Arp,
    /// Algorithm 1 ignoring volatile-annotated acquires and releases.
    ArpVa,
    /// 64 persists per epoch, no ordering.
    Ideal,
}

impl SimModel {
    /// Every policy, in report order.
    pub const ALL: [SimModel; 6] = [SimModel::Scp, SimModel::Rcbsp, SimModel::RcbspVa, SimModel::Arp, SimModel::ArpVa, SimModel::Ideal];

    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            SimModel::Scp => "SCP",
            SimModel::Rcbsp => "RCBSP",
            SimModel::RcbspVa => "RCBSP+VA",
            SimModel::Arp => "ARP",
            SimModel::ArpVa => "ARP+VA",
            SimModel::Ideal => "Ideal",
        }
    }

    fn honours_va(self) -> bool {
        matches!(self, SimModel::RcbspVa | SimModel::ArpVa)
    }
}

/// The epochs of a trace under one policy.
#[derive(Clone, Debug, Default)]
pub struct Epochs {
    /// For each persist event (index into the trace), its epoch.
    pub of_event: BTreeMap<usize, usize>,
    /// For each epoch, the epochs it depends on (including its thread's
    /// previous epoch).
    pub deps: Vec<Vec<usize>>,
    /// Persists per epoch (same index as `deps`).
    pub size: Vec<usize>,
}

impl Epochs {
    /// Total persists.
    pub fn persists(&self) -> usize {
        self.size.iter().sum()
    }
    /// Epochs holding at least one persist.
    pub fn nonempty(&self) -> usize {
        self.size.iter().filter(|&&s| s > 0).count()
    }
    /// Persists per non-empty epoch (Table 5).
    pub fn persists_per_epoch(&self) -> f64 {
        self.persists() as f64 / self.nonempty().max(1) as f64
    }
    /// Whether epoch `a` must complete before epoch `b` starts.
    pub fn precedes(&self, a: usize, b: usize) -> bool {
        let mut seen = vec![false; self.deps.len()];
        let mut todo = vec![b];
        while let Some(e) = todo.pop() {
            for &d in &self.deps[e] {
                if d == a {
                    return true;
                }
                if !seen[d] {
                    seen[d] = true;
                    todo.push(d);
                }
            }
        }
        false
    }
}

struct ThreadEpoch {
    cur: usize,
    wait_for_acq: bool,
}

/// Assigns every persist of `trace` an epoch under `model`.
pub fn epochs(trace: &ArpTrace, model: SimModel) -> Epochs {
    let sw = trace.synchronizes_with();
    let mut ep = Epochs::default();
    let mut threads: HashMap<u32, ThreadEpoch> = HashMap::new();
    let mut release_epoch: HashMap<usize, usize> = HashMap::new();
    for (i, e) in trace.events.iter().enumerate() {
        let th = threads.entry(e.thread).or_insert_with(|| ThreadEpoch { cur: new_epoch(&mut ep, None), wait_for_acq: false });
        let seen = |x: &ArpEvent| !(model.honours_va() && x.va);
        let acq = e.is_acquire() && seen(e);
        let rel = e.is_release() && seen(e);
        // 1. before the event: barriers and acquires may open an epoch
        let open = match model {
            SimModel::Scp => e.persist().is_some() || acq || rel || e.is_barrier(),
            SimModel::Rcbsp | SimModel::RcbspVa => acq || rel || e.is_barrier(),
            SimModel::Arp | SimModel::ArpVa => e.is_barrier() || (acq && th.wait_for_acq),
            SimModel::Ideal => e.persist().is_some() && ep.size[th.cur] >= 64,
        };
        if open {
            th.cur = new_epoch(&mut ep, Some(th.cur));
            th.wait_for_acq = false;
        }
        // 2. an acquire that synchronizes makes the current epoch wait for the
        //    release's; that epoch is closed (its thread moves on to a new one)
        if acq && model != SimModel::Ideal {
            let cur = th.cur;
            for r in &sw[i] {
                let Some(&re) = release_epoch.get(r).filter(|_| seen(&trace.events[*r])) else { continue };
                if re != cur && !ep.deps[cur].contains(&re) {
                    ep.deps[cur].push(re);
                }
                close_released(&mut ep, &mut threads, trace.events[*r].thread, re);
            }
        }
        let Some(th) = threads.get_mut(&e.thread) else { continue };
        // 3. the persist itself
        if e.persist().is_some() {
            ep.of_event.insert(i, th.cur);
            ep.size[th.cur] += 1;
        }
        // 4. a release: acquirers wait for this epoch; RCBSP closes it
        if rel && model != SimModel::Ideal {
            release_epoch.insert(i, th.cur);
            match model {
                // an acquire-release RMW is two-sided: its acquire half opens
                // the next epoch at once
                SimModel::Arp | SimModel::ArpVa if !acq => th.wait_for_acq = true,
                _ => {
                    th.cur = new_epoch(&mut ep, Some(th.cur));
                    th.wait_for_acq = false;
                }
            }
        }
    }
    ep
}

/// An acquire now depends on epoch `re` of thread `owner`: if `owner` is
/// still filling it (ARP keeps a released epoch open), it moves to a new
/// epoch, so every write of an epoch precedes in trace order the writes that
/// depend on it (a full write queue can then never deadlock).
fn close_released(ep: &mut Epochs, threads: &mut HashMap<u32, ThreadEpoch>, owner: u32, re: usize) {
    if let Some(o) = threads.get_mut(&owner).filter(|o| o.cur == re) {
        o.cur = new_epoch(ep, Some(re));
        o.wait_for_acq = false;
    }
}

fn new_epoch(ep: &mut Epochs, prev: Option<usize>) -> usize {
    ep.deps.push(prev.into_iter().collect());
    ep.size.push(0);
    ep.deps.len() - 1
}

/// Timing parameters (see the module docs).
#[derive(Clone, Debug)]
pub struct Timing {
    /// Nanoseconds per trace event on a thread's clock.
    pub cpu_ns: u64,
    /// Write-queue entries.
    pub queue: usize,
    /// PM banks.
    pub banks: usize,
    /// Row (page) size in bytes.
    pub row_bytes: u64,
    /// Write latency on a row-buffer hit.
    pub hit_ns: u64,
    /// Write latency on a row-buffer miss (the PM write latency).
    pub miss_ns: u64,
}

impl Timing {
    /// (bank, row) of `addr`: 64-byte lines interleaved across banks; each
    /// bank's row holds `row_bytes` of its lines.
    pub fn place(&self, addr: u64) -> (usize, u64) {
        let line = addr / 64;
        let banks = self.banks.max(1) as u64;
        ((line % banks) as usize, line / banks / (self.row_bytes / 64).max(1))
    }
}

impl Default for Timing {
    fn default() -> Self {
        Timing { cpu_ns: 2, queue: 64, banks: 8, row_bytes: 2048, hit_ns: 60, miss_ns: 300 }
    }
}

/// What one simulation measured.
#[derive(Clone, Debug)]
pub struct SimResult {
    /// The policy.
    pub model: SimModel,
    /// Persists per non-empty epoch.
    pub persists_per_epoch: f64,
    /// Simulated execution time.
    pub time_ns: u64,
    /// Writes that missed the open row / all writes.
    pub page_miss_rate: f64,
    /// Persists simulated.
    pub persists: usize,
    /// The controller stopped with writes it could never issue (a bug in
    /// the epoch allocation; the time is then meaningless).
    pub deadlocked: bool,
}

struct Write {
    epoch: usize,
    row: u64,
    bank: usize,
    seq: usize,
}

/// Simulates `trace` under `model` with `timing`.
pub fn simulate(trace: &ArpTrace, model: SimModel, timing: &Timing) -> SimResult {
    let ep = epochs(trace, model);
    let sw = trace.synchronizes_with();
    // every persist in trace order: (thread, issue time on the thread's clock, address, epoch)
    let mut arrivals = Vec::new();
    let mut clock: HashMap<u32, u64> = HashMap::new();
    let mut at: Vec<u64> = vec![0; trace.events.len()];
    for (i, e) in trace.events.iter().enumerate() {
        if is_x86_only(&e.op) {
            continue;
        }
        let synced = sw[i].iter().map(|&r| at[r]).max().unwrap_or(0);
        let c = clock.entry(e.thread).or_insert(0);
        *c = (*c).max(synced) + timing.cpu_ns;
        at[i] = *c;
        if let (Some((addr, _)), Some(&epoch)) = (e.persist(), ep.of_event.get(&i)) {
            arrivals.push((e.thread, *c, addr, epoch));
        }
    }
    let mut ctl = Controller::new(&ep, timing);
    let (time, misses, shift, deadlocked) = ctl.run(&arrivals);
    let cpu = clock.iter().map(|(th, c)| c + shift.get(th).copied().unwrap_or(0)).max().unwrap_or(0);
    let n = ep.persists();
    SimResult {
        model,
        persists_per_epoch: ep.persists_per_epoch(),
        time_ns: time.max(cpu),
        page_miss_rate: misses as f64 / n.max(1) as f64,
        persists: n,
        deadlocked,
    }
}

struct Controller<'a> {
    ep: &'a Epochs,
    t: &'a Timing,
    remaining: Vec<usize>,
    done: Vec<bool>,
    /// For each epoch, the epochs that depend on it.
    dependents: Vec<Vec<usize>>,
    queue: Vec<Write>,
    bank_free: Vec<u64>,
    bank_row: Vec<Option<u64>>,
    /// (completion time, epoch)
    inflight: Vec<(u64, usize)>,
}

impl<'a> Controller<'a> {
    fn new(ep: &'a Epochs, t: &'a Timing) -> Self {
        let mut c = Controller {
            ep,
            t,
            remaining: ep.size.clone(),
            done: vec![false; ep.size.len()],
            dependents: vec![Vec::new(); ep.size.len()],
            queue: Vec::new(),
            bank_free: vec![0; t.banks],
            bank_row: vec![None; t.banks],
            inflight: Vec::new(),
        };
        for (e, deps) in ep.deps.iter().enumerate() {
            for &d in deps {
                c.dependents[d].push(e);
            }
        }
        for e in 0..ep.size.len() {
            c.settle(e);
        }
        c
    }

    /// Marks `e` done if it has no writes left and all its dependencies are
    /// done, then every later epoch that this completes.
    fn settle(&mut self, e: usize) {
        let mut todo = vec![e];
        while let Some(e) = todo.pop() {
            if self.done[e] || self.remaining[e] > 0 || !self.ready(e) {
                continue;
            }
            self.done[e] = true;
            todo.extend(self.dependents[e].iter().copied().filter(|&s| !self.done[s]));
        }
    }

    fn ready(&self, epoch: usize) -> bool {
        self.ep.deps[epoch].iter().all(|&d| self.done[d])
    }

    fn room(&self) -> bool {
        self.queue.len() + self.inflight.len() < self.t.queue
    }

    /// Runs to completion; returns (end time, row misses, per-thread stall).
    /// Persists enter the queue in trace order (a full queue stalls the
    /// thread whose persist is next, and everything behind it).
    fn run(&mut self, arrivals: &[(u32, u64, u64, usize)]) -> (u64, usize, HashMap<u32, u64>, bool) {
        let mut shift: HashMap<u32, u64> = HashMap::new();
        let (mut now, mut misses, mut next, mut completed) = (0u64, 0usize, 0usize, 0usize);
        while completed < arrivals.len() {
            let (fin, rest): (Vec<_>, Vec<_>) = self.inflight.iter().partition(|(t, _)| *t <= now);
            self.inflight = rest;
            for (_, e) in fin {
                completed += 1;
                self.remaining[e] -= 1;
                self.settle(e);
            }
            while next < arrivals.len() && self.room() {
                let (th, t, addr, epoch) = arrivals[next];
                let s = shift.entry(th).or_insert(0);
                if t + *s > now {
                    break;
                }
                *s = now - t;
                let (bank, row) = self.t.place(addr);
                self.queue.push(Write { epoch, row, bank, seq: next });
                next += 1;
            }
            misses += self.issue(now);
            if self.inflight.is_empty() && (next == arrivals.len() || !self.room()) && completed < arrivals.len() {
                return (now, misses, shift, true);
            }
            let arrival = arrivals.get(next).filter(|_| self.room()).map(|a| a.1 + shift.get(&a.0).copied().unwrap_or(0));
            let done = self.inflight.iter().map(|(t, _)| *t);
            now = done.chain(arrival).filter(|&t| t > now).min().unwrap_or(now + 1);
        }
        (now, misses, shift, false)
    }

    /// Starts writes on free banks (FR-FCFS among ready epochs); returns misses.
    fn issue(&mut self, now: u64) -> usize {
        let mut misses = 0;
        for b in 0..self.t.banks {
            if self.bank_free[b] > now {
                continue;
            }
            let cands = self.queue.iter().enumerate().filter(|(_, w)| w.bank == b && self.ready(w.epoch));
            let pick = cands.min_by_key(|(_, w)| (Some(w.row) != self.bank_row[b], w.seq)).map(|(i, _)| i);
            if let Some(i) = pick {
                let w = self.queue.remove(i);
                let hit = Some(w.row) == self.bank_row[b];
                misses += usize::from(!hit);
                self.bank_row[b] = Some(w.row);
                self.bank_free[b] = now + if hit { self.t.hit_ns } else { self.t.miss_ns };
                self.inflight.push((self.bank_free[b], w.epoch));
            }
        }
        misses
    }
}

/// Is `op` one the controller never sees (x86-mapping instructions)?
pub fn is_x86_only(op: &Op) -> bool {
    matches!(op, Op::Clwb { .. } | Op::Sfence)
}
