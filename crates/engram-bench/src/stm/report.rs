//! The STM benchmark report: rows aggregated from the measurements
//! ([`aggregate`]), `stm.csv` (one line per structure, lookup share, thread
//! count and implementation) and `stm.md` (configuration, the agreement
//! check, the main table, plots, the comparison with the published claims,
//! how to read the numbers, how to reproduce).
//!
//! Keeps true: both files are rewritten whole from one run's rows; every
//! ratio says which way it divides in its column title; throughput is the
//! median over the runs of a point, while the per-commit counts and the
//! abort rate are totals over all its runs.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use super::workload::{Contents, Impl, Structure, Tally};
use crate::sysinfo::Machine;

/// Where a measurement belongs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point {
    /// The map.
    pub structure: Structure,
    /// Lookup share, %.
    pub lookup_pct: u32,
    /// Worker threads.
    pub threads: u32,
}

/// One measurement, as the runner collected it.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// Where it belongs.
    pub point: Point,
    /// Who ran it.
    pub imp: Impl,
    /// What the child reported.
    pub tally: Tally,
    /// Pool file size at the end (Engram only).
    pub pool_bytes: Option<u64>,
}

/// All runs of one implementation at one point.
#[derive(Clone, Debug)]
pub struct Row {
    /// Where.
    pub point: Point,
    /// Who.
    pub imp: Impl,
    /// Transactions per second of every run, in run order.
    pub runs: Vec<f64>,
    /// Their median.
    pub txps: f64,
    /// Counts summed over the runs.
    pub tally: Tally,
    /// Largest pool file seen, bytes (Engram only).
    pub pool_bytes: Option<u64>,
}

fn per(n: u64, d: u64) -> Option<f64> {
    (d > 0).then(|| n as f64 / d as f64)
}

impl Row {
    /// Fences per update commit.
    pub fn fences_per_update(&self) -> Option<f64> {
        per(self.tally.upd_fences, self.tally.updates)
    }
    /// Flushed cache lines per update commit.
    pub fn flushes_per_update(&self) -> Option<f64> {
        per(self.tally.upd_flushes, self.tally.updates)
    }
    /// Fences per read-only commit.
    pub fn fences_per_read(&self) -> Option<f64> {
        per(self.tally.ro_fences, self.tally.reads)
    }
    /// Flushed cache lines per read-only commit.
    pub fn flushes_per_read(&self) -> Option<f64> {
        per(self.tally.ro_flushes, self.tally.reads)
    }
    /// Attempts run again per attempt: (conflicts + stale snapshots) /
    /// (commits + conflicts + stale snapshots).
    pub fn abort_rate(&self) -> Option<f64> {
        let again = self.tally.conflicts + self.tally.stale;
        per(again, self.tally.commits() + again)
    }
    /// CPU time per committed transaction, ns (all runs).
    pub fn cpu_per_tx(&self) -> Option<f64> {
        (self.tally.cpu_nanos > 0).then_some(())?;
        per(self.tally.cpu_nanos, self.tally.commits())
    }
    /// CPUs the run's threads held on average: CPU time ÷ wall time (all
    /// runs). At most min(threads, cores); less when other work on the
    /// machine took the CPUs.
    pub fn cpus_held(&self) -> Option<f64> {
        (self.tally.cpu_nanos > 0).then_some(())?;
        per(self.tally.cpu_nanos, self.tally.nanos)
    }
    /// Whether the implementation goes through Engram's STM run loop (so
    /// conflicts are counted).
    pub fn counts_aborts(&self) -> bool {
        !matches!(self.imp, Impl::Pmdk | Impl::Romulus | Impl::Onefile)
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Groups measurements into rows, sorted by point then implementation.
pub fn aggregate(ms: &[Measurement]) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    for m in ms {
        let txps = m.tally.commits() as f64 / (m.tally.nanos.max(1) as f64 / 1e9);
        match rows.iter_mut().find(|r| r.point == m.point && r.imp == m.imp) {
            Some(r) => {
                r.runs.push(txps);
                r.tally.add(&m.tally);
                r.pool_bytes = r.pool_bytes.max(m.pool_bytes);
            }
            None => rows.push(Row { point: m.point, imp: m.imp, runs: vec![txps], txps: 0.0, tally: m.tally, pool_bytes: m.pool_bytes }),
        }
    }
    for r in &mut rows {
        r.txps = median(&r.runs);
    }
    rows.sort_by_key(|r| (r.point, r.imp));
    rows
}

/// The row of `imp` at `point`.
pub fn find(rows: &[Row], point: Point, imp: Impl) -> Option<&Row> {
    rows.iter().find(|r| r.point == point && r.imp == imp)
}

/// PSTM's slowdown against its no-flush run: no-flush tx/s / PSTM tx/s.
pub fn slowdown(rows: &[Row], point: Point) -> Option<f64> {
    let p = find(rows, point, Impl::Pstm)?;
    let v = find(rows, point, Impl::PstmProcess)?;
    (p.txps > 0.0).then(|| v.txps / p.txps)
}

/// The same slowdown by CPU time: PSTM CPU ns per transaction ÷ no-flush
/// CPU ns per transaction (less sensitive to other work on the machine).
pub fn cpu_slowdown(rows: &[Row], point: Point) -> Option<f64> {
    let p = find(rows, point, Impl::Pstm)?.cpu_per_tx()?;
    let v = find(rows, point, Impl::PstmProcess)?.cpu_per_tx()?;
    (v > 0.0).then(|| p / v)
}

/// PSTM's speedup over PMDK: PSTM tx/s / PMDK tx/s.
pub fn over_pmdk(rows: &[Row], point: Point) -> Option<f64> {
    let p = find(rows, point, Impl::Pstm)?;
    let d = find(rows, point, Impl::Pmdk)?;
    (d.txps > 0.0).then(|| p.txps / d.txps)
}

/// The persistent TMs reimplemented here and run in the same process.
pub const IN_RUN_PEERS: [Impl; 2] = [Impl::Romulus, Impl::Onefile];

/// PSTM against `peer` (one of [`IN_RUN_PEERS`]) run in the same
/// process: PSTM tx/s ÷ the peer's tx/s.
pub fn over_peer(rows: &[Row], point: Point, peer: Impl) -> Option<f64> {
    let p = find(rows, point, Impl::Pstm)?;
    let r = find(rows, point, peer)?;
    (r.txps > 0.0).then(|| p.txps / r.txps)
}

/// PSTM against the fastest of [`IN_RUN_PEERS`] measured at `point`:
/// PSTM tx/s ÷ that peer's tx/s.
pub fn over_best_peer(rows: &[Row], point: Point) -> Option<f64> {
    IN_RUN_PEERS.iter().filter_map(|&peer| over_peer(rows, point, peer)).min_by(f64::total_cmp)
}

/// Throughput for people: `1.23 M`, `456 k`, `789`.
pub fn fmt_txps(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{:.2} M", v / 1e6),
        v if v >= 1e4 => format!("{:.0} k", v / 1e3),
        v if v >= 1e3 => format!("{:.1} k", v / 1e3),
        v => format!("{v:.0}"),
    }
}

/// A ratio: `2.31×`.
pub fn fmt_x(v: f64) -> String {
    format!("{v:.2}×")
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "–".to_string(), f)
}

/// The single-threaded agreement check of one implementation.
#[derive(Clone, Copy, Debug)]
pub struct Agreement {
    /// The map.
    pub structure: Structure,
    /// Who.
    pub imp: Impl,
    /// What it ended with.
    pub got: Contents,
    /// What the `BTreeMap` model ended with.
    pub want: Contents,
}

impl Agreement {
    /// Whether it matched the model.
    pub fn ok(&self) -> bool {
        self.got == self.want
    }
}

/// Everything the report says besides the rows.
pub struct Context<'a> {
    /// The machine.
    pub machine: &'a Machine,
    /// Pool directory.
    pub dir: String,
    /// Its file system (`tmpfs`).
    pub fs: String,
    /// `default` or `quick`.
    pub profile: &'static str,
    /// Seconds per measurement.
    pub secs: f64,
    /// Runs per point.
    pub reps: u32,
    /// Keys are drawn below this.
    pub key_range: u64,
    /// Keys inserted before the clock starts.
    pub prefill: u64,
    /// Operations of the agreement check.
    pub agree_ops: u64,
    /// The seed.
    pub seed: u64,
    /// The command that produced the report.
    pub command: String,
    /// 1-minute load average at the start and end of the measurements.
    pub load: (Option<f64>, Option<f64>),
    /// Wall time of the measurements, s.
    pub wall_secs: f64,
    /// The agreement check.
    pub agreement: Vec<Agreement>,
    /// PNG files written beside the report.
    pub plots: Vec<String>,
}

/// Writes `stm.csv`.
pub fn write_csv(rows: &[Row], path: &Path) -> io::Result<()> {
    let mut s = String::from(
        "structure,lookup_pct,threads,impl,runs,median_txps,all_txps,commits,update_commits,readonly_commits,\
         flushes_per_update,fences_per_update,flushes_per_readonly,fences_per_readonly,conflicts,abort_rate,serial_runs,\
         slowdown_vs_process,cpu_slowdown_vs_process,cpu_ns_per_tx,cpus_held,speedup_vs_pmdk,pool_mib,speedup_vs_romulus,speedup_vs_onefile,stale_snapshots\n",
    );
    let f = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
    for r in rows {
        let all: Vec<String> = r.runs.iter().map(|v| format!("{v:.0}")).collect();
        let aborts = if r.counts_aborts() { f(r.abort_rate()) } else { String::new() };
        let (slow, cpu_slow, pmdk, rom, one) = if r.imp == Impl::Pstm {
            let p = r.point;
            (
                slowdown(rows, p),
                cpu_slowdown(rows, p),
                over_pmdk(rows, p),
                over_peer(rows, p, Impl::Romulus),
                over_peer(rows, p, Impl::Onefile),
            )
        } else {
            (None, None, None, None, None)
        };
        let _ = writeln!(
            s,
            "{},{},{},{},{},{:.0},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.point.structure.name(),
            r.point.lookup_pct,
            r.point.threads,
            r.imp.name(),
            r.runs.len(),
            r.txps,
            all.join(" "),
            r.tally.commits(),
            r.tally.updates,
            r.tally.reads,
            f(r.flushes_per_update()),
            f(r.fences_per_update()),
            f(r.flushes_per_read()),
            f(r.fences_per_read()),
            r.tally.conflicts,
            aborts,
            r.tally.serial,
            f(slow),
            f(cpu_slow),
            r.cpu_per_tx().map_or(String::new(), |v| format!("{v:.0}")),
            f(r.cpus_held()),
            f(pmdk),
            r.pool_bytes.map_or(String::new(), |b| format!("{:.0}", b as f64 / (1 << 20) as f64)),
            f(rom),
            f(one),
            r.tally.stale,
        );
    }
    std::fs::write(path, s)
}

/// The main table (markdown): one line per structure, lookup share and
/// thread count.
pub fn table(rows: &[Row]) -> String {
    let mut points: Vec<Point> = rows.iter().map(|r| r.point).collect();
    points.sort();
    points.dedup();
    let mut s = String::from(
        "| structure | lookups | threads | PSTM tx/s | no-flush tx/s | slowdown (no-flush ÷ PSTM tx/s) | slowdown by CPU time | TVar tree tx/s | PMDK tx/s | PSTM ÷ PMDK | RomulusLog (reimpl.) tx/s | PSTM ÷ RomulusLog | RomulusLog fences / update commit | OneFile-LF (reimpl.) tx/s | PSTM ÷ OneFile-LF | OneFile-LF fences / update commit | fences / update commit | lines flushed / update commit | fences / read-only commit | PSTM abort rate | CPUs held by PSTM's threads |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in points {
        let tx = |imp| opt(find(rows, p, imp).map(|r| r.txps), fmt_txps);
        let pstm = find(rows, p, Impl::Pstm);
        let aborts = |imp| opt(find(rows, p, imp).and_then(Row::abort_rate), |v| format!("{:.2} %", 100.0 * v));
        let _ = writeln!(
            s,
            "| {} | {} % | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.structure.label(),
            p.lookup_pct,
            p.threads,
            tx(Impl::Pstm),
            tx(Impl::PstmProcess),
            opt(slowdown(rows, p), fmt_x),
            opt(cpu_slowdown(rows, p), fmt_x),
            tx(Impl::Tvar),
            tx(Impl::Pmdk),
            opt(over_pmdk(rows, p), fmt_x),
            tx(Impl::Romulus),
            opt(over_peer(rows, p, Impl::Romulus), fmt_x),
            opt(find(rows, p, Impl::Romulus).and_then(Row::fences_per_update), |v| format!("{v:.2}")),
            tx(Impl::Onefile),
            opt(over_peer(rows, p, Impl::Onefile), fmt_x),
            opt(find(rows, p, Impl::Onefile).and_then(Row::fences_per_update), |v| format!("{v:.2}")),
            opt(pstm.and_then(Row::fences_per_update), |v| format!("{v:.2}")),
            opt(pstm.and_then(Row::flushes_per_update), |v| format!("{v:.1}")),
            opt(pstm.and_then(Row::fences_per_read), |v| format!("{v:.2}")),
            aborts(Impl::Pstm),
            opt(pstm.and_then(Row::cpus_held), |v| format!("{v:.2}")),
        );
    }
    s
}

/// (min, max) of `f` over the points that pass `keep`.
fn range(rows: &[Row], keep: impl Fn(&Point) -> bool, f: impl Fn(Point) -> Option<f64>) -> Option<(f64, f64)> {
    let mut points: Vec<Point> = rows.iter().map(|r| r.point).filter(|p| keep(p)).collect();
    points.dedup();
    points.into_iter().filter_map(f).fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

fn fmt_range(r: Option<(f64, f64)>) -> String {
    match r {
        None => "not measured".into(),
        Some((lo, hi)) => format!("{}–{}", fmt_x(lo), fmt_x(hi)),
    }
}

fn claims_section(rows: &[Row]) -> String {
    let mut s = String::from("## Against the published claims\n\n");
    s.push_str(
        "Krauter et al. measured their Haskell PSTM 1.3×–2.8× slower than GHC's volatile STM on these \
         structures and mixes. The closest measurement here is **slowdown = no-flush tx/s ÷ PSTM tx/s**, \
         PSTM against the same engine with its flushes and fences turned into no-ops (min–max over the \
         structures and both lookup shares):\n\n",
    );
    s.push_str(
        "| threads | slowdown vs no-flush (tx/s) | slowdown vs no-flush (CPU time per tx) | PSTM ÷ PMDK (tree, hash table) | PSTM ÷ TVar tree (tree) |\n\
         |---:|---:|---:|---:|---:|\n",
    );
    let mut threads: Vec<u32> = rows.iter().map(|r| r.point.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    for t in threads {
        let tvar = range(
            rows,
            |p| p.threads == t && p.structure == Structure::Rbtree,
            |p| {
                let a = find(rows, p, Impl::Pstm)?;
                let b = find(rows, p, Impl::Tvar)?;
                (b.txps > 0.0).then(|| a.txps / b.txps)
            },
        );
        let _ = writeln!(
            s,
            "| {t}{} | {} | {} | {} | {} |",
            if t > 2 { " (oversubscribed)" } else { "" },
            fmt_range(range(rows, |p| p.threads == t, |p| slowdown(rows, p))),
            fmt_range(range(rows, |p| p.threads == t, |p| cpu_slowdown(rows, p))),
            fmt_range(range(rows, |p| p.threads == t, |p| over_pmdk(rows, p))),
            fmt_range(tvar),
        );
    }
    s.push_str(&verdict_paragraph(rows));
    s
}

/// The median of `f` over the points with at most 2 threads (the machine's
/// cores), and how many points there were.
fn median_over_cores(rows: &[Row], f: impl Fn(Point) -> Option<f64>) -> Option<(f64, usize)> {
    let mut points: Vec<Point> = rows.iter().map(|r| r.point).filter(|p| p.threads <= 2).collect();
    points.dedup();
    let v: Vec<f64> = points.into_iter().filter_map(f).collect();
    (!v.is_empty()).then(|| (median(&v), v.len()))
}

/// Where a slowdown stands against the paper's 1.3×–2.8×.
fn against_paper(x: f64) -> &'static str {
    match x {
        x if x < 1.1 => "below the paper's range: persistence costs almost nothing measurable here",
        x if x < 1.3 => "below the paper's range",
        x if x <= 2.8 => "within the paper's range",
        _ => "above the paper's range",
    }
}

fn verdict_paragraph(rows: &[Row]) -> String {
    let mut s = String::from(
        "
",
    );
    let tx = median_over_cores(rows, |p| slowdown(rows, p));
    let cpu = median_over_cores(rows, |p| cpu_slowdown(rows, p));
    if let (Some((t, n)), Some((c, _))) = (tx, cpu) {
        let _ = writeln!(
            s,
            "Over the {n} points with 1 or 2 threads, the median slowdown is **{}** by throughput and **{}** by \
             CPU time per transaction — {}.",
            fmt_x(t),
            fmt_x(c),
            against_paper(c)
        );
    }
    let mut wins = 0;
    let mut all = 0;
    for r in rows.iter().filter(|r| r.imp == Impl::Pstm) {
        if let Some(x) = over_pmdk(rows, r.point) {
            all += 1;
            wins += (x > 1.0) as usize;
        }
    }
    if all > 0 {
        let _ = writeln!(s, "PSTM out-runs PMDK at {wins} of the {all} points where both ran.");
    }
    let smaller = cpu.is_some_and(|(c, _)| c < 1.3);
    s.push_str(if smaller {
        "\nWhy the slowdown is smaller than the paper's: "
    } else {
        "\nWhat the slowdown does and does not include: "
    });
    s.push_str(
        "(1) tmpfs is DRAM, where a CLWB and an SFENCE cost \
         a few tens of cycles instead of the hundreds of an Optane write-back, and an update commit here issues \
         only one fence (the table's column); (2) the no-flush peer still does everything else PSTM does — \
         the checksummed redo record, copies into the pool, persistent allocation — so the ratio prices the \
         persistence instructions only, while the paper's baseline (GHC's STM) keeps no log at all; (3) the \
         transactions are short and dominated by cache misses on the structure, which both sides pay. The \
         fully volatile TVar tree shows the other side of the comparison: a volatile STM is not automatically \
         faster: each of its variables is an allocation of its own reached through a pointer (a 16-byte \
         cell of lock word and value word since stm14tv2), so a read costs a cache miss more than a read of a \
         field embedded in a PSTM node.",
    );
    let tvar = median_over_cores(rows, |p| {
        (p.structure == Structure::Rbtree).then_some(())?;
        let a = find(rows, p, Impl::Pstm)?;
        let b = find(rows, p, Impl::Tvar)?;
        (b.txps > 0.0).then(|| a.txps / b.txps)
    });
    if let Some((x, n)) = tvar {
        let _ = write!(
            s,
            " In this run PSTM's red-black tree has {} the TVar tree's throughput (median of {n} points with 1 or 2 threads).",
            fmt_x(x)
        );
    }
    s.push('\n');
    s
}

const NOTES: &str = "\
## How to read these numbers

- **What the no-flush peer removes, exactly.** It is the same binary, the same \
collections and the same STM engine on a pool opened with `Durability::Process`. \
In that mode the persistence seam (`engram::pmem::Persister`) makes `flush` and \
`fence` return at once: no CLWB/CLFLUSHOPT and no SFENCE, on the commit's redo \
record and copies, on the in-place values, on the nodes a transaction allocates \
(their own fence before the record), and on the clock reservation (one fence per \
2^20 commits). Everything else still runs: the redo record is encoded with its \
CRC32C checksums (over the record and over every copy a commit made) and written \
into the thread's log in the pool; values are copied into the pool at commit \
(HAMT nodes); nodes come from the persistent allocator; the GC gate is taken per \
transaction. So the ratio isolates the price of the persistence *instructions* on \
this machine; it is not PSTM against a separately designed volatile STM (the \
paper's baseline is GHC's `TVar` STM, which has no log at all).
- **The TVar tree** is the fully volatile peer: the same red-black-tree steps over \
`engram::stm::TVar` cells run by `engram::stm::atomically` (lookups by \
`engram::stm::atomically_read`, the read-only path; since stm14l a link is the node's \
address, as TinySTM's tree holds a pointer; since stm14tv each node is one \
allocation, an `engram::stm::TBox` of six `engram::stm::TWord`s, lock word and value \
word inline, so a field read is on the node's own line) — no pool, no log, no \
copies; for the treap and the HAMT, `engram::stm::vcollections` with one `TVar` \
per node field (lookups by `atomically_read` too since stm14l). A `TVar` is a heap object of its own (since stm14tv2 a 16-byte cell: \
lock word, then the value inline or a pointer to an immutable `Arc`): a read takes \
no lock and no count, but costs one more cache line than a read of a field \
embedded in a node, and cloning a link value (`Option<Arc<Node>>` in the treap and \
HAMT) writes the node's reference count. Compare it with the no-flush tree as two \
different volatile designs, not as an upper bound.
- **PMDK** runs every operation under one global mutex (libpmemobj transactions \
are failure-atomic, not isolated), lookups without a transaction, updates in \
`TX_BEGIN`/`TX_END` with whole-node undo snapshots, nodes allocated and freed \
transactionally, `PMEM_IS_PMEM_FORCE=1` on the same tmpfs. It cannot scale with \
threads by construction; the OneFile/Romulus suite measures it the same way.
- **RomulusLog, reimplemented here** runs RomulusLog's algorithm (SPAA'18) as \
written in the paper, by our own Rust code (`src/stm/romulus/`), not the authors' \
C++: one mmapped file on the same tmpfs with a header and two halves, programs \
reading and writing `main` only; readers and writers under a C-RW-WP lock \
(per-thread reader indicators), writers flat-combined (the lock holder runs every \
published update in one transaction); an update stores in place, writes back each \
stored line (CLWB) and logs its range, then copies the logged ranges to `back`: \
four SFENCEs per transaction, none per lookup (with 2 or more threads a combining \
thread's fences also serve other threads' updates and are counted in its own \
commit's class). Simplified: our own segregated-free-list allocator, the suite's \
131,072 hash buckets cut to 65,536 like our tables. Its column is measured in \
this run, beside PSTM.
- **OneFile-LF, reimplemented here** runs the lock-free PTM of OneFile (DSN'19) \
as described in the paper, by our own Rust code (`src/stm/onefile/`): every heap \
word a 16-byte {value, seq} pair changed only by `lock cmpxchg16b` to a newer \
seq, one `curTx` word; an update runs against the heap with a volatile \
write-set, copies it to a per-thread log buffer in the file (pwb, SFENCE), CASes \
`curTx`, writes `curTx` back (SFENCE), then applies the write-set with the \
double-width CAS; threads that find a transaction not yet applied help apply it; \
a lookup validates its loads against `curTx` and stores nothing: two SFENCEs per \
update, none per lookup. Simplified: lock-free only (not the wait-free \
variant), the same allocator, tree and hash set as RomulusLog's peer \
(`src/stm/wordheap/`). Measured in this run, beside PSTM.
- **Fences per commit.** An update commit of PSTM issues one fence: the redo \
record, the copies, the previous commit's in-place values and the nodes it \
allocated (an insert of a new key in the trees and the hash table) are durable \
after it (new objects' initial contents travel in the redo record; docs/stm.md, \
\"One fence for commits that allocate\"). A read-only commit issues none. The table's figures are measured by the calling thread's \
`engram::pmem::counters()` around each transaction, summed over threads; the \
update figure mixes inserts of new keys, value replacements and deletes.
- **Aborts.** `engram::stm::stats()` counts attempts abandoned on a conflict, and \
read-only attempts run again because the snapshot they reused (docs/stm.md, \
\"The snapshot a read-only transaction reuses\") was older than a variable they \
read (`stale`, in the CSV's `stale_snapshots`); the abort rate is (conflicts + \
stale) ÷ (commits + conflicts + stale). After 8 conflicts in a row a \
transaction runs serially. PMDK never aborts (it locks).
- **Oversubscription, and how much CPU a run really had.** The machine has 2 \
cores; 4 and 8 threads time-slice them, so those rows measure how the engine \
behaves when a thread is descheduled while it holds commit locks or is \
mid-transaction, not parallel speedup. The last column is the CPU time of PSTM's \
threads over the wall time (per-thread `schedstat`): 1 thread can hold at most \
1.00, more threads at most 2.00. Where 2 or more threads held little more than \
one CPU, other work on the machine took the second core and the row says \
nothing about scaling; the \"slowdown by CPU time\" column compares CPU time per \
transaction instead of throughput and is the less noisy of the two slowdowns.
- **Garbage.** Removed nodes and old HAMT nodes are garbage until Engram's GC \
runs; the benchmark collects once after the prefill and never during the \
measured phase (PMDK frees nodes in the transaction instead). The CSV's \
`pool_mib` column shows how far each pool grew.
- **Where PSTM's time went when this benchmark was written** (perf; the per-transaction costs named here have since been removed, and docs/stm.md, \"The hot path and what it costs\", says where the time goes today). \
Single-threaded, the trees spend about half their cycles in `STx::read_cell` \
waiting for the lock word of the node being visited (cache misses down a tree of \
about 17 levels), and roughly 10 % more on per-read bookkeeping (the bounds check \
of the cell, the write-set lookup, the read-set push, which reallocates as the \
set grows in every transaction); CLWB and SFENCE hardly show. At 2 threads with \
the shortest transactions (hash table, 90 % lookups) 9–18 % of the cycles (two \
profiles) go to the set-up and tear-down of each transaction, mostly atomic \
writes to cache lines every thread shares, even when the transaction only reads: \
the lock of the pool's STM state and the `Arc<StmPool>` clone in \
`Pool::atomically`, and the GC gate's reader count in the run loop; the hash \
table also re-validates its bucket array (`slice_of`, `locate`) on every \
operation, about 3 %. The TVar tree spent three quarters of its cycles in `read_tvar`, on the `Arc` clones \
of every read, until stm14tv2 (docs/stm.md, \"The volatile TVar, second try\").
- **Emulated persistent memory.** tmpfs is DRAM: a CLWB + SFENCE costs far less \
than on Optane, so the PSTM slowdown here is a lower bound of what real \
persistent memory would show.
- **Noise.** Other engineers' jobs shared the 2 cores during the run (see the \
load average above); throughput is the median of the runs of each point (runs \
of different points are interleaved, so a burst of load hits one run of many \
points rather than every run of one point), but differences under about 20 % \
between neighbouring cells are not significant, and more so at 4 and 8 threads.
";

fn config_section(cx: &Context<'_>) -> String {
    let m = cx.machine;
    let mut s = String::from("## Machine and configuration\n\n");
    let _ = writeln!(s, "- CPU: {} ({} logical cores), Linux {}", m.cpu, m.cores, m.kernel);
    let _ = writeln!(
        s,
        "- Pools in `{}` ({}): PSTM in `Durability::Pmem` (`{}` + SFENCE), the no-flush peer in \
         `Durability::Process`, PMDK (libpmemobj {}) with `PMEM_IS_PMEM_FORCE=1`",
        cx.dir, cx.fs, m.flush_instr, m.pmdk
    );
    let _ = writeln!(
        s,
        "- Workload: keys below {}, {} pre-inserted (value = key, untimed, then one GC); each operation \
         one transaction: lookup with the stated probability, else insert (set the value) or delete, \
         equally likely; xorshift64* keys, seed {:#x}; hash tables of {} chains",
        cx.key_range,
        cx.prefill,
        cx.seed,
        super::workload::HASH_BUCKETS
    );
    let _ = writeln!(
        s,
        "- Profile `{}`: {} s per measurement, {} run(s) per point (median), each in a fresh child \
         process; {:.0} s of measurements in all; run on {}",
        cx.profile, cx.secs, cx.reps, cx.wall_secs, m.date
    );
    let load = |l: Option<f64>| l.map_or("unknown".to_string(), |l| format!("{l:.2}"));
    let _ = writeln!(
        s,
        "- Load average (1 min) when the measurements started / ended: {} / {} on {} cores (other \
         engineers' work shared the machine; anything above about 1 means the runs competed for the CPUs)",
        load(cx.load.0),
        load(cx.load.1),
        m.cores
    );
    s
}

fn agreement_section(cx: &Context<'_>) -> String {
    let mut s = format!(
        "\n## Agreement check\n\nBefore measuring, every implementation ran the same single-threaded \
         sequence (prefill, then {} operations at 50 % lookups) and its invariant check; its final \
         contents (entries, content sum) must equal a `BTreeMap` model's.\n\n",
        cx.agree_ops
    );
    s.push_str("| structure | implementation | entries | matches the model |\n|---|---|---:|---|\n");
    for a in &cx.agreement {
        let _ = writeln!(s, "| {} | {} | {} | {} |", a.structure.label(), a.imp.label(), a.got.len, if a.ok() { "yes" } else { "**NO**" });
    }
    s
}

/// The whole `stm.md`.
pub fn markdown(rows: &[Row], cx: &Context<'_>) -> String {
    let mut s = String::from("# Persistent STM: Engram PSTM vs the same code without persistence vs PMDK\n\n");
    s.push_str(
        "Generated by `engram-bench stm`; the run rewrites this file, `stm.csv` and the `stm-*.png` plots.\n\n\
         The workload of Krauter, Raad and Pietzuch, *Persistent Software Transactional Memory in Haskell* \
         (ICFP'21), after Yates & Scott: maps of u64 keys, every operation one transaction. **Higher tx/s \
         is better. Slowdown = no-flush tx/s ÷ PSTM tx/s (above 1: persistence costs that much); PSTM ÷ \
         PMDK = PSTM tx/s ÷ PMDK tx/s (above 1: PSTM faster).**\n\n",
    );
    s.push_str(&config_section(cx));
    s.push_str(&agreement_section(cx));
    s.push_str("\n## Results\n\n");
    s.push_str(&table(rows));
    for p in &cx.plots {
        let _ = writeln!(s, "\n![{p}]({p})");
    }
    s.push('\n');
    s.push_str(&claims_section(rows));
    s.push('\n');
    s.push_str(&super::peers::section(rows));
    s.push('\n');
    s.push_str(NOTES);
    let _ = write!(
        s,
        "\n## Reproduce\n\n```sh\ncargo run --release -p engram-bench -- stm --out docs/bench              # this report\n\
         cargo run --release -p engram-bench -- stm --quick --out /tmp/stm           # smoke test, seconds\n\
         cargo run --release -p engram-bench -- stm --structures rbtree --threads 1,2 --secs 2   # a subset, tables on stdout\n```\n\n\
         This report: `{}`\n",
        cx.command
    );
    s
}

/// Writes `stm.md`.
pub fn write_markdown(rows: &[Row], cx: &Context<'_>, path: &Path) -> io::Result<()> {
    std::fs::write(path, markdown(rows, cx))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(imp: Impl, commits: u64, nanos: u64) -> Measurement {
        let point = Point { structure: Structure::Rbtree, lookup_pct: 90, threads: 1 };
        let tally = Tally { nanos, updates: commits / 2, reads: commits - commits / 2, upd_fences: commits, ..Tally::default() };
        Measurement { point, imp, tally, pool_bytes: None }
    }

    #[test]
    fn rows_take_medians_and_ratios_divide_the_stated_way() {
        let ms = [
            m(Impl::Pstm, 100, 1_000_000_000),
            m(Impl::Pstm, 300, 1_000_000_000),
            m(Impl::Pstm, 200, 1_000_000_000),
            m(Impl::PstmProcess, 400, 1_000_000_000),
            m(Impl::Pmdk, 50, 1_000_000_000),
            m(Impl::Romulus, 400, 1_000_000_000),
            m(Impl::Onefile, 800, 1_000_000_000),
        ];
        let rows = aggregate(&ms);
        let p = rows[0].point;
        assert_eq!(find(&rows, p, Impl::Pstm).unwrap().txps, 200.0);
        assert_eq!(slowdown(&rows, p), Some(2.0));
        assert_eq!(over_pmdk(&rows, p), Some(4.0));
        assert_eq!(over_peer(&rows, p, Impl::Romulus), Some(0.5));
        assert_eq!(over_peer(&rows, p, Impl::Onefile), Some(0.25));
        assert_eq!(over_best_peer(&rows, p), Some(0.25));
        let header = table(&rows).lines().next().map(|l| l.matches('|').count());
        assert_eq!(header, table(&rows).lines().nth(1).map(|l| l.matches('|').count()));
        assert_eq!(find(&rows, p, Impl::Pstm).unwrap().fences_per_update(), Some(2.0));
        assert!(table(&rows).contains("2.00×"));
    }

    #[test]
    fn cpus_held_divides_all_runs_cpu_time_by_all_runs_wall_time() {
        let one = |cpu| Measurement {
            tally: Tally { cpu_nanos: cpu, ..m(Impl::Pstm, 100, 1_000_000_000).tally },
            ..m(Impl::Pstm, 100, 1_000_000_000)
        };
        let rows = aggregate(&[one(900_000_000), one(1_000_000_000), one(800_000_000)]);
        assert_eq!(rows[0].cpus_held(), Some(0.9));
        assert_eq!(rows[0].cpu_per_tx(), Some(2_700_000_000.0 / 300.0));
    }

    #[test]
    fn throughput_reads_well() {
        assert_eq!(fmt_txps(1_234_000.0), "1.23 M");
        assert_eq!(fmt_txps(456_000.0), "456 k");
        assert_eq!(fmt_txps(4_560.0), "4.6 k");
        assert_eq!(fmt_txps(789.0), "789");
    }
}
