//! `engram-bench arp`: the acquire-release persistency report
//! (`docs/bench/arp.md`): Table 5 (persists per epoch), Table 2, Figures 4
//! and 5 from the PM-controller simulator on the six workloads' traces, the
//! checker's verdicts, and the real x86 timings of each model's mapping that
//! the C++ benchmark (`cpp/bench/arp_bench time`) wrote as CSV.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use plotters::prelude::*;

use engram_model::arp::check::CheckConfig;
use engram_model::arp::eval::{self, BenchEval};
use engram_model::arp::sim::{SimModel, Timing};
use engram_model::arp::workloads::Params;

use crate::chart::register_font;

/// Options of `engram-bench arp`.
#[derive(Args, Clone)]
pub struct ArpArgs {
    /// Directory for arp.md and the PNG plots (nothing is written without it).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// CSV of `arp_bench time` (x86 timings of each mapping).
    #[arg(long)]
    pub x86: Option<PathBuf>,
    /// Operations per worker thread in the traces.
    #[arg(long, default_value_t = 200)]
    pub ops: usize,
}

/// Runs the evaluation, prints it, and writes the report with `--out`.
pub fn main(a: ArpArgs) -> ExitCode {
    let p = Params { ops: a.ops, antagonist_ops: a.ops, ..Params::default() };
    let timing = Timing::default();
    println!("arp: {} workers + 2 antagonists, {} operations each; timing {:?}", p.workers, p.ops, timing);
    let rows = eval::evaluate(&p, &CheckConfig::default(), &timing);
    let x86 = a.x86.as_deref().map(std::fs::read_to_string).transpose();
    let x86 = match x86 {
        Ok(x) => x,
        Err(e) => {
            eprintln!("arp: cannot read the x86 CSV: {e}");
            return ExitCode::from(1);
        }
    };
    let md = report(&rows, &p, &timing, x86.as_deref());
    println!("{md}");
    let Some(dir) = a.out else { return ExitCode::SUCCESS };
    if let Err(e) = std::fs::write(dir.join("arp.md"), &md) {
        eprintln!("arp: writing arp.md: {e}");
        return ExitCode::from(1);
    }
    if let Err(e) = plots(&rows, x86.as_deref(), &dir) {
        eprintln!("arp: plots skipped: {e}");
    }
    let bad = rows.iter().any(|r| r.checks.iter().any(|c| !c.violations.is_empty()));
    if bad {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

fn report(rows: &[BenchEval], p: &Params, t: &Timing, x86: Option<&str>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Acquire-release persistency: the paper's evaluation on our traces\n\n\
Written by `make bench-arp` (`engram-bench arp --out docs/bench --x86 docs/bench/arp-x86.csv`). \
Seed: Kolli et al., \"Language-level persistency\", ISCA 2017. The models, the checker and the \
simulator are in `crates/engram-model/src/arp/` (definitions in its module docs); the workloads \
in `arp/workloads/`; the C++ library and its x86 benchmark in `cpp/`.\n\n\
Configuration: {} worker threads + 2 antagonist threads (volatile-annotated lock only), {} \
operations per thread, one recorded execution per workload. Simulator: {} ns per trace event \
per thread, a {}-entry write queue, {} banks, {} B rows, {} ns row-hit / {} ns row-miss PM write, \
FR-FCFS within ready epochs.\n",
        p.workers, p.ops, t.cpu_ns, t.queue, t.banks, t.row_bytes, t.hit_ns, t.miss_ns
    );
    let _ = writeln!(s, "## Table 5: persists per epoch\n\n{}\n![persists per epoch](arp-table5.png)\n", eval::table5(rows));
    s.push_str(TABLE5_NOTES);
    let _ = writeln!(s, "\n## Table 2: where the gain comes from\n\n{}", eval::table2(rows));
    s.push_str(TABLE2_NOTES);
    let _ = writeln!(
        s,
        "\n## Figures 4 and 5: simulated execution time (normalised to SCP) and page-miss rate\n\n{}\n![simulated time](arp-figure4.png)\n",
        eval::figure4(rows)
    );
    s.push_str(FIG4_NOTES);
    let _ = writeln!(s, "\n## Crash consistency of the workloads\n\n{}", eval::checks(rows));
    s.push_str(CHECK_NOTES);
    s.push_str("\n## Real x86: each model's mapping on tmpfs (CLWB + SFENCE)\n\n");
    match x86 {
        Some(csv) => {
            s.push_str(&x86_table(csv));
            s.push_str("\n![x86 timings](arp-x86.png)\n\n");
            s.push_str(X86_NOTES);
        }
        None => s.push_str("Not measured in this run (no `--x86` CSV).\n"),
    }
    s
}

const TABLE5_NOTES: &str = "How to read it. SCP is 1 by construction (an epoch per persist). \
Each workload appears twice; both rows are the *same execution* (same seed, same schedule, the \
same persists in the same order), differing only in the sequence points the transactions place. \
\n\n\
*Undo log, 3 sequence points* is the program we run and check: every transaction is an \
undo-logged critical section whose log must persist before its data and whose data before its \
commit, so it places three sequence points (entries → count → data → commit; see \
`arp/workloads/mod.rs`). Those intra-thread barriers cap every model at about one epoch per \
protocol step, whatever the synchronization: sps 1 / 1.6 / 2.0 / 2.0 against the paper's \
1 / 4.6 / 8.1 / 13.2. A correct undo log under ARP cannot do with fewer than two (log before \
data, data before commit; the commit can share the next transaction's log epoch, which ours \
already does), so this cap is the price of crash consistency under ARP's per-persist failure \
atomicity, not of our coding. \
\n\n\
*Paper-like, none in a transaction* follows the paper's code structure as far as its text \
describes it: sequence points only where the program synchronizes, so the persists of one \
synchronization-free region (log entries, count, data, commit alike) share an epoch and only \
acquires and releases split epochs (Algorithm 1). This is what the paper's Table 5 measures. \
It is not crash-consistent under ARP (the checker finds violations in every workload, last \
column of the crash-consistency table below); it would be under a model whose failure-atomicity \
granularity is the synchronization-free region (the paper's taxonomy, Figure 1), which is not \
ARP. With it, sps comes out at 1 / 4.1 / 8.0 / 8.0: RCBSP and ARP match the paper (a swap's 8 \
persists are one ARP epoch, split in two by RCBSP at the second stripe's acquire). What is left: \
(1) sps under ARP+VA (paper 13.2, ours 8.0): 13.2 persists per epoch is more than one swap, so \
the paper's epochs span swaps, which Algorithm 1 allows only if the next swap's acquires follow \
no un-annotated release; our stripe locks guard persistent data and may not be annotated (the \
checker catches it), so the paper's sps must synchronize differently (its code is not \
published). (2) TPCC (paper 1 / 1.7 / 2.7 / 22.1, ours 1 / 9.9 / 9.9 / 54.5): our new-order \
logs each of its ~18 written words (about 54 persists per transaction) under one district lock \
and 3-6 stock locks; the paper's 1.7 persists per RCBSP epoch means its new-order persists \
about two words per synchronization operation, i.e. much finer-grained synchronization and far \
fewer persists per transaction (22.1 under ARP+VA is less than half of ours). The *ordering* of \
the models is what the definitions predict in both variants: RCBSP splits an epoch at every \
acquire and release, ARP only at the first acquire after a release, ARP+VA never at annotated \
ones. Where ARP equals RCBSP the workload has no persists between consecutive acquires without \
an intervening release (cq, pc, TATP, YCSB_A: one lock per transaction); sps and TPCC take \
several locks per transaction and log as each is taken, which is where directionality pays; \
TPCC's volatile-annotated item-index lookups split ARP's epochs and only ARP+VA merges them, \
the paper's TPCC pattern (ARP 2.7 vs ARP+VA 22.1). The paper's other four rows are not quoted \
in our sources, so we leave them blank rather than guess. Table 2 and Figure 4 below use the \
undo-logged variant.\n\n\
TPCC's order table is preallocated for every order the run can make (workers × operations \
orders per district), so no new order is ever skipped, however long the run (tested in Rust and \
C++). That is faithful to a growing table for what these tables measure: in Engram a table \
grows by allocating a chunk, and allocation writes no log and issues no flush (an allocated but \
unlinked chunk is garbage after a crash), so growth adds one persist (the link) per chunk, \
amortised over the chunk's orders, and no synchronization on the new-order path beyond the \
district lock already held.\n";

const TABLE2_NOTES: &str = "Directionality = ARP over RCBSP (one-sided releases and acquires); \
annotations = the same model with volatile-annotated acquires and releases removed from the \
controller. The paper's Table 2 reports both gains per workload; ours are computed the same way \
from the persists-per-epoch column of the simulator.\n";

const FIG4_NOTES: &str = "Execution time comes from the trace-driven timing model in \
`arp/sim.rs`: threads issue trace events at a fixed rate, persists enter a shared write queue \
(a full queue stalls the issuing thread), and a write may start only when every epoch its epoch \
depends on has completed. Bigger epochs let more writes overlap across banks and let FR-FCFS \
find row hits, so time falls with persists per epoch; Ideal (64 persists per epoch, no \
ordering) is the bound. The simulator is far simpler than the paper's gem5 setup (no caches, \
no coherence, a fixed CPU rate), so only the trends are comparable, not the percentages. The \
page-miss rate is row misses over writes.\n";

const CHECK_NOTES: &str = "Every workload is run (again, 16 operations per thread, since the \
checker's cost grows with the square of the persists) through the checker under ARP and ARP+VA with \
its recovery (undo-log rollback), its invariant, and a durability check against the recorded \
history (`arp/workloads/history.rs`: every update of a transaction whose commit persisted must \
survive recovery unless a later write replaced it; the commit carries the transaction's \
sequence number, so the image says which commits persisted). Images are enumerated exhaustively \
when few, otherwise sampled (extremes, every atom's down-closure and its complement's, random \
ideals), and the count of allowed images is a lower bound where the counting walk ran out of \
steps. Executions are recorded under a seeded scheduler (every instrumented operation is a \
possible thread switch, chosen from the seed), so this table is the same on any machine. The \
mutants are the same program with the unlocks of persistent-data locks made relaxed (missing \
release, checked under ARP) or annotated volatile (checked under ARP+VA). In pc, TATP and \
YCSB_A every transaction rewrites a whole record, so a mutant's bad image is consistent but \
old (recovery undoes a transaction whose successor on the same record committed): only the \
durability check sees it. `cargo test -p engram-model --test arp_workloads` asserts both \
mutants caught in all six workloads, and the correct programs clean, on fixed seeds.\n";

const X86_NOTES: &str = "What this measures: all six workloads (8 threads, 2 volatile \
antagonists, the same code and layout as the Rust generators) compiled against \
`engram/arp.hpp` (`cpp/bench/workloads.hpp`) with each model's x86 mapping, on a tmpfs file \
(`/dev/shm`), best of the repetitions. On x86 every persist is a store plus CLWB in every \
model; the models differ only in how many SFENCEs they issue (the column per operation): SCP \
one per persist, RCBSP one per acquire and release, ARP one per release (TSO orders acquires \
for free), ARP+VA none for annotated releases, epoch one per sequence point and per release. \
Epoch's release fence (and an SFENCE after a persistent acquire or release in every model) is \
there since the mapping was checked on multi-threaded traces under Px86 \
(`crates/engram-model/tests/arp_x86_mt.rs`; docs/persistency.md has the two counterexamples): \
another thread's sequence point orders through happens-before, and its SFENCE cannot complete \
this thread's CLWBs, so on x86 epoch persistency costs what ARP costs. On tmpfs CLWB writes \
back to DRAM, so an SFENCE costs roughly a store-buffer drain, not a media write: the \
differences are small and within the noise of a shared 2-core machine (10 threads on 2 cores), \
and where a weaker model is not faster this table says so. Real persistent memory (or eADR, \
where SFENCE orders nothing durable) changes the picture; this machine has neither.\n";

fn x86_table(csv: &str) -> String {
    let mut s = String::from("| workload | model | seconds | operations/s | SFENCE per op | CLWB per op |\n|---|---|---|---|---|---|\n");
    for f in x86_rows(csv) {
        let _ = writeln!(s, "| {} | {} | {} | {} | {} | {} |", f[0], f[1], f[2], f[4], f[5], f[6]);
    }
    s
}

/// The CSV's data rows (workload, model, seconds, ops, ops/s, sfence/op, clwb/op).
fn x86_rows(csv: &str) -> Vec<Vec<String>> {
    csv.lines().skip(1).map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>()).filter(|f| f.len() == 7).collect()
}

fn plots(rows: &[BenchEval], x86: Option<&str>, dir: &Path) -> Result<(), String> {
    register_font().map_err(|e| e.to_string())?;
    let names: Vec<String> = rows.iter().map(|r| r.bench.name().to_string()).collect();
    let series = |ms: &[SimModel], f: &dyn Fn(&BenchEval, SimModel) -> f64| -> Vec<(String, Vec<f64>)> {
        ms.iter().map(|&m| (m.name().to_string(), rows.iter().map(|r| f(r, m)).collect())).collect()
    };
    let t5 = series(&[SimModel::Scp, SimModel::Rcbsp, SimModel::Arp, SimModel::ArpVa], &|r, m| r.sim(m).persists_per_epoch);
    bars(&dir.join("arp-table5.png"), "Persists per epoch (Table 5)", &names, &t5)?;
    let f4 = series(&SimModel::ALL, &|r, m| r.sim(m).time_ns as f64 / r.sim(SimModel::Scp).time_ns.max(1) as f64);
    bars(&dir.join("arp-figure4.png"), "Simulated time, normalised to SCP (Figure 4)", &names, &f4)?;
    if let Some(csv) = x86 {
        let rows = x86_rows(csv);
        let mut groups: Vec<String> = rows.iter().map(|f| f[0].clone()).collect();
        groups.dedup();
        let mut models: Vec<String> = Vec::new();
        for f in &rows {
            if !models.contains(&f[1]) {
                models.push(f[1].clone());
            }
        }
        let series: Vec<(String, Vec<f64>)> = models
            .iter()
            .map(|m| {
                let v = groups
                    .iter()
                    .map(|g| rows.iter().find(|f| &f[0] == g && &f[1] == m).and_then(|f| f[4].parse::<f64>().ok()).unwrap_or(0.0) / 1000.0);
                (m.clone(), v.collect())
            })
            .collect();
        bars(&dir.join("arp-x86.png"), "x86 on tmpfs: thousand operations per second", &groups, &series)?;
    }
    Ok(())
}

const PALETTE: [RGBColor; 6] = [
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
];

/// A grouped bar chart: one group per name, one bar per series.
fn bars(path: &Path, title: &str, groups: &[String], series: &[(String, Vec<f64>)]) -> Result<(), String> {
    let root = BitMapBackend::new(path, (1000, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let ymax = series.iter().flat_map(|(_, v)| v.iter().copied()).fold(0.0f64, f64::max).max(1e-9) * 1.15;
    let n = series.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..groups.len() as f64, 0f64..ymax)
        .map_err(|e| e.to_string())?;
    let labels = groups.to_vec();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.01 {
                labels.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(|e| e.to_string())?;
    for (k, (name, vals)) in series.iter().enumerate() {
        let c = PALETTE[k % PALETTE.len()];
        let rects = vals.iter().enumerate().map(move |(g, &v)| {
            let x0 = g as f64 + 0.1 + 0.8 * k as f64 / n;
            Rectangle::new([(x0, 0.0), (x0 + 0.8 / n, v)], c.filled())
        });
        chart
            .draw_series(rects)
            .map_err(|e| e.to_string())?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}
