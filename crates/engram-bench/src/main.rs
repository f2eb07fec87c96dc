//! `engram-bench`: Engram against PMDK (libpmemobj) and malloc on
//! binary-trees, n-body and sps, with a report in `docs/bench/`.
//!
//! The run prints its configuration, then measures every job in a child
//! process of this binary (hidden `run-one` subcommand; see `job.rs` for
//! why), with a progress bar; at the end it checks that every
//! implementation computed the same values, prints the tables, and with
//! `--out` writes `results.csv`, `README.md` and PNG plots there.
//!
//! Exit status: 0 on success, 1 when a job fails or a file cannot be
//! written, 2 when implementations disagree on a check value (the report is
//! still written, so the disagreement can be inspected).

mod restart_one;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use engram_bench::job::{self, Impl, Job, Mode, Suite};
use engram_bench::plan::{self, Profile, Setup};
use engram_bench::plot;
use engram_bench::report::{self, SetupInfo};
use engram_bench::results::{self, Measurement};
use engram_bench::sysinfo::{self, Machine};

#[derive(Parser)]
#[command(
    name = "engram-bench",
    version,
    about = "Benchmarks Engram against PMDK (libpmemobj) and malloc: binary-trees, n-body, sps",
    long_about = "Benchmarks Engram against PMDK (libpmemobj) and malloc on binary-trees \
(allocation), n-body (many short regions) and sps (one long region), in two setups: \
pmem (tmpfs, Engram pmem mode vs PMDK with PMEM_IS_PMEM_FORCE=1) and msync (a disk \
directory, Engram msync mode vs PMDK msync). Prints its configuration first, checks that \
every implementation computes the same values, and reports speedup = PMDK time / Engram time."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every suite in both setups; writes the report into --out (default docs/bench).
    All(RunArgs),
    /// binary-trees only (tables on stdout; a report only with --out).
    BinaryTrees(RunArgs),
    /// n-body only (tables on stdout; a report only with --out).
    Nbody(RunArgs),
    /// sps only (tables on stdout; a report only with --out).
    Sps(RunArgs),
    /// The persistent-STM benchmarks (src/stm/): PSTM vs no-flush vs PMDK; stm.md with --out.
    Stm(engram_bench::stm::cli::StmArgs),
    /// Persistent memoization (fib 150,000) and restartable streams; laziness.md with --out.
    Lazy(engram_bench::lazy::LazyArgs),
    /// Acquire-release persistency (engram-model arp): Table 5, Table 2, Figures 4/5, x86 mappings; arp.md with --out.
    Arp(engram_bench::arp::ArpArgs),
    /// Durable commits/s on a disk: Engram (msync, wal, PSTM) vs SQLite and LMDB; disk.md with --out.
    Disk(engram_bench::disk::DiskArgs),
    /// The hybrid TM prototype (engram::htm): 90:5:5 commit shares, aborts by cause, Bloom vs precise wake-ups; hybrid.md with --out.
    Hybrid(engram_bench::hybrid::HybridArgs),
    /// STM retry wake-ups, Bloom filters vs precise watch sets (also a section of `hybrid`); wakeup.png with --out.
    Wakeup(engram_bench::wakeup::WakeupArgs),
    /// Runs one measurement and prints its result line (used by the runner).
    #[command(hide = true)]
    RunOne(RunOneArgs),
    /// One phase of the fill-then-restart test (used by go/cmd/engram-gobench).
    #[command(hide = true)]
    RestartOne(restart_one::RestartArgs),
}

#[derive(Args, Clone)]
struct RunArgs {
    /// Directory for results.csv, README.md and the PNG plots.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Tiny sizes, one run each: a smoke test of seconds.
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// The full ranges: binary-trees depth 20, n-body 10^7 steps, sps 10^7 elements.
    #[arg(long)]
    full: bool,
    /// Pool directory of the pmem setup (tmpfs emulating persistent memory).
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// Pool directory of the msync setup (a disk file system); created if missing.
    #[arg(long, default_value = "data/bench")]
    disk_dir: PathBuf,
    /// Skip the msync (disk) setup.
    #[arg(long)]
    no_disk: bool,
    /// Runs of every size but each suite's largest (default 3; 1 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=99))]
    reps: Option<u64>,
}

#[derive(Args)]
struct RunOneArgs {
    #[arg(long, value_enum)]
    suite: Suite,
    #[arg(long)]
    size: u64,
    #[arg(long, default_value_t = 0)]
    swaps: u64,
    #[arg(long = "impl", value_enum)]
    imp: Impl,
    #[arg(long, value_enum)]
    mode: Mode,
    #[arg(long)]
    dir: PathBuf,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (suites, mut args, default_out): (&[Suite], RunArgs, Option<&str>) = match cli.command {
        Command::RunOne(a) => return run_one(a),
        Command::RestartOne(a) => return restart_one::main(a),
        Command::Stm(a) => return engram_bench::stm::cli::main(a),
        Command::Lazy(a) => return engram_bench::lazy::main(a),
        Command::Arp(a) => return engram_bench::arp::main(a),
        Command::Disk(a) => return engram_bench::disk::main(a),
        Command::Hybrid(a) => return engram_bench::hybrid::main(a),
        Command::Wakeup(a) => return engram_bench::wakeup::main(a),
        Command::All(a) => (&Suite::ALL, a, Some("docs/bench")),
        Command::BinaryTrees(a) => (&[Suite::BinaryTrees], a, None),
        Command::Nbody(a) => (&[Suite::Nbody], a, None),
        Command::Sps(a) => (&[Suite::Sps], a, None),
    };
    if args.out.is_none() {
        args.out = default_out.map(PathBuf::from);
    }
    match run(suites, &args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("engram-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_one(a: RunOneArgs) -> ExitCode {
    let job = Job { suite: a.suite, size: a.size, swaps: a.swaps, imp: a.imp, mode: a.mode, dir: a.dir };
    match job::execute(&job) {
        Ok(outcome) => {
            println!("{}", job::result_line(&outcome));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Why a run stopped.
type RunError = engram_bench::child::RunError<job::JobError>;

fn profile(args: &RunArgs) -> Profile {
    match (args.quick, args.full) {
        (true, _) => Profile::Quick,
        (_, true) => Profile::Full,
        _ => Profile::Default,
    }
}

/// The setups of this run, their directories created and described.
fn setups(args: &RunArgs) -> Result<Vec<SetupInfo>, RunError> {
    let mut dirs = vec![(Setup::Pmem, args.dir.clone())];
    if !args.no_disk {
        dirs.push((Setup::Msync, args.disk_dir.clone()));
    }
    dirs.into_iter()
        .map(|(setup, dir)| {
            std::fs::create_dir_all(&dir).map_err(|source| RunError::Dir { dir: dir.clone(), source })?;
            let fs = sysinfo::fs_info(&dir);
            Ok(SetupInfo { setup, dir: dir.display().to_string(), fs: fs.kind, source: fs.source })
        })
        .collect()
}

fn print_config(machine: &Machine, infos: &[SetupInfo], profile: Profile, jobs: usize) {
    println!("engram-bench configuration");
    println!("  cpu:          {} ({} logical cores)", machine.cpu, machine.cores);
    println!("  kernel:       {}", machine.kernel);
    println!("  PMDK:         libpmemobj {}", machine.pmdk);
    println!("  engram flush: {} + sfence (pmem mode)", machine.flush_instr);
    let force = machine.pmem_force_env.as_deref().unwrap_or("unset");
    println!("  {}: {force} here; set to 1 for PMDK jobs of the pmem setup, removed for the others", job::PMEM_FORCE_VAR);
    for i in infos {
        println!(
            "  setup {:<6} dir {} ({}): Engram {} mode, PMDK {}",
            i.setup.name(),
            i.dir,
            i.fs,
            i.setup.mode().name(),
            i.setup.pmdk_config()
        );
    }
    if infos.first().is_some_and(|i| i.fs != "tmpfs") {
        println!("  note: the pmem setup's directory is not tmpfs");
    }
    let load = sysinfo::load_average().map_or("unknown".to_string(), |l| format!("{l:.2}"));
    println!("  load average: {load} (1 min; other work on the machine makes times noisy)");
    println!("  profile:      {} ({jobs} jobs, each in a child process)", profile.name());
}

fn describe(p: &plan::Planned) -> String {
    format!("{} {} {} {}", p.job.suite.name(), p.point.label(), p.job.imp.name(), p.job.mode.name())
}

fn measure_all(planned: &[plan::Planned]) -> Result<Vec<Measurement>, RunError> {
    let exe = std::env::current_exe().map_err(RunError::Exe)?;
    let bar = ProgressBar::new(planned.len() as u64);
    let style = ProgressStyle::with_template("{bar:40.cyan/blue} {pos}/{len} [{elapsed_precise}] {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    // Without a terminal the bar is hidden: log one line per job instead.
    let log_lines = !std::io::stderr().is_terminal();
    let mut out = Vec::with_capacity(planned.len());
    for (k, p) in planned.iter().enumerate() {
        bar.set_message(describe(p));
        if log_lines {
            eprintln!("[{}/{}] {}", k + 1, planned.len(), describe(p));
        }
        let outcome = job::spawn(&exe, &p.job);
        bar.inc(1);
        match outcome {
            Ok(outcome) => out.push(Measurement { planned: p.clone(), outcome }),
            Err(e) => {
                bar.abandon();
                return Err(e.into());
            }
        }
    }
    bar.finish_with_message("done");
    Ok(out)
}

fn write_report(out: &Path, rows: &[results::Row], cx: &mut report::Context<'_>, setups: &[Setup]) -> Result<(), RunError> {
    let werr = |path: PathBuf| move |source| RunError::Write { path: path.clone(), source };
    std::fs::create_dir_all(out).map_err(werr(out.to_path_buf()))?;
    let csv = out.join("results.csv");
    report::write_csv(rows, &csv).map_err(werr(csv.clone()))?;
    match plot::draw_all(rows, setups, out) {
        Ok(files) => cx.plots = files,
        Err(e) => eprintln!("engram-bench: plots skipped: {e}"),
    }
    let readme = out.join("README.md");
    report::write_readme(rows, cx, &readme).map_err(werr(readme.clone()))?;
    println!("\nreport written to {}", out.display());
    Ok(())
}

fn run(suites: &[Suite], args: &RunArgs) -> Result<ExitCode, RunError> {
    let profile = profile(args);
    let machine = Machine::detect();
    let infos = setups(args)?;
    let dirs: Vec<(Setup, PathBuf)> = infos.iter().map(|i| (i.setup, PathBuf::from(&i.dir))).collect();
    let planned = plan::plan(profile, suites, &dirs, args.reps.map(|r| r as usize));
    print_config(&machine, &infos, profile, planned.len());
    let load_start = sysinfo::load_average();
    let measurements = measure_all(&planned)?;
    let load = (load_start, sysinfo::load_average());
    let fs_of = |s: Setup| infos.iter().find(|i| i.setup == s).map_or_else(String::new, |i| i.fs.clone());
    let rows = results::aggregate(&measurements, &fs_of);
    println!("{}", report::all_tables(&rows));
    let setups: Vec<Setup> = infos.iter().map(|i| i.setup).collect();
    if let Some(out) = &args.out {
        let command = std::iter::once("engram-bench".to_string()).chain(std::env::args().skip(1)).collect::<Vec<_>>().join(" ");
        let mut cx = report::Context { machine: &machine, setups: &infos, profile, command, plots: Vec::new(), load };
        write_report(out, &rows, &mut cx, &setups)?;
    }
    let bad = results::disagreements(&measurements);
    if bad.is_empty() {
        println!("all implementations agree on every check value");
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("engram-bench: implementations disagree:");
    for b in &bad {
        eprintln!("  {b}");
    }
    Ok(ExitCode::from(2))
}
