//! The command line, declared with clap's derive API. Every subcommand has
//! `--help`; sizes take K/M/G/T suffixes ([`crate::size::parse_size`]).

use crate::size::parse_size;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Inspect, check and exercise Engram persistent-memory pools.
#[derive(Debug, Parser)]
#[command(name = "engram", version, propagate_version = true)]
#[command(after_help = "A pool is one file holding a crash-consistent persistent heap.\n\
    `info` and `check` never change the file: a pool that was not closed cleanly is\n\
    recovered on a private copy so you can see what recovery would do.")]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a new, empty pool file.
    Create(CreateArgs),
    /// Describe a pool: format, layout, size, durability, objects, roots, last close.
    Info(InfoArgs),
    /// Verify every reachable object and pointer (read-only; the file is not
    /// changed), or with --repair clear pointer fields that point at no object.
    Check(CheckArgs),
    /// Collect garbage: free every object that no root reaches.
    Gc(PathArg),
    /// Show failure-atomic regions at work: a bank ledger that survives crashes.
    Demo(DemoArgs),
    /// Simulate power failures: crash a workload at every ordering point under
    /// the x86 persistency model, recover each image and check its invariants.
    Crashtest(CrashtestArgs),
    /// Run invariant-keeping regions forever (used by the process-kill tests).
    #[command(hide = true)]
    Torture(TortureArgs),
}

/// `engram crashtest`.
#[derive(Debug, Args)]
#[command(after_help = "Workloads: `all` (the default) or one name; an unknown name lists them all\n\
    (docs/crash-consistency.md, \"What is explored\", describes each).\n\
    Exit status 1 if any crash image fails recovery or\n\
    its invariant; each violation names the trace position, the fence, what failed\n\
    and which unflushed stores the image lost.")]
pub struct CrashtestArgs {
    /// The workload to explore, or `all`.
    #[arg(default_value = "all")]
    pub workload: String,
    /// The deep sweep: more regions and up to 256 images per ordering point.
    #[arg(long)]
    pub deep: bool,
    /// The double-crash mode: a sample of first crashes, each recovered
    /// (traced), followed by more work and crashed again at every point.
    #[arg(long)]
    pub double: bool,
    /// `--double`: first-crash images taken on per workload, at most
    /// (overrides the sweep's).
    #[arg(long, value_name = "N")]
    pub first_images: Option<usize>,
    /// `--double`: first-crash images taken on per crash point, at most.
    #[arg(long, value_name = "N")]
    pub per_point: Option<usize>,
    /// Images checked per ordering point at most (overrides the sweep's).
    #[arg(long, value_name = "N")]
    pub images: Option<usize>,
    /// Regions in the traced stretch (overrides the sweep's).
    #[arg(long, value_name = "N")]
    pub regions: Option<u64>,
    /// Directory for the traced pool and the crash images (default: /dev/shm).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Seed for the explorer's random choices.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// Trace every flush as this instruction (default: the one this CPU's
    /// pmem mode uses; CLFLUSH adds a crash point after every flush).
    #[arg(long, value_name = "KIND")]
    pub flush_kind: Option<FlushKindArg>,
}

/// A cache-line write-back instruction, as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FlushKindArg {
    /// CLWB: write back, keep the line.
    Clwb,
    /// CLFLUSHOPT: write back and evict, weakly ordered.
    Clflushopt,
    /// CLFLUSH: write back and evict, ordered with all stores.
    Clflush,
}

/// A durability mode, as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// Flush cache lines (CLWB/CLFLUSHOPT/CLFLUSH) and fence: persistent memory.
    Pmem,
    /// msync the dirty pages at each commit: ordinary storage.
    Msync,
    /// Private mapping and a write-ahead log, one fdatasync per commit
    /// shared by concurrent commits (group commit): ordinary storage.
    Wal,
    /// No flushing: survives a process crash, not a power failure.
    Process,
}

impl From<DurabilityArg> for engram::Durability {
    fn from(d: DurabilityArg) -> Self {
        match d {
            DurabilityArg::Pmem => engram::Durability::Pmem,
            DurabilityArg::Msync => engram::Durability::Msync,
            DurabilityArg::Wal => engram::Durability::Wal,
            DurabilityArg::Process => engram::Durability::Process,
        }
    }
}

/// `engram create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The pool file to create (must not exist).
    pub path: PathBuf,
    /// Layout name that programs check when they open the pool (1 to 64 bytes).
    #[arg(long, value_name = "NAME")]
    pub layout: String,
    /// Initial file size, e.g. 16M (default 16M; at least about 5M).
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub size: Option<u64>,
    /// Largest size the pool may grow to, e.g. 64G (default 64G).
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub max_size: Option<u64>,
    /// Durability mode for this session (default: pmem on DAX, msync on tmpfs, wal elsewhere).
    #[arg(long, value_enum)]
    pub durability: Option<DurabilityArg>,
}

/// `engram info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The pool file.
    pub path: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `engram check`.
#[derive(Debug, Args)]
#[command(after_help = "Pointer fields that point at no live object (a pointer from another pool,\n\
    a stray value, a pointer left dangling by a free) are listed with the object,\n\
    its type and the field; exit status 1. --repair clears them (sets them to\n\
    null) in one crash-safe region after asking, then collects garbage.")]
pub struct CheckArgs {
    /// The pool file.
    pub path: PathBuf,
    /// Clear the bad pointer fields found (opens the pool read-write).
    #[arg(long)]
    pub repair: bool,
    /// With --repair: do not ask for confirmation.
    #[arg(long, requires = "repair")]
    pub yes: bool,
}

/// A command that takes only a pool path.
#[derive(Debug, Args)]
pub struct PathArg {
    /// The pool file.
    pub path: PathBuf,
}

/// `engram demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The demo pool (created, with its directory, on the first run).
    #[arg(default_value = "data/demo.pool")]
    pub path: PathBuf,
    /// Failure-atomic regions to run this time (each one transfer + one record).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub regions: u64,
    /// Abort the process in the middle of region K (1-based), after some of its writes.
    #[arg(long, value_name = "K")]
    pub crash_after: Option<u64>,
}

/// `engram torture` (hidden).
#[derive(Debug, Args)]
pub struct TortureArgs {
    /// The pool file (created if missing).
    pub path: PathBuf,
    /// Seed of the random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Durability mode (default: pmem on DAX, msync on tmpfs, wal elsewhere).
    #[arg(long, value_enum)]
    pub durability: Option<DurabilityArg>,
    /// Stop after this many regions and close cleanly (default: run until killed).
    #[arg(long, value_name = "N")]
    pub regions: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_sizes_and_modes() {
        let cli = Cli::try_parse_from(["engram", "create", "p", "--layout", "x", "--size", "32M", "--durability", "process"]).unwrap();
        let Command::Create(a) = cli.command else { panic!("not create") };
        assert_eq!(a.size, Some(32 << 20));
        assert_eq!(a.durability, Some(DurabilityArg::Process));
    }
}
