//! The paper's evaluation on our traces: Table 5 (persists per epoch),
//! Table 2 (what fence directionality and volatile annotations gain),
//! Figures 4 and 5 (simulated execution time normalised to SCP, page-miss
//! rates), and the checker's verdict on every workload, as data and as
//! Markdown. Used by the `engram-arp` binary and by `engram-bench arp`.

use super::check::{check, CheckConfig, CheckReport};
use super::order::Model;
use super::sim::{simulate, SimModel, SimResult, Timing};
use super::workloads::history::History;
use super::workloads::record::Mutation;
use super::workloads::{check_image_durable, record, Bench, Params, Variant};
use std::fmt::Write as _;

/// The paper's Table 5 where our sources quote it: (bench, SCP, RCBSP, ARP, ARP+VA).
pub const PAPER_TABLE5: [(Bench, [f64; 4]); 2] = [(Bench::Sps, [1.0, 4.6, 8.1, 13.2]), (Bench::Tpcc, [1.0, 1.7, 2.7, 22.1])];
/// The paper's average gain of ARP+VA in persists per epoch: over SCP, over RCBSP.
pub const PAPER_AVG_GAIN: (f64, f64) = (9.9, 4.6);

/// Operations per thread in the executions the checker examines.
pub const CHECK_OPS: usize = 16;

/// Everything measured for one workload.
#[derive(Clone, Debug)]
pub struct BenchEval {
    /// The workload.
    pub bench: Bench,
    /// Events in its trace (the simulated one).
    pub events: usize,
    /// Events in the shorter trace the checker examined.
    pub check_events: usize,
    /// One simulation per [`SimModel::ALL`] entry.
    pub sims: Vec<SimResult>,
    /// The checker under ARP and under ARP+VA.
    pub checks: Vec<CheckReport>,
    /// Violations found (ARP) with a missing release; (ARP+VA) with releases wrongly marked volatile.
    pub mutants: (usize, usize),
    /// The [`Variant::PaperLike`] run: one simulation per [`SimModel::ALL`] entry.
    pub paper_like: Vec<SimResult>,
    /// The checker under ARP on the paper-like variant's short run: violations found.
    pub paper_like_violations: usize,
}

impl BenchEval {
    /// The simulation of `m`.
    pub fn sim(&self, m: SimModel) -> &SimResult {
        let i = SimModel::ALL.iter().position(|&x| x == m).unwrap_or(0);
        &self.sims[i]
    }

    /// The paper-like variant's simulation of `m`.
    pub fn paper_sim(&self, m: SimModel) -> &SimResult {
        let i = SimModel::ALL.iter().position(|&x| x == m).unwrap_or(0);
        &self.paper_like[i]
    }
}

/// Runs every workload with `p`, simulates and checks it.
pub fn evaluate(p: &Params, cfg: &CheckConfig, timing: &Timing) -> Vec<BenchEval> {
    Bench::ALL.into_iter().map(|b| evaluate_one(b, p, cfg, timing)).collect()
}

/// [`evaluate`] for one workload.
pub fn evaluate_one(b: Bench, p: &Params, cfg: &CheckConfig, timing: &Timing) -> BenchEval {
    let p = &Params { variant: Variant::Logged, ..*p };
    let t = record(b, p, Mutation::None);
    let sims = SimModel::ALL.iter().map(|&m| simulate(&t, m, timing)).collect();
    // the checker's cost grows with the square of the atoms: it runs on a
    // shorter execution of the same workload
    let cp = Params { ops: p.ops.min(CHECK_OPS), antagonist_ops: p.antagonist_ops.min(CHECK_OPS), ..*p };
    let small = record(b, &cp, Mutation::None);
    let h = History::from_trace(&small);
    let checks =
        [Model::Arp, Model::ArpVa].iter().map(|&m| check(&small, m, cfg, &mut |img| check_image_durable(b, &cp, &h, img))).collect();
    let mutant = |mu, m| {
        let t = record(b, &cp, mu);
        let h = History::from_trace(&t);
        check(&t, m, cfg, &mut |img| check_image_durable(b, &cp, &h, img)).violations.len()
    };
    let mutants = (mutant(Mutation::MissingRelease, Model::Arp), mutant(Mutation::ReleaseMarkedVolatile, Model::ArpVa));
    let pl = Params { variant: Variant::PaperLike, ..*p };
    let pt = record(b, &pl, Mutation::None);
    let paper_like = SimModel::ALL.iter().map(|&m| simulate(&pt, m, timing)).collect();
    let cpl = Params { variant: Variant::PaperLike, ..cp };
    let paper_like_violations = {
        let t = record(b, &cpl, Mutation::None);
        let h = History::from_trace(&t);
        check(&t, Model::Arp, cfg, &mut |img| check_image_durable(b, &cpl, &h, img)).violations.len()
    };
    BenchEval {
        bench: b,
        events: t.events.len(),
        check_events: small.events.len(),
        sims,
        checks,
        mutants,
        paper_like,
        paper_like_violations,
    }
}

fn geomean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0), |(s, n), x| (s + x.ln(), n + 1));
    if n == 0 {
        0.0
    } else {
        (s / n as f64).exp()
    }
}

fn paper(b: Bench) -> Option<[f64; 4]> {
    PAPER_TABLE5.iter().find(|(x, _)| *x == b).map(|(_, v)| *v)
}

/// Table 5: persists per epoch, ours (both variants) beside the paper's.
pub fn table5(rows: &[BenchEval]) -> String {
    let mut s = String::from(
        "| workload | variant | SCP | RCBSP | ARP | ARP+VA | paper SCP / RCBSP / ARP / ARP+VA |\n|---|---|---|---|---|---|---|\n",
    );
    let cols = [SimModel::Scp, SimModel::Rcbsp, SimModel::Arp, SimModel::ArpVa];
    for r in rows {
        let theirs =
            paper(r.bench).map(|v| v.iter().map(|x| format!("{x}")).collect::<Vec<_>>().join(" / ")).unwrap_or_else(|| "not quoted".into());
        for v in Variant::ALL {
            let sim = |m| if v == Variant::Logged { r.sim(m) } else { r.paper_sim(m) };
            let ours: Vec<String> = cols.iter().map(|&m| format!("{:.1}", sim(m).persists_per_epoch)).collect();
            let _ = writeln!(s, "| {} | {} | {} | {theirs} |", r.bench.name(), v.name(), ours.join(" | "));
        }
    }
    for v in Variant::ALL {
        let ppe = |r: &BenchEval, m| if v == Variant::Logged { r.sim(m) } else { r.paper_sim(m) }.persists_per_epoch;
        let gain = |a, b| geomean(rows.iter().map(|r| ppe(r, a) / ppe(r, b)));
        let _ = writeln!(
            s,
            "| ARP+VA gain (geomean) | {} | {:.1}x over SCP | {:.1}x over RCBSP | | | paper: {}x over SCP, {}x over RCBSP |",
            v.name(),
            gain(SimModel::ArpVa, SimModel::Scp),
            gain(SimModel::ArpVa, SimModel::Rcbsp),
            PAPER_AVG_GAIN.0,
            PAPER_AVG_GAIN.1
        );
    }
    s
}

/// Table 2: persists-per-epoch gain of directionality and annotations.
pub fn table2(rows: &[BenchEval]) -> String {
    let mut s = String::from(
        "| workload | directionality (ARP / RCBSP) | annotations on RCBSP (RCBSP+VA / RCBSP) | annotations on ARP (ARP+VA / ARP) | both (ARP+VA / RCBSP) |\n|---|---|---|---|---|\n",
    );
    for r in rows {
        let q = |a, b| r.sim(a).persists_per_epoch / r.sim(b).persists_per_epoch;
        let _ = writeln!(
            s,
            "| {} | {:.2}x | {:.2}x | {:.2}x | {:.2}x |",
            r.bench.name(),
            q(SimModel::Arp, SimModel::Rcbsp),
            q(SimModel::RcbspVa, SimModel::Rcbsp),
            q(SimModel::ArpVa, SimModel::Arp),
            q(SimModel::ArpVa, SimModel::Rcbsp)
        );
    }
    s
}

/// Figures 4 and 5 as a table: execution time normalised to SCP, page-miss rate.
pub fn figure4(rows: &[BenchEval]) -> String {
    let mut s = String::from("| workload |");
    for m in SimModel::ALL {
        let _ = write!(s, " {} time | {} miss |", m.name(), m.name());
    }
    s.push_str("\n|---|");
    s.push_str(&"---|---|".repeat(SimModel::ALL.len()));
    s.push('\n');
    for r in rows {
        let scp = r.sim(SimModel::Scp).time_ns.max(1) as f64;
        let _ = write!(s, "| {} |", r.bench.name());
        for m in SimModel::ALL {
            let x = r.sim(m);
            let _ = write!(s, " {:.2} | {:.0} % |", x.time_ns as f64 / scp, 100.0 * x.page_miss_rate);
        }
        s.push('\n');
    }
    s
}

/// The checker's verdicts.
pub fn checks(rows: &[BenchEval]) -> String {
    let mut s = String::from(
        "| workload | events checked | ARP: images (checked / allowed), violations | ARP+VA: images, violations | missing release (ARP) | release marked volatile (ARP+VA) | paper-like variant (ARP) |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let c = |i: usize| format!("{} / {}, {}", r.checks[i].images_checked, r.checks[i].ideals, r.checks[i].violations.len());
        let caught = |n: usize| if n > 0 { format!("caught ({n} violations)") } else { "not caught".into() };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.bench.name(),
            r.check_events,
            c(0),
            c(1),
            caught(r.mutants.0),
            caught(r.mutants.1),
            if r.paper_like_violations > 0 {
                format!("not crash-consistent ({} violations)", r.paper_like_violations)
            } else {
                "none found".into()
            }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_evaluation_fills_every_table() {
        let p = Params { workers: 4, ops: 4, antagonist_ops: 4, seed: 3, ..Params::default() };
        let cfg = CheckConfig { max_images: 64, ..CheckConfig::default() };
        let rows = vec![evaluate_one(Bench::Sps, &p, &cfg, &Timing::default())];
        assert_eq!(rows[0].sim(SimModel::Scp).persists_per_epoch, 1.0);
        assert!(rows[0].sim(SimModel::Arp).persists_per_epoch >= rows[0].sim(SimModel::Rcbsp).persists_per_epoch);
        assert!(rows[0].checks.iter().all(|c| c.violations.is_empty()));
        let (logged, paper_like) = (rows[0].sim(SimModel::Arp), rows[0].paper_sim(SimModel::Arp));
        assert_eq!(logged.persists, paper_like.persists);
        assert!(paper_like.persists_per_epoch >= logged.persists_per_epoch);
        for table in [table5(&rows), table2(&rows), figure4(&rows), checks(&rows)] {
            assert!(table.lines().any(|l| l.starts_with("| sps |")), "{table}");
        }
    }
}
