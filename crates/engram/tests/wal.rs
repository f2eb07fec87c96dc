//! The `wal` durability mode: its crash explorer finds no violation, single
//! threaded and with group commit, and each of its fault switches is caught;
//! regions, STM transactions, growth and reopen work in the mode.

use engram::crashtest::wal::{explore, WalSettings};
use engram::{failpoint, CreateOptions, Durability, OpenOptions, Pool};

/// A fresh scratch directory on tmpfs when there is one, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let base = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        let d = base.join(format!("engram-wal-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn every_crash_state_recovers_one_thread() {
    let d = Scratch::new("one");
    let r = explore(&WalSettings::moderate(&d.0)).unwrap();
    println!("wal explorer, one thread: {r}");
    assert!(r.violations.is_empty(), "{r}");
    assert!(r.states >= 80 && r.syncs >= 6 && r.returned >= 6, "{r}");
}

#[test]
fn every_crash_state_recovers_with_group_commit() {
    let d = Scratch::new("group");
    let s = WalSettings { threads: 3, regions: 4, ..WalSettings::moderate(&d.0) };
    let r = explore(&s).unwrap();
    println!("wal explorer, three threads: {r}");
    assert!(r.violations.is_empty(), "{r}");
    assert!(r.returned >= 12, "{r}");
}

/// Commits that return before their record is synced are lost by a crash:
/// the explorer must say so.
#[test]
fn skipping_the_fdatasync_is_caught() {
    let d = Scratch::new("nosync");
    failpoint::plant("wal.skip_fdatasync");
    let r = explore(&WalSettings { max_states: 120, ..WalSettings::moderate(&d.0) });
    failpoint::disarm_all();
    let r = r.unwrap();
    println!("wal explorer without fdatasync: {r}");
    assert!(r.violations.iter().any(|v| v.contains("durable regions lost")), "{r}");
}

/// Recovery that replays torn records (a hole in a record's sectors)
/// breaks the pool: the explorer must say so.
#[test]
fn skipping_the_checksum_is_caught() {
    let d = Scratch::new("nocrc");
    failpoint::plant("wal.skip_checksum");
    let r = explore(&WalSettings { max_states: 300, ..WalSettings::moderate(&d.0) });
    failpoint::disarm_all();
    let r = r.unwrap();
    println!("wal explorer without checksums: {r}");
    assert!(!r.violations.is_empty(), "{r}");
}

/// Regions and STM transactions from several threads in wal mode; the
/// pool reopens (in wal and in msync mode) with everything they did.
#[test]
fn threads_commit_and_reopen() {
    let d = Scratch::new("threads");
    let path = d.0.join("t.pool");
    let pool = Pool::create(&path, CreateOptions::new("walt").durability(Durability::Wal)).unwrap();
    let counter = pool
        .txn(|tx| {
            let c = tx.alloc(0u64)?;
            tx.set_root("c", c)?;
            Ok::<_, engram::Error>(c)
        })
        .unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            let pool = pool.clone();
            s.spawn(move || {
                for _ in 0..25 {
                    pool.txn(|tx| {
                        tx.lock_ptr(counter)?;
                        tx.update(counter, |v| *v += 1)
                    })
                    .unwrap();
                }
            });
        }
    });
    // Crash without closing: the log alone holds the commits.
    pool.simulate_crash();
    // A read-only open overlays the log (the file alone is not up to date).
    let ro = Pool::open(&path, OpenOptions::new("walt").read_only()).unwrap();
    assert_eq!(ro.txn(|tx| tx.read(tx.root::<u64>("c")?.unwrap())).unwrap(), 100);
    drop(ro);
    let pool = Pool::open(&path, OpenOptions::new("walt").durability(Durability::Wal)).unwrap();
    assert!(!pool.open_report().was_clean);
    let c = pool.txn(|tx| tx.read(tx.root::<u64>("c")?.unwrap())).unwrap();
    assert_eq!(c, 100);
    pool.check().unwrap();
    pool.close().unwrap();
    // Another mode folds a leftover log in too.
    let pool = Pool::open(&path, OpenOptions::new("walt").durability(Durability::Msync)).unwrap();
    assert!(pool.open_report().was_clean);
    assert_eq!(pool.txn(|tx| tx.read(tx.root::<u64>("c")?.unwrap())).unwrap(), 100);
    pool.close().unwrap();
    assert!(!engram::wal::log_path(&path).exists());
}
