//! The run loop: runs a transaction body until it commits, waits on retry
//! (Bloom-filter wake-ups), backs off on conflicts and, after
//! `SERIAL_AFTER` conflicts in a row, runs the transaction serially.
//! An attempt starts with unrecorded reads (`tx.rs`) unless an earlier
//! attempt of the same call conflicted or met a retry with unrecorded
//! reads, or an update of this thread failed for them within its last
//! `RECORD_FOR` transactions; then it records from the start.
//! Also `Pool::atomically` / `Pool::root` and the per-thread statistics.

use super::domain::{Domain, SerialHold, VOLATILE};
use super::pool_state::{local_ref, PoolCtx};
use super::tx::STx;
use super::{word_at, StmError, StmResult};
use crate::error::{Error, Result};
use crate::htm::abort::code;
use crate::stm::persist::Persist;
use crate::stm::{runtime, wait, word};
use crate::Pool;
use std::cell::Cell;
use std::sync::atomic::Ordering;

/// A serial attempt (`domain.rs`): the serial lock of the transaction's
/// pool, held exclusively for the whole attempt, and the volatile domain's
/// if the last attempt touched a volatile variable (or there is no pool),
/// pool first. Commits take a domain's lock shared only while its count
/// says a serial transaction exists, so a commit normally writes nothing
/// there. A commit that checks the count just before a serial attempt
/// starts runs beside it: that only costs the serial attempt a possible
/// conflict (it runs serially again), never correctness, which the lock
/// words keep.
struct SerialGuard<'d>(#[allow(dead_code)] Option<SerialHold<'d>>, #[allow(dead_code)] Option<SerialHold<'static>>);

impl<'d> SerialGuard<'d> {
    fn take(pool: Option<&'d Domain>, volatile: bool) -> Self {
        let p = pool.map(SerialHold::take);
        SerialGuard(p, (volatile || pool.is_none()).then(|| SerialHold::take(&VOLATILE)))
    }
}
/// Conflicts in a row after which a transaction runs serially.
const SERIAL_AFTER: u32 = 8;
/// Transactions of a thread that record their reads from the start after
/// an update with unrecorded reads of that thread conflicted (under
/// contention, updates would otherwise often run twice).
const RECORD_FOR: u32 = 32;

thread_local! {
    pub(super) static IN_TX: Cell<bool> = const { Cell::new(false) };
    static STATS: Cell<StmStats> = const { Cell::new(StmStats { conflicts: 0, retries: 0, serial: 0, stale: 0 }) };
    /// Transactions left that record from the start (`RECORD_FOR`).
    static RECORDING: Cell<u32> = const { Cell::new(0) };
}

/// Whether this call's next attempt records its reads from the start.
#[inline]
fn record_from_start(earlier_failed: bool) -> bool {
    RECORDING.with(|r| match r.get() {
        0 => earlier_failed,
        n => {
            r.set(n - 1);
            true
        }
    })
}

/// Counts kept by the calling thread's transaction loop since the thread
/// started, for benchmarks (take deltas, as with `engram::pmem::counters`).
/// Thread-local, so counting adds no shared write to a commit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StmStats {
    /// Attempts abandoned on a conflict (a failed read validation or lock)
    /// and run again.
    pub conflicts: u64,
    /// Attempts that called [`STx::retry`] and waited for a change.
    pub retries: u64,
    /// Attempts run serially, after `SERIAL_AFTER` conflicts in a row.
    pub serial: u64,
    /// Read-only attempts run again at once because the snapshot they
    /// reused was older than a variable they read (not counted in
    /// `conflicts`).
    pub stale: u64,
}

/// The calling thread's [`StmStats`].
pub fn stats() -> StmStats {
    STATS.with(Cell::get)
}

pub(super) fn count_stat(f: impl FnOnce(&mut StmStats)) {
    STATS.with(|c| {
        let mut s = c.get();
        f(&mut s);
        c.set(s);
    });
}

/// Whether this thread is running an STM transaction body. A failure-atomic
/// region must not start there: the body may run several times, and each
/// run's region would commit (`Error::TxnInAtomically`).
pub(crate) fn in_atomically() -> bool {
    IN_TX.with(Cell::get)
}

/// Runs `f` as a transaction over volatile [`crate::stm::TVar`]s only.
pub fn atomically<R>(f: impl FnMut(&STx<'_>) -> StmResult<R>) -> Result<R> {
    run(None, || Ok(None), || (), f)
}

pub(super) fn nested_error() -> Error {
    Error::NestedTransaction { what: "atomically called inside a transaction (compose with or_else instead)" }
}

/// The run loop; `pool`: the domain of the pool `ctx` gives (None: a
/// volatile-only transaction). `gate` enters the pool's GC gate for one
/// attempt (its guard is held until the attempt ends, and dropped before a
/// retry waits).
fn run<'p, R, G>(
    pool: Option<&Domain>,
    mut ctx: impl FnMut() -> Result<Option<PoolCtx<'p>>>,
    mut gate: impl FnMut() -> G,
    mut f: impl FnMut(&STx<'p>) -> StmResult<R>,
) -> Result<R> {
    if IN_TX.with(Cell::get) {
        return Err(nested_error());
    }
    IN_TX.with(|t| t.set(true));
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_TX.with(|t| t.set(false));
        }
    }
    let _reset = Reset;
    let mut conflicts = 0u32;
    let mut record = false;
    // `TVar` reads take counts on their variables (a retry waits on them).
    let mut keeping = false;
    // The last attempt read or wrote a volatile variable (serial mode then
    // holds the volatile domain's lock too).
    let mut touched_v = false;
    // Hybrid level 1 (level1.rs): volatile transactions only (so a pool's
    // transaction does not ask the runtime).
    let mut l1_left = if pool.is_none() { runtime::level1_attempts() } else { 0 };
    loop {
        let serial = conflicts >= SERIAL_AFTER;
        if serial {
            count_stat(|s| s.serial += 1);
        }
        // The pool's GC gate (through this thread's own slot: pool/gate.rs)
        // first, before any other lock: an exclusive holder waits for the
        // slots while holding the gate's lock, so a thread that took the
        // serial lock and then waited for the gate would deadlock with a
        // committer that holds its slot and waits for the serial lock.
        let _gate = gate();
        let _excl = serial.then(|| SerialGuard::take(pool, touched_v));
        let c = ctx()?;
        let tx = STx::begin(c, record_from_start(record || conflicts > 0), keeping);
        let at_l1 = l1_left > 0 && !serial && tx.ctx.is_none();
        if at_l1 {
            // Pinned before the hardware transaction starts (a pin writes
            // this thread's epoch slot and may collect garbage: neither
            // belongs inside it); the body's TVar reads rely on it.
            tx.pin();
            // With RTM, an abort anywhere in the attempt returns here again.
            match runtime::backend().begin().and_then(|t| tx.hw_enter(t)) {
                Ok(()) => {}
                Err(a) => {
                    l1_left = runtime::level1_failed(a, l1_left);
                    continue;
                }
            }
        }
        let r = f(&tx).and_then(|v| tx.commit(serial).map(|_| v));
        if at_l1 && r.is_err() {
            let why = match &r {
                Err(StmError::Retry) => code::RETRY,
                Err(StmError::Failed(_)) => code::USER,
                _ => code::VALIDATE,
            };
            l1_left = runtime::level1_failed(tx.hw_abort(why), l1_left);
            continue;
        }
        match r {
            Ok(v) => return Ok(v),
            Err(StmError::Failed(e)) => {
                tx.discard();
                return Err(e);
            }
            Err(StmError::Conflict) => {
                touched_v = tx.touched_volatile();
                if tx.unrecorded() && !tx.st.borrow().writes.is_empty() {
                    RECORDING.with(|r| r.set(RECORD_FOR));
                }
                tx.discard();
                count_stat(|s| s.conflicts += 1);
                conflicts += 1;
                backoff(conflicts);
            }
            Err(StmError::Retry) if tx.unrecorded() || tx.unkept() => {
                // Nothing to wait on, or TVars read without a count (their
                // words would not outlive the unpinned wait): run again
                // recording and keeping what it reads.
                tx.discard();
                record = true;
                keeping = true;
            }
            Err(StmError::Retry) => {
                tx.discard();
                count_stat(|s| s.retries += 1);
                // `_keep` holds the TVars read, so their words outlive the wait.
                let (reads, _keep) = tx.retry_set();
                let lists = wait_lists(&tx, pool, &reads);
                drop(tx);
                drop(_gate);
                drop(_excl);
                wait::sleep(lists.as_slice(), reads.iter().map(|r| r.0), || {
                    reads.iter().any(|&(w, v, e)| {
                        // SAFETY: a read-set word: a TVar held by `_keep`, or a
                        // cell of the pool this call borrows (its mapping
                        // stays until the pool closes, which the borrow
                        // prevents; a word the GC freed meanwhile reads as
                        // changed, which only wakes us early).
                        let x = unsafe { word_at(w) }.load(Ordering::Acquire);
                        word::version(x) != v || word::is_locked(x, e)
                    })
                });
                conflicts = 0;
            }
        }
    }
}

/// The wait lists a retry registers on: its pool's if it read a pool
/// variable, the volatile domain's if it read a volatile one.
fn wait_lists<'d>(tx: &STx<'_>, pool: Option<&'d Domain>, reads: &[(usize, u64, u16)]) -> Vec<&'d crate::htm::wakeup::WakeList> {
    let (p, v) = reads.iter().fold((false, false), |(p, v), r| if tx.in_pool(r.0) { (true, v) } else { (p, true) });
    let mut lists = Vec::with_capacity(2);
    if let Some(d) = pool.filter(|_| p) {
        lists.push(&d.waiters);
    }
    if v {
        lists.push(&VOLATILE.waiters);
    }
    lists
}

pub(super) fn backoff(conflicts: u32) {
    if conflicts < 4 {
        for _ in 0..(1 << conflicts) * 16 {
            std::hint::spin_loop();
        }
    } else {
        std::thread::yield_now();
    }
}

impl Pool {
    /// Runs `f` as an STM transaction over this pool's [`crate::stm::PTVar`]s
    /// (and any volatile [`crate::stm::TVar`]s). Committed writes are durable
    /// when this returns; `f` may run more than once.
    ///
    /// ```
    /// use engram::{Pool, CreateOptions, Durability};
    /// use engram::stm::PTVar;
    /// # let path = std::env::temp_dir().join(format!("engram-stm-doc-{}.pool", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let pool = Pool::create(&path, CreateOptions::new("bank").durability(Durability::Process))?;
    /// let a: PTVar<u64> = pool.root("a", || 100)?;
    /// let b: PTVar<u64> = pool.root("b", || 0)?;
    /// pool.atomically(|tx| {
    ///     let x = tx.read(&a)?;
    ///     tx.write(&a, x - 30)?;
    ///     let y = tx.read(&b)?;
    ///     tx.write(&b, y + 30)
    /// })?;
    /// assert_eq!(pool.atomically(|tx| Ok(tx.read(&a)? + tx.read(&b)?))?, 100);
    /// # pool.close()?; std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), engram::Error>(())
    /// ```
    pub fn atomically<R>(&self, f: impl FnMut(&STx<'_>) -> StmResult<R>) -> Result<R> {
        // (A nested call is refused by `run`, before anything else.)
        let inner = self.inner();
        let local = local_ref(self)?;
        let slot = &local.gate;
        run(Some(&local.stm.domain), || Ok(Some(PoolCtx { inner, local })), || inner.gate.enter(slot), f)
    }

    /// The persistent variable named `name`, created holding `init()` if it
    /// does not exist (PSTM's `getRoot`).
    pub fn root<T: Persist>(&self, name: &str, init: impl FnOnce() -> T) -> Result<crate::stm::PTVar<T>> {
        if let Some(v) = self.txn(|tx| crate::stm::PTVar::<T>::find_root(tx, name))? {
            return Ok(v);
        }
        let mut init = Some(init);
        let v = self.atomically(|tx| {
            let x = init.take().map(|f| f()).ok_or(StmError::Failed(Error::invalid("root initialiser ran twice")))?;
            crate::stm::PTVar::new(tx, x)
        })?;
        self.txn(|tx| match crate::stm::PTVar::<T>::find_root(tx, name)? {
            Some(c) => Ok(c), // another thread won
            None => v.set_root(tx, name).map(|_| v),
        })
    }
}
