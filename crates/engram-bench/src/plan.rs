//! What a benchmark run measures: which sizes, which implementations, in
//! which setups, how many times.
//!
//! Two setups share one run:
//!
//! - **pmem** (`--dir`, tmpfs `/dev/shm` by default): persistent memory
//!   emulated on DRAM. Engram in `pmem` mode (CLWB/CLFLUSHOPT + SFENCE) vs
//!   PMDK with `PMEM_IS_PMEM_FORCE=1` (its own cache-line flushes); malloc
//!   and the volatile Rust code run here too, once, as the floor, and so
//!   does Engram in `process` mode (no flush, no fence), whose time is
//!   Engram's software cost alone.
//! - **msync** (`--disk-dir`, `data/bench` under the working directory by
//!   default): a real disk file system. Engram in `msync` mode vs PMDK
//!   without the flag, which then msyncs. Every fence is a system call that
//!   waits for the disk, so this setup uses smaller sizes.
//!
//! Keeps true: jobs of one size are interleaved (every implementation runs
//! once, then again), so slow drift on a shared machine spreads over all of
//! them instead of landing on one; the largest size of each suite and setup
//! runs once, all others [`Profile::reps`] times.

use std::path::PathBuf;

use crate::job::{Impl, Job, Mode, Suite};

/// How big a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Tiny sizes for the CI smoke test (seconds, also in debug builds).
    Quick,
    /// The sizes of the report (`make bench`).
    Default,
    /// The full ranges (binary-trees depth 20, n-body 10^7 steps,
    /// sps 10^7 elements): tens of minutes.
    Full,
}

impl Profile {
    /// The profile's name.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Quick => "quick",
            Profile::Default => "default",
            Profile::Full => "full",
        }
    }

    /// Repetitions of every size but the largest (whose median is its only run).
    pub fn reps(self) -> usize {
        match self {
            Profile::Quick => 1,
            Profile::Default | Profile::Full => 3,
        }
    }
}

/// Where and how durably the persistent implementations run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Setup {
    /// Cache-line flushes on tmpfs (emulated persistent memory).
    Pmem,
    /// msync on a disk file system.
    Msync,
}

impl Setup {
    /// The setup's name in the CSV.
    pub fn name(self) -> &'static str {
        match self {
            Setup::Pmem => "pmem",
            Setup::Msync => "msync",
        }
    }

    /// The durability mode of Engram and PMDK in this setup.
    pub fn mode(self) -> Mode {
        match self {
            Setup::Pmem => Mode::Pmem,
            Setup::Msync => Mode::Msync,
        }
    }

    /// How PMDK is configured in this setup.
    pub fn pmdk_config(self) -> &'static str {
        match self {
            Setup::Pmem => "PMEM_IS_PMEM_FORCE=1: cache-line flushes + SFENCE",
            Setup::Msync => "PMEM_IS_PMEM_FORCE unset: msync",
        }
    }
}

/// One size of one suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point {
    /// The suite.
    pub suite: Suite,
    /// Depth, steps or array length.
    pub size: u64,
    /// Swaps (sps only; 0 otherwise).
    pub swaps: u64,
}

impl Point {
    fn new(suite: Suite, size: u64) -> Self {
        let swaps = if suite == Suite::Sps { size } else { 0 };
        Point { suite, size, swaps }
    }

    fn sps(n: u64, swaps: u64) -> Self {
        Point { suite: Suite::Sps, size: n, swaps }
    }

    /// A label for tables: `14`, `10^5`, `10^4 (10^6 swaps)`.
    pub fn label(&self) -> String {
        match self.suite {
            Suite::BinaryTrees => self.size.to_string(),
            Suite::Nbody => pow10(self.size),
            Suite::Sps if self.swaps == self.size => pow10(self.size),
            Suite::Sps => format!("{} ({} swaps)", pow10(self.size), pow10(self.swaps)),
        }
    }

    /// How much work the point is, to find each suite's largest.
    fn work(&self) -> (u64, u64) {
        (self.size.max(self.swaps), self.size.min(self.swaps))
    }
}

/// `10^k` for exact powers of ten, the plain number otherwise.
pub fn pow10(v: u64) -> String {
    let mut k = 0;
    let mut x = v;
    while x >= 10 && x % 10 == 0 {
        x /= 10;
        k += 1;
    }
    if x == 1 && k >= 2 {
        format!("10^{k}")
    } else {
        v.to_string()
    }
}

const E3: u64 = 1_000;
const E4: u64 = 10_000;
const E5: u64 = 100_000;
const E6: u64 = 1_000_000;
const E7: u64 = 10_000_000;

/// The sizes of `suite` in `setup` for `profile`.
pub fn points(profile: Profile, setup: Setup, suite: Suite) -> Vec<Point> {
    let sizes: &[u64] = match (profile, setup, suite) {
        (Profile::Quick, Setup::Pmem, Suite::BinaryTrees) => &[6, 8],
        (Profile::Quick, Setup::Pmem, Suite::Nbody) => &[100, 1000],
        (Profile::Quick, Setup::Pmem, Suite::Sps) => &[100, 1000],
        // PMDK msyncs every node: depth 6 (the smallest CLBG allows) takes
        // it seconds already.
        (Profile::Quick, Setup::Msync, Suite::BinaryTrees) => &[6],
        (Profile::Quick, Setup::Msync, Suite::Nbody) => &[100],
        (Profile::Quick, Setup::Msync, Suite::Sps) => &[100],
        (Profile::Default, Setup::Pmem, Suite::BinaryTrees) => &[14, 16, 18],
        (Profile::Full, Setup::Pmem, Suite::BinaryTrees) => &[14, 16, 18, 20],
        (Profile::Default, Setup::Pmem, Suite::Nbody) => &[E5, E6],
        (Profile::Full, Setup::Pmem, Suite::Nbody) => &[E5, E6, E7],
        (Profile::Default, Setup::Pmem, Suite::Sps) => &[E3, E4, E5, E6],
        (Profile::Full, Setup::Pmem, Suite::Sps) => &[E3, E4, E5, E6, E7],
        (Profile::Default, Setup::Msync, Suite::BinaryTrees) => &[6, 8],
        (Profile::Full, Setup::Msync, Suite::BinaryTrees) => &[6, 8, 10],
        (Profile::Default, Setup::Msync, Suite::Nbody) => &[E3, E4],
        (Profile::Full, Setup::Msync, Suite::Nbody) => &[E3, E4, E5],
        (Profile::Default, Setup::Msync, Suite::Sps) => &[E3, E4],
        (Profile::Full, Setup::Msync, Suite::Sps) => &[E3, E4, E5],
    };
    let mut points: Vec<Point> = sizes.iter().map(|&s| Point::new(suite, s)).collect();
    // sps also at a fixed 10^6 swaps over growing arrays (pmem setup only:
    // on a disk every swap costs two msyncs).
    if suite == Suite::Sps && setup == Setup::Pmem && profile != Profile::Quick {
        points.extend(sizes.iter().filter(|&&n| n != E6).map(|&n| Point::sps(n, E6)));
    }
    points
}

/// The implementations of `suite` that run in `setup`; the volatile floor
/// (malloc, plain memory) only where `with_volatile`.
pub fn impls(suite: Suite, setup: Setup, with_volatile: bool) -> Vec<(Impl, Mode)> {
    let mode = setup.mode();
    let mut out = vec![(Impl::Engram, mode), (Impl::PmdkTx, mode)];
    if suite == Suite::BinaryTrees {
        out.push((Impl::PmdkAtomic, mode));
    }
    if with_volatile {
        out.push((Impl::EngramProcess, Mode::Process));
        let floor = if suite == Suite::BinaryTrees { Impl::Malloc } else { Impl::Volatile };
        out.push((floor, Mode::Volatile));
    }
    out
}

/// One planned measurement.
#[derive(Clone, Debug)]
pub struct Planned {
    /// The measurement.
    pub job: Job,
    /// The setup it belongs to.
    pub setup: Setup,
    /// The size it measures.
    pub point: Point,
}

/// The whole run: every job, in the order to run them.
///
/// `setups` pairs each setup with its directory; the first one also runs
/// the volatile floor. `reps` overrides [`Profile::reps`].
pub fn plan(profile: Profile, suites: &[Suite], setups: &[(Setup, PathBuf)], reps: Option<usize>) -> Vec<Planned> {
    let mut out = Vec::new();
    for &suite in suites {
        for (k, (setup, dir)) in setups.iter().enumerate() {
            let points = points(profile, *setup, suite);
            let largest = points.iter().map(Point::work).max();
            for point in &points {
                let n = if Some(point.work()) == largest { 1 } else { reps.unwrap_or(profile.reps()) };
                for _ in 0..n {
                    for (imp, mode) in impls(suite, *setup, k == 0) {
                        let job = Job { suite, size: point.size, swaps: point.swaps, imp, mode, dir: dir.clone() };
                        out.push(Planned { job, setup: *setup, point: *point });
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_of_ten_are_labelled() {
        assert_eq!(pow10(1000), "10^3");
        assert_eq!(pow10(10), "10");
        assert_eq!(pow10(1500), "1500");
        assert_eq!(Point::sps(E4, E6).label(), "10^4 (10^6 swaps)");
    }

    #[test]
    fn largest_point_runs_once() {
        let setups = [(Setup::Pmem, PathBuf::from("/dev/shm"))];
        let jobs = plan(Profile::Default, &[Suite::Nbody], &setups, None);
        let big = jobs.iter().filter(|p| p.point.size == E6).count();
        let small = jobs.iter().filter(|p| p.point.size == E5).count();
        assert_eq!(big, 4, "one run each of engram, pmdk-tx, engram-process, volatile");
        assert_eq!(small, 12);
    }

    #[test]
    fn every_planned_job_is_supported() {
        let setups = [(Setup::Pmem, PathBuf::from("/a")), (Setup::Msync, PathBuf::from("/b"))];
        for profile in [Profile::Quick, Profile::Default, Profile::Full] {
            for p in plan(profile, &Suite::ALL, &setups, None) {
                assert!(p.job.is_supported(), "{:?}", p.job);
            }
        }
    }
}
