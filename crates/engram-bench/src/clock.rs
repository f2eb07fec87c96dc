//! The clock of the measured part of a `run-one` job.
//!
//! By default a job's `nanos` is wall time (`CLOCK_MONOTONIC`, like the C
//! peers). With `ENGRAM_BENCH_CLOCK=cpu` in the environment it is the
//! calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) instead, in the
//! Rust implementations and in the C peers alike (`now_ns` in
//! `peers/pmdk_peers.c` reads the same variable), so a loop can be timed on
//! a machine shared with other builds without pool creation in the figure
//! (which `perf stat` over the whole process would include). Every timed
//! part of these workloads runs on the calling thread.
//!
//! No invariants beyond that; nothing here touches a pool.

use std::sync::OnceLock;

/// Whether `ENGRAM_BENCH_CLOCK=cpu` is set (read once).
fn cpu_clock() -> bool {
    static CPU: OnceLock<bool> = OnceLock::new();
    *CPU.get_or_init(|| std::env::var("ENGRAM_BENCH_CLOCK").is_ok_and(|v| v == "cpu"))
}

/// Nanoseconds on the job's clock (wall or this thread's CPU time); only
/// differences are meaningful.
pub fn now_ns() -> u64 {
    read(if cpu_clock() { libc::CLOCK_THREAD_CPUTIME_ID } else { libc::CLOCK_MONOTONIC })
}

/// Nanoseconds of this thread's CPU time, whatever `ENGRAM_BENCH_CLOCK`
/// says (the examples time their loops by it); only differences are
/// meaningful.
pub fn thread_cpu_ns() -> u64 {
    read(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Clock `id` in nanoseconds (0 if it cannot be read).
fn read(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the valid `ts`.
    let r = unsafe { libc::clock_gettime(id, &mut ts) };
    if r != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A started measurement on the job's clock.
#[derive(Clone, Copy, Debug)]
pub struct Stopwatch(u64);

impl Stopwatch {
    /// Starts now.
    pub fn start() -> Self {
        Stopwatch(now_ns())
    }

    /// Nanoseconds since `start` on the job's clock.
    pub fn elapsed_ns(self) -> u64 {
        now_ns().saturating_sub(self.0)
    }
}
