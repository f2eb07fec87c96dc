//! The paper's six persistent workloads, written against the recorder
//! ([`record()`]) so that each run yields a multi-threaded ARP trace: cq
//! (concurrent queue), pc (persistent hash-table cache), sps (array swaps),
//! TATP (update location), TPCC (new order) and YCSB-A (50 % reads, 50 %
//! updates). Each runs `workers` threads (8 by default) plus 2 antagonist
//! threads that only take and release a volatile-annotated lock among
//! themselves.
//!
//! ## How every workload persists (and why it is correct under ARP)
//!
//! Updates are undo-logged critical sections, under locks held until the
//! end (two-phase locking). Each thread has two log areas and alternates
//! between them:
//!
//! 1. as each lock is taken, append `(addr, old value)` entries for the data
//!    it guards to the area (no ordering among them); `sequence_point()`;
//! 2. set the area's count word to `seq << 8 | entries` (`seq` numbers the
//!    thread's transactions from 1); `sequence_point()`;
//! 3. write the new values in place; `sequence_point()`;
//! 4. set the count word to `seq << 8` (entries 0: commit), then release
//!    the locks.
//!
//! A crash before 2 persists leaves count 0: nothing to undo, and the data is
//! untouched (3 is ordered after 2). Between 2 and 4 recovery restores the
//! old values. Alternating areas lets step 1 of the next transaction share an
//! epoch with step 4 of this one (no extra sequence point): the next
//! transaction's step 2 is ordered after this step 4 by its own sequence
//! point. Across threads, ARP's synchronization guarantee does the rest: a
//! transaction that acquired a lock released by another persists after
//! everything the other did before the release, so a later transaction never
//! persists over data whose earlier writer could still be rolled back.
//!
//! Locks that protect only volatile data (a DRAM index, LRU list, statistics,
//! the antagonists' lock) carry the volatile annotation: ARP+VA drops them.
//! Recovery ([`recover`]) rolls back every area with a non-zero entry
//! count; each workload's invariant is then checked on the recovered image.
//! The sequence number is not needed by recovery: it tells the checker
//! which transaction a committed area belongs to, so that [`history`] can
//! also check durability (no committed update is lost or rolled back by an
//! older transaction's undo), the property a missing release breaks in
//! workloads whose transactions rewrite whole records.

pub mod history;
pub mod record;

use crate::arp::trace::ArpTrace;
use record::{set_word, word, Ctx, Mutation, Recorder};

/// The workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bench {
    /// Concurrent queue: a persistent ring buffer under one lock.
    Cq,
    /// Persistent cache: a hash table with per-bucket locks and a volatile LRU.
    Pc,
    /// Random swaps in a persistent array, striped locks.
    Sps,
    /// TATP update-location: one subscriber record per transaction.
    Tatp,
    /// TPCC new-order: district counter, order, order lines, stock.
    Tpcc,
    /// YCSB-A: 50 % reads, 50 % whole-record updates.
    YcsbA,
}

impl Bench {
    /// Every workload, in the paper's order.
    pub const ALL: [Bench; 6] = [Bench::Cq, Bench::Pc, Bench::Sps, Bench::Tatp, Bench::Tpcc, Bench::YcsbA];

    /// The paper's name.
    pub fn name(self) -> &'static str {
        match self {
            Bench::Cq => "cq",
            Bench::Pc => "pc",
            Bench::Sps => "sps",
            Bench::Tatp => "TATP",
            Bench::Tpcc => "TPCC",
            Bench::YcsbA => "YCSB_A",
        }
    }

    /// Parses [`Bench::name`] (case-insensitive).
    pub fn parse(s: &str) -> Option<Bench> {
        Bench::ALL.into_iter().find(|b| b.name().eq_ignore_ascii_case(s))
    }
}

/// Run parameters.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Worker threads.
    pub workers: usize,
    /// Operations per worker.
    pub ops: usize,
    /// Lock/unlock pairs per antagonist (2 antagonists).
    pub antagonist_ops: usize,
    /// Seed of the workers' random choices and of the scheduler.
    pub seed: u64,
    /// Where the transactions put sequence points.
    pub variant: Variant,
}

impl Default for Params {
    fn default() -> Self {
        Params { workers: 8, ops: 16, antagonist_ops: 16, seed: 1, variant: Variant::Logged }
    }
}

/// How a transaction orders its own persists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The undo-log protocol of the module docs: three sequence points per
    /// transaction (entries → count → data → commit). Crash-consistent
    /// under ARP.
    #[default]
    Logged,
    /// The paper's code structure as far as its text describes it: sequence
    /// points only where the program synchronizes, none inside a
    /// transaction, so every persist of one synchronization-free region
    /// (log entries, count, data, commit alike) shares an epoch and only
    /// acquires and releases split epochs. The same persists as `Logged`,
    /// in the same order (the same seed records the same execution, less
    /// the sequence points), for Table 5. Not crash-consistent under ARP (the
    /// undo log is no longer ordered before the data; the checker shows
    /// it): it is correct only under a model whose failure-atomicity
    /// granularity is the synchronization-free region (the paper's
    /// taxonomy, Figure 1), which ARP is not.
    PaperLike,
}

impl Variant {
    /// Both, the default first.
    pub const ALL: [Variant; 2] = [Variant::Logged, Variant::PaperLike];

    /// A short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Logged => "undo log, 3 sequence points",
            Variant::PaperLike => "paper-like, none in a transaction",
        }
    }
}

/// Log areas: thread `t`, area `a` at `t * 1024 + a * 512`: count word, then
/// up to 31 `(addr, old)` pairs.
const LOG_AREA: u64 = 512;
const MAX_ENTRIES: u64 = 31;
const MAX_THREADS: u64 = 16;
/// Workload data starts here.
pub const DATA: u64 = MAX_THREADS * 2 * LOG_AREA;
/// Volatile lock words live at `LOCKS + 8 * id` (volatile space).
const LOCKS: u64 = 1 << 40;

/// A worker thread's state.
pub struct Worker<'a> {
    ctx: Ctx<'a>,
    rng: u64,
    area: u64,
    entries: u64,
    /// Transactions begun by this thread (the count word's high bits).
    seq: u64,
    /// Whether transactions place their sequence points.
    variant: Variant,
}

impl<'a> Worker<'a> {
    fn new(rec: &'a Recorder, thread: u32, seed: u64, variant: Variant) -> Self {
        Worker {
            ctx: Ctx::new(rec, thread),
            rng: (seed ^ (thread as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1,
            area: 0,
            entries: 0,
            seq: 0,
            variant,
        }
    }

    fn rand(&mut self, n: u64) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % n.max(1)
    }

    fn lock(&self, id: u64, va: bool) {
        self.ctx.lock(LOCKS + 8 * id, va);
    }

    fn unlock(&self, id: u64, va: bool) {
        self.ctx.unlock(LOCKS + 8 * id, va);
    }

    fn load(&self, addr: u64) -> u64 {
        self.ctx.load(addr)
    }

    /// Takes and releases a volatile-annotated lock (a DRAM index lookup,
    /// LRU or statistics update).
    fn volatile_section(&self, id: u64) {
        self.lock(id, true);
        self.unlock(id, true);
    }

    /// Starts an undo-logged transaction (the module docs' protocol).
    fn begin(&mut self) {
        self.entries = 0;
    }

    /// Step 1, as soon as the lock guarding `addr` is held: log its old value.
    fn log(&mut self, addr: u64) {
        if self.entries >= MAX_ENTRIES {
            return;
        }
        let e = self.log_area() + 8 + 16 * self.entries;
        self.ctx.store(e, addr);
        self.ctx.store(e + 8, self.load(addr));
        self.entries += 1;
    }

    /// A sequence point of the undo-log protocol (none in
    /// [`Variant::PaperLike`], which still takes the scheduler's turn, so
    /// that both variants record the same execution).
    fn protocol_sequence_point(&self) {
        match self.variant {
            Variant::Logged => self.ctx.sequence_point(),
            Variant::PaperLike => self.ctx.skip(),
        }
    }

    fn log_area(&self) -> u64 {
        self.ctx.thread as u64 * 2 * LOG_AREA + self.area * LOG_AREA
    }

    /// Steps 2-4: validate the log, write the new values (each logged
    /// before), commit. Flips to the other log area for the next transaction.
    fn commit(&mut self, writes: &[(u64, u64)]) {
        let log = self.log_area();
        self.area ^= 1;
        self.seq += 1;
        self.protocol_sequence_point();
        // 2. the count makes the entries valid
        self.ctx.store(log, self.seq << 8 | self.entries);
        self.protocol_sequence_point();
        // 3. the new values
        for &(addr, v) in writes {
            self.ctx.store(addr, v);
        }
        self.protocol_sequence_point();
        // 4. commit
        self.ctx.store(log, self.seq << 8);
    }

    /// A transaction whose locks are all taken already: log everything, commit.
    fn tx(&mut self, writes: &[(u64, u64)]) {
        self.begin();
        for &(addr, _) in writes {
            self.log(addr);
        }
        self.commit(writes);
    }
}

/// Rolls back every log area with a non-zero entry count (newest entry
/// first). A plain count (sequence number 0, as the C++ port writes) works too.
pub fn recover(img: &mut [u8]) {
    for area in 0..MAX_THREADS * 2 {
        let log = area * LOG_AREA;
        let n = word(img, log) & 0xff;
        if n == 0 || n > MAX_ENTRIES {
            continue;
        }
        for k in (0..n).rev() {
            let e = log + 8 + 16 * k;
            let (addr, old) = (word(img, e), word(img, e + 8));
            set_word(img, addr, old);
        }
        set_word(img, log, 0);
    }
}

mod benches;

/// Runs `bench` with `p` and returns the recorded trace.
pub fn record(bench: Bench, p: &Params, mutation: Mutation) -> ArpTrace {
    let rec = Recorder::new(benches::initial(bench, p), mutation, (p.workers + 2) as u32, p.seed);
    std::thread::scope(|s| {
        for t in 0..p.workers {
            let rec = &rec;
            s.spawn(move || {
                let mut w = Worker::new(rec, t as u32, p.seed, p.variant);
                for i in 0..p.ops {
                    benches::op(bench, &mut w, p, i);
                }
                rec.exit(t as u32);
            });
        }
        for a in 0..2 {
            let rec = &rec;
            s.spawn(move || {
                let w = Worker::new(rec, (p.workers + a) as u32, p.seed, p.variant);
                for _ in 0..p.antagonist_ops {
                    w.volatile_section(benches::ANTAGONIST_LOCK);
                }
                rec.exit((p.workers + a) as u32);
            });
        }
    });
    rec.finish()
}

/// Recovery followed by `bench`'s invariant, for the checker.
pub fn check_image(bench: Bench, p: &Params, img: &[u8]) -> Result<(), String> {
    let mut m = img.to_vec();
    recover(&mut m);
    benches::invariant(bench, p, &m)
}

/// [`check_image`], then durability against the recorded execution's
/// history (see [`history::History`]).
pub fn check_image_durable(bench: Bench, p: &Params, h: &history::History, img: &[u8]) -> Result<(), String> {
    let mut m = img.to_vec();
    recover(&mut m);
    benches::invariant(bench, p, &m)?;
    h.check(&m)
}
