//! What the redo path's retires cost a second thread (issue 13, branch
//! redo13r): thread R runs n-body-shaped by-value regions (5 x 56 bytes
//! `read_slice` + `write_slice`: the redo path in pmem mode, one fence),
//! while thread U runs allocating regions (one small object allocated and
//! the previous one freed: the undo path). Every fence of U that finds R's
//! retire listed settles it in full (`retires.rs`: R's in-place lines
//! written back and fenced, R's word moved), and R's next commit finds U's
//! pending bump; this measures both threads' fences and CPU time per region.
//!
//! ```text
//! cargo build --release -p engram-bench --example two_thread_settle
//! target/release/examples/two_thread_settle DIR N [both|redo|undo]
//! ```
//!
//! `both` runs the two threads at once; `redo` or `undo` runs one of them
//! alone (the baseline). Times are each thread's CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`), fences and flushes each thread's own
//! counters (`engram::pmem::counters`). Nothing is asserted.

use engram::{CreateOptions, Durability, PArray, PPtr, Pool};
use engram_bench::clock::thread_cpu_ns as cpu_ns;

#[derive(Clone, Copy, Default, engram::Persistent)]
#[repr(C)]
struct Body {
    p: [f64; 7],
}

/// Runs `n` regions of `f` and prints ns, fences and flushes per region.
fn measured(name: &str, n: u64, mut f: impl FnMut() -> Result<(), engram::Error>) -> Result<(), engram::Error> {
    let (c0, t0) = (engram::pmem::counters(), cpu_ns());
    for _ in 0..n {
        f()?;
    }
    let (c1, t1) = (engram::pmem::counters(), cpu_ns());
    let per = |v: u64| v as f64 / n as f64;
    println!(
        "{name}: {:.0} ns/region CPU, {:.2} fences, {:.1} flushes per region",
        per(t1 - t0),
        per(c1.fences - c0.fences),
        per(c1.flushes - c0.flushes)
    );
    Ok(())
}

fn redo_thread(pool: &Pool, bodies: PArray<Body>, n: u64) -> Result<(), engram::Error> {
    measured("redo thread (n-body shape)", n, || {
        pool.txn(|tx| {
            let mut b = [Body::default(); 5];
            tx.read_slice(bodies, 0, &mut b)?;
            b[0].p[0] += 1.0;
            tx.write_slice(bodies, 0, &b)
        })
    })
}

fn undo_thread(pool: &Pool, n: u64) -> Result<(), engram::Error> {
    let mut last: PPtr<u64> = pool.txn(|tx| tx.alloc(0u64))?;
    measured("undo thread (alloc + free)", n, || {
        last = pool.txn(|tx| {
            let v = tx.read(last)?;
            let next = tx.alloc(v + 1)?;
            tx.free(last)?;
            Ok(next)
        })?;
        Ok(())
    })
}

fn main() -> Result<(), engram::Error> {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).map_or("/dev/shm", |s| s.as_str()));
    let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let which = args.get(3).map_or("both", |s| s.as_str()).to_string();
    let path = dir.join(format!("two-thread-settle-{}.pool", std::process::id()));
    let pool = Pool::create(&path, CreateOptions::new("settle").initial_size(64 << 20).durability(Durability::Pmem))?;
    let bodies = pool.txn(|tx| tx.alloc_array::<Body>(5))?;
    let r = std::thread::scope(|s| {
        let redo = (which != "undo").then(|| s.spawn(|| redo_thread(&pool, bodies, n)));
        let undo = (which != "redo").then(|| s.spawn(|| undo_thread(&pool, n)));
        let a = redo.map_or(Ok(()), |h| h.join().unwrap_or(Ok(())));
        let b = undo.map_or(Ok(()), |h| h.join().unwrap_or(Ok(())));
        a.and(b)
    });
    pool.close()?;
    let _ = std::fs::remove_file(&path);
    r
}
