//! `engram-bench hybrid`: the hybrid TM prototype (`engram::htm::hybrid`,
//! docs/hybrid.md) on a 90:5:5 workload, and `retry` wake-ups with Bloom
//! filters vs precise sets.
//!
//! - **Throughput and commit shares**: an open-addressing hash set of
//!   `HVar<u64>` slots (2^17 slots), and the treap, red-black tree and hash
//!   trie of `engram::htm::hybrid` (fields embedded in arena nodes); keys 1..=100,000, 50,000 pre-inserted;
//!   each operation is one transaction: a lookup (90 %), an insert (5 %) or a
//!   remove (5 %) of a random key; fixed time per point; modes Hybrid (lazy
//!   and early subscription), HtmCommit (software body, hardware commit) and
//!   Coarse (commit lock); 1, 2, 4, 8 threads; two emulated schedules (real
//!   conflicts only, and 2 % spurious conflicts per access, for the hash
//!   set). Reports commits
//!   per second, the share of commits at each level and aborts by cause.
//! - **Retry policies**: Hybrid-lazy with 1, 2 and one-per-thread hardware
//!   attempts under the noisy schedule.
//! - **Wake-ups**: 4 waiters each block (`retry`) on their own flag after
//!   reading 7 decoy variables; a signaller sets one flag at a time and
//!   measures the time until the waiter has run; a noise thread keeps writing
//!   256 other variables. Bloom vs precise: median and 99th-percentile
//!   latency and false wake-ups per signal.
//!
//! The backend is named in the output: without RTM (this session's AMD
//! EPYC) every figure is from the **emulated** HTM, whose costs are not a
//! hardware's; its shares and abort counts show the protocol, not RTM.
//! No pool is used; nothing is persisted.

use clap::Args;
use engram::htm::hybrid::rbtree::RbTree;
use engram::htm::hybrid::treap::Treap;
use engram::htm::hybrid::trie::HashTrie;
use engram::htm::hybrid::{Attempts, HVar, HybridStats, Mode, Policy, Runtime, Subscription, Tx, TxResult};
use engram::htm::{bloom::WatchMode, Cause, EmuConfig, Htm};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// Arguments of `engram-bench hybrid`.
#[derive(Args, Clone, Debug)]
pub struct HybridArgs {
    /// Directory for hybrid.md (tables go to stdout either way).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seconds per throughput point.
    #[arg(long, default_value_t = 0.5)]
    pub secs: f64,
    /// A smoke test: 0.05 s per point, 1 and 2 threads, 20 signals.
    #[arg(long)]
    pub quick: bool,
    /// Force the emulated backend even where RTM exists.
    #[arg(long)]
    pub emulated: bool,
}

const SLOTS: usize = 1 << 17;
const KEYS: u64 = 100_000;
const TOMB: u64 = u64::MAX;

struct Set {
    slots: Vec<HVar<u64>>,
}

fn hash(k: u64) -> usize {
    (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 47) as usize % SLOTS
}

impl Set {
    fn new() -> Set {
        Set { slots: (0..SLOTS).map(|_| HVar::new(0)).collect() }
    }
    /// The slot holding `k`, and the first reusable slot met on the way.
    fn find<'v>(&'v self, tx: &mut Tx<'v>, k: u64) -> TxResult<(Option<usize>, Option<usize>)> {
        let (mut i, mut free) = (hash(k), None);
        loop {
            tx.check()?;
            match tx.read(&self.slots[i])? {
                0 => return Ok((None, free.or(Some(i)))),
                x if x == k => return Ok((Some(i), free)),
                TOMB if free.is_none() => free = Some(i),
                _ => {}
            }
            i = (i + 1) % SLOTS;
        }
    }
    fn op<'v>(&'v self, tx: &mut Tx<'v>, kind: u64, k: u64) -> TxResult<bool> {
        let (at, free) = self.find(tx, k)?;
        match (kind, at, free) {
            (0, at, _) => Ok(at.is_some()),
            (1, None, Some(f)) => tx.write(&self.slots[f], k).map(|()| true),
            (2, Some(i), _) => tx.write(&self.slots[i], TOMB).map(|()| true),
            _ => Ok(false),
        }
    }
}

/// A set under test: one operation (0 lookup, 1 insert, 2 remove) as one
/// transaction.
trait Bench: Sync {
    fn run(&self, rt: &Runtime, kind: u64, k: u64) -> bool;
}

impl Bench for Set {
    fn run(&self, rt: &Runtime, kind: u64, k: u64) -> bool {
        rt.atomically(|tx| self.op(tx, kind, k)).unwrap_or(false)
    }
}

fn prio(k: u64) -> u64 {
    k.wrapping_mul(0xD1B5_4A32_D192_ED03)
}

impl Bench for Treap {
    fn run(&self, rt: &Runtime, kind: u64, k: u64) -> bool {
        let r = match kind {
            0 => rt.atomically(|tx| self.contains(tx, k)),
            1 => match self.alloc(k, prio(k)) {
                Some(n) => rt.atomically(|tx| self.insert(tx, n)),
                None => return false,
            },
            _ => rt.atomically(|tx| self.remove(tx, k)),
        };
        r.unwrap_or(false)
    }
}

impl Bench for RbTree {
    fn run(&self, rt: &Runtime, kind: u64, k: u64) -> bool {
        let r = match kind {
            0 => rt.atomically(|tx| self.contains(tx, k)),
            1 => match self.alloc(k) {
                Some(n) => rt.atomically(|tx| self.insert(tx, n)),
                None => return false,
            },
            _ => rt.atomically(|tx| self.remove(tx, k)),
        };
        r.unwrap_or(false)
    }
}

impl Bench for HashTrie {
    fn run(&self, rt: &Runtime, kind: u64, k: u64) -> bool {
        let r = match kind {
            0 => rt.atomically(|tx| self.contains(tx, k)),
            1 => rt.atomically(|tx| self.insert(tx, k)),
            _ => rt.atomically(|tx| self.remove(tx, k)),
        };
        r.unwrap_or(false)
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn backend(a: &HybridArgs, ppm: u32) -> Htm {
    let cfg = EmuConfig { seed: 42, conflict_ppm: ppm, ..EmuConfig::default() };
    if a.emulated {
        Htm::emulated(cfg)
    } else {
        Htm::auto(cfg)
    }
}

/// The structures measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Structure {
    HashSet,
    Treap,
    RbTree,
    Trie,
}

/// One throughput point: commits per second and the runtime's counters.
fn point(a: &HybridArgs, st: Structure, policy: Policy, ppm: u32, threads: usize) -> (f64, HybridStats) {
    let rt = Runtime::new(backend(a, ppm), policy);
    let set: Box<dyn Bench> = match st {
        Structure::HashSet => Box::new(Set::new()),
        // Nodes are not reused: room for the preload and the run's inserts.
        Structure::Treap => Box::new(Treap::new(1_000_000)),
        Structure::RbTree => Box::new(RbTree::new(1_000_000)),
        Structure::Trie => Box::new(HashTrie::new(200_000)),
    };
    let set = &*set;
    let mut rng = Rng(7);
    let mut n = 0;
    while n < KEYS / 2 {
        let k = rng.next() % KEYS + 1;
        n += u64::from(set.run(&rt, 1, k));
    }
    let before = rt.stats();
    let stop = AtomicBool::new(false);
    let secs = if a.quick { 0.05 } else { a.secs };
    let start = Instant::now();
    let ops: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (rt, set, stop) = (&rt, &set, &stop);
                s.spawn(move || {
                    let mut rng = Rng(0x1234_5678 + t as u64 * 7919);
                    let mut done = 0u64;
                    while !stop.load(SeqCst) {
                        let (r, k) = (rng.next() % 100, rng.next() % KEYS + 1);
                        let kind = if r < 90 {
                            0
                        } else if r < 95 {
                            1
                        } else {
                            2
                        };
                        set.run(rt, kind, k);
                        done += 1;
                    }
                    done
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, SeqCst);
        hs.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    let el = start.elapsed().as_secs_f64();
    (ops as f64 / el, delta(&rt.stats(), &before))
}

fn delta(a: &HybridStats, b: &HybridStats) -> HybridStats {
    let mut d = *a;
    (0..3).for_each(|i| d.commits[i] -= b.commits[i]);
    (0..Cause::COUNT).for_each(|i| {
        d.hw_aborts[i] -= b.hw_aborts[i];
        d.commit_aborts[i] -= b.commit_aborts[i];
    });
    d
}

fn shares(s: &HybridStats) -> String {
    let total = s.commits.iter().sum::<u64>().max(1) as f64;
    s.commits.iter().map(|&c| format!("{:.1}", 100.0 * c as f64 / total)).collect::<Vec<_>>().join(" / ")
}

/// Abort counts by cause, `name n, ...` (or `-`), for the report tables.
pub(crate) fn causes(c: &[u64; Cause::COUNT]) -> String {
    let v: Vec<String> = Cause::NAMES.iter().zip(c).filter(|(_, &n)| n > 0).map(|(name, n)| format!("{name} {n}")).collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(", ")
    }
}

fn modes() -> [(&'static str, Policy); 4] {
    let p = Policy::default;
    [
        ("hybrid-lazy", Policy { mode: Mode::Hybrid, ..p() }),
        ("hybrid-early", Policy { mode: Mode::Hybrid, subscription: Subscription::Early, ..p() }),
        ("htm-commit", Policy { mode: Mode::HtmCommit, ..p() }),
        ("coarse", Policy { mode: Mode::Coarse, ..p() }),
    ]
}

fn throughput(a: &HybridArgs, md: &mut String) {
    let threads: &[usize] = if a.quick { &[1, 2] } else { &[1, 2, 4, 8] };
    let points = [
        (Structure::HashSet, "hash set", "real conflicts only", 0u32),
        (Structure::HashSet, "hash set", "plus 2 % spurious conflicts per access", 20_000),
        (Structure::Treap, "treap (embedded fields)", "real conflicts only", 0),
        (Structure::RbTree, "red-black tree (embedded fields)", "real conflicts only", 0),
        (Structure::Trie, "hash trie (HAMT without compression, embedded slots)", "real conflicts only", 0),
    ];
    for (n, (st, name, sched, ppm)) in points.into_iter().enumerate() {
        let _ = writeln!(md, "\n### 90:5:5 {name}, {sched}\n");
        if a.out.is_some() {
            let _ = writeln!(md, "![{name}, {sched}: commits/s against threads](hybrid-proto-{n}.png)\n");
        }
        let _ = writeln!(md, "| mode | threads | commits/s | L1 / L2 / L3 % | level-1 aborts | level-2 commit aborts |");
        let _ = writeln!(md, "|---|---:|---:|---|---|---|");
        let mut drawn = Vec::new();
        for (mi, (mode, policy)) in modes().into_iter().enumerate() {
            for &t in threads {
                let (rate, s) = point(a, st, Policy { threads: t as u32, ..policy.clone() }, ppm, t);
                drawn.push((mi, t as u32, rate));
                let _ =
                    writeln!(md, "| {mode} | {t} | {rate:.0} | {} | {} | {} |", shares(&s), causes(&s.hw_aborts), causes(&s.commit_aborts));
            }
        }
        if let Some(out) = &a.out {
            let path = out.join(format!("hybrid-proto-{n}.png"));
            let names: Vec<&str> = modes().iter().map(|m| m.0).collect();
            let ts: Vec<u32> = threads.iter().map(|&t| t as u32).collect();
            let title = format!("{name}, {sched}");
            if let Err(e) = std::fs::create_dir_all(out)
                .map_err(|e| e.to_string())
                .and_then(|()| crate::hybrid_plot::draw(&title, &names, &ts, &drawn, &path))
            {
                eprintln!("engram-bench hybrid: plot {}: {e}", path.display());
            }
        }
    }
    let _ = writeln!(md, "\n### Retry policies (hybrid-lazy, 4 threads, 2 % spurious conflicts)\n");
    let _ = writeln!(md, "| level-1 attempts | commits/s | L1 / L2 / L3 % | level-1 aborts |");
    let _ = writeln!(md, "|---|---:|---|---|");
    for (name, at) in
        [("1", Attempts::Fixed(1)), ("2 (paper)", Attempts::Fixed(2)), ("1 per thread", Attempts::PerThread(1)), ("4", Attempts::Fixed(4))]
    {
        let (rate, s) = point(a, Structure::HashSet, Policy { hw_attempts: at, threads: 4, ..Policy::default() }, 20_000, 4);
        let _ = writeln!(md, "| {name} | {rate:.0} | {} | {} |", shares(&s), causes(&s.hw_aborts));
    }
}

/// Wake-up latency (ns, sorted) and false wake-ups, for `watch`.
fn wakeups(a: &HybridArgs, watch: WatchMode) -> (Vec<u64>, HybridStats) {
    const W: usize = 4;
    let signals = if a.quick { 20 } else { 300 };
    let rt = Runtime::new(backend(a, 0), Policy { watch, threads: W as u32 + 2, ..Policy::default() });
    let flags: Vec<HVar<u64>> = (0..W).map(|_| HVar::new(0)).collect();
    let decoys: Vec<HVar<u64>> = (0..W * 7).map(|_| HVar::new(0)).collect();
    let noise: Vec<HVar<u64>> = (0..256).map(|_| HVar::new(0)).collect();
    let (sent, acks, stop) = ((0..W).map(|_| AtomicU64::new(0)).collect::<Vec<_>>(), AtomicU64::new(0), AtomicBool::new(false));
    let t0 = Instant::now();
    let lat = std::thread::scope(|s| {
        let hs: Vec<_> = (0..W)
            .map(|i| {
                let (rt, flags, decoys, sent, acks, t0) = (&rt, &flags, &decoys, &sent, &acks, t0);
                s.spawn(move || {
                    let mut lat = Vec::with_capacity(signals);
                    for _ in 0..signals {
                        let _ = rt.atomically(|tx| {
                            for d in &decoys[i * 7..i * 7 + 7] {
                                tx.read(d)?;
                            }
                            if tx.read(&flags[i])? == 0 {
                                return tx.retry();
                            }
                            tx.write(&flags[i], 0)
                        });
                        lat.push((t0.elapsed().as_nanos() as u64).saturating_sub(sent[i].load(SeqCst)));
                        acks.fetch_add(1, SeqCst);
                    }
                    lat
                })
            })
            .collect();
        s.spawn(|| {
            let mut rng = Rng(99);
            while !stop.load(SeqCst) {
                let v = &noise[(rng.next() % 256) as usize];
                let _ = rt.atomically(|tx| {
                    let x = tx.read(v)?;
                    tx.write(v, x + 1)
                });
                std::thread::sleep(Duration::from_micros(20));
            }
        });
        for k in 0..signals * W {
            let i = k % W;
            sent[i].store(t0.elapsed().as_nanos() as u64, SeqCst);
            let _ = rt.atomically(|tx| tx.write(&flags[i], 1));
            while acks.load(SeqCst) <= k as u64 {
                std::thread::yield_now();
            }
        }
        stop.store(true, SeqCst);
        let mut all: Vec<u64> = hs.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect();
        all.sort_unstable();
        all
    });
    (lat, rt.stats())
}

fn wake_table(a: &HybridArgs, md: &mut String) {
    let _ =
        writeln!(md, "\n### retry wake-ups: 4 waiters (each reads its flag and 7 decoys), 1 signaller, 1 noise writer (256 variables)\n");
    let _ = writeln!(md, "| watch set | signals | median latency µs | p99 latency µs | wake-ups | false wake-ups | false per signal |");
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|");
    for watch in [WatchMode::Bloom, WatchMode::Precise] {
        let (lat, s) = wakeups(a, watch);
        let pct = |p: f64| lat.get(((lat.len() as f64 - 1.0) * p) as usize).copied().unwrap_or(0) as f64 / 1000.0;
        let n = lat.len().max(1);
        let _ = writeln!(
            md,
            "| {watch:?} | {} | {:.1} | {:.1} | {} | {} | {:.2} |",
            lat.len(),
            pct(0.5),
            pct(0.99),
            s.wake.woken,
            s.wake.false_wakeups,
            s.wake.false_wakeups as f64 / n as f64
        );
    }
}

/// Runs the benchmark; prints the report, writes `hybrid.md` with `--out`.
pub fn main(a: HybridArgs) -> ExitCode {
    let machine = crate::sysinfo::Machine::detect();
    // Arm the STM's HTM runtimes before the process's first transaction.
    if a.emulated {
        engram::stm::runtime::configure_emulated(EmuConfig { seed: 42, ..EmuConfig::default() });
    } else if let Err(e) = engram::stm::runtime::set_default_runtime(engram::stm::runtime::Runtime::Fine) {
        eprintln!("engram-bench hybrid: {e}");
    }
    let htm = backend(&a, 0);
    let mut md = String::from("# Hybrid TM prototype (engram::htm::hybrid)\n\n");
    let _ = writeln!(
        md,
        "Generated by `engram-bench hybrid{}`; design in [../hybrid.md](../hybrid.md).\n",
        if a.quick { " --quick" } else { "" }
    );
    let _ = writeln!(
        md,
        "- CPU: {} ({} logical cores), load average {}",
        machine.cpu,
        machine.cores,
        crate::sysinfo::load_average().map_or("unknown".into(), |l| format!("{l:.2}"))
    );
    let _ = writeln!(md, "- HTM backend: **{}** (RTM usable here: {})", htm.name(), engram::htm::rtm_available());
    if !htm.is_rtm() {
        let _ = writeln!(md, "- Every figure is from the emulated HTM: the levels' shares and abort causes show the protocol; times are not a hardware TM's. Hardware figures need an RTM machine (none was available).");
    }
    let _ = writeln!(md, "- L1 = all hardware, L2 = software body + hardware commit, L3 = commit lock; aborts are counts over the point.");
    println!("{md}");
    let start = md.len();
    throughput(&a, &mut md);
    wake_table(&a, &mut md);
    crate::hybrid_stm::section(&a, &mut md);
    crate::wakeup::section(a.quick, a.out.as_deref(), &mut md);
    println!("{}", &md[start..]);
    if let Some(out) = &a.out {
        let path = out.join("hybrid.md");
        if let Err(e) = std::fs::create_dir_all(out).and_then(|()| std::fs::write(&path, &md)) {
            eprintln!("engram-bench hybrid: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("report written to {}", path.display());
    }
    ExitCode::SUCCESS
}
