//! From measurements to report rows: medians, speedups over PMDK, and the
//! check that every implementation computed the same thing.
//!
//! Keeps true: a row's speedup is `PMDK tx median / this row's median` for
//! the same size in the same setup, so > 1 always means faster than PMDK;
//! the flush and fence counts of a row come from its median run; every
//! check value is compared with a reference computed here in plain Rust
//! (the CLBG node-count formula, volatile n-body, volatile sps), not only
//! with the other implementations.

use std::collections::BTreeMap;

use crate::job::{Check, Impl, Mode, Outcome, PersistCounts, SPS_SEED};
use crate::plan::{Planned, Point, Setup};
use crate::workloads;

/// One measurement and what it found.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// What was run.
    pub planned: Planned,
    /// What it found.
    pub outcome: Outcome,
}

/// One line of the report: the median of an implementation at one size.
#[derive(Clone, Debug)]
pub struct Row {
    /// The size.
    pub point: Point,
    /// The setup.
    pub setup: Setup,
    /// File system of the setup's directory.
    pub fs: String,
    /// The implementation.
    pub imp: Impl,
    /// Its durability mode.
    pub mode: Mode,
    /// Elapsed nanoseconds of every run, in run order.
    pub runs: Vec<u64>,
    /// The median (the lower one for an even count).
    pub nanos: u64,
    /// PMDK tx median / this median, same size and setup.
    pub speedup: Option<f64>,
    /// Engram's flush and fence counts in the median run.
    pub counts: Option<PersistCounts>,
    /// The check value of the median run.
    pub check: Check,
}

impl Row {
    /// Flushes per writing region (Engram rows).
    pub fn flushes_per_region(&self) -> Option<f64> {
        self.counts.map(|c| c.flushes as f64 / c.regions.max(1) as f64)
    }

    /// Fences per writing region (Engram rows).
    pub fn fences_per_region(&self) -> Option<f64> {
        self.counts.map(|c| c.fences as f64 / c.regions.max(1) as f64)
    }
}

type Key = (Point, Setup, Impl, Mode);

/// Groups measurements into rows, sorted by suite, setup, size and
/// implementation. `fs_of` names the file system of each setup.
pub fn aggregate(measurements: &[Measurement], fs_of: &dyn Fn(Setup) -> String) -> Vec<Row> {
    let mut groups: BTreeMap<Key, Vec<Outcome>> = BTreeMap::new();
    for m in measurements {
        let p = &m.planned;
        groups.entry((p.point, p.setup, p.job.imp, p.job.mode)).or_default().push(m.outcome);
    }
    let mut rows: Vec<Row> = groups
        .into_iter()
        .map(|((point, setup, imp, mode), outcomes)| {
            let runs: Vec<u64> = outcomes.iter().map(|o| o.nanos).collect();
            let mut sorted = outcomes.clone();
            sorted.sort_by_key(|o| o.nanos);
            let median = sorted[(sorted.len() - 1) / 2];
            Row {
                point,
                setup,
                fs: fs_of(setup),
                imp,
                mode,
                runs,
                nanos: median.nanos,
                speedup: None,
                counts: median.counts,
                check: median.check,
            }
        })
        .collect();
    let pmdk: BTreeMap<(Point, Setup), u64> =
        rows.iter().filter(|r| r.imp == Impl::PmdkTx).map(|r| ((r.point, r.setup), r.nanos)).collect();
    for r in &mut rows {
        r.speedup = pmdk.get(&(r.point, r.setup)).map(|&p| p as f64 / r.nanos.max(1) as f64);
    }
    rows.sort_by(|a, b| {
        (a.point.suite, a.setup, a.point.swaps != a.point.size, a.point.swaps, a.point.size, a.imp).cmp(&(
            b.point.suite,
            b.setup,
            b.point.swaps != b.point.size,
            b.point.swaps,
            b.point.size,
            b.imp,
        ))
    });
    rows
}

/// The check value every implementation must produce at `point`.
pub fn reference(point: &Point) -> Check {
    use crate::job::Suite;
    match point.suite {
        Suite::BinaryTrees => {
            let depth = point.size.min(u32::MAX as u64) as u32;
            Check::Count(workloads::binary_trees_node_count(workloads::binary_trees_max_depth(depth)))
        }
        Suite::Nbody => Check::Energy(workloads::nbody_run(point.size)),
        Suite::Sps => Check::Count(workloads::sps_reference(point.size as usize, point.swaps, SPS_SEED)),
    }
}

/// Every measurement whose check value differs from the reference, described.
pub fn disagreements(measurements: &[Measurement]) -> Vec<String> {
    let mut refs: BTreeMap<Point, Check> = BTreeMap::new();
    let mut out = Vec::new();
    for m in measurements {
        let p = &m.planned;
        let want = *refs.entry(p.point).or_insert_with(|| reference(&p.point));
        if !m.outcome.check.agrees(want) {
            out.push(format!(
                "{} {} {} on {} ({}): got {}, expected {}",
                p.point.suite.name(),
                p.point.label(),
                p.job.imp.name(),
                p.setup.name(),
                p.job.mode.name(),
                m.outcome.check,
                want
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{Job, Suite};
    use std::path::PathBuf;

    fn m(imp: Impl, nanos: u64, value: u64) -> Measurement {
        let point = Point { suite: Suite::BinaryTrees, size: 6, swaps: 0 };
        let mode = if imp == Impl::Malloc { Mode::Volatile } else { Mode::Pmem };
        let job = Job { suite: Suite::BinaryTrees, size: 6, swaps: 0, imp, mode, dir: PathBuf::from("/x") };
        Measurement {
            planned: Planned { job, setup: Setup::Pmem, point },
            outcome: Outcome { check: Check::Count(value), nanos, counts: None },
        }
    }

    #[test]
    fn median_and_speedup() {
        let good = workloads::binary_trees_node_count(6);
        let ms = vec![
            m(Impl::PmdkTx, 300, good),
            m(Impl::Engram, 90, good),
            m(Impl::PmdkTx, 100, good),
            m(Impl::Engram, 10, good),
            m(Impl::PmdkTx, 200, good),
            m(Impl::Engram, 50, good),
        ];
        let rows = aggregate(&ms, &|_| "tmpfs".into());
        let engram = rows.iter().find(|r| r.imp == Impl::Engram).unwrap();
        assert_eq!(engram.nanos, 50);
        assert_eq!(engram.speedup, Some(4.0));
        assert!(disagreements(&ms).is_empty());
    }

    #[test]
    fn a_wrong_count_is_reported() {
        let ms = vec![m(Impl::Malloc, 1, 12345)];
        let d = disagreements(&ms);
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("malloc"), "{}", d[0]);
    }
}
