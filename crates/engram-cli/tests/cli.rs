//! The `engram` command end to end: create/info/check/gc round trip, help
//! for every subcommand, one-line errors (never a panic) on files that are
//! not pools, and the demo finding its data again, after a clean exit and
//! after a crash.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

const BIN: &str = env!("CARGO_BIN_EXE_engram");

/// A unique path under /dev/shm (or the temp dir), removed on drop.
struct Temp(PathBuf);

impl Temp {
    fn new(tag: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = dir.join(format!("engram-cli-test-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_dir_all(&p);
        Temp(p)
    }

    fn s(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn engram(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run engram")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `args`, requires success, returns stdout.
fn ok(args: &[&str]) -> String {
    let o = engram(args);
    assert!(o.status.success(), "engram {args:?} failed: {}{}", stdout(&o), stderr(&o));
    stdout(&o)
}

/// Runs `args`, requires exit status 1 with one `engram:` line; returns it.
fn fails(args: &[&str]) -> String {
    let o = engram(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "engram {args:?}: {err}");
    assert!(!err.contains("panicked"), "engram {args:?} panicked: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "engram {args:?}: not one line: {err:?}");
    assert!(lines[0].starts_with("engram: "), "engram {args:?}: {err:?}");
    lines[0].to_string()
}

fn create(t: &Temp, layout: &str) {
    ok(&["create", t.s(), "--layout", layout, "--size", "8M", "--max-size", "1G", "--durability", "process"]);
}

/// The number after `"key":` in flat JSON.
fn json_u64(json: &str, key: &str) -> u64 {
    let pat = format!("\"{key}\":");
    let at = json.find(&pat).unwrap_or_else(|| panic!("{key} not in {json}")) + pat.len();
    let digits: String = json[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("{key} is not a number in {json}"))
}

#[test]
fn create_info_check_gc_round_trip() {
    let t = Temp::new("rt");
    create(&t, "round-trip");
    let info = ok(&["info", t.s()]);
    assert!(info.contains("\"round-trip\""), "{info}");
    assert!(info.contains(&format!("version {}", engram::format::FORMAT_VERSION)), "{info}");
    assert!(info.contains("8.00 MiB"), "{info}");
    assert!(info.contains("may grow to 1.00 GiB"), "{info}");
    assert!(["msync", "pmem", "wal"].iter().any(|m| info.contains(&format!("durability   {m} by default"))), "{info}");
    assert!(info.contains("last close   clean"), "{info}");
    let json = ok(&["info", "--json", t.s()]);
    assert!(json.starts_with('{') && json.trim_end().ends_with('}'), "{json}");
    assert!(json.contains("\"layout\":\"round-trip\""), "{json}");
    assert_eq!(json_u64(&json, "size"), 8 << 20);
    assert_eq!(json_u64(&json, "live_objects"), 0);
    let check = ok(&["check", t.s()]);
    assert!(check.contains("consistent: 0 objects"), "{check}");
    assert_eq!(check.lines().count(), 1, "{check}");
    let gc = ok(&["gc", t.s()]);
    assert!(gc.contains("after:  0 objects live"), "{gc}");
    // create refuses to overwrite
    assert!(fails(&["create", t.s(), "--layout", "x"]).contains("file exists"));
}

#[test]
fn help_works_everywhere() {
    let top = ok(&["--help"]);
    for sub in ["create", "info", "check", "gc", "demo"] {
        assert!(top.contains(sub), "{sub} missing from {top}");
        let h = ok(&[sub, "--help"]);
        assert!(h.contains(&format!("Usage: engram {sub}")), "{h}");
    }
    assert!(!top.contains("torture"), "torture is hidden: {top}");
    assert!(ok(&["torture", "--help"]).contains("--seed"));
    assert!(ok(&["create", "--help"]).contains("--max-size"));
}

#[test]
fn usage_errors_exit_2() {
    let t = Temp::new("usage");
    for args in [
        vec!["create", t.s(), "--layout", "x", "--size", "12Q"],
        vec!["create", t.s()],
        vec!["info"],
        vec!["frobnicate"],
        vec!["demo", t.s(), "--regions", "3", "--crash-after", "4"],
    ] {
        let o = engram(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
    }
    assert!(!t.0.exists());
}

#[test]
fn bad_files_give_one_line_errors() {
    let foreign = Temp::new("foreign");
    std::fs::write(&foreign.0, b"this is not a pool, just some text\n".repeat(500)).unwrap();
    let empty = Temp::new("empty");
    std::fs::write(&empty.0, b"").unwrap();
    let real = Temp::new("real");
    create(&real, "real");
    let bytes = std::fs::read(&real.0).unwrap();
    let truncated = Temp::new("truncated");
    std::fs::write(&truncated.0, &bytes[..64 << 10]).unwrap();
    let tiny = Temp::new("tiny");
    std::fs::write(&tiny.0, &bytes[..300]).unwrap();
    let missing = Temp::new("missing");
    let dir = Temp::new("dir");
    std::fs::create_dir(&dir.0).unwrap();
    let cases = [
        (&foreign, "not an Engram pool"),
        (&empty, "not an Engram pool"),
        (&truncated, "truncated pool"),
        (&tiny, "truncated pool"),
        (&missing, "No such file"),
        (&dir, "directory"),
    ];
    for (t, want) in cases {
        for cmd in ["info", "check", "gc"] {
            let line = fails(&[cmd, t.s()]);
            assert!(line.contains(want), "{cmd} {}: {line}", t.s());
            assert!(line.contains(t.s()), "{cmd}: the message names the file: {line}");
        }
    }
    assert!(!missing.0.exists(), "nothing creates a missing pool");
    assert_eq!(std::fs::read(&foreign.0).unwrap().len(), 35 * 500, "the foreign file is untouched");
    let wrong = fails(&["demo", real.s()]);
    assert!(wrong.contains("layout is \"real\""), "{wrong}");
}

#[test]
fn check_names_a_corrupt_object() {
    let t = Temp::new("corrupt");
    ok(&["demo", t.s(), "--regions", "3"]);
    let json = ok(&["info", "--json", t.s()]);
    let (base, root) = (json_u64(&json, "base"), json_u64(&json, "addr"));
    // Overwrite the 16-byte object header in front of the ledger.
    let mut bytes = std::fs::read(&t.0).unwrap();
    let at = (root - base - 16) as usize;
    bytes[at..at + 16].fill(0xA5);
    std::fs::write(&t.0, &bytes).unwrap();
    // The walk reports the root naming it (and treats it as null).
    let line = fails(&["check", t.s()]);
    assert!(line.contains("root \"ledger\"") && line.contains("header is damaged"), "{line}");
}

#[test]
fn demo_finds_its_data_again() {
    let t = Temp::new("demo");
    let first = ok(&["demo", t.s(), "--regions", "4"]);
    assert!(first.contains("created a new pool"), "{first}");
    assert!(first.contains("4 record(s) for 4 region(s)"), "{first}");
    let second = ok(&["demo", t.s(), "--regions", "2"]);
    assert!(second.contains("last run closed it cleanly"), "{second}");
    assert!(second.contains("found the ledger: 1 earlier run(s), 4 record(s)"), "{second}");
    assert!(second.contains("run 2:"), "{second}");
    assert!(second.contains("6 record(s) for 6 region(s)"), "{second}");
}

#[test]
fn demo_recovers_from_a_crash() {
    let t = Temp::new("crash");
    ok(&["demo", t.s(), "--regions", "2"]);
    let o = engram(&["demo", t.s(), "--regions", "3", "--crash-after", "2"]);
    assert!(!o.status.success(), "the crash run must not succeed");
    assert!(stdout(&o).contains("crash:"), "{}", stdout(&o));
    assert!(!stderr(&o).contains("panicked"));
    let info = ok(&["info", t.s()]);
    assert!(info.contains("not clean"), "{info}");
    assert!(info.contains("would undo 1 region(s) (2 log entries)"), "{info}");
    // info and check leave the file as it was
    ok(&["check", t.s()]);
    assert!(ok(&["info", t.s()]).contains("not clean"));
    let after = ok(&["demo", t.s(), "--regions", "1"]);
    assert!(after.contains("the last run crashed; recovery undid 1 region(s) (2 log entries)"), "{after}");
    // 2 records from run 1 and 1 committed before the crash in run 2
    assert!(after.contains("found the ledger: 2 earlier run(s), 3 record(s)"), "{after}");
    assert!(after.contains("invariants OK"), "{after}");
    assert!(after.contains("4 record(s) for 4 region(s)"), "{after}");
}

#[test]
fn crashtest_reports_points_images_and_violations() {
    let out = engram(&["crashtest", "abort", "--images", "4", "--regions", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("ordering points") && text.contains("images checked") && text.contains("0 violations"), "{text}");
    // simulated crashes and the panic workload's panics are intended: silent
    for w in ["recovery", "panic", "stm-recovery"] {
        let out = Command::new(BIN).args(["crashtest", w, "--images", "2", "--regions", "2"]).env("RUST_BACKTRACE", "1").output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !err.contains("panicked") && !err.contains("backtrace"), "{w}: {err}");
    }
    let out = engram(&["crashtest", "commit", "--images", "2", "--regions", "1", "--flush-kind", "clflush"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // the double-crash mode: a crash during `raw`'s recovery (no ledger)
    let out = engram(&["crashtest", "raw", "--double", "--regions", "1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("second-crash images checked, 0 violations"), "{text}");
    let bad = engram(&["crashtest", "no-such-workload"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown workload"));
}

/// A misspelt `ENGRAM_COMMIT_RECORD` is refused with a message naming it,
/// before a pool is created or opened (a misspelt setting must not silently
/// become another one); the file is left as it was.
#[test]
fn an_unknown_commit_record_setting_is_refused_before_the_file_is_touched() {
    let t = Temp::new("commit-record");
    let run = |args: &[&str]| Command::new(BIN).args(args).env("ENGRAM_COMMIT_RECORD", "sometimes").output().unwrap();
    let o = run(&["create", t.s(), "--layout", "cr", "--size", "8M", "--durability", "process"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("ENGRAM_COMMIT_RECORD=\"sometimes\""), "{}", stderr(&o));
    assert!(!t.0.exists(), "a refused create left a file");
    create(&t, "cr");
    let before = std::fs::read(&t.0).unwrap();
    let o = run(&["info", t.s()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&t.0).unwrap(), before, "a refused open changed the file");
    ok(&["info", t.s()]);
}
