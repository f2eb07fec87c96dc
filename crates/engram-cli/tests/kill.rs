//! Process-kill crash tests: `engram torture` is SIGKILLed at a random
//! moment 5-60 ms after it starts, the pool is reopened here with the
//! engine (which recovers it), every torture invariant is checked
//! (`engram_cli::torture::verify`) along with the engine's own heap check,
//! and the next round kills a new torture process on the same pool. In one
//! round of four the pool is not reopened here between two kills: the
//! second torture process recovers the first one's crash itself and is
//! killed 1-10 ms after it starts, often while that recovery is running.
//!
//! A kill keeps the page cache, so this proves recovery from a process
//! crash (undo of interrupted regions, GC of leaked allocations), not from
//! a power failure; the crash explorer covers that.

use engram::{CreateOptions, Durability, OpenOptions, Pool};
use engram_cli::torture::{self, Summary};
use rand::{Rng, SeedableRng};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_engram");

/// Serialises the tests of this file. A pool's lock is a `flock` on its
/// file, and a child spawned by one test thread holds copies of every open
/// descriptor of this process until it execs; were a pool open in another
/// test thread at that moment, a torture process could find it locked.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
/// Rounds per durability mode (`ENGRAM_KILL_ROUNDS` overrides, for soak runs;
/// `ENGRAM_KILL_SEED` changes the random choices).
const ROUNDS: u32 = 40;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Temp(PathBuf);

impl Temp {
    fn new(tag: &str) -> Self {
        // wal mode is for disks: its pool goes to the temporary directory
        // (this machine's disk), the others to tmpfs when there is one.
        let shm = Path::new("/dev/shm").is_dir() && tag != "wal";
        let dir = if shm { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let p = dir.join(format!("engram-cli-kill-{}-{tag}.pool", std::process::id()));
        let _ = std::fs::remove_file(&p);
        Temp(p)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(engram::wal::log_path(&self.0));
    }
}

#[derive(Default, Debug)]
struct Totals {
    kills: u32,
    kills_in_recovery: u32,
    undone_regions: u64,
    undone_entries: u64,
    rounds_with_undo: u32,
    committed: u64,
    /// Rounds after which the recovered pool held more committed regions
    /// than before: the torture processes make progress between kills.
    rounds_with_progress: u32,
}

impl Totals {
    /// Prints what the kills did, for the test log.
    fn print(&self, start: Instant) {
        println!(
            "{} kills ({} soon after a crash, while recovering) in {:.1?}: {} regions undone ({} log entries) in {} rounds; {} regions committed, {} rounds made progress",
            self.kills,
            self.kills_in_recovery,
            start.elapsed(),
            self.undone_regions,
            self.undone_entries,
            self.rounds_with_undo,
            self.committed,
            self.rounds_with_progress
        );
    }
}

/// Spawns torture on `path`, kills it after `delay`, and checks it was the kill that ended it.
fn kill_after(path: &Path, seed: u64, mode: &str, delay: Duration) {
    let child = Command::new(BIN)
        .args(["torture", path.to_str().unwrap(), "--seed", &seed.to_string(), "--durability", mode])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn engram torture");
    std::thread::sleep(delay);
    // SAFETY: plain syscall; the pid is our child's, not yet reaped.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    assert_eq!(rc, 0, "kill failed");
    let out = child.wait_with_output().expect("wait for torture");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGKILL),
        "torture ended before the kill: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Reopens (recovering) and checks everything; returns what was undone.
fn recover_and_check(path: &Path, d: Durability, last: &Summary) -> (engram::OpenReport, Summary) {
    let pool = Pool::open(path, OpenOptions::new(torture::LAYOUT).durability(d)).expect("reopen after kill");
    let report = pool.open_report().clone();
    let sum = torture::verify(&pool).unwrap_or_else(|e| panic!("after kill: {e}"));
    let st = pool.check().unwrap_or_else(|e| panic!("heap check after kill: {e}"));
    assert!(st.objects >= sum.objects, "check walked {} objects, the torture structures hold {}", st.objects, sum.objects);
    if !report.was_clean {
        assert_eq!(pool.info().live_objects, st.objects, "recovery left unreachable objects allocated");
    }
    assert!(sum.regions >= last.regions, "committed regions went back from {} to {}", last.regions, sum.regions);
    assert!(!last.set_up || sum.set_up, "the roots disappeared");
    pool.close().expect("clean close");
    (report, sum)
}

/// Kills and recovers torture on one pool, round after round; returns the
/// regions committed in this mode.
fn rounds(mode: &str, d: Durability, seed: u64, totals: &mut Totals) -> u64 {
    let t = Temp::new(mode);
    Pool::create(&t.0, CreateOptions::new(torture::LAYOUT).durability(d)).unwrap().close().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut last = Summary::default();
    for round in 0..env_or("ENGRAM_KILL_ROUNDS", ROUNDS as u64) {
        let delay = Duration::from_millis(rng.gen_range(5..=60));
        kill_after(&t.0, seed * 100_000 + round, mode, delay);
        totals.kills += 1;
        if rng.gen_ratio(1, 4) {
            let early = Duration::from_millis(rng.gen_range(1..=10));
            kill_after(&t.0, seed * 100_000 + 50_000 + round, mode, early);
            totals.kills += 1;
            totals.kills_in_recovery += 1;
        }
        let (report, sum) = recover_and_check(&t.0, d, &last);
        totals.undone_regions += report.undone_regions;
        totals.undone_entries += report.undone_entries;
        totals.rounds_with_undo += (report.undone_regions > 0) as u32;
        totals.rounds_with_progress += (sum.regions > last.regions) as u32;
        last = sum;
    }
    totals.committed += last.regions;
    last.regions
}

#[test]
fn sigkill_at_random_moments_never_breaks_an_invariant() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let start = Instant::now();
    let mut totals = Totals::default();
    let seed = env_or("ENGRAM_KILL_SEED", 1);
    let process = rounds("process", Durability::Process, 2 * seed, &mut totals);
    let msync = rounds("msync", Durability::Msync, 2 * seed + 1, &mut totals);
    totals.print(start);
    assert!(totals.kills >= 40);
    // Outcomes, not time: each mode's torture processes committed regions
    // that survived their kills, and some kill landed inside a region.
    assert!(process > 0 && msync > 0, "torture never committed a region (process {process}, msync {msync})");
    assert!(totals.rounds_with_progress > 0, "no round made progress: {totals:?}");
    assert!(totals.undone_regions > 0, "no kill landed inside a region");
}

/// The same in wal mode, on the disk: the log is replayed at every reopen
/// (and by a torture process that recovers the previous one's crash).
#[test]
fn sigkill_in_wal_mode_never_breaks_an_invariant() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let start = Instant::now();
    let mut totals = Totals::default();
    let seed = env_or("ENGRAM_KILL_SEED", 1);
    let wal = rounds("wal", Durability::Wal, 2 * seed + 7, &mut totals);
    totals.print(start);
    assert!(totals.kills >= 40);
    assert!(wal > 0 && totals.rounds_with_progress > 0, "torture never committed a region: {totals:?}");
    // A killed region's recordings never reach the log alone (one thread:
    // nothing else commits them), so there is usually nothing to undo.
}

#[test]
fn torture_runs_bounded_and_closes_clean() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Temp::new("bounded");
    let out = Command::new(BIN)
        .args(["torture", t.0.to_str().unwrap(), "--seed", "9", "--durability", "process", "--regions", "600"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty(), "torture prints nothing");
    let pool = Pool::open(&t.0, OpenOptions::new(torture::LAYOUT).durability(Durability::Process)).unwrap();
    assert!(pool.open_report().was_clean);
    let sum = torture::verify(&pool).unwrap();
    assert_eq!(sum.regions, 600);
    assert_eq!(sum.list_len, torture::MAX_LIST);
    assert_eq!(sum.junk, torture::JUNK_SLOTS);
    assert_eq!(pool.check().unwrap().objects, sum.objects);
    pool.close().unwrap();
}
