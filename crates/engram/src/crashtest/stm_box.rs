//! Crash-consistency workload `stm-box`: `PTVar` values over 40 bytes,
//! boxed transparently (`stm/engine/boxed.rs`).
//!
//! Commit `k` sets the count to `k`, a 64-byte boxed array to `[k; 8]`,
//! on even `k` a 2,400-byte one to `[k; 300]`, and on `k % 3 == 0` makes a
//! new boxed variable holding `[k; 8]`, writes `[k + 1; 8]` to it in the
//! same transaction (the box it replaces is listed by the very record of
//! this commit, so it must not be reused before the next fence) and links
//! it from a root. Each commit frees the boxes it replaces (or defers
//! them). Every crash image must open, hold the state after exactly `count`
//! commits with every box whole (a box freed too early and reused shows as
//! a torn array or a lost commit), keep no unreachable object live, and
//! accept another commit.

use super::stm::{raw, Check, Dir};
use super::Harness;
use crate::error::{Error, Result};
use crate::stm::redo::{StmMeta, META_ROOT};
use crate::stm::{BoxCell, PTVar};
use crate::{PPtr, Pool};
use engram_model::Trace;

type Small = [u64; 8];
type Large = [u64; 300];

/// The workload's variables.
struct Boxes {
    count: PTVar<u64>,
    small: PTVar<Small>,
    large: PTVar<Large>,
    fresh: PTVar<PPtr<BoxCell<Small>>>,
}

/// (count, small's element, large's element, fresh's element or 0).
type State = (u64, u64, u64, u64);

impl Boxes {
    fn open(pool: &Pool) -> Result<Boxes> {
        Ok(Boxes {
            count: pool.root("box.count", || 0u64)?,
            small: pool.root("box.small", || [0u64; 8])?,
            large: pool.root("box.large", || [0u64; 300])?,
            fresh: pool.root("box.fresh", PPtr::null)?,
        })
    }

    fn find(pool: &Pool) -> Result<Boxes> {
        let d = Dir::of(pool)?;
        Ok(Boxes {
            count: d.var("box.count")?,
            small: PTVar::from_box_cell(d.ptr::<BoxCell<Small>>("box.small")?),
            large: PTVar::from_box_cell(d.ptr::<BoxCell<Large>>("box.large")?),
            fresh: d.var("box.fresh")?,
        })
    }

    /// Commit `k` (see the module comment).
    fn step(&self, pool: &Pool, k: u64) -> Result<()> {
        pool.atomically(|tx| {
            tx.write(&self.count, k)?;
            tx.write(&self.small, [k; 8])?;
            if k % 2 == 0 {
                tx.write(&self.large, [k; 300])?;
            }
            if k % 3 == 0 {
                let v = PTVar::<Small>::new(tx, [k; 8])?;
                tx.write(&v, [k + 1; 8])?;
                let cell = v.box_cell().ok_or_else(|| Error::corrupt("a 64-byte value is not boxed"))?;
                tx.write(&self.fresh, cell)?;
            }
            Ok(())
        })?;
        super::note_returned(k);
        Ok(())
    }

    /// What a plain region reads: each box must be one value throughout.
    fn read(&self, pool: &Pool) -> Result<State> {
        raw(pool, Dir::of(pool)?.ptr::<StmMeta>(META_ROOT)?, |r| {
            let elem = |c: PPtr<BoxCell<Small>>| -> Result<u64> { whole(&r.tx.read(r.cell(c, "a boxed variable")?)?) };
            let count = r.cell(self.count.cell(), "the count")?;
            let small = elem(self.small.box_cell().ok_or_else(|| Error::corrupt("unboxed"))?)?;
            let large = self.large.box_cell().ok_or_else(|| Error::corrupt("unboxed"))?;
            let large = whole(&r.tx.read(r.cell(large, "a boxed variable")?)?)?;
            let fresh = r.cell(self.fresh.cell(), "the fresh link")?;
            let fresh = if fresh.is_null() { 0 } else { elem(fresh)? };
            Ok((count, small, large, fresh))
        })
    }
}

/// The one value every element of `a` holds.
fn whole<const N: usize>(a: &[u64; N]) -> Result<u64> {
    match a.iter().find(|&&x| x != a[0]) {
        None => Ok(a[0]),
        Some(_) => Err(Error::corrupt(format!("a box holds a torn array ({:?} ...)", &a[..4.min(N)]))),
    }
}

/// The state after `k` commits.
fn model(k: u64) -> State {
    let last = |m: u64| (1..=k).rev().find(|i| i % m == 0).unwrap_or(0);
    let fresh = last(3);
    (k, k, last(2), if fresh == 0 { 0 } else { fresh + 1 })
}

fn check(pool: &Pool, max: u64, min: u64) -> Check<()> {
    let b = Boxes::find(pool).map_err(|e| e.to_string())?;
    let s = b.read(pool).map_err(|e| format!("reading the boxes: {e}"))?;
    if s != model(s.0) {
        return Err(format!("partial commit: {s:?}, after {} commits expected {:?}", s.0, model(s.0)));
    }
    if s.0 < min || s.0 > max {
        return Err(format!("count {} outside {min}..={max} (durable commits lost)", s.0));
    }
    // The recovery GC kept exactly the reachable objects.
    let live = pool.info().live_objects;
    let reachable = pool.check().map_err(|e| e.to_string())?.objects;
    if live != reachable {
        return Err(format!("{live} live objects, {reachable} reachable: boxes leaked"));
    }
    b.step(pool, max + 1).map_err(|e| format!("a commit after recovery: {e}"))
}

/// `stm-box`: boxed values replaced, freed, made and written in one commit.
pub(super) fn w_box(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.create(0)?;
    let b = Boxes::open(&pool)?;
    for k in 1..=2 {
        b.step(&pool, k)?;
    }
    // Traced from commit 3 (a box made and replaced in one commit) on.
    let n = 4 + h.settings.regions.clamp(1, 3);
    let trace = h.traced(pool, &tracer, |pool| (3..=n).try_for_each(|k| b.step(pool, k)))?;
    h.expect(move |pool, returned| check(pool, n, returned.max(2)));
    Ok(trace)
}
