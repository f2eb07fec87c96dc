//! Helpers shared by the integration tests: unique pool paths on tmpfs, a
//! watchdog that turns a hang into a failure, and the read-only auditors'
//! loop of the volatile STM stress tests (and the join that ends them).
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

static N: AtomicU32 = AtomicU32::new(0);

/// A fresh pool path under /dev/shm (or the temp dir), removed on drop.
pub struct TempPool(pub PathBuf);

impl TempPool {
    pub fn new(tag: &str) -> Self {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let p = dir.join(format!("engram-test-{}-{}-{}.pool", tag, std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_file(&p);
        TempPool(p)
    }
}

impl Drop for TempPool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `f` on its own thread; panics if it has not finished within `bound`
/// (a hang detector, such as for a lost `retry` wake-up, not a timing claim).
pub fn bounded<R: Send + 'static>(what: &str, bound: std::time::Duration, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (done, wait) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = f();
        let _ = done.send(());
        r
    });
    match wait.recv_timeout(bound) {
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: not finished after {bound:?} (deadlock, lost wake-up or starvation)")
        }
        _ => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
    }
}

/// What a read-only auditor thread shares with its test: `stop` (set by
/// the test, or by the first torn total if `until_torn`), and the counts
/// of audits and of totals other than the one expected.
pub struct Audit<'a> {
    pub stop: &'a std::sync::atomic::AtomicBool,
    pub seen: &'a std::sync::atomic::AtomicU64,
    pub torn: &'a std::sync::atomic::AtomicU64,
    pub until_torn: bool,
}

impl Audit<'_> {
    /// An auditor's loop: `bugs` planted on this thread, every read
    /// widened (`stm.ro_slow_read`, `stretch_reads`), `total` run until
    /// `stop` and compared with `want`; the thread's plants removed after.
    pub fn run(&self, bugs: &[&str], want: u64, mut total: impl FnMut() -> u64) {
        for b in bugs {
            engram::failpoint::plant(b);
        }
        engram::failpoint::plant("stm.ro_slow_read");
        engram::failpoint::stretch_reads(true);
        while !self.stop.load(Ordering::Acquire) {
            let got = total();
            self.seen.fetch_add(1, Ordering::Relaxed);
            if got != want {
                self.torn.fetch_add(1, Ordering::Relaxed);
                if self.until_torn {
                    self.stop.store(true, Ordering::Release);
                }
            }
        }
        engram::failpoint::disarm_all();
        engram::failpoint::stretch_reads(false);
    }
}

/// Ends a stress test's scope: joins the writers, then sets `stop` and
/// joins the readers (so the readers audit until the last write).
pub fn join_writers_then_readers<T, U>(
    ws: Vec<std::thread::ScopedJoinHandle<'_, T>>,
    stop: &std::sync::atomic::AtomicBool,
    rs: Vec<std::thread::ScopedJoinHandle<'_, U>>,
) {
    for w in ws {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Release);
    for r in rs {
        r.join().unwrap();
    }
}
