//! The written report: `results.csv` (one line per implementation and size)
//! and `README.md` (configuration, tables of medians and speedups, the
//! comparison with the published claims, how to reproduce).
//!
//! Keeps true: both files are regenerated whole by every run, from the rows
//! of that run only; every ratio printed is `PMDK tx time / other time`, so
//! a number above 1 means faster than PMDK, and the README says so above the
//! first table.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use crate::job::{Impl, Suite};
use crate::plan::{Profile, Setup};
use crate::results::Row;
use crate::sysinfo::Machine;

/// A setup as it ran: where, and on which file system.
#[derive(Clone, Debug)]
pub struct SetupInfo {
    /// The setup.
    pub setup: Setup,
    /// Its pool directory.
    pub dir: String,
    /// File system type of the directory.
    pub fs: String,
    /// What is mounted there (a device, `tmpfs`), if known.
    pub source: Option<String>,
}

/// Everything the README says besides the rows.
pub struct Context<'a> {
    /// The machine.
    pub machine: &'a Machine,
    /// The setups that ran.
    pub setups: &'a [SetupInfo],
    /// The size profile.
    pub profile: Profile,
    /// The command line that produced the report.
    pub command: String,
    /// Names of the PNG files written beside the README.
    pub plots: Vec<String>,
    /// 1-minute load average when the measurements started and ended.
    pub load: (Option<f64>, Option<f64>),
}

/// Writes `results.csv`.
pub fn write_csv(rows: &[Row], path: &Path) -> io::Result<()> {
    let mut s = String::from(
        "suite,size,swaps,impl,mode,setup,fs,runs,median_nanos,all_nanos,speedup_vs_pmdk_tx,flushes_per_region,fences_per_region,regions,check\n",
    );
    for r in rows {
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
        let all: Vec<String> = r.runs.iter().map(u64::to_string).collect();
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.point.suite.name(),
            r.point.size,
            r.point.swaps,
            r.imp.name(),
            r.mode.name(),
            r.setup.name(),
            r.fs,
            r.runs.len(),
            r.nanos,
            all.join(" "),
            opt(r.speedup),
            opt(r.flushes_per_region()),
            opt(r.fences_per_region()),
            r.counts.map_or(String::new(), |c| c.regions.to_string()),
            r.check
        );
    }
    std::fs::write(path, s)
}

/// A duration for people: `850 µs`, `12.3 ms`, `4.56 s`.
pub fn fmt_time(nanos: u64) -> String {
    let ms = nanos as f64 / 1e6;
    match ms {
        m if m < 1.0 => format!("{:.0} µs", nanos as f64 / 1e3),
        m if m < 10.0 => format!("{m:.2} ms"),
        m if m < 100.0 => format!("{m:.1} ms"),
        m if m < 1000.0 => format!("{m:.0} ms"),
        m => format!("{:.2} s", m / 1000.0),
    }
}

/// A ratio: `3.21×`, `412×`.
pub fn fmt_ratio(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}×")
    } else {
        format!("{r:.2}×")
    }
}

/// An implementation's column title.
pub fn impl_label(imp: Impl) -> &'static str {
    match imp {
        Impl::Engram => "Engram",
        Impl::EngramProcess => "Engram, no flush",
        Impl::PmdkTx => "PMDK tx",
        Impl::PmdkAtomic => "PMDK atomic",
        Impl::Malloc => "malloc",
        Impl::Volatile => "volatile",
    }
}

fn suite_title(suite: Suite) -> &'static str {
    match suite {
        Suite::BinaryTrees => "binary-trees (allocation: one region per tree build and per tree free)",
        Suite::Nbody => "n-body (many short regions: one per step, the 5 bodies logged as one range)",
        Suite::Sps => "sps (one long region of random swaps in an array of n u64)",
    }
}

/// The markdown table of one suite in one setup, or None if it has no rows.
pub fn table(rows: &[Row], suite: Suite, setup: Setup) -> Option<String> {
    let rows: Vec<&Row> = rows.iter().filter(|r| r.point.suite == suite && r.setup == setup).collect();
    if rows.is_empty() {
        return None;
    }
    let mut imps: Vec<Impl> = rows.iter().map(|r| r.imp).collect();
    imps.sort();
    imps.dedup();
    let others: Vec<Impl> = imps.iter().copied().filter(|&i| !matches!(i, Impl::PmdkTx | Impl::EngramProcess)).collect();
    let mut points: Vec<_> = rows.iter().map(|r| r.point).collect();
    points.dedup();
    let mut s = format!("| {} |", suite.size_label());
    for &i in &imps {
        let _ = write!(s, " {} |", impl_label(i));
    }
    for &i in &others {
        let _ = write!(s, " {} speedup |", impl_label(i));
    }
    s.push_str(" Engram flushes/region | Engram fences/region |\n|");
    for _ in 0..1 + imps.len() + others.len() + 2 {
        s.push_str("---:|");
    }
    s.push('\n');
    for p in points {
        let find = |i: Impl| rows.iter().find(|r| r.point == p && r.imp == i);
        let _ = write!(s, "| {} |", p.label());
        for &i in &imps {
            let cell = find(i).map_or("–".into(), |r| fmt_time(r.nanos));
            let _ = write!(s, " {cell} |");
        }
        for &i in &others {
            let cell = find(i).and_then(|r| r.speedup).map_or("–".into(), fmt_ratio);
            let _ = write!(s, " {cell} |");
        }
        let engram = find(Impl::Engram).copied();
        let per = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.1}"));
        let _ = writeln!(s, " {} | {} |", per(engram.and_then(Row::flushes_per_region)), per(engram.and_then(Row::fences_per_region)));
    }
    Some(s)
}

/// Every table, as printed at the end of a run.
pub fn all_tables(rows: &[Row]) -> String {
    let mut s = String::new();
    for suite in Suite::ALL {
        for setup in [Setup::Pmem, Setup::Msync] {
            if let Some(t) = table(rows, suite, setup) {
                let _ = writeln!(s, "\n{} — {} setup\n\n{t}", suite.name(), setup.name());
            }
        }
    }
    s
}

/// (min, max) of a row property over the rows that match.
fn range(rows: &[Row], keep: impl Fn(&Row) -> bool, value: impl Fn(&Row) -> Option<f64>) -> Option<(f64, f64)> {
    rows.iter().filter(|r| keep(r)).filter_map(value).fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

fn fmt_range(r: Option<(f64, f64)>) -> String {
    match r {
        None => "not measured".into(),
        Some((lo, hi)) if (hi - lo).abs() < 0.005 * hi => fmt_ratio(lo),
        Some((lo, hi)) => format!("{}–{}", fmt_ratio(lo), fmt_ratio(hi)),
    }
}

/// How a measured range compares with a claimed speedup of `claim_lo..claim_hi`.
fn verdict(r: Option<(f64, f64)>, claim_lo: f64, claim_hi: f64) -> &'static str {
    match r {
        None => "not measured",
        Some((_, hi)) if hi < 1.0 => "slower than PMDK here, so the claim is not reproduced",
        Some((lo, hi)) if lo < 1.0 && hi < 1.5 => "on par with PMDK, so the claim is not reproduced",
        Some((_, hi)) if hi < claim_lo => "faster than PMDK but short of the claim",
        Some((lo, _)) if lo >= claim_lo && lo <= claim_hi * 1.5 => "in line with the claim",
        Some((lo, _)) if lo > claim_hi * 1.5 => "beyond the claim",
        Some(_) => "reaching the claim only at some sizes",
    }
}

fn engram_speedup(rows: &[Row], suite: Suite, setup: Setup) -> Option<(f64, f64)> {
    range(rows, |r| r.imp == Impl::Engram && r.point.suite == suite && r.setup == setup, |r| r.speedup)
}

fn claims_section(rows: &[Row]) -> String {
    let mut s = String::from("## Against the published claims\n\n");
    s.push_str(
        "The published claims quoted in the benchmark issue: allocation about 40× faster than \
         PMDK, transactions 3–4× faster. Measured here (speedup = PMDK tx time / Engram \
         time, min–max over the sizes):\n\n",
    );
    s.push_str("| claim | workload | pmem setup (tmpfs) | msync setup (disk) | pmem setup vs claim |\n|---|---|---:|---:|---|\n");
    let lines = [
        ("allocation 40×", Suite::BinaryTrees, 40.0, 40.0),
        ("transactions 3–4×", Suite::Nbody, 3.0, 4.0),
        ("transactions 3–4×", Suite::Sps, 3.0, 4.0),
    ];
    for (claim, suite, lo, hi) in lines {
        let pmem = engram_speedup(rows, suite, Setup::Pmem);
        let msync = engram_speedup(rows, suite, Setup::Msync);
        let _ = writeln!(s, "| {claim} | {} | {} | {} | {} |", suite.name(), fmt_range(pmem), fmt_range(msync), verdict(pmem, lo, hi));
    }
    let atomic = range(
        rows,
        |r| r.imp == Impl::Engram && r.point.suite == Suite::BinaryTrees && r.setup == Setup::Pmem,
        |r| {
            let a = rows.iter().find(|o| o.imp == Impl::PmdkAtomic && o.point == r.point && o.setup == r.setup)?;
            Some(a.nanos as f64 / r.nanos.max(1) as f64)
        },
    );
    let malloc = range(
        rows,
        |r| r.imp == Impl::Engram && r.point.suite == Suite::BinaryTrees && r.setup == Setup::Pmem,
        |r| {
            let m = rows.iter().find(|o| o.imp == Impl::Malloc && o.point == r.point)?;
            Some(r.nanos as f64 / m.nanos.max(1) as f64)
        },
    );
    let _ = write!(
        s,
        "\nAgainst PMDK's atomic allocation (`pmemobj_alloc` per node, no transaction) Engram's \
         binary-trees is {} faster in the pmem setup; it is {} slower than malloc.\n",
        fmt_range(atomic),
        fmt_range(malloc)
    );
    s.push_str(&software_share(rows));
    s
}

/// "Engram, no flush" time as a share of Engram's time, per suite (pmem setup).
fn software_share(rows: &[Row]) -> String {
    let mut parts = Vec::new();
    for suite in Suite::ALL {
        let share = range(
            rows,
            |r| r.imp == Impl::Engram && r.point.suite == suite && r.setup == Setup::Pmem,
            |r| {
                let p = rows.iter().find(|o| o.imp == Impl::EngramProcess && o.point == r.point)?;
                Some(100.0 * p.nanos as f64 / r.nanos.max(1) as f64)
            },
        );
        match share {
            Some((lo, hi)) if lo.round() == hi.round() => parts.push(format!("{} {lo:.0} %", suite.name())),
            Some((lo, hi)) => parts.push(format!("{} {lo:.0}–{hi:.0} %", suite.name())),
            None => {}
        }
    }
    if parts.is_empty() {
        return String::new();
    }
    format!(
        "\nWhere Engram's time goes in the pmem setup: the same code with no flush and no fence \
         (\"Engram, no flush\") takes {} of Engram's time (above 100 % is noise). That \
         share is software: region set-up and tear-down, undo entries (copy and CRC32C), \
         allocation bookkeeping; the rest is the flushes and fences.\n",
        parts.join(", ")
    )
}

const NOTES: &str = "\
## How to read these numbers

- **What a region costs in Engram.** A region logs a range the first time it \
changes it (the undo entry is flushed and fenced before the store: one fence \
per logged range), then at commit flushes everything it wrote and allocated, \
fences, and bumps its log generation (one more flush and fence). The Engram columns of \
the tables show the result: an n-body step is 3 fences (undo entry, data, generation) and about 11 cache lines; an sps \
region is one fence per distinct element it changes plus 2; a binary-trees \
build region allocates without logging, so it is one fence and one flush per \
node (two 32-byte slots share a line, and each is flushed); a free region \
writes nothing persistent (frees are applied to the volatile slot bitmaps \
after commit; after a crash the GC rebuilds them) and issues no fence.
- **PMDK's side.** In the pmem setup libpmemobj believes the tmpfs mapping is \
persistent memory (`PMEM_IS_PMEM_FORCE=1`) and flushes cache lines itself. \
In the msync setup every libpmemobj flush is its own `msync` system call \
(one per range: per node for binary-trees), whereas Engram's msync mode \
records the dirty pages and msyncs merged runs once per fence. That, not \
the allocator, is why the msync-setup ratios of binary-trees are so large.
- **Emulated persistent memory.** tmpfs is DRAM: CLWB/CLFLUSHOPT and SFENCE \
cost far less than on Optane, so the pmem setup shows software overhead \
(logging, allocation, bookkeeping) more than media latency. Both sides issue \
the same kind of flushes, so the comparison is fair; absolute times would be \
higher on real persistent memory.
- **Layouts differ slightly.** A PMDK node holds two 16-byte `PMEMoid`s; an \
Engram node two 8-byte `PPtr`s. Engram's n-body copies the 5 bodies out of \
the pool and back (`read_slice`/`write_slice`); PMDK's works in place after \
`pmemobj_tx_add_range`. Both log the whole array once per step.
- **Noise.** Times are medians of the runs in the CSV's `runs` column (one \
run for the largest size of each suite and setup). On a small shared \
machine, differences under about 20 % between runs are noise, and more when \
the load average above was high; the msync setup also shares the disk with \
whatever else runs.
- **Correctness.** Every run's node count, energy or checksum is checked \
against a reference computed in plain Rust; the run fails if any \
implementation disagrees.
";

/// Writes `README.md`.
pub fn write_readme(rows: &[Row], cx: &Context<'_>, path: &Path) -> io::Result<()> {
    std::fs::write(path, readme(rows, cx))
}

fn config_section(cx: &Context<'_>) -> String {
    let m = cx.machine;
    let mut s = String::from("## Machine and configuration\n\n");
    let _ = writeln!(s, "- CPU: {} ({} logical cores), Linux {}", m.cpu, m.cores, m.kernel);
    let _ = writeln!(s, "- PMDK (libpmemobj) {}; Engram flushes with `{}` + SFENCE in pmem mode", m.pmdk, m.flush_instr);
    let _ = writeln!(s, "- Run on {}, profile `{}`", m.date, cx.profile.name());
    let load = |l: Option<f64>| l.map_or("unknown".to_string(), |l| format!("{l:.1}"));
    let _ = writeln!(
        s,
        "- Load average (1 min) when the measurements started / ended: {} / {} on {} cores \
         (above about 1, other work shared the machine and the times are noisier)\n",
        load(cx.load.0),
        load(cx.load.1),
        m.cores
    );
    s.push_str("| setup | directory | file system | Engram mode | PMDK |\n|---|---|---|---|---|\n");
    for info in cx.setups {
        let fs = match &info.source {
            Some(src) if src != &info.fs => format!("{} on `{src}`", info.fs),
            _ => info.fs.clone(),
        };
        let _ = writeln!(
            s,
            "| {} | `{}` | {fs} | `{}` | {} |",
            info.setup.name(),
            info.dir,
            info.setup.mode().name(),
            info.setup.pmdk_config()
        );
    }
    s.push_str(
        "\nmalloc (binary-trees) and the volatile Rust code (n-body, sps) run once, in the first \
         setup, as the floor: no pool, no persistence. So does \"Engram, no flush\": the same \
         Engram code in `process` mode (no flush, no fence), whose time is Engram's software cost \
         alone; the rest of the Engram time is the price of the flushes and fences. Times cover \
         what the PMDK peer times: never pool creation or close; for sps only the swapping \
         transaction.\n",
    );
    s
}

/// "binary-trees 14, 16; nbody 10^5" for the sizes `setup` ran.
fn sizes_of(rows: &[Row], setup: Setup) -> String {
    let mut parts = Vec::new();
    for suite in Suite::ALL {
        let mut labels: Vec<String> = Vec::new();
        for r in rows.iter().filter(|r| r.setup == setup && r.point.suite == suite) {
            let l = r.point.label();
            if !labels.contains(&l) {
                labels.push(l);
            }
        }
        if !labels.is_empty() {
            parts.push(format!("{} {}", suite.name(), labels.join(", ")));
        }
    }
    parts.join("; ")
}

fn sizes_section(rows: &[Row], cx: &Context<'_>) -> String {
    let mut s = String::from("\nSizes run (binary-trees: maximum depth; n-body: steps; sps: n, with swaps = n unless stated):\n\n");
    for info in cx.setups {
        let _ = writeln!(s, "- {} setup: {}", info.setup.name(), sizes_of(rows, info.setup));
    }
    if cx.setups.iter().any(|i| i.setup == Setup::Msync) {
        s.push_str(
            "\nThe msync setup runs smaller sizes on purpose: there every fence is an `msync` that waits \
             for the disk, and PMDK issues one per flushed range (per node in binary-trees), so the \
             pmem-setup sizes would take PMDK hours.\n",
        );
    }
    s
}

fn readme(rows: &[Row], cx: &Context<'_>) -> String {
    let mut s = String::from("# Engram vs PMDK (libpmemobj) vs malloc\n\n");
    s.push_str(
        "Generated by `engram-bench`; `make bench` rewrites this file, `results.csv` and the plots.\n\n\
         **Speedup = PMDK tx time / other time: above 1 means faster than PMDK's transactional \
         version, below 1 slower.** Times are medians; lower is better.\n\n",
    );
    s.push_str(&config_section(cx));
    s.push_str(&sizes_section(rows, cx));
    s.push_str("\n## Results\n");
    for suite in Suite::ALL {
        let _ = writeln!(s, "\n### {}\n", suite_title(suite));
        for info in cx.setups {
            if let Some(t) = table(rows, suite, info.setup) {
                let _ = writeln!(s, "{} setup ({}, `{}`):\n\n{t}", info.setup.name(), info.fs, info.dir);
            }
        }
        let png = format!("{}.png", suite.name());
        if cx.plots.contains(&png) {
            let _ = writeln!(s, "![{}]({png})\n", suite.name());
        }
    }
    if cx.plots.iter().any(|p| p == "speedup.png") {
        s.push_str("\n### Engram speedup over PMDK, all workloads\n\n![speedup](speedup.png)\n");
    }
    s.push('\n');
    s.push_str(&claims_section(rows));
    s.push('\n');
    s.push_str(NOTES);
    let _ = write!(
        s,
        "\n## Reproduce\n\n```sh\nmake bench                       # = cargo run --release -p engram-bench -- all --out docs/bench\n\
         cargo run --release -p engram-bench -- all --quick --out /tmp/bench   # smoke test, seconds\n\
         cargo run --release -p engram-bench -- all --full --out docs/bench    # depth 20, 10^7 steps and elements\n\
         cargo run --release -p engram-bench -- sps --dir /dev/shm             # one suite, tables on stdout\n```\n\n\
         This report: `{}`\n",
        cx.command
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_ratios_read_well() {
        assert_eq!(fmt_time(850_000), "850 µs");
        assert_eq!(fmt_time(12_340_000), "12.3 ms");
        assert_eq!(fmt_time(4_560_000_000), "4.56 s");
        assert_eq!(fmt_ratio(3.214), "3.21×");
        assert_eq!(fmt_ratio(412.4), "412×");
    }

    #[test]
    fn verdicts() {
        assert_eq!(verdict(Some((0.5, 0.9)), 3.0, 4.0), "slower than PMDK here, so the claim is not reproduced");
        assert_eq!(verdict(Some((1.1, 2.0)), 3.0, 4.0), "faster than PMDK but short of the claim");
        assert_eq!(verdict(Some((0.9, 1.3)), 3.0, 4.0), "on par with PMDK, so the claim is not reproduced");
        assert_eq!(verdict(Some((3.2, 3.9)), 3.0, 4.0), "in line with the claim");
        assert_eq!(verdict(Some((2.0, 3.5)), 3.0, 4.0), "reaching the claim only at some sizes");
    }
}
