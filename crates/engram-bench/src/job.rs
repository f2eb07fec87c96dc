//! One measurement: a workload at one size, by one implementation, in one
//! durability mode, in one directory, run in a child process of the
//! benchmark binary.
//!
//! Why a child process: libpmemobj reads `PMEM_IS_PMEM_FORCE` once per
//! process, before its first pool, so one process cannot measure PMDK both
//! with the flag (cache-line flushes on tmpfs) and without it (msync on a
//! disk). [`spawn`] starts `engram-bench run-one ...` with the variable set
//! exactly when the job asks for PMDK in `pmem` mode and removed otherwise;
//! the child runs [`execute`] and prints one [`RESULT_TAG`] line that
//! [`spawn`] parses. Every measurement thus also starts from a fresh heap,
//! fresh thread caches and fresh counters, whatever ran before it.
//!
//! What it keeps true:
//!
//! - [`execute`] refuses a PMDK job whose environment does not match its
//!   mode, so a hand-run `run-one` cannot report msync numbers as pmem ones.
//! - The pool file a job creates is removed when the job ends, pass or fail.
//! - A check value crosses the process boundary exactly (floats as bits).

use std::fmt;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use engram::Durability;

use crate::child::{self, ChildError, PoolFile};
use crate::{engram_impl, peers, workloads};

/// First word of the line a child prints with its result.
pub const RESULT_TAG: &str = "ENGRAM-BENCH-RESULT";

/// The environment variable libpmemobj reads to treat any mapping as pmem.
pub use crate::child::PMEM_FORCE_VAR;

/// The seed of every sps run (any nonzero value; fixed for comparability).
pub const SPS_SEED: NonZeroU64 = match NonZeroU64::new(0x5EED_5EED) {
    Some(s) => s,
    None => panic!("seed is nonzero"),
};

/// A workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum)]
pub enum Suite {
    /// CLBG binary-trees: allocation in short regions.
    BinaryTrees,
    /// CLBG n-body: many short regions.
    Nbody,
    /// Random swaps in an array: one long region.
    Sps,
}

impl Suite {
    /// Every suite, in report order.
    pub const ALL: [Suite; 3] = [Suite::BinaryTrees, Suite::Nbody, Suite::Sps];

    /// The suite's name in the CSV and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Suite::BinaryTrees => "binary-trees",
            Suite::Nbody => "nbody",
            Suite::Sps => "sps",
        }
    }

    /// What `size` means for this suite.
    pub fn size_label(self) -> &'static str {
        match self {
            Suite::BinaryTrees => "depth",
            Suite::Nbody => "steps",
            Suite::Sps => "n",
        }
    }
}

/// An implementation of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum)]
pub enum Impl {
    /// Engram regions (this crate's `engram_impl`).
    Engram,
    /// The same Engram code in `process` mode (no flush, no fence): what is
    /// left is Engram's software cost (logging, allocation, bookkeeping).
    EngramProcess,
    /// libpmemobj transactions (`pmdk_bt_tx`, `pmdk_nbody`, `pmdk_sps`).
    PmdkTx,
    /// libpmemobj atomic allocation per node (binary-trees only).
    PmdkAtomic,
    /// malloc/free in C (binary-trees only).
    Malloc,
    /// The same Rust code over plain memory (n-body and sps).
    Volatile,
}

impl Impl {
    /// The implementation's name in the CSV and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Engram => "engram",
            Impl::EngramProcess => "engram-process",
            Impl::PmdkTx => "pmdk-tx",
            Impl::PmdkAtomic => "pmdk-atomic",
            Impl::Malloc => "malloc",
            Impl::Volatile => "volatile",
        }
    }

    /// Whether this is a PMDK peer.
    pub fn is_pmdk(self) -> bool {
        matches!(self, Impl::PmdkTx | Impl::PmdkAtomic)
    }

    /// Whether this implementation keeps its data in a pool file.
    pub fn is_persistent(self) -> bool {
        matches!(self, Impl::Engram | Impl::EngramProcess | Impl::PmdkTx | Impl::PmdkAtomic)
    }
}

/// How an implementation makes its stores durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum)]
pub enum Mode {
    /// Cache-line flushes and fences (Engram `pmem`; PMDK with
    /// `PMEM_IS_PMEM_FORCE=1`).
    Pmem,
    /// `msync` (Engram `msync`; PMDK on a non-pmem mapping without the flag).
    Msync,
    /// Nothing is persisted (malloc, volatile).
    Volatile,
    /// Engram's `process` mode: the same regions with no flush and no fence.
    Process,
}

impl Mode {
    /// The mode's name in the CSV and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Pmem => "pmem",
            Mode::Msync => "msync",
            Mode::Volatile => "volatile",
            Mode::Process => "process",
        }
    }
}

/// One measurement to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// The workload.
    pub suite: Suite,
    /// Depth (binary-trees), steps (n-body) or array length (sps).
    pub size: u64,
    /// Swaps (sps only; 0 otherwise).
    pub swaps: u64,
    /// Who runs it.
    pub imp: Impl,
    /// How durable it is.
    pub mode: Mode,
    /// Where the pool file goes (unused by volatile implementations).
    pub dir: PathBuf,
}

/// A workload's check value; every implementation must produce the same.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    /// Node count (binary-trees) or checksum (sps).
    Count(u64),
    /// Final energy (n-body).
    Energy(f64),
}

impl Check {
    /// Whether two check values agree: counts exactly, energies to 1e-9.
    pub fn agrees(self, other: Check) -> bool {
        match (self, other) {
            (Check::Count(a), Check::Count(b)) => a == b,
            (Check::Energy(a), Check::Energy(b)) => (a - b).abs() < 1e-9,
            _ => false,
        }
    }

    fn encode(self) -> String {
        match self {
            Check::Count(v) => format!("u64:{v}"),
            Check::Energy(v) => format!("f64:{:#018x}", v.to_bits()),
        }
    }

    fn decode(s: &str) -> Option<Check> {
        if let Some(v) = s.strip_prefix("u64:") {
            return v.parse().ok().map(Check::Count);
        }
        let bits = s.strip_prefix("f64:0x")?;
        u64::from_str_radix(bits, 16).ok().map(|b| Check::Energy(f64::from_bits(b)))
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Count(v) => write!(f, "{v}"),
            Check::Energy(v) => write!(f, "{v:.9}"),
        }
    }
}

/// Engram's persistence work in the measured part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PersistCounts {
    /// Cache lines (pmem) or ranges (msync) flushed.
    pub flushes: u64,
    /// Fences.
    pub fences: u64,
    /// Regions that wrote.
    pub regions: u64,
}

/// What one measurement found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    /// The check value.
    pub check: Check,
    /// Elapsed nanoseconds of the measured part.
    pub nanos: u64,
    /// Flush and fence counts (Engram only).
    pub counts: Option<PersistCounts>,
}

/// Why a measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The job's implementation, mode and suite do not go together.
    #[error("{imp} cannot run {suite} in {mode} mode", imp = .0.imp.name(), suite = .0.suite.name(), mode = .0.mode.name())]
    Unsupported(Box<Job>),
    /// A PMDK job's environment does not match its mode.
    #[error("{0}")]
    Environment(String),
    /// The Engram implementation failed.
    #[error("engram: {0}")]
    Engram(#[from] engram::Error),
    /// A PMDK peer failed.
    #[error("pmdk: {0}")]
    Peer(#[from] peers::PeerError),
    /// The child process gave no result.
    #[error("{0}")]
    Child(#[from] ChildError),
}

impl Job {
    /// Whether the job runs in this combination at all.
    pub fn is_supported(&self) -> bool {
        let mode_ok = match self.imp {
            Impl::Engram | Impl::PmdkTx | Impl::PmdkAtomic => matches!(self.mode, Mode::Pmem | Mode::Msync),
            Impl::EngramProcess => self.mode == Mode::Process,
            Impl::Malloc | Impl::Volatile => self.mode == Mode::Volatile,
        };
        let suite_ok = match self.imp {
            Impl::PmdkAtomic | Impl::Malloc => self.suite == Suite::BinaryTrees,
            Impl::Volatile => self.suite != Suite::BinaryTrees,
            Impl::Engram | Impl::EngramProcess | Impl::PmdkTx => true,
        };
        mode_ok && suite_ok && (self.suite != Suite::Sps || self.size > 0)
    }

    /// Whether the child must run with `PMEM_IS_PMEM_FORCE=1`.
    pub fn needs_pmem_force(&self) -> bool {
        self.imp.is_pmdk() && self.mode == Mode::Pmem
    }

    /// The `run-one` arguments that describe this job.
    pub fn args(&self) -> Vec<String> {
        vec![
            "run-one".into(),
            "--suite".into(),
            self.suite.name().into(),
            "--size".into(),
            self.size.to_string(),
            "--swaps".into(),
            self.swaps.to_string(),
            "--impl".into(),
            self.imp.name().into(),
            "--mode".into(),
            self.mode.name().into(),
            "--dir".into(),
            self.dir.display().to_string(),
        ]
    }

    fn pool_path(&self) -> PathBuf {
        let name = format!("engram-bench-{}-{}-{}.pool", std::process::id(), self.suite.name(), self.imp.name());
        self.dir.join(name)
    }
}

/// Checks that a PMDK job sees the environment its mode needs.
fn check_environment(job: &Job) -> Result<(), JobError> {
    if !job.imp.is_pmdk() {
        return Ok(());
    }
    let forced = std::env::var_os(PMEM_FORCE_VAR).is_some_and(|v| v == "1");
    match (job.mode, forced) {
        (Mode::Pmem, false) => Err(JobError::Environment(format!("PMDK in pmem mode needs {PMEM_FORCE_VAR}=1 in the environment"))),
        (Mode::Msync, true) => Err(JobError::Environment(format!("PMDK in msync mode needs {PMEM_FORCE_VAR} unset"))),
        _ => Ok(()),
    }
}

fn durability(mode: Mode) -> Durability {
    match mode {
        Mode::Pmem => Durability::Pmem,
        Mode::Msync => Durability::Msync,
        Mode::Volatile | Mode::Process => Durability::Process,
    }
}

fn from_engram<T>(run: engram_impl::EngramRun<T>, check: impl FnOnce(T) -> Check) -> Outcome {
    Outcome {
        check: check(run.value),
        nanos: run.nanos,
        counts: Some(PersistCounts { flushes: run.flushes, fences: run.fences, regions: run.regions }),
    }
}

fn from_peer<T>(m: peers::Measured<T>, check: impl FnOnce(T) -> Check) -> Outcome {
    Outcome { check: check(m.value), nanos: m.nanos, counts: None }
}

/// Depth argument of binary-trees (clamped later like CLBG).
fn depth(job: &Job) -> u32 {
    job.size.min(u32::MAX as u64) as u32
}

/// Runs `job` in this process.
pub fn execute(job: &Job) -> Result<Outcome, JobError> {
    if !job.is_supported() {
        return Err(JobError::Unsupported(Box::new(job.clone())));
    }
    check_environment(job)?;
    let pool = PoolFile(job.pool_path());
    let path = pool.0.as_path();
    match job.suite {
        Suite::BinaryTrees => binary_trees(job, path),
        Suite::Nbody => nbody(job, path),
        Suite::Sps => sps(job, path),
    }
}

fn binary_trees(job: &Job, path: &Path) -> Result<Outcome, JobError> {
    let d = depth(job);
    Ok(match job.imp {
        Impl::Engram | Impl::EngramProcess => from_engram(engram_impl::binary_trees(path, d, durability(job.mode))?, Check::Count),
        Impl::PmdkTx => from_peer(peers::pmdk_binary_trees_tx(path, d)?, Check::Count),
        Impl::PmdkAtomic => from_peer(peers::pmdk_binary_trees_atomic(path, d)?, Check::Count),
        Impl::Malloc => from_peer(peers::malloc_binary_trees(d), Check::Count),
        Impl::Volatile => return Err(JobError::Unsupported(Box::new(job.clone()))),
    })
}

fn nbody(job: &Job, path: &Path) -> Result<Outcome, JobError> {
    Ok(match job.imp {
        Impl::Engram | Impl::EngramProcess => from_engram(engram_impl::nbody(path, job.size, durability(job.mode))?, Check::Energy),
        Impl::PmdkTx => from_peer(peers::pmdk_nbody(path, job.size)?, Check::Energy),
        Impl::Volatile => {
            let start = crate::clock::Stopwatch::start();
            let energy = std::hint::black_box(workloads::nbody_run(std::hint::black_box(job.size)));
            Outcome { check: Check::Energy(energy), nanos: start.elapsed_ns(), counts: None }
        }
        Impl::PmdkAtomic | Impl::Malloc => return Err(JobError::Unsupported(Box::new(job.clone()))),
    })
}

fn sps(job: &Job, path: &Path) -> Result<Outcome, JobError> {
    let n = job.size;
    Ok(match job.imp {
        Impl::Engram | Impl::EngramProcess => {
            from_engram(engram_impl::sps(path, n, job.swaps, SPS_SEED, durability(job.mode))?, Check::Count)
        }
        Impl::PmdkTx => from_peer(peers::pmdk_sps(path, n as usize, job.swaps, SPS_SEED)?, Check::Count),
        Impl::Volatile => {
            let mut a: Vec<u64> = (0..n).collect();
            let start = crate::clock::Stopwatch::start();
            workloads::sps_swap(std::hint::black_box(&mut a), job.swaps, SPS_SEED);
            let nanos = start.elapsed_ns();
            Outcome { check: Check::Count(workloads::sps_checksum(&a)), nanos, counts: None }
        }
        Impl::PmdkAtomic | Impl::Malloc => return Err(JobError::Unsupported(Box::new(job.clone()))),
    })
}

/// The line a child prints for `outcome`.
pub fn result_line(outcome: &Outcome) -> String {
    let mut line = format!("{RESULT_TAG} check={} nanos={}", outcome.check.encode(), outcome.nanos);
    if let Some(c) = outcome.counts {
        line.push_str(&format!(" flushes={} fences={} regions={}", c.flushes, c.fences, c.regions));
    }
    line
}

/// Parses a line printed by [`result_line`].
pub fn parse_result_line(line: &str) -> Option<Outcome> {
    let f = child::fields(line, RESULT_TAG)?;
    let num = |k: &str| f.get(k).and_then(|v| v.parse().ok());
    let counts = match (num("flushes"), num("fences"), num("regions")) {
        (Some(flushes), Some(fences), Some(regions)) => Some(PersistCounts { flushes, fences, regions }),
        _ => None,
    };
    Some(Outcome { check: Check::decode(f.get("check")?)?, nanos: num("nanos")?, counts })
}

/// Runs `job` in a child process of the binary `exe` (`engram-bench`).
pub fn spawn(exe: &Path, job: &Job) -> Result<Outcome, JobError> {
    Ok(child::run(exe, &job.args(), job.needs_pmem_force(), parse_result_line)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_line_roundtrips() {
        let o = Outcome {
            check: Check::Energy(-0.169_075_164_123),
            nanos: 12345,
            counts: Some(PersistCounts { flushes: 7, fences: 3, regions: 1 }),
        };
        assert_eq!(parse_result_line(&result_line(&o)), Some(o));
        let p = Outcome { check: Check::Count(u64::MAX), nanos: 1, counts: None };
        assert_eq!(parse_result_line(&result_line(&p)), Some(p));
        assert_eq!(parse_result_line("something else"), None);
    }

    #[test]
    fn unsupported_combinations_are_refused() {
        let job = Job { suite: Suite::Nbody, size: 1, swaps: 0, imp: Impl::Malloc, mode: Mode::Volatile, dir: PathBuf::from("/dev/shm") };
        assert!(!job.is_supported());
        assert!(matches!(execute(&job), Err(JobError::Unsupported(_))));
    }

    #[test]
    fn checks_compare_by_kind() {
        assert!(Check::Count(3).agrees(Check::Count(3)));
        assert!(!Check::Count(3).agrees(Check::Energy(3.0)));
        assert!(Check::Energy(1.0).agrees(Check::Energy(1.0 + 1e-12)));
    }
}
