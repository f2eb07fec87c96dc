//! A C-ABI micro-benchmark: `engram_region_log` on words the region has
//! already logged (what a front end that logs before every store pays once
//! a range is in the log), and a short region per iteration
//! (`engram_region_begin` + one log + `engram_region_commit`).
//!
//! Calls the `extern "C"` entry points directly (the same code a C caller
//! reaches, minus the call through the PLT). Times with the thread's CPU
//! clock, so other work on the machine shows up only as noise:
//!
//! ```text
//! cargo run --release -p engram-ffi --example log_loop -- [DIR] [LOGS] [REGIONS]
//! ```
//!
//! Prints ns per already-logged `engram_region_log` (over an array of 512
//! words, each logged once first) and ns per region (process durability:
//! no flush, no fence, so the figure is the software cost). Not a test:
//! speed is measured here, never asserted.

use engram_ffi::*;
use std::ffi::CString;

/// CPU time of this thread in ns.
fn cpu_ns() -> u64 {
    let mut ts = std::mem::MaybeUninit::<[i64; 2]>::uninit();
    // SAFETY: clock_gettime writes one timespec (two longs on 64-bit Linux).
    let r = unsafe {
        clock_gettime(3 /* CLOCK_THREAD_CPUTIME_ID */, ts.as_mut_ptr())
    };
    assert_eq!(r, 0, "clock_gettime");
    // SAFETY: initialised by the successful call.
    let [s, ns] = unsafe { ts.assume_init() };
    s as u64 * 1_000_000_000 + ns as u64
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut [i64; 2]) -> i32;
}

fn ok(s: engram_status, what: &str) {
    assert_eq!(s, 0, "{what}: status {s}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).cloned().unwrap_or_else(|| "/dev/shm".into());
    let logs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20_000_000);
    let regions: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(2_000_000);
    let path = CString::new(format!("{dir}/engram-log-loop-{}.pool", std::process::id())).unwrap();
    let layout = CString::new("log_loop").unwrap();
    let name = CString::new("log_loop::word").unwrap();
    const WORDS: u64 = 512;
    // SAFETY: every pointer passed below is a live local of the right type.
    unsafe {
        let mut o = std::mem::zeroed::<engram_create_options>();
        ok(engram_create_options_init(&mut o), "options");
        o.layout = layout.as_ptr();
        o.durability = 3; // PROCESS: software cost only
        o.overwrite = 1;
        let mut pool = 0;
        ok(engram_pool_create(path.as_ptr(), &o, &mut pool), "create");
        let d = engram_type_desc {
            name: name.as_ptr(),
            size: 8,
            align: 8,
            nptrs: 0,
            ptr_offsets: std::ptr::null(),
            signature: std::ptr::null(),
        };
        let mut ty = 0;
        ok(engram_type_register(pool, &d, &mut ty), "type");
        let mut r = 0;
        let mut arr = 0;
        ok(engram_region_begin(pool, &mut r), "begin");
        ok(engram_alloc_array(r, ty, WORDS, &mut arr), "alloc");
        ok(engram_region_commit(r), "commit");

        // Already-logged words: log each once, then `logs` more times.
        ok(engram_region_begin(pool, &mut r), "begin");
        for i in 0..WORDS {
            ok(engram_region_log(r, arr + i * 8, 8), "log");
        }
        let t = cpu_ns();
        for i in 0..logs {
            let s = engram_region_log(r, arr + (i % WORDS) * 8, 8);
            if s != 0 {
                ok(s, "log");
            }
        }
        let per_log = (cpu_ns() - t) as f64 / logs as f64;
        ok(engram_region_commit(r), "commit");

        // Short regions: begin, log one word, store, commit.
        let t = cpu_ns();
        for i in 0..regions {
            ok(engram_region_begin(pool, &mut r), "begin");
            let a = arr + (i % WORDS) * 8;
            ok(engram_region_log(r, a, 8), "log");
            *(a as *mut u64) = i;
            ok(engram_region_commit(r), "commit");
        }
        let per_region = (cpu_ns() - t) as f64 / regions as f64;
        ok(engram_pool_close(pool), "close");
        let _ = std::fs::remove_file(path.to_str().unwrap());
        println!("already-logged engram_region_log: {per_log:.1} ns ({logs} calls)");
        println!("region begin+log+commit (process mode): {per_region:.1} ns ({regions} regions)");
    }
}
