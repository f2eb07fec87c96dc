//! Simulated power failure: every engine path, explored at every ordering
//! point under the x86 persistency model (the moderate sweep; the deep one
//! is `engram crashtest --deep` under `make bench`). Also proves the
//! explorer can fail: dropping one fence of the undo log, the STM's record
//! fence, or the flush of a span-table entry, must be reported as a
//! violation.

use engram::crashtest::{workload, workloads, Settings};
use engram::failpoint;

/// A fresh scratch directory (tmpfs when there is one), removed on drop,
/// also when an assertion fails; tests run in parallel, each has its own.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new() -> Self {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        Scratch(base.join(format!("engram-explorer-{}-{n}", std::process::id())))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The region and allocator workloads here, the STM's in the next test
/// (the two run in parallel).
#[test]
fn every_workload_is_crash_consistent() {
    sweep(|name| !name.starts_with("stm-"));
}

#[test]
fn every_stm_workload_is_crash_consistent() {
    sweep(|name| name.starts_with("stm-"));
}

fn sweep(which: impl Fn(&str) -> bool) {
    let dir = Scratch::new();
    let settings = Settings::moderate(&dir.0);
    let mut total = 0;
    for w in workloads().iter().filter(|w| which(w.name)) {
        let t0 = std::time::Instant::now();
        let r = w.run(&settings, &mut |_, _| {}).unwrap_or_else(|e| panic!("{}: {e}", w.name));
        println!("{:<14} {r} ({:.1?})", w.name, t0.elapsed());
        for v in &r.violations {
            println!("  violation before event {} ({:?}): {} [{}]", v.event_index, v.fence, v.message, v.image);
        }
        assert!(r.violations.is_empty(), "{}: {} violations", w.name, r.violations.len());
        assert!(r.points > 1 && r.images_checked > 0, "{}: explored nothing", w.name);
        total += r.images_checked;
    }
    println!("{total} images checked");
}

fn violations_with(fault: impl Fn(), name: &str) -> usize {
    let dir = Scratch::new();
    violations_in(Settings::moderate(&dir.0), fault, name)
}

fn violations_in(settings: Settings, fault: impl Fn(), name: &str) -> usize {
    fault();
    let r = workload(name).unwrap().run(&settings, &mut |_, _| {});
    failpoint::disarm_all();
    let r = r.unwrap();
    for v in r.violations.iter().take(2) {
        println!("{name}: violation before event {} ({:?}): {} [{}]", v.event_index, v.fence, v.message, v.image);
    }
    r.violations.len()
}

#[test]
fn explorer_catches_a_dropped_undo_log_fence() {
    let n = violations_with(|| failpoint::drop_fence("undo entry before the logged range is modified"), "commit");
    assert!(n > 0, "dropping the undo-entry fence went unnoticed");
}

#[test]
fn explorer_catches_a_dropped_commit_fence() {
    let n = violations_with(|| failpoint::drop_fence("region data before the log is invalidated"), "commit");
    assert!(n > 0, "dropping the commit data fence went unnoticed");
}

#[test]
fn explorer_catches_a_dropped_span_table_flush() {
    let n = violations_with(|| failpoint::drop_flush("span-table entry"), "alloc");
    assert!(n > 0, "dropping the span-table flush went unnoticed");
}

/// Without the record fence, a commit's in-place values can reach the media
/// before its record. The images that show it keep some in-place lines and
/// not the record's: one transfer per region, and enough images per point
/// that the per-line choices reach the in-place lines (the record and the
/// copies have lower addresses and are tried first).
#[test]
fn explorer_catches_a_dropped_stm_record_fence() {
    let dir = Scratch::new();
    let mut settings = Settings::moderate(&dir.0);
    settings.regions = 1;
    settings.explorer.max_images_per_point = 128;
    let fence = "STM redo record and copies before the new values are visible";
    let n = violations_in(settings, || failpoint::drop_fence(fence), "stm-bank");
    assert!(n > 0, "dropping the STM record fence went unnoticed");
}

/// The explorer for each flush instruction the engine may use (CLWB,
/// CLFLUSHOPT, CLFLUSH on machines without the others): the tracer records
/// the forced kind, CLFLUSH adds a crash point after every flush, and every
/// image is still consistent.
#[test]
fn every_flush_kind_is_crash_consistent() {
    use engram_model::FlushKind;
    let dir = Scratch::new();
    let runs = [
        (FlushKind::Clwb, "commit"),
        (FlushKind::Clflushopt, "commit"),
        (FlushKind::Clflush, "commit"),
        (FlushKind::Clflush, "stm-bank"),
    ];
    for (kind, name) in runs {
        let mut settings = Settings::moderate(&dir.0);
        settings.flush_kind = Some(kind);
        settings.regions = if name == "commit" { 2 } else { 1 };
        let r = workload(name).unwrap().run(&settings, &mut |_, _| {}).unwrap();
        println!("{kind:?} {name:<10} {r}");
        for v in &r.violations {
            println!("  violation before event {} ({:?}): {} [{}]", v.event_index, v.fence, v.message, v.image);
        }
        assert!(r.violations.is_empty(), "{kind:?} {name}");
        if kind == FlushKind::Clflush {
            assert!(r.points > r.fences + 1, "{name}: no crash point after a CLFLUSH ({r})");
        } else {
            assert_eq!(r.points, r.fences + 1, "{name}: {r}");
        }
    }
}

/// The tracer records the flush instruction the persister really uses on
/// this CPU, or the one a test forces.
#[test]
fn tracer_records_the_flush_instruction() {
    use engram::pmem::FlushInstr;
    use engram::trace::Tracer;
    use engram::{CreateOptions, Pool};
    use engram_model::{Event, FlushKind};
    let dir = Scratch::new();
    std::fs::create_dir_all(&dir.0).unwrap();
    for forced in [None, Some(FlushKind::Clwb), Some(FlushKind::Clflushopt), Some(FlushKind::Clflush)] {
        let tracer = Tracer::new();
        if let Some(k) = forced {
            tracer.force_flush_kind(k);
        }
        let path = dir.0.join("kinds.pool");
        let _ = std::fs::remove_file(&path);
        let pool = Pool::create(&path, CreateOptions::new("kinds").trace(tracer.clone())).unwrap();
        tracer.start();
        pool.txn(|tx| {
            let p = tx.alloc(7u64)?;
            tx.set_root("x", p)
        })
        .unwrap();
        let trace = tracer.stop();
        pool.close().unwrap();
        let want = forced.unwrap_or(FlushInstr::detect().kind());
        let kinds: Vec<FlushKind> = trace.events.iter().filter_map(|e| if let Event::Flush { kind, .. } = e { Some(*kind) } else { None }).collect();
        assert!(!kinds.is_empty());
        assert!(kinds.iter().all(|&k| k == want), "{forced:?}: {kinds:?}");
    }
}

/// Every named fence and flush, with the workload whose traced stretch
/// reaches it. Dropping any one of them must be reported by the moderate
/// sweep of that workload, except the ones listed in [`HARMLESS`].
const FAULTS: &[(&str, &str, &str)] = &[
    ("flush", "span-table entry", "alloc"),
    ("fence", "span tables cleared before the arenas are handed back", "gc"),
    ("fence", "arena table entries of a freed huge object", "gc"),
    ("fence", "span tables of swept spans", "gc"),
    ("fence", "slot bitmaps before the clean flag", "close"),
    ("fence", "undo entry before the logged range is modified", "commit"),
    ("fence", "jump entry before entries in the next chunk", "spill"),
    ("fence", "log chunk headers before the chunk is linked", "spill"),
    ("fence", "log chunk link before entries use it", "spill"),
    ("fence", "restored bytes before the log is invalidated", "abort"),
    ("fence", "log generation bump: the region is committed", "commit"),
    ("fence", "type entry body before its used flag", "commit"),
    ("fence", "type entry used flag", "commit"),
    ("fence", "region data before the log is invalidated", "commit"),
    ("fence", "header copy written before it is relied on", "relocation"),
    ("fence", "grown size recorded before the new space is used", "growth"),
    ("fence", "objects allocated by a transaction that wrote no variable", "stm-map"),
    ("fence", "new transactional objects before the record that links them", "stm-map"),
    ("fence", "STM redo record and copies before the new values are visible", "stm-bank"),
    ("fence", "STM clock reservation before versions above it are used", "stm-first"),
    ("fence", "in-place STM values of idle threads before their records are cleared", "stm-gc"),
    ("fence", "STM records cleared", "stm-gc"),
    ("fence", "replayed STM values before their records are cleared", "stm-recovery"),
    ("fence", "STM records cleared and epoch bumped", "stm-recovery"),
    ("fence", "swizzled pointers before the relocation is finished", "relocation"),
];

/// Drops one fault in turn on the moderate sweep of its workload and
/// returns a line per fault: (hits, violations).
fn fault_sweep(which: impl Fn(usize) -> bool) -> Vec<String> {
    let dir = Scratch::new();
    let mut missed = Vec::new();
    for (i, &(kind, what, name)) in FAULTS.iter().enumerate().filter(|(i, _)| which(*i)) {
        let t0 = std::time::Instant::now();
        if kind == "fence" {
            failpoint::drop_fence(what);
        } else {
            failpoint::drop_flush(what);
        }
        let mut settings = Settings::moderate(&dir.0);
        settings.explorer.max_violations = 1; // one is proof enough
        let r = workload(name).unwrap().run(&settings, &mut |_, _| {});
        let hits = failpoint::drops();
        failpoint::disarm_all();
        let r = r.unwrap_or_else(|e| panic!("{name}: {e}"));
        println!("#{i} {kind} {what:?} on {name}: dropped {hits}x, {} violations, {} images ({:.1?})", r.violations.len(), r.images_checked, t0.elapsed());
        if hits == 0 {
            missed.push(format!("{kind} {what:?}: never reached by {name}"));
        } else if r.violations.is_empty() {
            missed.push(format!("{kind} {what:?}: dropped {hits}x on {name}, no violation"));
        }
    }
    missed
}

// Three tests, so that the test harness runs the faults in parallel.

#[test]
fn moderate_sweep_catches_every_dropped_fence_and_flush_1() {
    let missed = fault_sweep(|i| i % 3 == 0);
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

#[test]
fn moderate_sweep_catches_every_dropped_fence_and_flush_2() {
    let missed = fault_sweep(|i| i % 3 == 1);
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

#[test]
fn moderate_sweep_catches_every_dropped_fence_and_flush_3() {
    let missed = fault_sweep(|i| i % 3 == 2);
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}
