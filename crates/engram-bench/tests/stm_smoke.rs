//! Smoke test of `engram-bench stm --quick --out DIR`: every structure and
//! implementation runs (PSTM, no-flush, the TVar tree, PMDK, RomulusLog's
//! and OneFile-LF's algorithms) at 1 and 2
//! threads and both lookup shares, every implementation agrees with the
//! `BTreeMap` model (exit status 0), and the report, the CSV and the plots
//! are written. About 30 s in a debug build.
//!
//! Keeps true: the output directory is unique to this process and removed
//! at the end, pass or fail.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("engram-bench-stm-smoke-{}-{tag}", std::process::id()));
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
fn quick_stm_run_covers_every_structure_and_implementation() {
    let out = TempDir::new("out");
    let run = Command::new(env!("CARGO_BIN_EXE_engram-bench"))
        .args(["stm", "--quick", "--out"])
        .arg(&out.0)
        .args(["--dir", pmem_dir()])
        .output()
        .expect("run engram-bench stm");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "engram-bench stm --quick failed ({}):\n{stdout}\n{}", run.status, String::from_utf8_lossy(&run.stderr));
    assert!(stdout.starts_with("engram-bench stm configuration"), "configuration printed first:\n{stdout}");
    assert!(stdout.contains("agreement check: 17 of 17 implementations"), "{stdout}");

    let csv = std::fs::read_to_string(out.0.join("stm.csv")).expect("stm.csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("column {name}"));
    let (structure, imp, threads, txps) = (col("structure"), col("impl"), col("threads"), col("median_txps"));
    let (fences, ro_fences) = (col("fences_per_update"), col("fences_per_readonly"));
    let mut seen = BTreeSet::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let rate: f64 = f[txps].parse().expect("median_txps");
        assert!(rate > 0.0, "no transactions: {l}");
        if f[imp] == "pstm" {
            // An update commit fences once, or twice when it allocated a
            // node; a read-only commit never.
            let per_update: f64 = f[fences].parse().expect("fences_per_update");
            assert!((1.0..=2.0).contains(&per_update), "fences per update commit {per_update}: {l}");
            assert_eq!(f[ro_fences], "0.0000", "read-only commits fence: {l}");
        }
        if f[imp] == "romulus" && f[threads] == "1" {
            // RomulusLog: four fences per update commit, none per lookup
            // (with more threads a combiner's fences serve other threads'
            // updates too, and land in its own commit's class).
            assert_eq!((f[fences], f[ro_fences]), ("4.0000", "0.0000"), "RomulusLog's fences: {l}");
        }
        if f[imp] == "onefile" && f[threads] == "1" {
            // OneFile-LF: two fences per update commit, none per lookup
            // (with more threads a commit that loses the CAS on curTx
            // fences again).
            assert_eq!((f[fences], f[ro_fences]), ("2.0000", "0.0000"), "OneFile-LF's fences: {l}");
        }
        seen.insert((f[structure].to_string(), f[imp].to_string(), f[threads].to_string()));
    }
    let mut expected = Vec::new();
    for s in ["rbtree", "treap", "hashtable", "hamt"] {
        for t in ["1", "2"] {
            expected.push((s, "pstm", t));
            expected.push((s, "pstm-process", t));
        }
    }
    for t in ["1", "2"] {
        expected.extend([
            ("rbtree", "tvar", t),
            ("treap", "tvar", t),
            ("hamt", "tvar", t),
            ("rbtree", "pmdk", t),
            ("hashtable", "pmdk", t),
            ("rbtree", "romulus", t),
            ("hashtable", "romulus", t),
            ("rbtree", "onefile", t),
            ("hashtable", "onefile", t),
        ]);
    }
    for (s, i, t) in expected {
        assert!(seen.contains(&(s.into(), i.into(), t.into())), "no row for {s} {i} {t}; rows: {seen:?}");
    }

    let md = std::fs::read_to_string(out.0.join("stm.md")).expect("stm.md");
    assert!(md.contains("slowdown (no-flush ÷ PSTM tx/s)"), "the report states the ratio direction");
    assert!(md.contains("What the no-flush peer removes"), "the report explains the peer");
    assert!(md.contains("PSTM ÷ RomulusLog (this run)"), "the report compares PSTM with the in-run RomulusLog");
    assert!(md.contains("PSTM ÷ OneFile-LF (this run)"), "the report compares PSTM with the in-run OneFile-LF");
    assert!(md.contains("PSTM ÷ best peer (this run)"), "the report compares PSTM with the best in-run peer");
    for png in ["stm-throughput.png", "stm-slowdown.png", "stm-vs-pmdk.png"] {
        let bytes = std::fs::read(out.0.join(png)).unwrap_or_else(|e| panic!("{png}: {e}"));
        assert!(bytes.starts_with(b"\x89PNG"), "{png} is a PNG");
        assert!(md.contains(png), "stm.md shows {png}");
    }
}
