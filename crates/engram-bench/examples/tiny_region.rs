//! The fixed software cost of a failure-atomic region (issue 13): regions
//! that do almost nothing, so what is measured is `Pool::txn`, the region's
//! setup, one logging call, the commit and the drop.
//!
//! ```text
//! cargo build --release -p engram-bench --example tiny_region
//! target/release/examples/tiny_region DIR N [process|pmem] [empty|word|slice]
//! ```
//!
//! Three loops (or the one named) of `N` regions each, timed on this thread's CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`, so a loaded machine adds little), in a fresh
//! pool under `DIR` (tmpfs, e.g. `/dev/shm`), deleted afterwards:
//!
//! - `empty`: `pool.txn(|_| Ok(()))` (no log, no flush, no fence);
//! - `word`: one `u64` of one object read, logged and written;
//! - `slice`: n-body's shape without its arithmetic (5 x 56 bytes read with
//!   `read_slice` and written back with `write_slice`).
//!
//! Prints ns per region. For instruction counts run it under
//! `valgrind --tool=callgrind` with two values of `N` and divide the
//! difference. Nothing here is asserted; crashes are not simulated.

use engram::{CreateOptions, Durability, PArray, PPtr, Pool};
use engram_bench::clock::thread_cpu_ns as cpu_ns;

#[derive(Clone, Copy, Default, engram::Persistent)]
#[repr(C)]
struct Body {
    p: [f64; 7],
}

fn timed(n: u64, mut f: impl FnMut() -> Result<(), engram::Error>) -> Result<f64, engram::Error> {
    let t = cpu_ns();
    for _ in 0..n {
        f()?;
    }
    Ok((cpu_ns() - t) as f64 / n as f64)
}

fn run(pool: &Pool, n: u64, only: &str) -> Result<(), engram::Error> {
    let (word, bodies): (PPtr<u64>, PArray<Body>) = pool.txn(|tx| Ok((tx.alloc(0u64)?, tx.alloc_array::<Body>(5)?)))?;
    let n_of = |kind: &str| if only.is_empty() || only == kind { n } else { 0 };
    let empty = timed(n_of("empty"), || pool.txn(|_| Ok(())))?;
    let one = timed(n_of("word"), || {
        pool.txn(|tx| {
            let v = tx.read(word)?;
            tx.write(word, v + 1)
        })
    })?;
    let slice = timed(n_of("slice"), || {
        pool.txn(|tx| {
            let mut b = [Body::default(); 5];
            tx.read_slice(bodies, 0, &mut b)?;
            b[0].p[0] += 1.0;
            tx.write_slice(bodies, 0, &b)
        })
    })?;
    println!("empty {empty:.1} ns/region  word {one:.1} ns/region  slice {slice:.1} ns/region");
    Ok(())
}

fn main() -> Result<(), engram::Error> {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).map_or("/dev/shm", |s| s.as_str()));
    let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let durability = match args.get(3).map(|s| s.as_str()) {
        Some("pmem") => Durability::Pmem,
        _ => Durability::Process,
    };
    let path = dir.join(format!("tiny-region-{}.pool", std::process::id()));
    let pool = Pool::create(&path, CreateOptions::new("tiny").initial_size(16 << 20).durability(durability))?;
    let r = run(&pool, n, args.get(4).map_or("", |s| s.as_str()));
    pool.close()?;
    let _ = std::fs::remove_file(&path);
    r
}
