//! Smoke test of the `engram-bench` binary: `all --quick` runs every suite
//! and implementation in both setups (both directories on tmpfs here, to be
//! quick), exits 0 only if every implementation agreed on every check
//! value, and writes a CSV with a row for each of them.
//!
//! Keeps true: the output and disk directories are unique to this process
//! and removed at the end, pass or fail.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        Self::under(&std::env::temp_dir(), tag)
    }

    fn under(parent: &std::path::Path, tag: &str) -> Self {
        let dir = parent.join(format!("engram-bench-smoke-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn pmem_dir() -> &'static str {
    if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    }
}

#[test]
fn quick_run_covers_every_suite_and_implementation() {
    let out = TempDir::new("out");
    // The msync setup's code path is the same on any file system; on tmpfs
    // its msyncs do not wait for a disk other work may be keeping busy, so
    // the test stays fast (the report itself measures a real disk).
    let disk = TempDir::under(std::path::Path::new(pmem_dir()), "disk");
    let run = Command::new(env!("CARGO_BIN_EXE_engram-bench"))
        .args(["all", "--quick", "--out"])
        .arg(&out.0)
        .args(["--dir", pmem_dir(), "--disk-dir"])
        .arg(&disk.0)
        .output()
        .expect("run engram-bench");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "engram-bench all --quick failed ({}):\n{stdout}\n{}", run.status, String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("all implementations agree"), "{stdout}");
    assert!(stdout.contains("engram-bench configuration"), "configuration printed first");

    let csv = std::fs::read_to_string(out.0.join("results.csv")).expect("results.csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("column {name}"));
    let (suite, imp, setup) = (col("suite"), col("impl"), col("setup"));
    let seen: BTreeSet<(String, String, String)> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[suite].to_string(), f[imp].to_string(), f[setup].to_string())
        })
        .collect();
    let expected = [
        ("binary-trees", "engram", "pmem"),
        ("binary-trees", "pmdk-tx", "pmem"),
        ("binary-trees", "pmdk-atomic", "pmem"),
        ("binary-trees", "malloc", "pmem"),
        ("binary-trees", "engram-process", "pmem"),
        ("binary-trees", "engram", "msync"),
        ("binary-trees", "pmdk-tx", "msync"),
        ("binary-trees", "pmdk-atomic", "msync"),
        ("nbody", "engram", "pmem"),
        ("nbody", "pmdk-tx", "pmem"),
        ("nbody", "volatile", "pmem"),
        ("nbody", "engram-process", "pmem"),
        ("nbody", "engram", "msync"),
        ("nbody", "pmdk-tx", "msync"),
        ("sps", "engram", "pmem"),
        ("sps", "pmdk-tx", "pmem"),
        ("sps", "volatile", "pmem"),
        ("sps", "engram-process", "pmem"),
        ("sps", "engram", "msync"),
        ("sps", "pmdk-tx", "msync"),
    ];
    for (s, i, m) in expected {
        assert!(seen.contains(&(s.into(), i.into(), m.into())), "no row for {s} {i} {m}; rows: {seen:?}");
    }
    let readme = std::fs::read_to_string(out.0.join("README.md")).expect("README.md");
    assert!(readme.contains("PMDK tx time / other time"), "README states the ratio direction");
}
