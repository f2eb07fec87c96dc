//! `engram demo`: a bank ledger kept in a pool, to show what the engine is
//! for. The first run creates the pool and the ledger; every later run finds
//! it again, checks it, and extends it with more failure-atomic regions.
//!
//! The ledger (root `ledger`) holds the balances of [`NAMES`] accounts in a
//! `PArray<u64>` and a singly-linked list of transfer [`Record`]s. Each
//! region moves money from one account to another *and* appends the record
//! of it, so these invariants hold after every region, and after any crash:
//!
//! 1. the balances sum to [`TOTAL`];
//! 2. the list holds records `1..=regions`, in order, and `tail` is the last;
//! 3. replaying the records from the opening balances gives today's balances.
//!
//! `--crash-after K` aborts the process inside region K after its debit and
//! after linking its record, before the credit: without the undo log the
//! next run would find money missing and a dangling record. It finds instead
//! that recovery undid the region, and the invariants hold.

use crate::args::DemoArgs;
use crate::error::CliError;
use crate::progress;
use engram::{CreateOptions, Error, PArray, PPtr, Persistent, Pool, Tx};
use rand::Rng;
use std::io::Write as _;
use std::path::Path;

/// Layout name of demo pools.
pub const LAYOUT: &str = "engram-demo";
/// The account holders.
pub const NAMES: [&str; 6] = ["ada", "alan", "barbara", "edsger", "grace", "ken"];
/// Opening balance of each account.
pub const OPENING_BALANCE: u64 = 1_000;
/// What the balances always sum to.
pub const TOTAL: u64 = NAMES.len() as u64 * OPENING_BALANCE;
/// Regions printed one line each; the rest are summarised.
const SHOWN: u64 = 10;

/// The root object: balances, the record list and counters.
#[derive(Clone, Copy, Debug, Persistent)]
#[engram(name = "demo.Ledger")]
pub struct Ledger {
    /// Runs of `engram demo` that reached their regions.
    pub runs: u64,
    /// Regions committed, which is also the number of records.
    pub regions: u64,
    /// Balances, one per name in [`NAMES`].
    pub accounts: PArray<u64>,
    /// Oldest record.
    pub head: PPtr<Record>,
    /// Newest record.
    pub tail: PPtr<Record>,
}

/// One transfer, appended by the region that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Persistent)]
#[engram(name = "demo.Record")]
pub struct Record {
    /// 1-based position in the ledger.
    pub seq: u64,
    /// The run that made it.
    pub run: u64,
    /// Index of the debited account.
    pub from: u64,
    /// Index of the credited account.
    pub to: u64,
    /// Money moved.
    pub amount: u64,
    /// Seconds since the Unix epoch when it was made.
    pub unix_secs: u64,
    /// The next newer record.
    pub next: PPtr<Record>,
}

/// What `verify` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// Runs so far.
    pub runs: u64,
    /// Records (= committed regions).
    pub records: u64,
    /// Current balances.
    pub balances: Vec<u64>,
    /// The newest record, if any.
    pub last: Option<Record>,
}

/// Runs the demo.
pub fn run(a: &DemoArgs) -> Result<(), CliError> {
    if let Some(k) = a.crash_after {
        if k == 0 || k > a.regions {
            return Err(CliError::Usage { what: format!("--crash-after {k} must be between 1 and --regions {}", a.regions) });
        }
    }
    let path = a.path.as_path();
    let at = |e: CliError| e.at(path);
    println!("engram demo: {}", path.display());
    let pool = open(path)?;
    let ledger = find_or_build(&pool).map_err(at)?;
    verify(&pool, ledger).map_err(at)?;
    let run = pool
        .txn(|tx| {
            tx.update(ledger, |l| {
                l.runs += 1;
                l.runs
            })
        })
        .map_err(|e| at(e.into()))?;
    extend(&pool, ledger, run, a.regions, a.crash_after).map_err(at)?;
    let found = verify(&pool, ledger).map_err(at)?;
    println!("balances: {}", balances_line(&found.balances));
    pool.close().map_err(|e| at(e.into()))?;
    println!("closed the pool cleanly; run `engram demo` again and it will find all of this");
    Ok(())
}

/// Opens the pool (making it and its directory on the first run) and says how.
fn open(path: &Path) -> Result<Pool, CliError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| CliError::Io { op: "create directory", path: dir.into(), source })?;
    }
    let pool = Pool::open_or_create(path, CreateOptions::new(LAYOUT)).map_err(|e| CliError::from(e).at(path))?;
    let i = pool.info();
    let r = pool.open_report();
    if r.created {
        println!("created a new pool (layout {:?}, durability {})", LAYOUT, i.durability.name());
    } else if r.was_clean {
        println!("opened the pool: the last run closed it cleanly");
    } else {
        let kept = r.recovered.map_or(0, |s| s.objects);
        println!(
            "opened the pool: the last run crashed; recovery undid {} region(s) ({} log entries) and kept {kept} reachable objects",
            r.undone_regions, r.undone_entries
        );
    }
    Ok(pool)
}

/// The ledger root, or a new ledger built in one region.
fn find_or_build(pool: &Pool) -> Result<PPtr<Ledger>, CliError> {
    let (ledger, built) = pool.txn(|tx| {
        if let Some(l) = tx.root::<Ledger>("ledger")? {
            return Ok::<_, Error>((l, false));
        }
        let accounts = tx.alloc_array::<u64>(NAMES.len() as u64)?;
        tx.write_slice(accounts, 0, &[OPENING_BALANCE; NAMES.len()])?;
        let l = tx.alloc(Ledger { runs: 0, regions: 0, accounts, head: PPtr::null(), tail: PPtr::null() })?;
        tx.set_root("ledger", l)?;
        Ok((l, true))
    })?;
    if built {
        println!("first run: built a ledger of {} accounts holding {TOTAL} in total", NAMES.len());
    } else {
        let f = verify_quiet(pool, ledger)?;
        let last = f.last.map_or(String::new(), |r| format!("; newest: {}", record_line(&r)));
        println!("found the ledger: {} earlier run(s), {} record(s){last}", f.runs, f.records);
    }
    Ok(ledger)
}

/// Runs `n` regions (aborting inside region `crash`, if given).
fn extend(pool: &Pool, ledger: PPtr<Ledger>, run: u64, n: u64, crash: Option<u64>) -> Result<(), CliError> {
    println!("run {run}: {n} region(s), each moving money between two accounts and appending its record, atomically");
    let pb = progress::steps(n, "regions");
    let mut rng = rand::thread_rng();
    for k in 1..=n {
        let rec = pool.txn(|tx| transfer(tx, ledger, run, &mut rng, crash == Some(k)))?;
        if k <= SHOWN {
            pb.suspend(|| println!("  {}", record_line(&rec)));
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    if n > SHOWN {
        println!("  ... and {} more", n - SHOWN);
    }
    Ok(())
}

/// One region: debit, link the record, credit, count.
fn transfer(tx: &Tx<'_>, ledger: PPtr<Ledger>, run: u64, rng: &mut impl Rng, crash: bool) -> Result<Record, Error> {
    let mut l = tx.read(ledger)?;
    let n = NAMES.len() as u64;
    let from = rng.gen_range(0..n);
    let to = (from + rng.gen_range(1..n)) % n;
    // 1. debit
    let balance = tx.get(l.accounts, from)?;
    let amount = rng.gen_range(0..=balance.min(250));
    tx.set(l.accounts, from, balance - amount)?;
    // 2. append the record
    let unix_secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let rec = Record { seq: l.regions + 1, run, from, to, amount, unix_secs, next: PPtr::null() };
    let p = tx.alloc(rec)?;
    if l.tail.is_null() {
        l.head = p;
    } else {
        tx.update(l.tail, |t| t.next = p)?;
    }
    if crash {
        crash_now(&rec);
    }
    // 3. credit, 4. count
    let b = tx.get(l.accounts, to)?;
    tx.set(l.accounts, to, b + amount)?;
    l.tail = p;
    l.regions = rec.seq;
    tx.write(ledger, l)?;
    Ok(rec)
}

fn crash_now(rec: &Record) -> ! {
    println!(
        "  crash: {} was debited {} and record #{} linked, but {} not yet credited; aborting the process now",
        NAMES[rec.from as usize], rec.amount, rec.seq, NAMES[rec.to as usize]
    );
    let _ = std::io::stdout().flush();
    std::process::abort()
}

/// Checks the invariants and prints the verdict.
fn verify(pool: &Pool, ledger: PPtr<Ledger>) -> Result<Found, CliError> {
    let f = verify_quiet(pool, ledger)?;
    println!(
        "invariants OK: balances sum to {TOTAL}; {} record(s) for {} region(s); replaying them from the opening balances gives today's balances",
        f.records, f.records
    );
    Ok(f)
}

/// Checks the invariants (see the module docs).
pub fn verify_quiet(pool: &Pool, ledger: PPtr<Ledger>) -> Result<Found, CliError> {
    pool.txn(|tx| {
        let l = tx.read(ledger)?;
        let balances = balances(tx, l.accounts)?;
        let sum: u64 = balances.iter().fold(0u64, |s, &b| s.saturating_add(b));
        if sum != TOTAL {
            return Err(CliError::invariant(format!("balances sum to {sum}, expected {TOTAL}")));
        }
        let (replayed, last) = replay(tx, &l)?;
        if replayed != balances {
            return Err(CliError::invariant(format!(
                "replaying the records gives {}, the accounts hold {}",
                balances_line(&replayed),
                balances_line(&balances)
            )));
        }
        Ok(Found { runs: l.runs, records: l.regions, balances, last })
    })
}

fn balances(tx: &Tx<'_>, accounts: PArray<u64>) -> Result<Vec<u64>, CliError> {
    let len = tx.len(accounts)?;
    if len != NAMES.len() as u64 {
        return Err(CliError::invariant(format!("{len} accounts, expected {}", NAMES.len())));
    }
    let mut out = vec![0; NAMES.len()];
    tx.read_slice(accounts, 0, &mut out)?;
    Ok(out)
}

/// Walks the records, applying each to the opening balances.
fn replay(tx: &Tx<'_>, l: &Ledger) -> Result<(Vec<u64>, Option<Record>), CliError> {
    let mut bal = vec![OPENING_BALANCE; NAMES.len()];
    let (mut p, mut last, mut n) = (l.head, None, 0u64);
    while !p.is_null() {
        let r = tx.read(p)?;
        n += 1;
        if r.seq != n || n > l.regions {
            return Err(CliError::invariant(format!("record {n} has seq {} (ledger counts {} regions)", r.seq, l.regions)));
        }
        let (from, to) = (r.from as usize, r.to as usize);
        let debit = bal.get(from).and_then(|b| b.checked_sub(r.amount));
        match (debit, bal.get(to)) {
            (Some(d), Some(_)) if from != to => {
                bal[from] = d;
                bal[to] += r.amount;
            }
            _ => return Err(CliError::invariant(format!("record {n} is not a valid transfer: {r:?}"))),
        }
        if r.next.is_null() && p != l.tail {
            return Err(CliError::invariant(format!("record {n} ends the list but the tail is {:?}", l.tail)));
        }
        (last, p) = (Some(r), r.next);
    }
    if n != l.regions {
        return Err(CliError::invariant(format!("{n} records for {} regions", l.regions)));
    }
    Ok((bal, last))
}

fn record_line(r: &Record) -> String {
    let name = |i: u64| NAMES.get(i as usize).copied().unwrap_or("?");
    format!("#{:<4} run {:<3} {:>8} -> {:<8} {:>4}", r.seq, r.run, name(r.from), name(r.to), r.amount)
}

fn balances_line(b: &[u64]) -> String {
    NAMES.iter().zip(b).map(|(n, v)| format!("{n} {v}")).collect::<Vec<_>>().join(", ")
}
