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
    sweep(|name| !name.starts_with("stm-") && !name.starts_with("lazy-"));
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
        let r = w.run(&settings, &mut |_, _| {}).unwrap_or_else(|e| panic!("{}: {e}", w.name));
        println!("{:<14} {r}", w.name);
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

/// The persistent-laziness workloads (`lazy-*`), in parallel with the others.
#[test]
fn every_lazy_workload_is_crash_consistent() {
    sweep(|name| name.starts_with("lazy-"));
}

/// Without the fence between a result's copy and its 8-byte link, the link
/// can reach the media before the copy: a thunk then points at a copy that
/// is not there (or not whole).
#[test]
fn explorer_catches_a_dropped_lazy_result_fence() {
    let n = violations_with(|| failpoint::drop_fence(engram::lazy::FENCE_RESULT), "lazy-force");
    assert!(n > 0, "dropping the lazy result fence went unnoticed");
}
