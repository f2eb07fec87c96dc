//! Crash-consistency workloads of the persistent STM (`stm-*`).
//!
//! Each workload runs single-threaded STM transactions whose effects a plain
//! Rust model computes independently, and records the model's state after
//! every commit. The traced pool is cross-checked against the model after
//! every `atomically` (read by a plain region that only reads: no store, no
//! flush, no fence, nothing in the trace). Every crash image must then
//!
//! - open (recovery replays retained redo records) and pass `Pool::check`;
//! - hold no variable whose lock word is still locked in the new epoch;
//! - equal the model after exactly `k` commits for some `k` at least the
//!   number of commits known durable when tracing began (all or nothing:
//!   the bank's per-account `ops` counters, copied note, snapshot vector,
//!   boxed pair and large vector make a half-applied commit visible);
//! - accept a new update transaction.
//!
//! The workloads: `stm-bank` (transfers writing `u64`s plus copy-on-commit
//! `String`, `Vec<u64>`, `Box<(u64, u64)>` and, every fourth, a vector larger
//! than a span, so the commit allocates fresh spans; one in three is an
//! `or_else` whose first branch writes and then retries on some transfers),
//! `stm-map` (a sorted linked list of `PTVar` nodes created in transactions,
//! plus a `Vec<(u64, u64)>` snapshot of the same map), `stm-gc`
//! (`Pool::collect`, i.e. STM quiesce and record clearing, between commits),
//! `stm-recovery` and `stm-relocation` (a process crash right after the
//! record fence, then the traced open that replays it, at the same base or
//! at a new one, where the replayed values' pointers must be swizzled).

use super::{Harness, LAYOUT};
use crate::error::{Error, Result};
use crate::failpoint;
use crate::stm::redo::{StmMeta, META_ROOT};
use crate::stm::{word, CopyCx, PStr, PTVar, Persist, STx, StmResult, VarCell};
use crate::trace::Tracer;
use crate::{OpenOptions, PPtr, Persistent, Pool, Tx};
use engram_model::Trace;
use std::collections::BTreeMap;

pub(super) type Check<T> = std::result::Result<T, String>;

const N: usize = 8;
const START: u64 = 100;
const TOTAL: u64 = N as u64 * START;

// ----- the bank ------------------------------------------------------------

/// Handles of the bank's variables (all named roots).
#[derive(Clone)]
struct Bank {
    accts: Vec<PTVar<u64>>,
    /// Per account: how many transfers touched it (a partial commit shows).
    ops: Vec<PTVar<u64>>,
    count: PTVar<u64>,
    /// Copy-on-commit: describes the last transfer.
    note: PTVar<String>,
    /// Copy-on-commit: `[count, balances...]` after the last transfer.
    hist: PTVar<Vec<u64>>,
    /// Copy-on-commit: `(count, amount)` from transfers with `i % 3 == 1`,
    /// `(count before, 0)` from a first `or_else` branch that committed, and
    /// `(999, 999)` only if a retried branch's write leaked.
    last: PTVar<Box<(u64, u64)>>,
    /// Copy-on-commit, every fourth transfer: `BIG` copies of the count, a
    /// large object whose fresh spans are allocated by the commit itself.
    big: PTVar<Vec<u64>>,
}

/// Elements of the large copy (72 KiB: more than a span).
const BIG: usize = 9000;

/// The bank as the model (and an image) sees it.
#[derive(Clone, Debug, PartialEq)]
struct BankState {
    accts: Vec<u64>,
    ops: Vec<u64>,
    count: u64,
    note: String,
    hist: Vec<u64>,
    last: (u64, u64),
    /// The large copy as (element, length): every element must be equal.
    big: (u64, usize),
}

impl Bank {
    fn open(pool: &Pool) -> Result<Bank> {
        let mut accts = Vec::new();
        let mut ops = Vec::new();
        for i in 0..N {
            accts.push(pool.root(&format!("stm.acct{i}"), || START)?);
            ops.push(pool.root(&format!("stm.ops{i}"), || 0u64)?);
        }
        Ok(Bank {
            accts,
            ops,
            count: pool.root("stm.count", || 0u64)?,
            note: pool.root("stm.note", || "opened".to_string())?,
            hist: pool.root("stm.hist", Vec::new)?,
            last: pool.root("stm.last", || Box::new((0u64, 0u64)))?,
            big: pool.root("stm.big", Vec::new)?,
        })
    }

    /// The handles of an existing bank (one pass over the root table).
    fn find(pool: &Pool) -> Result<Bank> {
        let d = Dir::of(pool)?;
        Ok(Bank {
            accts: (0..N).map(|i| d.var(&format!("stm.acct{i}"))).collect::<Result<_>>()?,
            ops: (0..N).map(|i| d.var(&format!("stm.ops{i}"))).collect::<Result<_>>()?,
            count: d.var("stm.count")?,
            note: d.var("stm.note")?,
            hist: d.var("stm.hist")?,
            last: d.var("stm.last")?,
            big: d.var("stm.big")?,
        })
    }

    fn initial() -> BankState {
        BankState { accts: vec![START; N], ops: vec![0; N], count: 0, note: "opened".into(), hist: Vec::new(), last: (0, 0), big: (0, 0) }
    }

    /// Transfer `i` as one transaction (it may run several times).
    fn transfer(&self, tx: &STx<'_>, i: u64) -> StmResult<()> {
        let (from, to) = endpoints(i);
        if i % 3 != 2 {
            let amt = tx.read(&self.accts[from])?.min(i % 7 + 1);
            return self.move_money(tx, from, to, amt, i % 3 == 1);
        }
        tx.or_else(
            |tx| {
                // writes first, then maybe retry: or_else must drop them
                tx.modify(&self.ops[from], |x| x + 1000)?;
                tx.write(&self.last, Box::new((999, 999)))?;
                let need = or_else_need(i);
                if tx.read(&self.accts[from])? < need {
                    return tx.retry();
                }
                tx.modify(&self.ops[from], |x| x - 1000)?;
                tx.write(&self.last, Box::new((tx.read(&self.count)?, 0)))?;
                self.move_money(tx, from, to, need, false)
            },
            |tx| {
                let alt = (from + N / 2) % N;
                let amt = tx.read(&self.accts[alt])?.min(i % 7 + 1);
                self.move_money(tx, alt, to, amt, false)
            },
        )
    }

    fn move_money(&self, tx: &STx<'_>, from: usize, to: usize, amt: u64, boxed: bool) -> StmResult<()> {
        tx.modify(&self.accts[from], |x| x - amt)?;
        tx.modify(&self.accts[to], |x| x + amt)?;
        tx.modify(&self.ops[from], |x| x + 1)?;
        tx.modify(&self.ops[to], |x| x + 1)?;
        let n = tx.read(&self.count)? + 1;
        tx.write(&self.count, n)?;
        tx.write(&self.note, note(n, from, to, amt))?;
        let mut hist = vec![n];
        for a in &self.accts {
            hist.push(tx.read(a)?);
        }
        tx.write(&self.hist, hist)?;
        if boxed {
            tx.write(&self.last, Box::new((n, amt)))?;
        }
        if n % 4 == 0 {
            tx.write(&self.big, vec![n; BIG])?;
        }
        Ok(())
    }

    /// Transfer `i`, committed, applied to the model, and cross-checked.
    fn step(&self, pool: &Pool, i: u64, model: &mut Vec<BankState>) -> Result<()> {
        pool.atomically(|tx| self.transfer(tx, i))?;
        let mut next = model.last().cloned().unwrap_or_else(Bank::initial);
        next.transfer(i);
        let got = self.read(pool)?;
        if got != next {
            return Err(Error::corrupt(format!("after transfer {i} the pool holds {got:?}, the model {next:?}")));
        }
        model.push(next);
        super::note_returned(model.len() as u64 - 1);
        Ok(())
    }
}

fn endpoints(i: u64) -> (usize, usize) {
    // (3i + 1) - i = 2i + 1 is odd: never the same account
    ((i % N as u64) as usize, ((i * 3 + 1) % N as u64) as usize)
}

/// What the first `or_else` branch needs: it commits on `i % 6 == 2` if
/// the account can pay, and always retries on `i % 6 == 5`.
fn or_else_need(i: u64) -> u64 {
    if i % 6 == 2 {
        60
    } else {
        10 * TOTAL
    }
}

fn note(n: u64, from: usize, to: usize, amt: u64) -> String {
    format!("transfer #{n}: {amt} from {from} to {to}")
}

impl BankState {
    /// What transfer `i` does, computed without the STM.
    fn transfer(&mut self, i: u64) {
        let (from, to) = endpoints(i);
        let alt = (from + N / 2) % N;
        let (src, amt, boxed) = match i % 3 {
            2 if self.accts[from] >= or_else_need(i) => (from, or_else_need(i), false),
            2 => (alt, self.accts[alt].min(i % 7 + 1), false),
            k => (from, self.accts[from].min(i % 7 + 1), k == 1),
        };
        if i % 3 == 2 && src == from {
            self.last = (self.count, 0);
        }
        self.accts[src] -= amt;
        self.accts[to] += amt;
        self.ops[src] += 1;
        self.ops[to] += 1;
        self.count += 1;
        self.note = note(self.count, src, to, amt);
        self.hist = std::iter::once(self.count).chain(self.accts.iter().copied()).collect();
        if boxed {
            self.last = (self.count, amt);
        }
        if self.count % 4 == 0 {
            self.big = (self.count, BIG);
        }
    }
}

// ----- reading a pool outside the STM ------------------------------------------

/// The pool's named roots, read in one pass (a lookup by name scans the
/// whole root table, and every image needs some twenty of them).
pub(super) struct Dir(std::collections::HashMap<String, (u64, String)>);

impl Dir {
    pub(super) fn of(pool: &Pool) -> Result<Dir> {
        Ok(Dir(pool.roots()?.into_iter().map(|r| (r.name, (r.addr, r.type_name))).collect()))
    }

    pub(super) fn ptr<T: Persistent>(&self, name: &str) -> Result<PPtr<T>> {
        match self.0.get(name) {
            Some((addr, ty)) if *ty == T::type_name() => Ok(PPtr::from_addr(*addr)),
            Some((_, ty)) => Err(Error::corrupt(format!("root {name} holds a {ty}, not a {}", T::type_name()))),
            None => Err(Error::corrupt(format!("root {name} is missing"))),
        }
    }

    pub(super) fn var<T: Persist>(&self, name: &str) -> Result<PTVar<T>> {
        self.ptr::<VarCell<T::P>>(name).map(PTVar::from_cell)
    }
}

/// Reads variables' committed values with a plain region (which writes
/// nothing when it only reads, so it leaves no trace), and refuses a lock
/// word still locked in the pool's current STM epoch: no transaction could
/// ever take that variable again.
///
/// It also refuses a version (other than 0, the version of a variable no
/// commit wrote) at or above the pool's durable clock
/// reservation: a fresh process starts its clock there, so such a version
/// would be handed out again (the checking process shares the traced one's
/// clock, which hides this unless the pool is checked directly).
pub(super) struct Raw<'t, 'p> {
    pub(super) tx: &'t Tx<'p>,
    epoch: u16,
    reserved: u64,
}

impl<'t, 'p> Raw<'t, 'p> {
    fn new(tx: &'t Tx<'p>, meta: PPtr<StmMeta>) -> Result<Self> {
        let m = tx.read(meta)?;
        Ok(Raw { tx, epoch: (m.epoch & 0x7FFF) as u16, reserved: m.clock_reserved })
    }

    pub(super) fn var<T: Persist>(&self, v: &PTVar<T>) -> Result<T::P> {
        self.cell(v.cell(), "a variable")
    }

    pub(super) fn cell<P: Persistent>(&self, c: PPtr<VarCell<P>>, what: &str) -> Result<P> {
        let v = self.tx.read(c)?;
        if word::is_locked(v.word, self.epoch) {
            return Err(Error::corrupt(format!("{what} at {:#x} is still locked in epoch {}", c.addr(), self.epoch)));
        }
        if word::version(v.word) > 0 && word::version(v.word) >= self.reserved {
            return Err(Error::corrupt(format!(
                "{what} at {:#x} has version {}, not below the durable clock reservation {}",
                c.addr(),
                word::version(v.word),
                self.reserved
            )));
        }
        Ok(v.value)
    }

    pub(super) fn slice<T: Persistent + Default + Clone>(&self, a: crate::PArray<T>) -> Result<Vec<T>> {
        let mut out = vec![T::default(); self.tx.len(a)? as usize];
        self.tx.read_slice(a, 0, &mut out)?;
        Ok(out)
    }

    fn string(&self, s: PStr) -> Result<String> {
        String::from_utf8(self.slice(s.array())?).map_err(|_| Error::corrupt("note is not UTF-8"))
    }
}

/// Reads `f` with a [`Raw`] reader in a plain region.
pub(super) fn raw<R>(pool: &Pool, meta: PPtr<StmMeta>, f: impl Fn(&Raw<'_, '_>) -> Result<R>) -> Result<R> {
    pool.txn(|tx| f(&Raw::new(tx, meta)?))
}

impl Bank {
    /// The committed state, read outside the STM.
    fn read(&self, pool: &Pool) -> Result<BankState> {
        let meta = Dir::of(pool)?.ptr::<StmMeta>(META_ROOT)?;
        raw(pool, meta, |r| {
            let mut s = Bank::initial();
            for i in 0..N {
                s.accts[i] = r.var(&self.accts[i])?;
                s.ops[i] = r.var(&self.ops[i])?;
            }
            s.count = r.var(&self.count)?;
            s.note = r.string(r.var(&self.note)?)?;
            s.hist = r.slice(r.var(&self.hist)?.array())?;
            let last = r.tx.read(r.var(&self.last)?)?;
            s.last = (last.a, last.b);
            let big = r.slice(r.var(&self.big)?.array())?;
            if big.iter().any(|&x| x != big[0]) {
                return Err(Error::corrupt("the large copy is torn"));
            }
            s.big = (big.first().copied().unwrap_or(0), big.len());
            Ok(s)
        })
    }
}

/// The bank invariant on an image: the state after `k >= min` transfers,
/// and a transfer still commits.
fn check_bank(pool: &Pool, model: &[BankState], min: usize) -> Check<()> {
    let bank = Bank::find(pool).map_err(|e| e.to_string())?;
    let s = bank.read(pool).map_err(|e| format!("reading the bank: {e}"))?;
    let money: u64 = s.accts.iter().sum();
    if money != TOTAL {
        return Err(format!("money not conserved: {money} != {TOTAL} ({s:?})"));
    }
    if s.ops.iter().sum::<u64>() != 2 * s.count {
        return Err(format!("partial commit: ops {:?} for {} transfers", s.ops, s.count));
    }
    let k = s.count as usize;
    if k < min {
        return Err(format!("durable commits lost: {k} transfers visible, {min} were durable"));
    }
    match model.get(k) {
        Some(m) if *m == s => {}
        Some(m) => return Err(format!("state after {k} transfers differs from the model: {s:?} != {m:?}")),
        None => return Err(format!("{k} transfers visible, only {} ran", model.len() - 1)),
    }
    let mut after = vec![s];
    bank.step(pool, 1000 + k as u64, &mut after).map_err(|e| format!("a transfer after recovery: {e}"))
}

/// Transfers [`bank_more`] makes.
pub(super) const BANK_MORE: u64 = 2;

/// The double-crash mode's more work on a recovered bank (`Ok(None)`: the
/// pool has none): transfer 300 on a new thread (which adopts a recovered
/// redo log or makes one), then the rest on this one. A model starts at the
/// recovered state (noted at position 0: a recovered state is one the
/// program may have seen) and takes each commit. Returns the second
/// crash's invariant: the model after `k` transfers, `k` at least noted.
pub(super) fn bank_more(pool: &Pool, tracer: &Tracer) -> Result<Option<Box<super::Invariant>>> {
    let Ok(bank) = Bank::find(pool) else { return Ok(None) };
    let s = bank.read(pool)?;
    let c = s.count;
    let mut model = vec![s; c as usize + 1];
    super::note_returned_at(0, c);
    let switches = failpoint::switches();
    let at = std::thread::scope(|sc| {
        sc.spawn(|| {
            failpoint::adopt_switches(&switches);
            pool.atomically(|tx| bank.transfer(tx, 300)).map(|_| tracer.position())
        })
        .join()
        .unwrap_or_else(|_| Err(Error::corrupt("a workload thread panicked")))
    })?;
    let mut next = model[c as usize].clone();
    next.transfer(300);
    model.push(next);
    super::note_returned_at(at, c + 1);
    for i in 301..300 + BANK_MORE {
        bank.step(pool, i, &mut model)?;
    }
    Ok(Some(Box::new(move |pool: &Pool, returned: u64| check_bank(pool, &model, (c as usize).max(returned as usize)))))
}

fn bank_pool(h: &Harness, warm: u64) -> Result<(Pool, std::sync::Arc<Tracer>, Bank, Vec<BankState>)> {
    let (pool, tracer) = h.create(0)?;
    let bank = Bank::open(&pool)?;
    let mut model = vec![Bank::initial()];
    for i in 0..warm {
        bank.step(&pool, i, &mut model)?;
    }
    Ok((pool, tracer, bank, model))
}

/// `stm-first`: the pool's first STM transactions, traced (the variables
/// exist already): the thread's redo log is created and linked.
pub(super) fn w_first(h: &Harness) -> Result<Trace> {
    let (pool, tracer, bank, mut model) = bank_pool(h, 0)?;
    let trace = h.traced(pool, &tracer, |pool| {
        for i in 0..2 {
            bank.step(pool, i, &mut model)?;
        }
        Ok(())
    })?;
    h.expect(move |pool, returned| check_bank(pool, &model, returned as usize));
    Ok(trace)
}

/// `mt-stm`: two threads' transfers on one bank at once (each thread's redo
/// log exists before tracing starts). Which states the
/// pool passes through depends on the interleaving, so an image is checked
/// for what every state keeps: money conserved, two ops per transfer, no
/// variable locked or versioned above the durable reservation, at least the
/// transfers that had returned, and a new transfer.
pub(super) fn w_threads(h: &Harness) -> Result<Trace> {
    threads(h, true)
}

/// `mt-stm-first`: as `mt-stm`, but the workers' first commits (which
/// create and link their redo logs) are traced too: it found the race of
/// two threads linking their first logs into one log-table entry.
pub(super) fn w_threads_first(h: &Harness) -> Result<Trace> {
    threads(h, false)
}

/// Two workers' transfers, traced; with `warm`, each commits once before
/// tracing starts (its redo log then exists).
fn threads(h: &Harness, warm: bool) -> Result<Trace> {
    let (pool, tracer, bank, _) = bank_pool(h, 1)?;
    let regions = h.settings.regions.min(2);
    let (ready, go) = (std::sync::Barrier::new(3), std::sync::Barrier::new(3));
    let switches = failpoint::switches();
    let notes: Vec<Result<Vec<(usize, u64)>>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2u64)
            .map(|t| {
                let (pool, bank, tracer, ready, go, switches) = (&pool, &bank, &tracer, &ready, &go, &switches);
                s.spawn(move || {
                    failpoint::adopt_switches(switches);
                    let w = if warm { pool.atomically(|tx| bank.transfer(tx, 3 * (100 + t))).map(|_| ()) } else { Ok(()) };
                    ready.wait();
                    go.wait();
                    w?;
                    let mut notes = Vec::new();
                    for k in 0..regions {
                        let i = 3 * (10 * (t + 1) + k); // i % 3 == 0: plain transfers
                                                        // The transfer's own number, read in its own
                                                        // transaction; the position after it returned
                                                        // covers its record fence and those of every
                                                        // transfer numbered below it (each fenced before
                                                        // its values became visible).
                        let n = pool.atomically(|tx| {
                            bank.transfer(tx, i)?;
                            tx.read(&bank.count)
                        })?;
                        notes.push((tracer.position(), n));
                    }
                    Ok(notes)
                })
            })
            .collect();
        ready.wait();
        let before = bank.read(&pool).map(|b| b.count);
        tracer.start();
        go.wait();
        let mut out: Vec<Result<Vec<(usize, u64)>>> = vec![before.map(|c| vec![(0, c)])];
        out.extend(hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::corrupt("a workload thread panicked")))));
        out
    });
    let trace = tracer.stop();
    pool.simulate_crash();
    for n in notes {
        for (at, c) in n? {
            super::note_returned_at(at, c);
        }
    }
    h.expect(check_bank_any);
    Ok(trace)
}

/// `mt-stm-adopt`: a thread makes two transfers and exits (its last
/// in-place values flushed on its thread, never fenced there); a second
/// thread then adopts its redo log and makes two transfers, overwriting
/// both of the first thread's records. A fence completes only its own
/// thread's flushes, so the adopter must flush those values again.
pub(super) fn w_adopt(h: &Harness) -> Result<Trace> {
    let (pool, tracer, bank, _) = bank_pool(h, 1)?;
    let switches = failpoint::switches();
    tracer.start();
    let mut notes = Vec::new();
    for t in 0..2u64 {
        let (pool, bank, tracer, switches) = (&pool, &bank, &tracer, &switches);
        let n: Result<Vec<(usize, u64)>> = std::thread::scope(|s| {
            s.spawn(move || {
                failpoint::adopt_switches(switches);
                let mut v = Vec::new();
                for k in 0..2 {
                    let i = 3 * (10 * (t + 1) + k); // plain transfers
                    let n = pool.atomically(|tx| {
                        bank.transfer(tx, i)?;
                        tx.read(&bank.count)
                    })?;
                    v.push((tracer.position(), n));
                }
                Ok(v)
            })
            .join()
            .unwrap_or_else(|_| Err(Error::corrupt("a workload thread panicked")))
        });
        notes.extend(n?);
    }
    let trace = tracer.stop();
    pool.simulate_crash();
    for (at, c) in notes {
        super::note_returned_at(at, c);
    }
    h.expect(check_bank_any);
    Ok(trace)
}

/// The bank invariants that hold whatever the order of the transfers.
fn check_bank_any(pool: &Pool, returned: u64) -> Check<()> {
    let bank = Bank::find(pool).map_err(|e| e.to_string())?;
    let s = bank.read(pool).map_err(|e| format!("reading the bank: {e}"))?;
    let money: u64 = s.accts.iter().sum();
    if money != TOTAL {
        return Err(format!("money not conserved: {money} != {TOTAL} ({s:?})"));
    }
    if s.ops.iter().sum::<u64>() != 2 * s.count {
        return Err(format!("partial commit: ops {:?} for {} transfers", s.ops, s.count));
    }
    if s.count < returned {
        return Err(format!("durable commits lost: {} transfers visible, {returned} had returned", s.count));
    }
    pool.atomically(|tx| bank.transfer(tx, 999)).map_err(|e| format!("a transfer after recovery: {e}"))
}

/// `stm-bank`: transfers, each one commit with copies; or_else on every third.
pub(super) fn w_bank(h: &Harness) -> Result<Trace> {
    // warm-up: the thread's redo log and the clock reservation exist
    let (pool, tracer, bank, mut model) = bank_pool(h, 2)?;
    let min = model.len() - 1;
    let n = 3 * h.settings.regions;
    let trace = h.traced(pool, &tracer, |pool| {
        for i in 2..2 + n {
            bank.step(pool, i, &mut model)?;
        }
        Ok(())
    })?;
    h.expect(move |pool, returned| check_bank(pool, &model, min.max(returned as usize)));
    Ok(trace)
}

/// `stm-gc`: commits, `Pool::collect` (quiesce, records cleared, old copies
/// freed), commits.
pub(super) fn w_gc(h: &Harness) -> Result<Trace> {
    let (pool, tracer, bank, mut model) = bank_pool(h, 12)?;
    let min = model.len() - 1;
    let trace = h.traced(pool, &tracer, |pool| {
        bank.step(pool, 12, &mut model)?;
        bank.step(pool, 13, &mut model)?;
        let before = pool.info().live_objects;
        pool.collect()?;
        if pool.info().live_objects >= before {
            return Err(Error::corrupt("collect freed none of the old copies"));
        }
        bank.step(pool, 14, &mut model)?;
        bank.step(pool, 15, &mut model)
    })?;
    h.expect(move |pool, returned| check_bank(pool, &model, min.max(returned as usize)));
    Ok(trace)
}

/// `stm-recovery` / `stm-relocation`: a process crash right after a
/// commit's record fence (nothing in place yet), then the traced open that
/// replays it (at a new base if `relocate`), and one more transfer.
fn crashed_after_fence(h: &Harness, relocate: bool) -> Result<Trace> {
    let (pool, _, bank, mut model) = bank_pool(h, 3)?;
    failpoint::arm(failpoint::Failpoint::StmAfterFence, 0);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.atomically(|tx| bank.transfer(tx, 3))));
    failpoint::disarm_failpoints();
    if r.is_ok() {
        return Err(Error::corrupt("failpoint stm.after_fence did not fire"));
    }
    pool.simulate_crash();
    let mut next = model[model.len() - 1].clone();
    next.transfer(3);
    model.push(next);
    // the record is durable: no image may lose transfer 3
    let min = model.len() - 1;
    let tracer = h.tracer_on_attach();
    let mut o = OpenOptions::new(LAYOUT).trace(tracer.clone());
    o.force_relocate = relocate;
    let pool = Pool::open(&h.pool_path, o)?;
    let rep = pool.open_report().stm.unwrap_or_default();
    if rep.replayed == 0 || relocate != pool.open_report().relocated {
        return Err(Error::corrupt(format!("the open did not replay the commit: {rep:?}")));
    }
    let bank = Bank::find(&pool)?;
    if bank.read(&pool)? != model[min] {
        return Err(Error::corrupt("the replayed state differs from the model"));
    }
    bank.step(&pool, 4, &mut model)?;
    let trace = tracer.stop();
    pool.simulate_crash();
    h.expect(move |pool, returned| check_bank(pool, &model, min.max(returned as usize)));
    Ok(trace)
}

pub(super) fn w_recovery(h: &Harness) -> Result<Trace> {
    crashed_after_fence(h, false)
}

pub(super) fn w_relocation(h: &Harness) -> Result<Trace> {
    crashed_after_fence(h, true)
}

// ----- the map -------------------------------------------------------------------

/// A node of the sorted list: each node is a `PTVar<MapNode>` cell.
#[derive(Clone, Copy, Debug, Persistent)]
#[engram(name = "engram::crashtest::MapNode")]
struct MapNode {
    key: u64,
    val: u64,
    next: PPtr<VarCell<MapNode>>,
}

impl Persist for MapNode {
    type P = MapNode;
    fn persist(&self, _: &mut CopyCx<'_>) -> Result<MapNode> {
        Ok(*self)
    }
    fn plain(&self) -> Option<MapNode> {
        Some(*self)
    }
}

type Link = PPtr<VarCell<MapNode>>;
pub(super) type Entries = Vec<(u64, u64)>;

/// The map twice over: a sorted list of `PTVar` nodes created in
/// transactions, and a copy-on-commit snapshot vector; plus its length.
#[derive(Clone, Copy)]
struct Map {
    head: PTVar<Link>,
    snap: PTVar<Entries>,
    len: PTVar<u64>,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Op {
    Put(u64, u64),
    Del(u64),
}

/// Operation `i`: puts of keys `5i mod 13`, and every third a delete of the
/// key put two operations before (present unless deleted since).
fn map_op(i: u64) -> Op {
    let key = |i: u64| (i * 5) % 13;
    if i % 3 == 2 {
        Op::Del(key(i - 2))
    } else {
        Op::Put(key(i), i * 100 + key(i))
    }
}

/// Applies `op` to the model; returns the value it replaced or removed.
pub(super) fn apply_model(m: &mut BTreeMap<u64, u64>, op: Op) -> Option<u64> {
    match op {
        Op::Put(k, v) => m.insert(k, v),
        Op::Del(k) => m.remove(&k),
    }
}

impl Map {
    fn open(pool: &Pool) -> Result<Map> {
        Ok(Map {
            head: pool.root("stm.map.head", PPtr::null)?,
            snap: pool.root("stm.map.snap", Vec::new)?,
            len: pool.root("stm.map.len", || 0u64)?,
        })
    }

    fn find(pool: &Pool) -> Result<Map> {
        let d = Dir::of(pool)?;
        Ok(Map { head: d.var("stm.map.head")?, snap: d.var("stm.map.snap")?, len: d.var("stm.map.len")? })
    }

    fn apply(&self, tx: &STx<'_>, op: Op) -> StmResult<()> {
        let key = match op {
            Op::Put(k, _) | Op::Del(k) => k,
        };
        // find the first node with a key >= `key`, and the link to it
        let (mut prev, mut cur): (Option<PTVar<MapNode>>, Link) = (None, tx.read(&self.head)?);
        let mut found = None;
        while !cur.is_null() {
            let node = tx.read(&PTVar::<MapNode>::from_cell(cur))?;
            if node.key >= key {
                found = (node.key == key).then_some(node);
                break;
            }
            prev = Some(PTVar::from_cell(cur));
            cur = node.next;
        }
        let grew: i64 = match (op, found) {
            (Op::Put(_, v), Some(n)) => tx.write(&PTVar::<MapNode>::from_cell(cur), MapNode { val: v, ..n }).map(|_| 0)?,
            (Op::Put(k, v), None) => {
                let fresh = PTVar::new(tx, MapNode { key: k, val: v, next: cur })?;
                self.link(tx, prev, fresh.cell()).map(|_| 1)?
            }
            (Op::Del(_), Some(n)) => self.link(tx, prev, n.next).map(|_| -1)?,
            (Op::Del(_), None) => return Ok(()), // read-only
        };
        tx.write(&self.len, tx.read(&self.len)?.wrapping_add_signed(grew))?;
        let mut snap: BTreeMap<u64, u64> = tx.read(&self.snap)?.as_slice(tx)?.iter().map(|p| (p.a, p.b)).collect();
        apply_model(&mut snap, op);
        tx.write(&self.snap, snap.into_iter().collect())
    }

    fn link(&self, tx: &STx<'_>, prev: Option<PTVar<MapNode>>, to: Link) -> StmResult<()> {
        match prev {
            None => tx.write(&self.head, to),
            Some(p) => {
                let n = tx.read(&p)?;
                tx.write(&p, MapNode { next: to, ..n })
            }
        }
    }

    fn step(&self, pool: &Pool, op: Op, model: &mut Vec<Entries>) -> Result<()> {
        pool.atomically(|tx| self.apply(tx, op))?;
        let mut m: BTreeMap<u64, u64> = model.last().cloned().unwrap_or_default().into_iter().collect();
        apply_model(&mut m, op);
        let want: Entries = m.into_iter().collect();
        let got = self.read(pool)?;
        if got != want {
            return Err(Error::corrupt(format!("after {op:?} the pool holds {got:?}, the model {want:?}")));
        }
        model.push(want);
        super::note_returned(model.len() as u64 - 1);
        Ok(())
    }
}

impl Map {
    /// The map in a pool; the list, the snapshot and the length must agree.
    fn read(&self, pool: &Pool) -> Result<Entries> {
        let meta = Dir::of(pool)?.ptr::<StmMeta>(META_ROOT)?;
        raw(pool, meta, |r| {
            let mut list = Vec::new();
            let mut p = r.var(&self.head)?;
            while !p.is_null() {
                if list.len() > 1000 {
                    return Err(Error::corrupt("the list has a cycle"));
                }
                let n = r.cell(p, "a list node")?;
                list.push((n.key, n.val));
                p = n.next;
            }
            let snap: Entries = r.slice(r.var(&self.snap)?.array())?.iter().map(|p| (p.a, p.b)).collect();
            let len = r.var(&self.len)?;
            if list != snap || len != list.len() as u64 || list.windows(2).any(|w| w[0].0 >= w[1].0) {
                return Err(Error::corrupt(format!("torn map: list {list:?}, snapshot {snap:?}, length {len}")));
            }
            Ok(list)
        })
    }
}

/// The map invariant on an image: the model after `k >= min` operations,
/// and an insertion still commits.
fn check_map(pool: &Pool, model: &[Entries], min: usize) -> Check<()> {
    let map = Map::find(pool).map_err(|e| e.to_string())?;
    let got = map.read(pool).map_err(|e| format!("reading the map: {e}"))?;
    if !model[min..].contains(&got) {
        return Err(format!("map {got:?} is no state after {min} or more operations"));
    }
    map.step(pool, Op::Put(1000, 1), &mut vec![got]).map_err(|e| format!("a put after recovery: {e}"))
}

/// The map of `stm-map` and `mt-stm-made` after its first two operations
/// (before tracing), with the model's states so far.
fn seeded_map(pool: &Pool) -> Result<(Map, Vec<Entries>)> {
    let map = Map::open(pool)?;
    let mut model = vec![Entries::new()];
    for i in 0..2 {
        map.step(pool, map_op(i), &mut model)?;
    }
    Ok((map, model))
}

/// `stm-map`: puts (new nodes, updates) and deletes against a model.
pub(super) fn w_map(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.create(0)?;
    let (map, mut model) = seeded_map(&pool)?;
    let min = model.len() - 1;
    let n = 4 * h.settings.regions;
    let trace = h.traced(pool, &tracer, |pool| {
        for i in 2..2 + n {
            map.step(pool, map_op(i), &mut model)?;
        }
        Ok(())
    })?;
    h.expect(move |pool, returned| check_map(pool, &model, min.max(returned as usize)));
    Ok(trace)
}

// ----- a record larger than a log half -------------------------------------

/// Variables of `stm-overflow`: one commit writing all of them needs a redo
/// record of 24 bytes each, more than a 32 KiB log half.
const OVF_VARS: usize = 1400;

type Cells = Vec<PPtr<VarCell<u64>>>;

/// The variables (`stm.ovf.vars`, created in one transaction) and the
/// number of steps committed (`stm.ovf.count`).
fn ovf_open(pool: &Pool) -> Result<(PTVar<Cells>, PTVar<u64>)> {
    let vars: PTVar<Cells> = pool.root("stm.ovf.vars", Vec::new)?;
    let count: PTVar<u64> = pool.root("stm.ovf.count", || 0u64)?;
    pool.atomically(|tx| {
        if tx.read(&vars)?.as_slice(tx)?.is_empty() {
            let cells = (0..OVF_VARS).map(|_| PTVar::new(tx, 0u64).map(|v| v.cell())).collect::<StmResult<Cells>>()?;
            tx.write(&vars, cells)?;
        }
        Ok(())
    })?;
    Ok((vars, count))
}

/// Step `k`: every variable and the count become `k`, in one commit.
fn ovf_step(pool: &Pool, vars: &PTVar<Cells>, count: &PTVar<u64>, k: u64) -> Result<()> {
    pool.atomically(|tx| {
        let cells = tx.read(vars)?.as_slice(tx)?.to_vec();
        for c in cells {
            tx.write(&PTVar::<u64>::from_cell(c), k)?;
        }
        tx.write(count, k)
    })?;
    super::note_returned(k);
    Ok(())
}

/// An image: every variable equals the count (all or nothing), the count
/// is at least `min`, and one more overflowing commit goes through.
fn check_ovf(pool: &Pool, max: u64, min: u64) -> Check<()> {
    let read = || -> Result<(u64, Vec<u64>)> {
        let d = Dir::of(pool)?;
        let (vars, count) = (d.var::<Cells>("stm.ovf.vars")?, d.var::<u64>("stm.ovf.count")?);
        raw(pool, d.ptr::<StmMeta>(META_ROOT)?, |r| {
            let cells = r.slice(r.var(&vars)?.array())?;
            Ok((r.var(&count)?, cells.iter().map(|&c| r.cell(c, "a variable")).collect::<Result<Vec<u64>>>()?))
        })
    };
    let (k, vals) = read().map_err(|e| format!("reading the variables: {e}"))?;
    if vals.len() != OVF_VARS || vals.iter().any(|&v| v != k) {
        let bad = vals.iter().filter(|&&v| v != k).count();
        return Err(format!("partial commit: {bad} of {} variables differ from the count {k}", vals.len()));
    }
    if k < min || k > max {
        return Err(format!("count {k} outside {min}..={max}"));
    }
    let (vars, count) = ovf_open(pool).map_err(|e| e.to_string())?;
    ovf_step(pool, &vars, &count, max + 1).map_err(|e| format!("a commit after recovery: {e}"))
}

/// `stm-overflow`: commits whose redo records overflow the log half into
/// arrays of their own (and free the array of the half's previous record).
pub(super) fn w_overflow(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.create(0)?;
    let (vars, count) = ovf_open(&pool)?;
    for k in 1..=2 {
        ovf_step(&pool, &vars, &count, k)?;
    }
    let n = 2 + h.settings.regions.min(3);
    let trace = h.traced(pool, &tracer, |pool| (3..=n).try_for_each(|k| ovf_step(pool, &vars, &count, k)))?;
    h.expect(move |pool, returned| check_ovf(pool, n, returned.max(2)));
    Ok(trace)
}

/// Keys of the nodes `mt-stm-made` allocates (above every key of
/// [`map_op`], so each is linked at the list's end).
const MADE_KEYS: [u64; 2] = [100, 101];

/// `mt-stm-made`: one thread's write-free transactions allocate list nodes
/// (`PTVar::new`, nothing written), each handed to a second thread whose
/// commit links it at the end of the map. The second thread's record fence
/// completes only its own flushes: only the allocating transaction's fence
/// ("objects allocated by a transaction that wrote no variable") keeps a
/// linked node from being lost on the media.
pub(super) fn w_threads_made(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.create(0)?;
    let (map, mut model) = seeded_map(&pool)?;
    let min = model.len() - 1;
    for &k in &MADE_KEYS {
        let mut m = model.last().cloned().unwrap_or_default();
        m.push((k, k * 7));
        model.push(m);
    }
    let (ready, go) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    let (send, recv) = std::sync::mpsc::channel::<Link>();
    let switches = failpoint::switches();
    let notes: Result<Vec<(usize, u64)>> = std::thread::scope(|s| {
        let (pool, tracer, ready, go, switches) = (&pool, &tracer, &ready, &go, &switches);
        let linker = s.spawn(move || {
            failpoint::adopt_switches(switches);
            // a commit before tracing: this thread's redo log exists
            let warm = pool.atomically(|tx| tx.write(&map.len, tx.read(&map.len)?));
            ready.wait();
            go.wait();
            warm?;
            let mut notes = Vec::new();
            for (j, cell) in recv.iter().enumerate() {
                pool.atomically(|tx| map.link_last(tx, cell))?;
                notes.push((tracer.position(), (min + 1 + j) as u64));
            }
            Ok(notes)
        });
        ready.wait();
        tracer.start();
        go.wait();
        for &k in &MADE_KEYS {
            let node = MapNode { key: k, val: k * 7, next: PPtr::null() };
            let made = pool.atomically(|tx| PTVar::new(tx, node).map(|v| v.cell()));
            match made {
                Ok(cell) => send.send(cell).map_err(|_| Error::corrupt("the linking thread is gone"))?,
                Err(e) => {
                    drop(send);
                    let _ = linker.join();
                    return Err(e);
                }
            }
        }
        drop(send);
        linker.join().unwrap_or_else(|_| Err(Error::corrupt("a workload thread panicked")))
    });
    let trace = tracer.stop();
    pool.simulate_crash();
    for (at, n) in notes? {
        super::note_returned_at(at, n);
    }
    h.expect(move |pool, returned| check_map(pool, &model, min.max(returned as usize)));
    Ok(trace)
}

impl Map {
    /// Links the node `cell` (its key above every other) at the list's end,
    /// and adds it to the snapshot and the length.
    fn link_last(&self, tx: &STx<'_>, cell: Link) -> StmResult<()> {
        let (mut prev, mut cur): (Option<PTVar<MapNode>>, Link) = (None, tx.read(&self.head)?);
        while !cur.is_null() {
            let v = PTVar::<MapNode>::from_cell(cur);
            prev = Some(v);
            cur = tx.read(&v)?.next;
        }
        self.link(tx, prev, cell)?;
        let node = tx.read(&PTVar::<MapNode>::from_cell(cell))?;
        tx.write(&self.len, tx.read(&self.len)? + 1)?;
        let mut snap: BTreeMap<u64, u64> = tx.read(&self.snap)?.as_slice(tx)?.iter().map(|p| (p.a, p.b)).collect();
        apply_model(&mut snap, Op::Put(node.key, node.val));
        tx.write(&self.snap, snap.into_iter().collect())
    }
}
