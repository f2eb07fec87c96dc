//! The STM benchmark workload (Krauter et al. ICFP'21, after Yates & Scott)
//! and the driver that runs it on any map.
//!
//! - Keys are drawn from `0..key_range` (100,000); before the clock starts,
//!   `prefill` of them (50,000, a seeded random half) are inserted with
//!   value = key, in batches, untimed ([`prefill_pairs`]).
//! - Every operation is ONE transaction. With probability L it is a lookup;
//!   otherwise an insert (sets the key's value, replacing an old one) or a
//!   delete, equally likely ([`OpGen`]). Keys, the choice and the values
//!   come from xorshift64*, seeded per thread from the run's seed, so a
//!   run is reproducible up to the interleaving of its threads.
//! - [`drive`] starts the threads behind a barrier, lets them run for a
//!   fixed time (or, single-threaded, a fixed number of operations), and
//!   sums what each thread counted ([`Tally`]): committed transactions,
//!   split into update commits (the operation changed the map) and
//!   read-only ones (lookups, deletes of absent keys); per class the
//!   `engram::pmem::counters()` flush and fence deltas of the thread; and
//!   the `engram::stm::stats()` deltas (conflicts, retries, serial runs).
//!   Each thread first runs one untimed transaction that changes nothing,
//!   so per-thread set-up (Engram's redo log, a PMDK lane) is not measured.
//!
//! Keeps true: a worker's error stops every worker and is returned; the
//! wall time covers the whole measured phase, from the barrier to the last
//! thread's exit, so oversubscribed threads that are descheduled at the
//! stop signal lengthen it rather than being left out.

use std::hint::black_box;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use clap::ValueEnum;

use crate::workloads::XorShift64Star;

/// Keys are drawn below this.
pub const KEY_RANGE: u64 = 100_000;
/// Keys inserted before the clock starts.
pub const PREFILL: u64 = 50_000;
/// Chain heads of the hash tables (Engram's and PMDK's): load factor 0.76
/// at 50,000 keys.
pub const HASH_BUCKETS: u64 = 65_536;
/// The default seed of every run (fixed for comparability).
pub const SEED: u64 = 0x5EED_57A1_2021;
/// Operations per transaction of the untimed prefill.
pub const PREFILL_BATCH: usize = 64;

/// A benchmark structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum)]
pub enum Structure {
    /// Red-black tree (Engram `RbTree`; PMDK and TVar peers).
    Rbtree,
    /// Treap (Engram `Treap`).
    Treap,
    /// Chained hash table of 65,536 chains (Engram `HashTable`; PMDK
    /// peer).
    Hashtable,
    /// Hash array mapped trie (Engram `PMap`).
    Hamt,
}

impl Structure {
    /// Every structure, in report order.
    pub const ALL: [Structure; 4] = [Structure::Rbtree, Structure::Treap, Structure::Hashtable, Structure::Hamt];

    /// The name on the command line and in the CSV.
    pub fn name(self) -> &'static str {
        match self {
            Structure::Rbtree => "rbtree",
            Structure::Treap => "treap",
            Structure::Hashtable => "hashtable",
            Structure::Hamt => "hamt",
        }
    }

    /// The name in tables and plots.
    pub fn label(self) -> &'static str {
        match self {
            Structure::Rbtree => "red-black tree",
            Structure::Treap => "treap",
            Structure::Hashtable => "hash table",
            Structure::Hamt => "HAMT (PMap)",
        }
    }
}

/// An implementation of the benchmark maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum)]
pub enum Impl {
    /// Engram's PSTM collections on a `Durability::Pmem` pool.
    Pstm,
    /// The same code on a `Durability::Process` pool: no flush, no fence.
    PstmProcess,
    /// Volatile `engram::stm::TVar`s, no pool: the red-black tree in an
    /// arena, the treap and HAMT of `vcollections` (one `TVar` per field).
    Tvar,
    /// libpmemobj, one transaction per update under a global mutex.
    Pmdk,
    /// RomulusLog's algorithm (SPAA'18), reimplemented here (`romulus`).
    Romulus,
    /// OneFile-LF's algorithm (DSN'19), reimplemented here (`onefile`).
    Onefile,
}

impl Impl {
    /// Every implementation, in report order.
    pub const ALL: [Impl; 6] = [Impl::Pstm, Impl::PstmProcess, Impl::Tvar, Impl::Pmdk, Impl::Romulus, Impl::Onefile];

    /// The name on the command line and in the CSV.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Pstm => "pstm",
            Impl::PstmProcess => "pstm-process",
            Impl::Tvar => "tvar",
            Impl::Pmdk => "pmdk",
            Impl::Romulus => "romulus",
            Impl::Onefile => "onefile",
        }
    }

    /// The name in tables and plots.
    pub fn label(self) -> &'static str {
        match self {
            Impl::Pstm => "PSTM (pmem)",
            Impl::PstmProcess => "PSTM, no flush (process)",
            Impl::Tvar => "TVar tree (volatile)",
            Impl::Pmdk => "PMDK (global lock)",
            Impl::Romulus => "RomulusLog's algorithm, reimplemented here",
            Impl::Onefile => "OneFile-LF's algorithm, reimplemented here",
        }
    }

    /// Whether this implementation has `structure`.
    pub fn supports(self, structure: Structure) -> bool {
        match self {
            Impl::Pstm | Impl::PstmProcess => true,
            Impl::Tvar => structure != Structure::Hashtable,
            Impl::Pmdk | Impl::Romulus | Impl::Onefile => matches!(structure, Structure::Rbtree | Structure::Hashtable),
        }
    }
}

/// One operation, one transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Reads the key's value.
    Lookup(u64),
    /// Sets the key's value (replacing an old one).
    Insert(u64, u64),
    /// Removes the key if present.
    Delete(u64),
}

/// A thread's stream of operations.
#[derive(Clone, Debug)]
pub struct OpGen {
    rng: XorShift64Star,
    key_range: u64,
    lookup_pct: u64,
}

/// SplitMix64's finaliser: spreads a seed and a thread number apart.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn rng_for(seed: u64, stream: u64) -> XorShift64Star {
    let s = mix64(seed ^ mix64(stream.wrapping_add(1)));
    XorShift64Star::new(NonZeroU64::new(s).unwrap_or(NonZeroU64::MIN))
}

impl OpGen {
    /// Thread `thread`'s operations: lookups with probability
    /// `lookup_pct` %, keys below `key_range`.
    pub fn new(seed: u64, thread: u32, key_range: u64, lookup_pct: u32) -> Self {
        OpGen { rng: rng_for(seed, thread as u64), key_range: key_range.max(1), lookup_pct: lookup_pct.min(100) as u64 }
    }

    /// The next operation.
    pub fn next_op(&mut self) -> Op {
        let r = self.rng.next_u64();
        let key = self.rng.next_u64() % self.key_range;
        if r % 100 < self.lookup_pct {
            Op::Lookup(key)
        } else if (r >> 32) & 1 == 0 {
            Op::Insert(key, r)
        } else {
            Op::Delete(key)
        }
    }
}

/// The untimed prefill: `n` distinct keys below `key_range` in a seeded
/// random order (a partial Fisher–Yates shuffle), each with value = key.
pub fn prefill_pairs(key_range: u64, n: u64, seed: u64) -> Vec<(u64, u64)> {
    let mut keys: Vec<u64> = (0..key_range).collect();
    let n = n.min(key_range) as usize;
    let mut rng = rng_for(seed, u64::MAX);
    for i in 0..n {
        let j = i + (rng.next_u64() % (keys.len() - i) as u64) as usize;
        keys.swap(i, j);
    }
    keys.truncate(n);
    keys.into_iter().map(|k| (k, k)).collect()
}

/// What a map holds, in a form every implementation can compute: the
/// number of entries and an order-independent sum over them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Contents {
    /// Entries.
    pub len: u64,
    /// Wrapping sum of [`entry_sum`] over the entries.
    pub sum: u64,
}

/// One entry's share of [`Contents::sum`] (mirrored by `entry_sum` in
/// `peers/pmdk_stm_peers.c`).
pub fn entry_sum(key: u64, value: u64) -> u64 {
    key.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ value
}

impl Contents {
    /// Adds one entry.
    pub fn add(&mut self, key: u64, value: u64) {
        self.len += 1;
        self.sum = self.sum.wrapping_add(entry_sum(key, value));
    }
}

/// Why a benchmark run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// An Engram operation failed.
    #[error("engram: {0}")]
    Engram(#[from] engram::Error),
    /// A PMDK peer failed.
    #[error("pmdk: {0}")]
    Pmdk(#[from] super::pmdk::PmdkError),
    /// The RomulusLog peer failed.
    #[error("romulus: {0}")]
    Romulus(#[from] super::romulus::RomError),
    /// The OneFile-LF peer failed.
    #[error("onefile: {0}")]
    Onefile(#[from] super::onefile::OfError),
    /// The parameters do not go together.
    #[error("invalid benchmark parameters: {0}")]
    Invalid(String),
    /// A structure failed its invariant check.
    #[error("{0}")]
    Broken(String),
    /// A worker thread panicked.
    #[error("a benchmark thread panicked")]
    Panicked,
}

/// A map the driver can run: every call is one transaction.
pub trait TxMap: Sync {
    /// Per-thread state (a free list, say).
    type Local: Default;

    /// Runs `op` as one transaction; true if it changed the map.
    fn apply(&self, local: &mut Self::Local, op: Op) -> Result<bool, BenchError>;

    /// Inserts `pairs` in one transaction (prefill; not timed).
    fn insert_batch(&self, pairs: &[(u64, u64)]) -> Result<(), BenchError>;

    /// Checks the structure's invariants and reports what it holds.
    fn contents(&self) -> Result<Contents, BenchError>;
}

/// Inserts `pairs` in batches of [`PREFILL_BATCH`].
pub fn prefill<M: TxMap>(map: &M, pairs: &[(u64, u64)]) -> Result<(), BenchError> {
    pairs.chunks(PREFILL_BATCH).try_for_each(|c| map.insert_batch(c))
}

/// How long the measured phase lasts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RunFor {
    /// Until this much time has passed (any number of threads).
    Time(Duration),
    /// Exactly this many operations (one thread only: the agreement check).
    Ops(u64),
}

/// What the threads of one run did, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Wall time of the measured phase, ns.
    pub nanos: u64,
    /// Commits that changed the map.
    pub updates: u64,
    /// Commits that did not (lookups, deletes of absent keys).
    pub reads: u64,
    /// Flushes (cache lines) in update commits.
    pub upd_flushes: u64,
    /// Fences in update commits.
    pub upd_fences: u64,
    /// Flushes in read-only commits.
    pub ro_flushes: u64,
    /// Fences in read-only commits.
    pub ro_fences: u64,
    /// Attempts aborted on a conflict and run again.
    pub conflicts: u64,
    /// Attempts that waited in `retry` (none expected here).
    pub retries: u64,
    /// Attempts run serially by the contention manager.
    pub serial: u64,
    /// Read-only attempts run again because the snapshot they reused was
    /// older than a variable they read (`engram::stm::StmStats::stale`).
    pub stale: u64,
    /// CPU time the worker threads spent in the measured phase, ns (from
    /// /proc/thread-self/schedstat; 0 where unavailable). Unlike the wall
    /// time it does not count time a thread waited for a CPU that other
    /// work on the machine held.
    pub cpu_nanos: u64,
}

impl Tally {
    /// Committed transactions.
    pub fn commits(&self) -> u64 {
        self.updates + self.reads
    }

    /// Adds `o`'s counts and times (a run's, or another thread's) to
    /// these. Runs' wall times add up; the threads of one run share its
    /// wall time, which the run sets after summing them.
    pub fn add(&mut self, o: &Tally) {
        self.nanos += o.nanos;
        self.updates += o.updates;
        self.reads += o.reads;
        self.upd_flushes += o.upd_flushes;
        self.upd_fences += o.upd_fences;
        self.ro_flushes += o.ro_flushes;
        self.ro_fences += o.ro_fences;
        self.conflicts += o.conflicts;
        self.retries += o.retries;
        self.serial += o.serial;
        self.stale += o.stale;
        self.cpu_nanos += o.cpu_nanos;
    }
}

/// The calling thread's CPU time so far, ns (the first field of
/// /proc/thread-self/schedstat), if the kernel reports it.
pub fn thread_cpu_nanos() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}

/// The parameters of one measured phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Phase {
    /// Worker threads.
    pub threads: u32,
    /// Lookup probability, %.
    pub lookup_pct: u32,
    /// Keys are drawn below this.
    pub key_range: u64,
    /// The run's seed.
    pub seed: u64,
    /// How long it lasts.
    pub run: RunFor,
}

/// One worker: operations until told to stop (or `limit` of them).
fn worker<M: TxMap>(map: &M, phase: &Phase, thread: u32, start: &Barrier, stop: &AtomicBool) -> Result<Tally, BenchError> {
    let mut ops = OpGen::new(phase.seed, thread, phase.key_range, phase.lookup_pct);
    let limit = match phase.run {
        RunFor::Ops(n) => n,
        RunFor::Time(_) => u64::MAX,
    };
    let mut local = M::Local::default();
    let mut t = Tally::default();
    // Warm-up, untimed: one transaction that changes nothing (a delete of a
    // key outside the range), so that per-thread set-up — Engram allocating
    // this thread's redo log in the pool (64 KiB, flushed and fenced),
    // libpmemobj binding a lane — is not counted as part of a commit.
    if let Err(e) = map.apply(&mut local, Op::Delete(u64::MAX - thread as u64)) {
        stop.store(true, Ordering::Relaxed);
        start.wait();
        return Err(e);
    }
    start.wait();
    let cpu0 = thread_cpu_nanos();
    let s0 = engram::stm::stats();
    let mut done = 0;
    while done < limit && !stop.load(Ordering::Relaxed) {
        let op = ops.next_op();
        let c0 = engram::pmem::counters();
        let changed = match map.apply(&mut local, op) {
            Ok(c) => c,
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                return Err(e);
            }
        };
        let c1 = engram::pmem::counters();
        let (flushes, fences) = (c1.flushes - c0.flushes, c1.fences - c0.fences);
        if changed {
            (t.updates, t.upd_flushes, t.upd_fences) = (t.updates + 1, t.upd_flushes + flushes, t.upd_fences + fences);
        } else {
            (t.reads, t.ro_flushes, t.ro_fences) = (t.reads + 1, t.ro_flushes + flushes, t.ro_fences + fences);
        }
        done += 1;
    }
    let s1 = engram::stm::stats();
    t.conflicts = s1.conflicts - s0.conflicts;
    t.retries = s1.retries - s0.retries;
    t.serial = s1.serial - s0.serial;
    t.stale = s1.stale - s0.stale;
    t.cpu_nanos = match (cpu0, thread_cpu_nanos()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => 0,
    };
    black_box(&local);
    Ok(t)
}

/// Runs the measured phase on `map` and sums the threads' tallies.
pub fn drive<M: TxMap>(map: &M, phase: &Phase) -> Result<Tally, BenchError> {
    if phase.threads == 0 || (matches!(phase.run, RunFor::Ops(_)) && phase.threads != 1) {
        return Err(BenchError::Invalid(format!("{} threads for {:?}", phase.threads, phase.run)));
    }
    let start = Barrier::new(phase.threads as usize + 1);
    let stop = AtomicBool::new(false);
    let (start, stop) = (&start, &stop);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..phase.threads).map(|i| s.spawn(move || worker(map, phase, i, start, stop))).collect();
        start.wait();
        let t0 = Instant::now();
        if let RunFor::Time(d) = phase.run {
            // Sleep in slices, so that a failed worker ends the run early.
            while t0.elapsed() < d && !stop.load(Ordering::Relaxed) {
                std::thread::sleep((d - t0.elapsed().min(d)).min(Duration::from_millis(20)));
            }
            stop.store(true, Ordering::Relaxed);
        }
        let mut total = Tally::default();
        let mut first_err = None;
        for h in handles {
            match h.join() {
                Ok(Ok(t)) => total.add(&t),
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(_) => first_err = first_err.or(Some(BenchError::Panicked)),
            }
        }
        total.nanos = t0.elapsed().as_nanos() as u64;
        first_err.map_or(Ok(total), Err)
    })
}

/// The contents a `BTreeMap` has after the prefill and `ops` operations of
/// thread 0's stream: what every implementation must end with in the
/// single-threaded agreement run.
pub fn model_contents(key_range: u64, prefill_n: u64, lookup_pct: u32, seed: u64, ops: u64) -> Contents {
    let mut m: std::collections::BTreeMap<u64, u64> = prefill_pairs(key_range, prefill_n, seed).into_iter().collect();
    let mut g = OpGen::new(seed, 0, key_range, lookup_pct);
    for _ in 0..ops {
        match g.next_op() {
            Op::Lookup(k) => {
                black_box(m.get(&k));
            }
            Op::Insert(k, v) => {
                m.insert(k, v);
            }
            Op::Delete(k) => {
                m.remove(&k);
            }
        }
    }
    let mut c = Contents::default();
    for (&k, &v) in &m {
        c.add(k, v);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_follows_the_lookup_share() {
        let mut g = OpGen::new(SEED, 0, KEY_RANGE, 90);
        let (mut look, mut ins, mut del) = (0, 0, 0);
        for _ in 0..100_000 {
            match g.next_op() {
                Op::Lookup(k) | Op::Delete(k) | Op::Insert(k, _) if k >= KEY_RANGE => panic!("key {k}"),
                Op::Lookup(_) => look += 1,
                Op::Insert(..) => ins += 1,
                Op::Delete(_) => del += 1,
            }
        }
        assert!((89_000..91_000).contains(&look), "{look}");
        assert!((4_500..5_500).contains(&ins) && (4_500..5_500).contains(&del), "{ins} {del}");
    }

    #[test]
    fn prefill_is_distinct_and_reproducible() {
        let a = prefill_pairs(1000, 500, 7);
        let mut keys: Vec<u64> = a.iter().map(|p| p.0).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 500);
        assert_eq!(a, prefill_pairs(1000, 500, 7));
        assert_ne!(a, prefill_pairs(1000, 500, 8));
    }

    #[test]
    fn stm_stats_count_a_forced_conflict() {
        use engram::stm::{atomically, TVar};
        let (a, b) = (TVar::new(0u64), TVar::new(0u64));
        let before = engram::stm::stats();
        let mut attempts = 0;
        atomically(|tx| {
            attempts += 1;
            let x = tx.read(&a)?;
            if attempts == 1 {
                // Another thread commits a write to `a` after we read it:
                // this attempt must fail validation at commit.
                let a2 = a.clone();
                std::thread::spawn(move || atomically(|tx| tx.write(&a2, 7)).unwrap()).join().unwrap();
            }
            tx.write(&b, x + 1)
        })
        .unwrap();
        let after = engram::stm::stats();
        assert_eq!((attempts, after.conflicts - before.conflicts), (2, 1));
        assert_eq!(b.load(), 8);
    }

    #[test]
    fn threads_get_different_streams() {
        let a: Vec<Op> = (0..8).scan(OpGen::new(1, 0, 100, 50), |g, _| Some(g.next_op())).collect();
        let b: Vec<Op> = (0..8).scan(OpGen::new(1, 1, 100, 50), |g, _| Some(g.next_op())).collect();
        assert_ne!(a, b);
    }
}
