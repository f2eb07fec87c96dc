//! The Engram implementations of the three workloads, written to do what the
//! C peers in `peers/pmdk_peers.c` do, region for transaction:
//!
//! - **binary-trees**: every tree is built in ONE region (`tx.alloc` per
//!   node, bottom-up) and freed in ONE region (`tx.free` per node); the
//!   long-lived tree is built in a region that also links it from the root
//!   `long_lived`, and freed in a region that removes that root. Node counts
//!   are read in read-only regions (which issue no flush and no fence), as
//!   the peer reads them outside any transaction.
//! - **n-body**: the five bodies live in a `PArray<Body>` linked from the
//!   root `bodies`; one region allocates and initialises it, then every step
//!   is one region doing `read_slice` → `advance` → `write_slice` (one logged
//!   range, like the peer's `pmemobj_tx_add_range` of the whole array).
//! - **sps**: a `PArray<u64>` with `a[i] = i` is built and committed before
//!   the clock starts; the timed part is ONE region doing all the swaps with
//!   an array view's `swap` (`Tx::array`; each element logged the first
//!   time it changes, both elements of a swap under one fence). The peer
//!   fences once per `pmemobj_tx_add_range`, two per new swap: libpmemobj
//!   has no call that adds several ranges at once. With
//!   `ENGRAM_BENCH_SPS=sets` each swap is two `get`s and two `set`s instead
//!   (one fence per new element, as the peer), to show what `swap` gains.
//!
//! What this module keeps true:
//!
//! - Each function creates its pool fresh at `path` (overwriting any old
//!   file), sized up front like the peer's pool, and closes it before
//!   returning; the file stays on disk for the caller to remove.
//! - [`EngramRun::nanos`] covers what the peer's clock covers and nothing
//!   else: never pool creation or close; for sps only the swapping region.
//! - [`EngramRun::flushes`] and [`EngramRun::fences`] are the calling
//!   thread's `engram::pmem::counters()` deltas over the same timed part,
//!   and [`EngramRun::regions`] counts the regions in it that wrote.
//!
//! Crash behaviour: these are benchmarks over throw-away pools; every region
//! is an ordinary failure-atomic region, so a crash leaves the last committed
//! state and any tree being built is garbage the recovery GC reclaims.

use engram::{CreateOptions, Durability, Error, PArray, PPtr, Persistent, Pool, Tx};
use std::num::NonZeroU64;
use std::path::Path;

use crate::peers::{binary_trees_pool_bytes, nbody_pool_bytes, sps_pool_bytes};
use crate::workloads::{
    self, binary_trees_iterations, binary_trees_max_depth, Body, XorShift64Star, BINARY_TREES_MIN_DEPTH, NBODIES, NBODY_DT,
};

/// Layout name of every benchmark pool.
const LAYOUT: &str = "engram_bench";

/// A result, the time it took and what persisting it cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngramRun<T> {
    /// The workload's result (node count, energy or checksum).
    pub value: T,
    /// Elapsed time of the measured part, in nanoseconds.
    pub nanos: u64,
    /// Cache lines (pmem) or ranges (msync) flushed in the measured part.
    pub flushes: u64,
    /// Fences issued in the measured part.
    pub fences: u64,
    /// Regions in the measured part that wrote to the pool.
    pub regions: u64,
}

/// Clock and persistence counters from the start of a measured part.
struct Meter {
    start: crate::clock::Stopwatch,
    counters: engram::pmem::Counters,
}

impl Meter {
    fn start() -> Self {
        Meter { counters: engram::pmem::counters(), start: crate::clock::Stopwatch::start() }
    }

    fn stop<T>(self, value: T, regions: u64) -> EngramRun<T> {
        let nanos = self.start.elapsed_ns();
        let now = engram::pmem::counters();
        EngramRun { value, nanos, flushes: now.flushes - self.counters.flushes, fences: now.fences - self.counters.fences, regions }
    }
}

/// Creates a fresh pool of `bytes` at `path` in `durability` mode.
fn create_pool(path: &Path, bytes: u64, durability: Durability) -> Result<Pool, Error> {
    let opts = CreateOptions::new(LAYOUT).durability(durability).initial_size(bytes).overwrite();
    Pool::create(path, opts)
}

// ---------------------------------------------------------------------------
// binary-trees
// ---------------------------------------------------------------------------

/// A tree node; a leaf has both children null.
#[derive(Clone, Copy, Debug, Persistent)]
#[engram(name = "engram_bench::Node")]
struct Node {
    left: PPtr<Node>,
    right: PPtr<Node>,
}

/// Builds a complete tree of `depth` bottom-up, like CLBG.
fn build(tx: &Tx<'_>, depth: u32) -> Result<PPtr<Node>, Error> {
    let (left, right) = if depth > 0 { (build(tx, depth - 1)?, build(tx, depth - 1)?) } else { (PPtr::null(), PPtr::null()) };
    tx.alloc(Node { left, right })
}

/// Number of nodes of `tree`.
fn check(tx: &Tx<'_>, tree: PPtr<Node>) -> Result<u64, Error> {
    let n = tx.read(tree)?;
    if n.left.is_null() {
        return Ok(1);
    }
    Ok(1 + check(tx, n.left)? + check(tx, n.right)?)
}

/// Frees every node of `tree` when the region commits.
fn free_tree(tx: &Tx<'_>, tree: PPtr<Node>) -> Result<(), Error> {
    let n = tx.read(tree)?;
    if !n.left.is_null() {
        free_tree(tx, n.left)?;
        free_tree(tx, n.right)?;
    }
    tx.free(tree)
}

/// Builds, checks and frees one tree of `depth`: two writing regions.
fn one_tree(pool: &Pool, depth: u32) -> Result<u64, Error> {
    let tree = pool.txn(|tx| build(tx, depth))?;
    let count = pool.txn(|tx| check(tx, tree))?;
    pool.txn(|tx| free_tree(tx, tree))?;
    Ok(count)
}

/// The CLBG program over an open pool: (sum of all checks, writing regions).
fn bt_run(pool: &Pool, max_depth: u32) -> Result<(u64, u64), Error> {
    let mut count = one_tree(pool, max_depth + 1)?;
    let mut regions = 2;
    pool.txn(|tx| {
        let tree = build(tx, max_depth)?;
        tx.set_root("long_lived", tree)
    })?;
    regions += 1;
    for d in (BINARY_TREES_MIN_DEPTH..=max_depth).step_by(2) {
        for _ in 0..binary_trees_iterations(max_depth, d) {
            count += one_tree(pool, d)?;
            regions += 2;
        }
    }
    pool.txn(|tx| {
        let tree = tx.root::<Node>("long_lived")?.ok_or_else(|| Error::InvalidArgument { what: "long_lived root missing".into() })?;
        count += check(tx, tree)?;
        tx.remove_root("long_lived")?;
        free_tree(tx, tree)
    })?;
    Ok((count, regions + 1))
}

/// binary-trees in a fresh pool at `path`. `depth` is clamped as CLBG does
/// ([`binary_trees_max_depth`]); the value is the sum of all node counts.
pub fn binary_trees(path: &Path, depth: u32, durability: Durability) -> Result<EngramRun<u64>, Error> {
    let max_depth = binary_trees_max_depth(depth);
    let pool = create_pool(path, binary_trees_pool_bytes(max_depth), durability)?;
    let meter = Meter::start();
    let (count, regions) = bt_run(&pool, max_depth)?;
    let run = meter.stop(count, regions);
    pool.close()?;
    Ok(run)
}

// ---------------------------------------------------------------------------
// n-body
// ---------------------------------------------------------------------------

const NO_BODY: Body = Body { x: 0.0, y: 0.0, z: 0.0, vx: 0.0, vy: 0.0, vz: 0.0, mass: 0.0 };

/// One region: allocates the bodies, writes the initial state, links them.
fn nbody_init(pool: &Pool) -> Result<PArray<Body>, Error> {
    pool.txn(|tx| {
        let bodies = tx.alloc_array::<Body>(NBODIES as u64)?;
        tx.write_slice(bodies, 0, &workloads::nbody_initial())?;
        tx.set_root_array("bodies", bodies)?;
        Ok(bodies)
    })
}

/// One region: the whole array is read, advanced once and written back.
fn nbody_step(pool: &Pool, bodies: PArray<Body>) -> Result<(), Error> {
    pool.txn(|tx| {
        let mut b = [NO_BODY; NBODIES];
        tx.read_slice(bodies, 0, &mut b)?;
        workloads::advance(&mut b, NBODY_DT);
        tx.write_slice(bodies, 0, &b)
    })
}

fn nbody_energy(pool: &Pool, bodies: PArray<Body>) -> Result<f64, Error> {
    pool.txn(|tx| {
        let mut b = [NO_BODY; NBODIES];
        tx.read_slice(bodies, 0, &mut b)?;
        Ok(workloads::energy(&b))
    })
}

/// n-body for `steps` steps with one region per step, in a fresh pool at
/// `path`; the value is the final energy. Timed like the peer: from before
/// the bodies are allocated to after the energy is read.
pub fn nbody(path: &Path, steps: u64, durability: Durability) -> Result<EngramRun<f64>, Error> {
    let pool = create_pool(path, nbody_pool_bytes(), durability)?;
    let meter = Meter::start();
    let bodies = nbody_init(&pool)?;
    for _ in 0..steps {
        nbody_step(&pool, bodies)?;
    }
    let energy = nbody_energy(&pool, bodies)?;
    let run = meter.stop(energy, steps + 1);
    pool.close()?;
    Ok(run)
}

// ---------------------------------------------------------------------------
// sps
// ---------------------------------------------------------------------------

/// Elements copied per `write_slice`/`read_slice` when filling or summing.
const SPS_CHUNK: usize = 1 << 16;

/// One region (untimed): an array of `n` with `a[i] = i`, linked from a root.
fn sps_setup(pool: &Pool, n: u64) -> Result<PArray<u64>, Error> {
    pool.txn(|tx| {
        let a = tx.alloc_array::<u64>(n)?;
        let mut chunk = Vec::with_capacity(SPS_CHUNK);
        let mut start = 0;
        while start < n {
            let end = (start + SPS_CHUNK as u64).min(n);
            chunk.clear();
            chunk.extend(start..end);
            tx.write_slice(a, start, &chunk)?;
            start = end;
        }
        tx.set_root_array("array", a)?;
        Ok(a)
    })
}

/// Whether sps swaps by two `get`s and two `set`s (`ENGRAM_BENCH_SPS=sets`)
/// rather than by `ArrayView::swap`.
fn sps_by_sets() -> bool {
    std::env::var("ENGRAM_BENCH_SPS").is_ok_and(|v| v == "sets")
}

/// The timed part: one region of `swaps` swaps, both elements logged,
/// through an array view (`Tx::array`: the header checked once, like the
/// peer's one `pmemobj_direct`).
fn sps_swaps(pool: &Pool, a: PArray<u64>, n: u64, swaps: u64, seed: NonZeroU64, by_sets: bool) -> Result<(), Error> {
    pool.txn(|tx| {
        let v = tx.array(a)?;
        let mut rng = XorShift64Star::new(seed);
        for _ in 0..swaps {
            let i = rng.next_u64() % n;
            let j = rng.next_u64() % n;
            if by_sets {
                let (vi, vj) = (v.get(i)?, v.get(j)?);
                v.set(i, vj)?;
                v.set(j, vi)?;
            } else {
                v.swap(i, j)?;
            }
        }
        Ok(())
    })
}

/// The sps checksum of the array, read in chunks (untimed).
fn sps_sum(pool: &Pool, a: PArray<u64>, n: u64) -> Result<u64, Error> {
    pool.txn(|tx| {
        let mut all = vec![0u64; n as usize];
        for (k, chunk) in all.chunks_mut(SPS_CHUNK).enumerate() {
            tx.read_slice(a, (k * SPS_CHUNK) as u64, chunk)?;
        }
        Ok(workloads::sps_checksum(&all))
    })
}

/// sps: an array of `n` u64 (`a[i] = i`) in a fresh pool at `path`, then
/// ONE region of `swaps` random swaps driven by xorshift64* from `seed`.
/// The value is [`workloads::sps_checksum`]; the time covers only the
/// swapping region.
pub fn sps(path: &Path, n: u64, swaps: u64, seed: NonZeroU64, durability: Durability) -> Result<EngramRun<u64>, Error> {
    if n == 0 {
        return Err(Error::InvalidArgument { what: "sps needs n > 0".into() });
    }
    let pool = create_pool(path, sps_pool_bytes(n, swaps), durability)?;
    let a = sps_setup(&pool, n)?;
    let by_sets = sps_by_sets();
    let meter = Meter::start();
    sps_swaps(&pool, a, n, swaps, seed, by_sets)?;
    let mut run = meter.stop(0, 1);
    run.value = sps_sum(&pool, a, n)?;
    pool.close()?;
    Ok(run)
}
