//! The `engram-bench stm` subcommand: prints its configuration, runs the
//! agreement check (every implementation of every structure, one thread, a
//! fixed sequence of operations, compared with a `BTreeMap` model), then
//! the measurements — each in a child process, the runs of different points
//! interleaved — prints the table, and with `--out` writes `stm.md`,
//! `stm.csv` and the `stm-*.png` plots there.
//!
//! Exit status: 0 on success, 1 when a job fails or a file cannot be
//! written, 2 when an implementation disagrees with the model (the report
//! is still written, so the disagreement can be inspected).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::job::{self, StmJob, StmJobError};
use super::report::{self, Agreement, Context, Measurement, Point};
use super::workload::{model_contents, Impl, RunFor, Structure, KEY_RANGE, PREFILL, SEED};
use crate::sysinfo::{self, Machine};

/// Arguments of `engram-bench stm`.
#[derive(Args, Clone, Debug)]
pub struct StmArgs {
    /// Directory for stm.md, stm.csv and the stm-*.png plots (tables go to stdout either way).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A smoke test: 0.2 s per point, one run, keys below 10,000 (5,000 pre-inserted), 1 and 2 threads.
    #[arg(long)]
    pub quick: bool,
    /// Seconds per measurement (default 1, with 3 runs per point; 0.2 with --quick).
    #[arg(long)]
    pub secs: Option<f64>,
    /// Runs per point, interleaved; the report shows the median (default 3; 1 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=99))]
    pub reps: Option<u32>,
    /// Pool directory (tmpfs emulating persistent memory).
    #[arg(long, default_value = "/dev/shm")]
    pub dir: PathBuf,
    /// Thread counts (default 1,2,4,8; 1,2 with --quick).
    #[arg(long, value_delimiter = ',')]
    pub threads: Option<Vec<u32>>,
    /// Lookup shares in % (default 50,90).
    #[arg(long, value_delimiter = ',')]
    pub lookups: Option<Vec<u32>>,
    /// Structures (default all).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub structures: Option<Vec<Structure>>,
    /// Implementations (default all: pstm, pstm-process, tvar, pmdk, romulus, onefile).
    #[arg(long = "impls", value_delimiter = ',', value_enum)]
    pub impls: Option<Vec<Impl>>,
    /// Seed of keys and operations.
    #[arg(long, default_value_t = SEED)]
    pub seed: u64,
    /// Runs one measurement described by SPEC and prints its result line (used by the runner).
    #[arg(long, hide = true)]
    pub run_one: Option<String>,
}

/// What the run covers, after defaults.
#[derive(Clone, Debug)]
struct Plan {
    profile: &'static str,
    secs: f64,
    reps: u32,
    threads: Vec<u32>,
    lookups: Vec<u32>,
    structures: Vec<Structure>,
    impls: Vec<Impl>,
    key_range: u64,
    prefill: u64,
    agree_ops: u64,
    seed: u64,
    dir: PathBuf,
}

impl Plan {
    fn of(a: &StmArgs) -> Self {
        let q = a.quick;
        Plan {
            profile: if q { "quick" } else { "default" },
            secs: a.secs.unwrap_or(if q { 0.2 } else { 1.0 }).clamp(0.01, 600.0),
            reps: a.reps.unwrap_or(if q { 1 } else { 3 }),
            threads: a.threads.clone().unwrap_or_else(|| if q { vec![1, 2] } else { vec![1, 2, 4, 8] }),
            lookups: a.lookups.clone().unwrap_or_else(|| vec![50, 90]),
            structures: a.structures.clone().unwrap_or_else(|| Structure::ALL.to_vec()),
            impls: a.impls.clone().unwrap_or_else(|| Impl::ALL.to_vec()),
            key_range: if q { KEY_RANGE / 10 } else { KEY_RANGE },
            prefill: if q { PREFILL / 10 } else { PREFILL },
            agree_ops: if q { 2_000 } else { 20_000 },
            seed: a.seed,
            dir: a.dir.clone(),
        }
    }

    fn job(&self, structure: Structure, imp: Impl, lookup_pct: u32, threads: u32, run: RunFor) -> StmJob {
        StmJob {
            structure,
            imp,
            lookup_pct,
            threads,
            run,
            key_range: self.key_range,
            prefill: self.prefill,
            seed: self.seed,
            dir: self.dir.clone(),
        }
    }

    /// One single-threaded job per structure and implementation.
    fn agreement_jobs(&self) -> Vec<StmJob> {
        let mut v = Vec::new();
        for &s in &self.structures {
            for &i in self.impls.iter().filter(|i| i.supports(s)) {
                v.push(self.job(s, i, 50, 1, RunFor::Ops(self.agree_ops)));
            }
        }
        v
    }

    /// Every measurement, the runs of different points interleaved: rep
    /// by rep; within a point, implementations back to back.
    fn measure_jobs(&self) -> Vec<(Point, StmJob)> {
        let run = RunFor::Time(Duration::from_secs_f64(self.secs));
        let mut v = Vec::new();
        for _ in 0..self.reps {
            for &s in &self.structures {
                for &l in &self.lookups {
                    for &t in &self.threads {
                        for &i in self.impls.iter().filter(|i| i.supports(s)) {
                            v.push((Point { structure: s, lookup_pct: l, threads: t }, self.job(s, i, l, t, run)));
                        }
                    }
                }
            }
        }
        v
    }
}

/// Why a run stopped.
type RunError = crate::child::RunError<StmJobError>;

/// Runs `engram-bench stm`.
pub fn main(args: StmArgs) -> ExitCode {
    if let Some(spec) = &args.run_one {
        return run_one(spec, &args.dir);
    }
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("engram-bench stm: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_one(spec: &str, dir: &Path) -> ExitCode {
    let outcome = StmJob::parse(spec, dir).and_then(|j| job::execute(&j));
    match outcome {
        Ok(o) => {
            println!("{}", job::result_line(&o));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn print_config(m: &Machine, plan: &Plan, fs: &str, jobs: usize) {
    println!("engram-bench stm configuration");
    println!("  cpu:        {} ({} logical cores), kernel {}", m.cpu, m.cores, m.kernel);
    println!("  pools:      {} ({fs})", plan.dir.display());
    println!("  PSTM:       Durability::Pmem ({} + sfence); no-flush peer: Durability::Process", m.flush_instr);
    println!("  PMDK:       libpmemobj {} with {}=1 (set for PMDK children only)", m.pmdk, crate::job::PMEM_FORCE_VAR);
    println!(
        "  workload:   keys < {}, {} pre-inserted, lookups {:?} %, threads {:?}, seed {:#x}",
        plan.key_range, plan.prefill, plan.lookups, plan.threads, plan.seed
    );
    let names = |v: Vec<&str>| v.join(", ");
    println!("  structures: {}", names(plan.structures.iter().map(|s| s.name()).collect()));
    println!("  impls:      {}", names(plan.impls.iter().map(|i| i.name()).collect()));
    println!(
        "  profile:    {} ({} s per run, {} run(s) per point, {jobs} jobs, each in a child process)",
        plan.profile, plan.secs, plan.reps
    );
    if fs != "tmpfs" {
        println!("  note: the pool directory is not tmpfs");
    }
    let load = sysinfo::load_average().map_or("unknown".into(), |l| format!("{l:.2}"));
    println!("  load avg:   {load} (1 min; other work on the machine makes the numbers noisy)");
}

fn bar(n: usize) -> ProgressBar {
    let bar = ProgressBar::new(n as u64);
    let style = ProgressStyle::with_template("{bar:40.cyan/blue} {pos}/{len} [{elapsed_precise}] {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

fn describe(j: &StmJob) -> String {
    let run = match j.run {
        RunFor::Time(_) => format!("{}% lookups, {} thr", j.lookup_pct, j.threads),
        RunFor::Ops(n) => format!("agreement, {n} ops"),
    };
    format!("{} {} {run}", j.structure.name(), j.imp.name())
}

/// Runs `jobs` one by one in children; `each` sees every outcome.
fn run_jobs(exe: &Path, jobs: &[&StmJob], mut each: impl FnMut(usize, job::StmOutcome)) -> Result<(), RunError> {
    let bar = bar(jobs.len());
    let log_lines = !std::io::stderr().is_terminal();
    for (k, j) in jobs.iter().enumerate() {
        bar.set_message(describe(j));
        if log_lines {
            eprintln!("[{}/{}] {}", k + 1, jobs.len(), describe(j));
        }
        let o = job::spawn(exe, j);
        bar.inc(1);
        match o {
            Ok(o) => each(k, o),
            Err(e) => {
                bar.abandon();
                return Err(e.into());
            }
        }
    }
    bar.finish_and_clear();
    Ok(())
}

fn run(args: &StmArgs) -> Result<ExitCode, RunError> {
    let plan = Plan::of(args);
    std::fs::create_dir_all(&plan.dir).map_err(|source| RunError::Dir { dir: plan.dir.clone(), source })?;
    let machine = Machine::detect();
    let fs = sysinfo::fs_info(&plan.dir).kind;
    let exe = std::env::current_exe().map_err(RunError::Exe)?;
    let agree_jobs = plan.agreement_jobs();
    let measure = plan.measure_jobs();
    print_config(&machine, &plan, &fs, agree_jobs.len() + measure.len());

    // 1. the agreement check.
    let want = model_contents(plan.key_range, plan.prefill, 50, plan.seed, plan.agree_ops);
    let mut agreement = Vec::new();
    run_jobs(&exe, &agree_jobs.iter().collect::<Vec<_>>(), |k, o| {
        let j = &agree_jobs[k];
        agreement.push(Agreement { structure: j.structure, imp: j.imp, got: o.contents, want });
    })?;
    let bad: Vec<&Agreement> = agreement.iter().filter(|a| !a.ok()).collect();
    println!(
        "agreement check: {} of {} implementations end with the model's {} entries",
        agreement.len() - bad.len(),
        agreement.len(),
        want.len
    );

    // 2. the measurements.
    let load_start = sysinfo::load_average();
    let t0 = Instant::now();
    let mut ms = Vec::new();
    let jobs: Vec<&StmJob> = measure.iter().map(|(_, j)| j).collect();
    run_jobs(&exe, &jobs, |k, o| {
        ms.push(Measurement { point: measure[k].0, imp: measure[k].1.imp, tally: o.tally, pool_bytes: o.pool_bytes });
    })?;
    let wall_secs = t0.elapsed().as_secs_f64();
    let load = (load_start, sysinfo::load_average());
    let rows = report::aggregate(&ms);
    println!("\n{}", report::table(&rows));

    if let Some(out) = &args.out {
        let command = std::iter::once("engram-bench".to_string()).chain(std::env::args().skip(1)).collect::<Vec<_>>().join(" ");
        let mut cx = Context {
            machine: &machine,
            dir: plan.dir.display().to_string(),
            fs,
            profile: plan.profile,
            secs: plan.secs,
            reps: plan.reps,
            key_range: plan.key_range,
            prefill: plan.prefill,
            agree_ops: plan.agree_ops,
            seed: plan.seed,
            command,
            load,
            wall_secs,
            agreement: agreement.clone(),
            plots: Vec::new(),
        };
        write_report(out, &rows, &mut cx)?;
    }
    if bad.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for a in bad {
        eprintln!(
            "engram-bench stm: {} {} ended with {} entries (sum {:#x}), the model with {} (sum {:#x})",
            a.structure.name(),
            a.imp.name(),
            a.got.len,
            a.got.sum,
            a.want.len,
            a.want.sum
        );
    }
    Ok(ExitCode::from(2))
}

fn write_report(out: &Path, rows: &[report::Row], cx: &mut Context<'_>) -> Result<(), RunError> {
    let werr = |path: PathBuf| move |source| RunError::Write { path: path.clone(), source };
    std::fs::create_dir_all(out).map_err(werr(out.to_path_buf()))?;
    let csv = out.join("stm.csv");
    report::write_csv(rows, &csv).map_err(werr(csv.clone()))?;
    match super::plot::draw_all(rows, out) {
        Ok(files) => cx.plots = files,
        Err(e) => eprintln!("engram-bench stm: plots skipped: {e}"),
    }
    let md = out.join("stm.md");
    report::write_markdown(rows, cx, &md).map_err(werr(md.clone()))?;
    println!("report written to {}", md.display());
    Ok(())
}
