//! `engram-bench disk`: durable commits per second on an ordinary disk, the
//! setup almost every user has (no persistent memory), against SQLite and
//! LMDB on the same disk in the same run.
//!
//! Every commit is one transfer between two accounts (read both balances,
//! write both), durable when the commit returns:
//!
//! - Engram region, `msync` mode and `wal` mode (`Pool::txn`, 2PL locks on
//!   the two accounts, undo log);
//! - Engram PSTM transaction, `wal` mode (`Pool::atomically`, two `PTVar`s);
//! - SQLite (rusqlite, bundled), `journal_mode=WAL`, `synchronous=FULL`,
//!   one connection per thread, `BEGIN IMMEDIATE` ... `COMMIT`;
//! - LMDB (heed), default flags (a sync per commit), one write transaction
//!   per commit (LMDB runs one writer at a time).
//!
//! Each system runs at 1, 2 and 8 threads for a fixed time (counting
//! commits, never asserting on them), in interleaved rounds whose median is
//! reported (the disk of a shared machine changes speed by an order of
//! magnitude from minute to minute); money is checked to be conserved at
//! the end of each run. Results go to stdout and, with `--out`, to
//! `disk.md` and `disk.png` there.

use clap::Args;
use engram::stm::PTVar;
use engram::{CreateOptions, Durability, PArray, Pool};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Options of `engram-bench disk`.
#[derive(Args, Clone, Debug)]
pub struct DiskArgs {
    /// Directory on the disk under test (created if missing).
    #[arg(long, default_value = "data/bench")]
    pub dir: PathBuf,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Rounds: every cell is measured this often, interleaved with the
    /// others (the disk of a shared machine changes speed), and the median
    /// is reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Thread counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2,8")]
    pub threads: Vec<u32>,
    /// Where disk.md and disk.png go (nothing written without it).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Half a second per measurement (a smoke test).
    #[arg(long)]
    pub quick: bool,
    /// Only these systems (indexes into the report's rows, from 0).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<usize>,
}

/// Accounts in every system's table.
const ACCOUNTS: u64 = 1024;
const START: u64 = 1000;

/// The systems measured, in report order.
pub const SYSTEMS: [&str; 5] = ["Engram region (msync)", "Engram region (wal)", "Engram PSTM (wal)", "SQLite (WAL, FULL)", "LMDB (sync)"];

/// One measurement.
#[derive(Clone, Debug)]
pub struct Cell {
    /// Index into [`SYSTEMS`].
    pub system: usize,
    /// Threads committing.
    pub threads: u32,
    /// Commits that returned.
    pub commits: u64,
    /// Over this long.
    pub secs: f64,
}

impl Cell {
    /// Commits per second.
    pub fn rate(&self) -> f64 {
        self.commits as f64 / self.secs
    }
}

/// Runs `step(thread, i)` on `threads` threads until `secs` pass; counts steps.
fn drive(threads: u32, secs: f64, step: &(impl Fn(u32, u64) -> Result<(), String> + Sync)) -> Result<(u64, f64), String> {
    let stop = AtomicBool::new(false);
    let count = AtomicU64::new(0);
    let start = Instant::now();
    let err = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, count) = (&stop, &count);
                s.spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        step(t, i)?;
                        count.fetch_add(1, Ordering::Relaxed);
                        i += 1;
                    }
                    Ok::<(), String>(())
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into()))).find(|r| r.is_err())
    });
    let secs = start.elapsed().as_secs_f64();
    if let Some(Err(e)) = err {
        return Err(e);
    }
    Ok((count.load(Ordering::Relaxed), secs))
}

/// The two accounts of thread `t`'s `i`-th transfer (distinct, pseudo-random).
fn pair(t: u32, i: u64) -> (u64, u64) {
    let mut x = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 31;
    let a = x % ACCOUNTS;
    let b = (a + 1 + (x >> 20) % (ACCOUNTS - 1)) % ACCOUNTS;
    (a, b)
}

fn fresh(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    for suffix in ["", ".wal", "-wal", "-shm", "-journal"] {
        let mut s = p.as_os_str().to_owned();
        s.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(s));
    }
    let _ = std::fs::remove_dir_all(&p);
    p
}

fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

fn engram_region(dir: &Path, mode: Durability, threads: u32, secs: f64) -> Result<(u64, f64), String> {
    let path = fresh(dir, "disk-region.pool");
    let pool = Pool::create(&path, CreateOptions::new("disk-bench").durability(mode).check_pointers(false)).map_err(e)?;
    let acc: PArray<u64> = pool
        .txn(|tx| {
            let a = tx.alloc_array::<u64>(ACCOUNTS)?;
            tx.write_slice(a, 0, &vec![START; ACCOUNTS as usize])?;
            Ok::<_, engram::Error>(a)
        })
        .map_err(e)?;
    let step = |t: u32, i: u64| {
        let (a, b) = pair(t, i);
        pool.txn(|tx| {
            // Two-phase locking in a fixed order: no deadlock.
            tx.lock(acc.addr() + a.min(b) * 8)?;
            tx.lock(acc.addr() + a.max(b) * 8)?;
            let (x, y) = (tx.get(acc, a)?, tx.get(acc, b)?);
            let amount = x.min(1);
            tx.set(acc, a, x - amount)?;
            tx.set(acc, b, y + amount)
        })
        .map_err(e)
    };
    let r = drive(threads, secs, &step)?;
    let sum: u64 = pool.txn(|tx| (0..ACCOUNTS).map(|k| tx.get(acc, k)).sum::<engram::Result<u64>>()).map_err(e)?;
    pool.close().map_err(e)?;
    fresh(dir, "disk-region.pool");
    conserved(sum)?;
    Ok(r)
}

fn engram_pstm(dir: &Path, threads: u32, secs: f64) -> Result<(u64, f64), String> {
    let path = fresh(dir, "disk-pstm.pool");
    let pool = Pool::create(&path, CreateOptions::new("disk-bench").durability(Durability::Wal).check_pointers(false)).map_err(e)?;
    let vars: Vec<PTVar<u64>> = pool.atomically(|tx| (0..ACCOUNTS).map(|_| PTVar::new(tx, START)).collect()).map_err(e)?;
    let step = |t: u32, i: u64| {
        let (a, b) = pair(t, i);
        let (va, vb) = (&vars[a as usize], &vars[b as usize]);
        pool.atomically(|tx| {
            let (x, y) = (tx.read(va)?, tx.read(vb)?);
            let amount = x.min(1);
            tx.write(va, x - amount)?;
            tx.write(vb, y + amount)
        })
        .map_err(e)
    };
    let r = drive(threads, secs, &step)?;
    let sum: u64 = pool.atomically(|tx| vars.iter().map(|v| tx.read(v)).sum()).map_err(e)?;
    pool.close().map_err(e)?;
    fresh(dir, "disk-pstm.pool");
    conserved(sum)?;
    Ok(r)
}

fn sqlite(dir: &Path, threads: u32, secs: f64) -> Result<(u64, f64), String> {
    let path = fresh(dir, "disk-sqlite.db");
    let open = || -> Result<rusqlite::Connection, String> {
        let c = rusqlite::Connection::open(&path).map_err(e)?;
        c.busy_timeout(Duration::from_secs(30)).map_err(e)?;
        c.pragma_update(None, "journal_mode", "WAL").map_err(e)?;
        c.pragma_update(None, "synchronous", "FULL").map_err(e)?;
        Ok(c)
    };
    let c = open()?;
    c.execute_batch("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)").map_err(e)?;
    let tx = c.unchecked_transaction().map_err(e)?;
    for k in 0..ACCOUNTS {
        tx.execute("INSERT INTO accounts VALUES (?1, ?2)", (k as i64, START as i64)).map_err(e)?;
    }
    tx.commit().map_err(e)?;
    let conns: Vec<std::sync::Mutex<rusqlite::Connection>> =
        (0..threads).map(|_| open().map(std::sync::Mutex::new)).collect::<Result<_, _>>()?;
    let step = |t: u32, i: u64| {
        let (a, b) = pair(t, i);
        let c = conns[t as usize].lock().map_err(e)?;
        c.execute_batch("BEGIN IMMEDIATE").map_err(e)?;
        let get = |k: u64| c.query_row("SELECT balance FROM accounts WHERE id = ?1", [k as i64], |r| r.get::<_, i64>(0));
        let (x, y) = (get(a).map_err(e)?, get(b).map_err(e)?);
        let amount = x.min(1);
        c.execute("UPDATE accounts SET balance = ?1 WHERE id = ?2", (x - amount, a as i64)).map_err(e)?;
        c.execute("UPDATE accounts SET balance = ?1 WHERE id = ?2", (y + amount, b as i64)).map_err(e)?;
        c.execute_batch("COMMIT").map_err(e)
    };
    let r = drive(threads, secs, &step)?;
    let sum: i64 = c.query_row("SELECT SUM(balance) FROM accounts", [], |r| r.get(0)).map_err(e)?;
    drop(conns);
    drop(c);
    fresh(dir, "disk-sqlite.db");
    conserved(sum as u64)?;
    Ok(r)
}

fn lmdb(dir: &Path, threads: u32, secs: f64) -> Result<(u64, f64), String> {
    use heed::types::Bytes;
    let path = fresh(dir, "disk-lmdb");
    std::fs::create_dir_all(&path).map_err(e)?;
    // SAFETY: heed's contract for `open`: this environment is opened once
    // in this process and no other process uses the directory.
    let env = unsafe { heed::EnvOpenOptions::new().map_size(64 << 20).max_dbs(1).open(&path) }.map_err(e)?;
    let db: heed::Database<Bytes, Bytes> = {
        let mut w = env.write_txn().map_err(e)?;
        let db = env.create_database(&mut w, None).map_err(e)?;
        for k in 0..ACCOUNTS {
            db.put(&mut w, &k.to_be_bytes()[..], &START.to_le_bytes()[..]).map_err(e)?;
        }
        w.commit().map_err(e)?;
        db
    };
    let read = |w: &heed::RwTxn<'_>, k: u64| -> Result<u64, String> {
        let v = db.get(w, &k.to_be_bytes()[..]).map_err(e)?.ok_or("missing account")?;
        Ok(u64::from_le_bytes(v.try_into().map_err(e)?))
    };
    let step = |t: u32, i: u64| {
        let (a, b) = pair(t, i);
        let mut w = env.write_txn().map_err(e)?;
        let (x, y) = (read(&w, a)?, read(&w, b)?);
        let amount = x.min(1);
        db.put(&mut w, &a.to_be_bytes()[..], &(x - amount).to_le_bytes()[..]).map_err(e)?;
        db.put(&mut w, &b.to_be_bytes()[..], &(y + amount).to_le_bytes()[..]).map_err(e)?;
        w.commit().map_err(e)
    };
    let r = drive(threads, secs, &step)?;
    let sum = {
        let w = env.write_txn().map_err(e)?;
        (0..ACCOUNTS).map(|k| read(&w, k)).sum::<Result<u64, String>>()?
    };
    drop(env);
    fresh(dir, "disk-lmdb");
    conserved(sum)?;
    Ok(r)
}

fn conserved(sum: u64) -> Result<(), String> {
    if sum == ACCOUNTS * START {
        Ok(())
    } else {
        Err(format!("money not conserved: {sum} != {}", ACCOUNTS * START))
    }
}

fn measure(system: usize, dir: &Path, threads: u32, secs: f64) -> Result<(u64, f64), String> {
    match system {
        0 => engram_region(dir, Durability::Msync, threads, secs),
        1 => engram_region(dir, Durability::Wal, threads, secs),
        2 => engram_pstm(dir, threads, secs),
        3 => sqlite(dir, threads, secs),
        _ => lmdb(dir, threads, secs),
    }
}

/// `engram-bench disk`.
pub fn main(a: DiskArgs) -> ExitCode {
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("engram-bench disk: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run(a: &DiskArgs) -> Result<(), String> {
    std::fs::create_dir_all(&a.dir).map_err(e)?;
    let secs = if a.quick { 0.5 } else { a.seconds };
    let m = crate::sysinfo::Machine::detect();
    let fs = crate::sysinfo::fs_info(&std::fs::canonicalize(&a.dir).map_err(e)?);
    let setup = format!(
        "CPU {} ({} logical CPUs), kernel {}; directory {} on {} ({}); {secs} s per cell; {} accounts; {}",
        m.cpu,
        m.cores,
        m.kernel,
        a.dir.display(),
        fs.kind,
        fs.source.as_deref().unwrap_or("unknown device"),
        ACCOUNTS,
        m.date
    );
    println!("{setup}");
    let load0 = crate::sysinfo::load_average();
    let rounds = if a.quick { 1 } else { a.rounds.max(1) };
    let mut all: Vec<Cell> = Vec::new();
    for round in 1..=rounds {
        for &threads in &a.threads {
            for system in (0..SYSTEMS.len()).filter(|s| a.only.is_empty() || a.only.contains(s)) {
                let (commits, secs) = measure(system, &a.dir, threads, secs)?;
                let c = Cell { system, threads, commits, secs };
                println!("round {round}: {:<24} {threads} thread(s): {:>9.0} commits/s", SYSTEMS[system], c.rate());
                all.push(c);
            }
        }
    }
    let cells = medians(&all);
    let load = |x: Option<f64>| x.map_or("unknown".to_string(), |l| format!("{l:.1}"));
    let setup = format!(
        "{setup}; median of {rounds} interleaved rounds; 1-minute load average {} at the start, {} at the end",
        load(load0),
        load(crate::sysinfo::load_average())
    );
    let md = report(&setup, &cells, &a.threads);
    println!("\n{md}");
    if let Some(out) = &a.out {
        std::fs::create_dir_all(out).map_err(e)?;
        let plot = crate::disk_plot::draw(&cells, &a.threads, &out.join("disk.png"));
        if let Err(err) = &plot {
            eprintln!("engram-bench disk: plot skipped: {err}");
        }
        std::fs::write(out.join("disk.md"), md).map_err(e)?;
    }
    Ok(())
}

/// The cell with the median rate of each (system, threads).
fn medians(all: &[Cell]) -> Vec<Cell> {
    let mut out: Vec<Cell> = Vec::new();
    for c in all {
        if out.iter().any(|o| o.system == c.system && o.threads == c.threads) {
            continue;
        }
        let mut same: Vec<&Cell> = all.iter().filter(|o| o.system == c.system && o.threads == c.threads).collect();
        same.sort_by(|x, y| x.rate().total_cmp(&y.rate()));
        out.push(same[same.len() / 2].clone());
    }
    out
}

fn rate(cells: &[Cell], system: usize, threads: u32) -> Option<f64> {
    cells.iter().find(|c| c.system == system && c.threads == threads).map(Cell::rate)
}

/// The markdown report: commits/s per system and thread count, ratios to
/// SQLite and LMDB, and each system's scaling over one thread.
pub fn report(setup: &str, cells: &[Cell], threads: &[u32]) -> String {
    let mut s = String::from("# Durable commits per second on a disk\n\n");
    s.push_str("Generated by `engram-bench disk --out docs/bench` (`make bench`). One commit = one transfer between two\n");
    s.push_str("of 1,024 accounts (read both, write both), durable when the commit returns; each thread commits in a loop.\n");
    s.push_str("Engram regions lock the two accounts (2PL) and undo-log them; the PSTM transaction reads and writes two\n");
    s.push_str("`PTVar`s; SQLite runs `journal_mode=WAL`, `synchronous=FULL`, one connection per thread, `BEGIN IMMEDIATE`;\n");
    s.push_str("LMDB (heed) uses its default flags (a sync per commit). All on the same directory, in the same run.\n\n");
    s.push_str(&format!("Setup: {setup}.\n\n"));
    s.push_str("| system |");
    for t in threads {
        s.push_str(&format!(" {t} thread{} |", if *t == 1 { "" } else { "s" }));
    }
    s.push_str(" scaling (max threads / 1) |\n|---|");
    s.push_str(&"---:|".repeat(threads.len() + 1));
    s.push('\n');
    for (i, name) in SYSTEMS.iter().enumerate() {
        s.push_str(&format!("| {name} |"));
        for &t in threads {
            s.push_str(&rate(cells, i, t).map_or(" - |".into(), |r| format!(" {r:.0} |")));
        }
        let scale = match (threads.first(), threads.last()) {
            (Some(&a), Some(&b)) => rate(cells, i, a).zip(rate(cells, i, b)).map(|(x, y)| y / x),
            _ => None,
        };
        s.push_str(&scale.map_or(" - |".into(), |x| format!(" {x:.2}x |")));
        s.push('\n');
    }
    s.push_str("\nRatios (Engram / peer, commits per second; above 1 Engram commits more):\n\n| Engram | peer |");
    for t in threads {
        s.push_str(&format!(" {t} |"));
    }
    s.push_str("\n|---|---|");
    s.push_str(&"---:|".repeat(threads.len()));
    s.push('\n');
    for (eng, eng_name) in SYSTEMS.iter().enumerate().take(3) {
        for (peer, peer_name) in SYSTEMS.iter().enumerate().skip(3) {
            s.push_str(&format!("| {eng_name} | {peer_name} |"));
            for &t in threads {
                let r = rate(cells, eng, t).zip(rate(cells, peer, t)).map(|(a, b)| a / b);
                s.push_str(&r.map_or(" - |".into(), |x| format!(" {x:.2} |")));
            }
            s.push('\n');
        }
    }
    s.push_str("\n![commits per second](disk.png)\n\n");
    s.push_str("Reading it: the disk of this shared virtual machine changes speed by an order of magnitude from one\n");
    s.push_str("minute to the next (an idle `fdatasync` costs about 25 us, one behind other tenants' builds milliseconds),\n");
    s.push_str("so only ratios within one run mean much, and the load average above says how busy the machine was.\n");
    s.push_str("`perf` of one thread in `wal` mode on an idle disk: 86 % of the time in the kernel (the `pwrite` of the\n");
    s.push_str("record, `fdatasync`, the virtio notification), under 10 % in the engine. With 8 threads the group\n");
    s.push_str("commit shares one `fdatasync` among the threads waiting; how much that gains depends on how much of a\n");
    s.push_str("commit is the device flush rather than CPU (2 CPUs here).\n");
    s.push_str("The group commit's protocol, and its CPU time, context switches and `fdatasync`s per commit\n");
    s.push_str("measured with `perf stat`, are in [disk-group-commit.md](disk-group-commit.md).\n");
    s
}
