//! `retry` wake-ups of the real STM (`engram::stm::wait`): Bloom-filter
//! read sets (the hybrid TM's 64-bit filters) against precise watch sets.
//! A section of `engram-bench hybrid` (docs/bench/hybrid.md) and, alone,
//! `engram-bench wakeup` (prints the section; `wakeup.png` with `--out`).
//!
//! Workload, for 1, 2, 4 and 8 waiters and each mode: waiter `i` blocks in
//! `retry` until its flag `TVar` changes, after reading 7 decoy `TVar`s of
//! its own (a read set of 8 words, 8 of the filter's 64 bits). A signaller
//! sets one flag at a time, round robin, once every waiter is blocked
//! (registered on the wait list), writing the time since the start into
//! it, and waits until that waiter has run before the next signal; the
//! waiter's latency is the time from the signal's commit starting to its
//! own transaction returning. A noise thread meanwhile commits writes of 4
//! of 256 other variables, pausing 20 µs between commits. Reported: median
//! and 99th-percentile latency, wake-ups delivered, and false wake-ups (a
//! waiter woken although nothing it read changed) per 1000 commits (signals
//! plus noise).
//!
//! Times depend on the machine and its load (the report states both); the
//! counts show the modes' difference. No pool: volatile `TVar`s.

use crate::chart::{colour, draw_legend, draw_threads_mesh, fmt_tick, register_font};
use engram::stm::wait::{self, WakeStats, WatchMode};
use engram::stm::{atomically, TVar};
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Arguments of `engram-bench wakeup`.
#[derive(clap::Args, Clone, Debug)]
pub struct WakeupArgs {
    /// Directory for wakeup.png (the section goes to stdout).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A smoke test: 1 and 2 waiters, 40 signals each.
    #[arg(long)]
    pub quick: bool,
}

const WAITERS: [usize; 4] = [1, 2, 4, 8];
const DECOYS: usize = 7;
const NOISE_VARS: usize = 256;
const NOISE_WRITES: usize = 4;

/// One measured point.
struct Point {
    mode: WatchMode,
    waiters: usize,
    /// Latencies in ns, sorted.
    lat: Vec<u64>,
    commits: u64,
    stats: WakeStats,
}

impl Point {
    fn pct(&self, p: f64) -> f64 {
        self.lat.get(((self.lat.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0) as f64
    }
    fn false_per_1000(&self) -> f64 {
        1000.0 * self.stats.false_wakeups as f64 / self.commits.max(1) as f64
    }
}

struct Shared {
    flags: Vec<TVar<u64>>,
    decoys: Vec<Vec<TVar<u64>>>,
    noise: Vec<TVar<u64>>,
    acks: AtomicU64,
    stop: AtomicBool,
    t0: Instant,
}

const STOP: u64 = u64::MAX;

/// Waiter `i`: blocks until its flag changes; returns the latencies.
fn waiter(sh: &Shared, i: usize) -> Vec<u64> {
    let (mut last, mut lat) = (0u64, Vec::new());
    loop {
        let v = atomically(|tx| {
            for d in &sh.decoys[i] {
                tx.read(d)?;
            }
            let v = tx.read(&sh.flags[i])?;
            if v == last {
                return tx.retry();
            }
            Ok(v)
        });
        let Ok(v) = v else { return lat };
        if v == STOP {
            return lat;
        }
        lat.push((sh.t0.elapsed().as_nanos() as u64).saturating_sub(v));
        last = v;
        sh.acks.fetch_add(1, SeqCst);
    }
}

fn noise(sh: &Shared, commits: &AtomicU64) {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    while !sh.stop.load(SeqCst) {
        let picks: Vec<usize> = (0..NOISE_WRITES)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as usize % NOISE_VARS
            })
            .collect();
        let ok = atomically(|tx| picks.iter().try_for_each(|&k| tx.write(&sh.noise[k], x)));
        commits.fetch_add(u64::from(ok.is_ok()), SeqCst);
        std::thread::sleep(Duration::from_micros(20));
    }
}

fn point(mode: WatchMode, waiters: usize, signals: usize) -> Point {
    wait::set_wakeup_mode(mode);
    let sh = Arc::new(Shared {
        flags: (0..waiters).map(|_| TVar::new(0)).collect(),
        decoys: (0..waiters).map(|_| (0..DECOYS).map(|_| TVar::new(0)).collect()).collect(),
        noise: (0..NOISE_VARS).map(|_| TVar::new(0)).collect(),
        acks: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        t0: Instant::now(),
    });
    let commits = Arc::new(AtomicU64::new(0));
    let before = wait::wakeup_stats();
    let hs: Vec<_> = (0..waiters).map(|i| (sh.clone(), i)).map(|(sh, i)| std::thread::spawn(move || waiter(&sh, i))).collect();
    let nz = {
        let (sh, c) = (sh.clone(), commits.clone());
        std::thread::spawn(move || noise(&sh, &c))
    };
    for k in 0..signals {
        // Every waiter blocked again (registered), so the signal measures a
        // wake-up, not a waiter that had not gone to sleep yet.
        while wait::waiting() < waiters {
            std::thread::yield_now();
        }
        let i = k % waiters;
        let _ = atomically(|tx| tx.write(&sh.flags[i], (sh.t0.elapsed().as_nanos() as u64).max(1)));
        commits.fetch_add(1, SeqCst);
        while sh.acks.load(SeqCst) <= k as u64 {
            std::thread::yield_now();
        }
    }
    sh.stop.store(true, SeqCst);
    let _ = nz.join();
    let stats = wait::wakeup_stats().since(&before);
    let commits = commits.load(SeqCst);
    for f in &sh.flags {
        let _ = atomically(|tx| tx.write(f, STOP));
    }
    let mut lat: Vec<u64> = hs.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect();
    lat.sort_unstable();
    Point { mode, waiters, lat, commits, stats }
}

/// Measures every point (the process's wake-up mode is restored after).
fn measure(quick: bool) -> Vec<Point> {
    let was = wait::wakeup_mode();
    let waiters: &[usize] = if quick { &WAITERS[..2] } else { &WAITERS };
    let signals = |w: usize| if quick { 40 * w } else { 4000.max(500 * w) };
    let pts = WatchMode::ALL.iter().flat_map(|&m| waiters.iter().map(move |&w| point(m, w, signals(w)))).collect();
    wait::set_wakeup_mode(was);
    pts
}

/// Appends the section to `md`; draws `wakeup.png` into `out` if given.
pub fn section(quick: bool, out: Option<&Path>, md: &mut String) {
    let pts = measure(quick);
    let _ = writeln!(md, "\n## `retry` wake-ups in the real STM: Bloom filters vs precise watch sets\n");
    let _ = writeln!(
        md,
        "`engram::stm::wait` (`ENGRAM_STM_WAKEUP=bloom|precise`); volatile `TVar`s, STM runtime `{}`. \
         Each waiter blocks on its flag after reading 7 decoys (8 words); one signaller sets one flag at a time; \
         a noise thread commits 4 writes of 256 other variables every 20 µs. Latency: from the signal's commit \
         starting to the waiter's transaction returning. False wake-ups: woken, nothing read had changed.\n",
        engram::stm::runtime::current().name()
    );
    let _ = writeln!(
        md,
        "| watch set | waiters | signals | median µs | p99 µs | commits | wake-ups | false wake-ups | false per 1000 commits |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for p in &pts {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.1} | {:.1} | {} | {} | {} | {:.1} |",
            p.mode.name(),
            p.waiters,
            p.lat.len(),
            p.pct(0.5) / 1000.0,
            p.pct(0.99) / 1000.0,
            p.commits,
            p.stats.woken,
            p.stats.false_wakeups,
            p.false_per_1000()
        );
    }
    if let Some(dir) = out {
        match std::fs::create_dir_all(dir).map_err(|e| e.to_string()).and_then(|()| draw(&pts, &dir.join("wakeup.png"))) {
            Ok(()) => {
                let _ = writeln!(md, "\n![wake-up latency](wakeup.png)");
            }
            Err(e) => eprintln!("engram-bench: wakeup.png not drawn: {e}"),
        }
    }
}

/// Median and p99 latency against waiters, one line each per mode.
fn draw(pts: &[Point], path: &Path) -> Result<(), String> {
    register_font().map_err(|e| e.to_string())?;
    let waiters: Vec<u32> = crate::chart::sorted(pts.iter().map(|p| p.waiters as u32));
    let root = BitMapBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    // y is log10(µs): one slow outlier must not flatten the medians.
    let y = |ns: f64| (ns / 1000.0).max(0.1).log10();
    let hi = pts.iter().map(|p| y(p.pct(0.99))).fold(0.0, f64::max).max(1.0);
    let n = waiters.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption("STM retry wake-up latency, Bloom vs precise (x: blocked waiters; lower is better)", ("sans-serif", 18))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.3..n - 0.7, -1.0..hi.ceil() + 0.5)
        .map_err(|e| e.to_string())?;
    let decades = |v: &f64| if (v - v.round()).abs() < 1e-6 { fmt_tick(10f64.powf(v.round())) } else { String::new() };
    draw_threads_mesh(&mut chart, &waiters, "µs (log scale)", &decades)?;
    for (mode, c) in [(WatchMode::Bloom, colour::PMDK), (WatchMode::Precise, colour::ENGRAM)] {
        for (q, width, what) in [(0.5, 3, "median"), (0.99, 1, "p99")] {
            let line: Vec<(f64, f64)> = waiters
                .iter()
                .enumerate()
                .filter_map(|(i, &w)| pts.iter().find(|p| p.mode == mode && p.waiters == w as usize).map(|p| (i as f64, y(p.pct(q)))))
                .collect();
            chart
                .draw_series(LineSeries::new(line.clone(), c.stroke_width(width)))
                .map_err(|e| e.to_string())?
                .label(format!("{} {what}", mode.name()))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(width)));
            chart.draw_series(line.iter().map(|&p| Circle::new(p, 4, c.filled()))).map_err(|e| e.to_string())?;
        }
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present().map_err(|e| e.to_string())
}

/// `engram-bench wakeup`: the machine, then the section, on stdout.
pub fn main(a: WakeupArgs) -> ExitCode {
    let m = crate::sysinfo::Machine::detect();
    let load = crate::sysinfo::load_average().map_or("unknown".into(), |l| format!("{l:.2}"));
    let mut md = format!("- CPU: {} ({} logical cores), load average {load}\n", m.cpu, m.cores);
    if let Some(out) = &a.out {
        if let Err(e) = std::fs::create_dir_all(out) {
            eprintln!("engram-bench wakeup: cannot create {}: {e}", out.display());
            return ExitCode::FAILURE;
        }
    }
    section(a.quick, a.out.as_deref(), &mut md);
    println!("{md}");
    ExitCode::SUCCESS
}
