//! One STM measurement — a structure, an implementation, a lookup share, a
//! thread count — run in a child process of the benchmark binary
//! (`engram-bench stm --run-one SPEC --dir DIR`).
//!
//! Why a child process: libpmemobj reads `PMEM_IS_PMEM_FORCE` once per
//! process, before its first pool, so [`spawn`] sets it to 1 for PMDK jobs
//! and removes it for the others (as the region benchmarks' `job.rs` does).
//! A child also starts every measurement with a fresh heap, a fresh STM
//! clock and fresh thread-local counters, whatever ran before.
//!
//! Keeps true: the pool file a job creates is removed when the job ends,
//! pass or fail; a job's spec and its result line round-trip exactly
//! ([`StmJob::spec`] / [`StmJob::parse`], [`result_line`] /
//! [`parse_result_line`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use engram::Durability;

use super::maps;
use super::onefile::OneFileMap;
use super::pmdk::PmdkMap;
use super::romulus::RomulusMap;
use super::tvar_rbtree::TVarRbTree;
use super::tvar_vmap::TVarVMap;
use super::wordheap::map::HEAP_BYTES;
use super::workload::{self, BenchError, Contents, Impl, Phase, RunFor, Structure, Tally, TxMap};
use crate::child::{self, ChildError, PoolFile};

/// First word of the line a child prints with its result.
pub const RESULT_TAG: &str = "ENGRAM-STM-RESULT";

/// One measurement to make.
#[derive(Clone, Debug, PartialEq)]
pub struct StmJob {
    /// The map.
    pub structure: Structure,
    /// Who implements it.
    pub imp: Impl,
    /// Lookup share, %.
    pub lookup_pct: u32,
    /// Worker threads.
    pub threads: u32,
    /// How long the measured phase lasts.
    pub run: RunFor,
    /// Keys are drawn below this.
    pub key_range: u64,
    /// Keys inserted before the clock starts.
    pub prefill: u64,
    /// The run's seed.
    pub seed: u64,
    /// Where the pool file goes.
    pub dir: PathBuf,
}

/// What one measurement found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StmOutcome {
    /// The threads' counts.
    pub tally: Tally,
    /// The map's contents at the end (after its invariant check).
    pub contents: Contents,
    /// Size of the pool file at the end (Engram pools only).
    pub pool_bytes: Option<u64>,
}

/// Why a measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum StmJobError {
    /// The benchmark itself failed (in this process).
    #[error("{0}")]
    Bench(#[from] BenchError),
    /// A spec could not be parsed.
    #[error("bad job spec {0:?}")]
    BadSpec(String),
    /// The child process gave no result.
    #[error("{0}")]
    Child(#[from] ChildError),
}

impl StmJob {
    /// The job as one `key=value,...` word.
    pub fn spec(&self) -> String {
        let (millis, ops) = match self.run {
            RunFor::Time(d) => (d.as_millis() as u64, 0),
            RunFor::Ops(n) => (0, n),
        };
        format!(
            "structure={},impl={},lookup={},threads={},millis={millis},ops={ops},keys={},prefill={},seed={}",
            self.structure.name(),
            self.imp.name(),
            self.lookup_pct,
            self.threads,
            self.key_range,
            self.prefill,
            self.seed
        )
    }

    /// Parses [`StmJob::spec`]'s output; the pool goes in `dir`.
    pub fn parse(spec: &str, dir: &Path) -> Result<Self, StmJobError> {
        let bad = || StmJobError::BadSpec(spec.to_string());
        let field = |name: &str| -> Result<&str, StmJobError> {
            spec.split(',').find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')).ok_or_else(bad)
        };
        let num = |name: &str| -> Result<u64, StmJobError> { field(name)?.parse().map_err(|_| bad()) };
        let (sname, iname) = (field("structure")?, field("impl")?);
        let structure = Structure::ALL.into_iter().find(|s| s.name() == sname).ok_or_else(bad)?;
        let imp = Impl::ALL.into_iter().find(|i| i.name() == iname).ok_or_else(bad)?;
        let (millis, ops) = (num("millis")?, num("ops")?);
        let run = if ops > 0 { RunFor::Ops(ops) } else { RunFor::Time(Duration::from_millis(millis)) };
        Ok(StmJob {
            structure,
            imp,
            lookup_pct: num("lookup")?.min(100) as u32,
            threads: num("threads")?.clamp(1, 1024) as u32,
            run,
            key_range: num("keys")?.max(1),
            prefill: num("prefill")?,
            seed: num("seed")?,
            dir: dir.to_path_buf(),
        })
    }

    /// The child's arguments.
    pub fn args(&self) -> Vec<String> {
        vec!["stm".into(), "--run-one".into(), self.spec(), "--dir".into(), self.dir.display().to_string()]
    }

    fn phase(&self) -> Phase {
        Phase { threads: self.threads, lookup_pct: self.lookup_pct, key_range: self.key_range, seed: self.seed, run: self.run }
    }

    fn pool_path(&self) -> PathBuf {
        let name = format!("engram-bench-stm-{}-{}-{}.pool", std::process::id(), self.structure.name(), self.imp.name());
        self.dir.join(name)
    }
}

/// Prefills `map`, runs the measured phase, checks the result.
fn measure<M: TxMap>(map: &M, pairs: &[(u64, u64)], phase: &Phase) -> Result<(Tally, Contents), BenchError> {
    workload::prefill(map, pairs)?;
    let tally = workload::drive(map, phase)?;
    Ok((tally, map.contents()?))
}

/// Runs `job` in this process.
pub fn execute(job: &StmJob) -> Result<StmOutcome, StmJobError> {
    if !job.imp.supports(job.structure) {
        return Err(BenchError::Invalid(format!("{} has no {}", job.imp.label(), job.structure.label())).into());
    }
    let file = PoolFile(job.pool_path());
    let pairs = workload::prefill_pairs(job.key_range, job.prefill, job.seed);
    let phase = job.phase();
    let durability = match job.imp {
        Impl::Pstm => Durability::Pmem,
        _ => Durability::Process,
    };
    let (tally, contents, pool_bytes) = match job.imp {
        Impl::Pstm | Impl::PstmProcess => maps::with_map(job.structure, &file.0, durability, &mut |m| {
            let tally = m.run(&pairs, &phase)?;
            Ok((tally, m.final_contents()?, Some(m.bytes())))
        })?,
        Impl::Tvar => {
            let (t, c) = match TVarVMap::new(job.structure) {
                Some(m) => measure(&m, &pairs, &phase)?,
                None => measure(&TVarRbTree::new(), &pairs, &phase)?,
            };
            (t, c, None)
        }
        Impl::Pmdk => {
            let map = PmdkMap::create(&file.0, job.structure, job.key_range).map_err(BenchError::from)?;
            let (t, c) = measure(&map, &pairs, &phase)?;
            (t, c, None)
        }
        Impl::Romulus => {
            let map = RomulusMap::create(&file.0, job.structure, HEAP_BYTES)?;
            let (t, c) = measure(&map, &pairs, &phase)?;
            (t, c, None)
        }
        Impl::Onefile => {
            let map = OneFileMap::create(&file.0, job.structure, HEAP_BYTES)?;
            let (t, c) = measure(&map, &pairs, &phase)?;
            (t, c, None)
        }
    };
    Ok(StmOutcome { tally, contents, pool_bytes })
}

/// The line a child prints for `o`.
pub fn result_line(o: &StmOutcome) -> String {
    let t = &o.tally;
    let mut line = format!(
        "{RESULT_TAG} nanos={} updates={} reads={} upd_flushes={} upd_fences={} ro_flushes={} ro_fences={} conflicts={} retries={} serial={} stale={} cpu_nanos={} len={} sum={}",
        t.nanos,
        t.updates,
        t.reads,
        t.upd_flushes,
        t.upd_fences,
        t.ro_flushes,
        t.ro_fences,
        t.conflicts,
        t.retries,
        t.serial,
        t.stale,
        t.cpu_nanos,
        o.contents.len,
        o.contents.sum
    );
    if let Some(b) = o.pool_bytes {
        line.push_str(&format!(" pool_bytes={b}"));
    }
    line
}

/// Parses a line printed by [`result_line`].
pub fn parse_result_line(line: &str) -> Option<StmOutcome> {
    let f = child::fields(line, RESULT_TAG)?;
    let g = |k: &str| f.get(k).and_then(|v| v.parse::<u64>().ok());
    let tally = Tally {
        nanos: g("nanos")?,
        updates: g("updates")?,
        reads: g("reads")?,
        upd_flushes: g("upd_flushes")?,
        upd_fences: g("upd_fences")?,
        ro_flushes: g("ro_flushes")?,
        ro_fences: g("ro_fences")?,
        conflicts: g("conflicts")?,
        retries: g("retries")?,
        serial: g("serial")?,
        stale: g("stale")?,
        cpu_nanos: g("cpu_nanos")?,
    };
    Some(StmOutcome { tally, contents: Contents { len: g("len")?, sum: g("sum")? }, pool_bytes: g("pool_bytes") })
}

/// Runs `job` in a child process of the binary `exe`.
pub fn spawn(exe: &Path, job: &StmJob) -> Result<StmOutcome, StmJobError> {
    Ok(child::run(exe, &job.args(), job.imp == Impl::Pmdk, parse_result_line)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_roundtrips() {
        let job = StmJob {
            structure: Structure::Hamt,
            imp: Impl::PstmProcess,
            lookup_pct: 90,
            threads: 8,
            run: RunFor::Time(Duration::from_millis(1500)),
            key_range: 100_000,
            prefill: 50_000,
            seed: 42,
            dir: PathBuf::from("/dev/shm"),
        };
        assert_eq!(StmJob::parse(&job.spec(), Path::new("/dev/shm")).unwrap(), job);
        let ops = StmJob { run: RunFor::Ops(77), ..job };
        assert_eq!(StmJob::parse(&ops.spec(), Path::new("/dev/shm")).unwrap(), ops);
        assert!(StmJob::parse("structure=nope", Path::new("/")).is_err());
    }

    #[test]
    fn result_line_roundtrips() {
        let o = StmOutcome {
            tally: Tally {
                nanos: 5,
                updates: 6,
                reads: 7,
                upd_flushes: 8,
                upd_fences: 9,
                ro_flushes: 1,
                ro_fences: 2,
                conflicts: 3,
                retries: 4,
                serial: 10,
                stale: 14,
                cpu_nanos: 13,
            },
            contents: Contents { len: 11, sum: u64::MAX },
            pool_bytes: Some(12),
        };
        assert_eq!(parse_result_line(&result_line(&o)), Some(o));
        let p = StmOutcome { pool_bytes: None, ..o };
        assert_eq!(parse_result_line(&result_line(&p)), Some(p));
    }
}
