//! Crash-consistency workload `mt-stm-young`: an allocating commit's
//! record carries its new objects, written back whole at recovery
//! (`stm/engine/young.rs`); a later change to such an object by another
//! thread must never be undone by that write-back.
//!
//! Thread A (the harness thread) makes a variable M and links it (commit
//! 1), then stays idle: its record stays in its log. Thread B then sets M
//! to 1 (commit 2) and writes another variable twice (commits 3 and 4); its
//! commit 4 overwrites the half holding commit 2's record, so M = 1 is then
//! only in place. Before that, B must clear A's record (the helping rule),
//! or recovery would write M's initial 0 back over it. Every image must
//! hold the state after exactly `n` commits, `n` at least the commits that
//! had returned, and accept another commit. The planted bugs
//! `stm.young_not_helped` (no helping) and `stm.young_span_lost` (A's
//! record registered without its object's span, so B's overwritten record
//! 2 is not found to have written into it) are caught: M reads 0 after
//! commit 4.

use super::stm::{raw, Check, Dir};
use super::Harness;
use crate::error::{Error, Result};
use crate::failpoint;
use crate::stm::redo::{StmMeta, META_ROOT};
use crate::stm::{PTVar, VarCell};
use crate::{PPtr, Pool};
use engram_model::Trace;

type Link = PPtr<VarCell<u64>>;

struct Vars {
    n: PTVar<u64>,
    link: PTVar<Link>,
    y: PTVar<u64>,
    warm: PTVar<u64>,
    /// Written by A alone, in a cell of a cache line of its own (a 40-byte
    /// value): only A's flush, and a helper's, ever cover it.
    a: PTVar<[u64; 5]>,
}

impl Vars {
    fn open(pool: &Pool) -> Result<Vars> {
        Ok(Vars {
            n: pool.root("young.n", || 0u64)?,
            link: pool.root("young.link", PPtr::null)?,
            y: pool.root("young.y", || 0u64)?,
            warm: pool.root("young.warm", || 0u64)?,
            a: pool.root("young.a", || [0u64; 5])?,
        })
    }

    fn find(pool: &Pool) -> Result<Vars> {
        let d = Dir::of(pool)?;
        Ok(Vars {
            n: d.var("young.n")?,
            link: d.var("young.link")?,
            y: d.var("young.y")?,
            warm: d.var("young.warm")?,
            a: d.var("young.a")?,
        })
    }

    /// Commit 1 (thread A): M made, holding 0, and linked.
    fn make(&self, pool: &Pool) -> Result<()> {
        pool.atomically(|tx| {
            let m = PTVar::new(tx, 0u64)?;
            tx.write(&self.link, m.cell())?;
            tx.write(&self.a, [1; 5])?;
            tx.write(&self.n, 1)
        })
    }

    /// Commit `k` in 2..=4 (thread B).
    fn step(&self, pool: &Pool, k: u64) -> Result<()> {
        pool.atomically(|tx| {
            if k == 2 {
                let m = tx.read(&self.link)?;
                tx.write(&PTVar::<u64>::from_cell(m), 1)?;
            } else {
                tx.write(&self.y, k - 1)?;
            }
            tx.write(&self.n, k)
        })
    }

    /// (n, M or none, y, a's element) as a plain region reads them.
    fn read(&self, pool: &Pool) -> Result<State> {
        raw(pool, Dir::of(pool)?.ptr::<StmMeta>(META_ROOT)?, |r| {
            let link = r.cell(self.link.cell(), "the link")?;
            let m = if link.is_null() { None } else { Some(r.cell(link, "the new variable")?) };
            let a = r.cell(self.a.cell(), "a")?;
            if a.iter().any(|&x| x != a[0]) {
                return Err(Error::corrupt(format!("a torn value {a:?}")));
            }
            Ok((r.cell(self.n.cell(), "the count")?, m, r.cell(self.y.cell(), "y")?, a[0]))
        })
    }
}

/// (n, M or none, y, a's element).
type State = (u64, Option<u64>, u64, u64);

/// The state after `n` commits.
fn model(n: u64) -> State {
    let m = match n {
        0 => None,
        1 => Some(0),
        _ => Some(1),
    };
    (n, m, if n >= 3 { n - 1 } else { 0 }, (n >= 1) as u64)
}

fn check(pool: &Pool, returned: u64) -> Check<()> {
    let v = Vars::find(pool).map_err(|e| e.to_string())?;
    let s = v.read(pool).map_err(|e| format!("reading the variables: {e}"))?;
    let want = model(s.0);
    if s != want {
        return Err(format!(
            "after {} commits: {s:?}, expected {want:?} (an object's initial bytes written back over a later change?)",
            s.0
        ));
    }
    if s.0 < returned || s.0 > 4 {
        return Err(format!("durable commits lost: {} visible, {returned} had returned", s.0));
    }
    pool.atomically(|tx| tx.write(&v.warm, 7)).map_err(|e| format!("a commit after recovery: {e}"))
}

/// `mt-stm-young`: thread A's new object changed by thread B (see above).
pub(super) fn w_young(h: &Harness) -> Result<Trace> {
    young(h, false)
}

/// `mt-stm-young-gc`: as `mt-stm-young`, but after commit 2 thread B runs
/// an online GC, whose quiesce clears every record: A's record (with the
/// new object) must be cleared durably before B's (planted fault: the
/// fence "an STM record with new objects cleared before later records"
/// dropped, caught as M = 0 after commit 2).
pub(super) fn w_young_gc(h: &Harness) -> Result<Trace> {
    young(h, true)
}

/// The harness thread is B (it commits and helps, so the fault switches it
/// reaches are counted); the spawned thread is A, alive until B is done.
fn young(h: &Harness, gc: bool) -> Result<Trace> {
    let (pool, tracer) = h.create(0)?;
    let vars = Vars::open(&pool)?;
    let (ready, go, made, done) =
        (std::sync::Barrier::new(2), std::sync::Barrier::new(2), std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    let switches = failpoint::switches();
    let r: Result<Option<(usize, u64)>> = std::thread::scope(|s| {
        let (pool, vars, tracer, ready, go, made, done, switches) = (&pool, &vars, &tracer, &ready, &go, &made, &done, &switches);
        let a = s.spawn(move || {
            failpoint::adopt_switches(switches);
            // A commit before tracing: this thread's redo log exists.
            let warm = pool.atomically(|tx| tx.write(&vars.warm, 1));
            ready.wait();
            go.wait();
            let r = warm.and_then(|_| vars.make(pool)).map(|_| (tracer.position(), 1));
            made.wait();
            done.wait(); // alive (its log not adopted by B) until B is done
            r
        });
        let warm = pool.atomically(|tx| tx.write(&vars.warm, 2));
        ready.wait();
        tracer.start();
        go.wait();
        made.wait();
        let last = if gc { 2 } else { 4 };
        let b = warm.and_then(|_| {
            (2..=last).try_for_each(|k| {
                vars.step(pool, k)?;
                super::note_returned(k);
                Ok(())
            })?;
            if gc {
                pool.collect()?;
            }
            Ok(())
        });
        done.wait();
        let a = a.join().unwrap_or_else(|_| Err(Error::corrupt("a workload thread panicked")));
        b.and(a.map(Some))
    });
    let trace = tracer.stop();
    pool.simulate_crash();
    if let Some((at, n)) = r? {
        super::note_returned_at(at, n);
    }
    h.expect(check);
    Ok(trace)
}
