//! Simulated power failure: every engine path, explored at every ordering
//! point under the x86 persistency model (the moderate sweep; the deep one
//! is `engram crashtest --deep` under `make bench`). Also proves the
//! explorer can fail: dropping one fence of the undo log, or the flush of a
//! span-table entry, must be reported as a violation.

use engram::crashtest::{workload, workloads, Settings};
use engram::failpoint;

fn dir() -> std::path::PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
    base.join(format!("engram-explorer-{}", std::process::id()))
}

#[test]
fn every_workload_is_crash_consistent() {
    let settings = Settings::moderate(&dir());
    let mut total = 0;
    for w in workloads() {
        let r = w.run(&settings, &mut |_, _| {}).unwrap_or_else(|e| panic!("{}: {e}", w.name));
        println!("{:<11} {r}", w.name);
        for v in &r.violations {
            println!("  violation before event {} ({:?}): {} [{}]", v.event_index, v.fence, v.message, v.image);
        }
        assert!(r.violations.is_empty(), "{}: {} violations", w.name, r.violations.len());
        assert!(r.points > 1 && r.images_checked > 0, "{}: explored nothing", w.name);
        total += r.images_checked;
    }
    println!("{total} images checked");
    let _ = std::fs::remove_dir_all(dir());
}

fn violations_with(fault: impl Fn(), name: &str) -> usize {
    let settings = Settings::moderate(&dir());
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
