//! Crash consistency of PSTM under the HTM and coarse-grain STM runtimes
//! (`engram::stm::runtime`): the explorer's STM workloads (trace durability
//! mode, every ordering point under the x86 persistency model, the moderate
//! sweep) with the process's default runtime set to `FineHtm`, `Hybrid`
//! (persistent transactions start at level 2) and `Coarse`, on the
//! *emulated* HTM backend (so the hardware commit runs on every machine,
//! with 2 % spurious conflicts per access so its software fallback runs
//! too). Each must report no violation, and a seeded fault (the commit's
//! one fence dropped) must be caught under `FineHtm` and `Coarse`.
//!
//! What this proves: the hardware commit (lock bits set and reads
//! validated in one hardware transaction) and the coarse commit (the
//! global lock, plain-store lock bits) leave the durable protocol intact:
//! the redo record and copies made durable by ONE fence before any new
//! value is stored in place, recovery unchanged. Its own process (a test
//! binary of its own), since the runtime and backend are fixed at the
//! process's first commit; the runs share that default, so one test.

use engram::crashtest::{workload, Settings};
use engram::failpoint;
use engram::htm::EmuConfig;
use engram::stm::runtime::{self, Runtime};

/// A scratch directory (tmpfs when there is one), removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let base = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        Scratch(base.join(format!("engram-explorer-htm-{}-{tag}", std::process::id())))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The workloads run under each runtime (transfers with or_else and
/// retry, a sorted list and map against a model, the red-black tree and
/// the hash table, overflowing records, two threads' commits in one
/// merged trace), and whether a dropped commit
/// fence is seeded under it. Persistent transactions under `Hybrid` start
/// at level 2, the `FineHtm` commit, so it gets the bank only (test time).
const RUNS: [(Runtime, &[&str], bool); 3] = [
    (Runtime::FineHtm, &["stm-bank", "stm-map", "stm-rbtree", "stm-hash", "mt-stm"], true),
    (Runtime::Hybrid, &["stm-bank"], false),
    (Runtime::Coarse, &["stm-bank", "stm-map", "stm-rbtree", "stm-hash", "stm-overflow", "mt-stm"], true),
];

#[test]
fn pstm_under_each_htm_runtime_is_crash_consistent() {
    assert!(runtime::configure_emulated(EmuConfig { conflict_ppm: 20_000, ..EmuConfig::default() }));
    for (rt, workloads, fault) in RUNS {
        runtime::set_default_runtime(rt).unwrap();
        let before = runtime::stats();
        let dir = Scratch::new(rt.name());
        for &name in workloads {
            let t0 = std::time::Instant::now();
            let r = workload(name).unwrap().run(&Settings::moderate(&dir.0), &mut |_, _| {}).unwrap_or_else(|e| panic!("{name}: {e}"));
            println!("{:<9} {name:<13} {r} ({:.1?})", rt.name(), t0.elapsed());
            for v in &r.violations {
                println!("  violation before event {} ({:?}): {} [{}]", v.event_index, v.fence, v.message, v.image);
            }
            assert!(r.violations.is_empty(), "{name} under {}: {} violations", rt.name(), r.violations.len());
            assert!(r.points > 1 && r.images_checked > 0, "{name}: explored nothing");
        }
        // the runtime's commit path ran on this thread (the workloads'
        // single-thread commits run here)
        let d = runtime::stats();
        match rt {
            Runtime::Coarse => assert!(d.coarse_commits > before.coarse_commits, "no coarse commit ran"),
            _ => assert!(d.hw_commits > before.hw_commits, "no hardware commit ran under {}", rt.name()),
        }
        if !fault {
            continue;
        }
        // and the explorer still catches a dropped commit fence under it
        let dir = Scratch::new(&format!("{}-fault", rt.name()));
        let mut settings = Settings::moderate(&dir.0);
        settings.explorer.max_violations = 1;
        failpoint::drop_fence(engram::fences::STM_RECORD);
        let r = workload("stm-bank").unwrap().run(&settings, &mut |_, _| {});
        failpoint::disarm_all();
        match r {
            Ok(r) => {
                let v = r.violations.first().unwrap_or_else(|| panic!("{}: the dropped fence went unnoticed ({r})", rt.name()));
                println!("{} fault: violation before event {}: {}", rt.name(), v.event_index, v.message);
            }
            Err(e) => println!("{} fault: the traced run failed: {e}", rt.name()),
        }
    }
    runtime::set_default_runtime(Runtime::Fine).unwrap();
}
