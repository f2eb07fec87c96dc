//! go-pmem's fill-the-heap-then-restart test on the Rust engine: the hidden
//! `restart-one` subcommand, one phase per process, driven by
//! `go/cmd/engram-gobench` (which runs the Go version the same way).
//!
//! - `--phase fill`: creates a pool at `--path`, fills it with a linked list
//!   of `--n` 16-byte nodes (`next`, `val`), 10^4 per region, named by the
//!   root `list`; then closes it, or with `--crash` sends itself SIGKILL
//!   before any close (the pool stays dirty, as after a crash).
//! - `--phase reopen`: opens the pool (recovering it if it was not closed),
//!   reads the list's first node and prints
//!   `first-access=<unix ns> open=<ns>`: the wall clock at that first access
//!   (the parent subtracts its own clock at process start) and the open plus
//!   first access timed inside the process.
//!
//! Crash behaviour: the crash is the point of the test; every region is an
//! ordinary failure-atomic region, so the reopen sees the last committed
//! batch. Errors are printed and give a failing exit code, never a panic.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use engram::{CreateOptions, Durability, Error, OpenOptions, PPtr, Persistent, Pool};

use engram_bench::job::Mode;

const LAYOUT: &str = "engram_bench_restart";
const BATCH: u64 = 10_000;

/// The arguments of `restart-one`.
#[derive(Args)]
pub struct RestartArgs {
    /// fill or reopen.
    #[arg(long)]
    phase: String,
    /// Number of list nodes.
    #[arg(long)]
    n: u64,
    #[arg(long, value_enum)]
    mode: Mode,
    /// The pool file.
    #[arg(long)]
    path: PathBuf,
    /// fill: kill the process with SIGKILL instead of closing the pool.
    #[arg(long)]
    crash: bool,
}

/// A list node: 16 bytes, like the Go test's.
#[derive(Clone, Copy, Debug, Persistent)]
#[engram(name = "engram_bench::ListNode")]
struct ListNode {
    next: PPtr<ListNode>,
    val: u64,
}

fn durability(m: Mode) -> Durability {
    match m {
        Mode::Pmem => Durability::Pmem,
        Mode::Msync => Durability::Msync,
        Mode::Volatile | Mode::Process => Durability::Process,
    }
}

fn fill(a: &RestartArgs) -> Result<(), Error> {
    let opts = CreateOptions::new(LAYOUT).durability(durability(a.mode)).initial_size((64 << 20) + a.n * 64).overwrite();
    let pool = Pool::create(&a.path, opts)?;
    let mut head = PPtr::<ListNode>::null();
    let mut done = 0;
    while done < a.n {
        head = pool.txn(|tx| {
            let mut h = head;
            for val in done..a.n.min(done + BATCH) {
                h = tx.alloc(ListNode { next: h, val })?;
            }
            tx.set_root("list", h)?;
            Ok(h)
        })?;
        done += BATCH;
    }
    if a.crash {
        // SAFETY: kill(2) on our own pid with a valid signal number; it
        // touches no memory of this process.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
    pool.close()
}

fn reopen(a: &RestartArgs) -> Result<String, Error> {
    let start = Instant::now();
    let pool = Pool::open(&a.path, OpenOptions::new(LAYOUT).durability(durability(a.mode)))?;
    let val = pool.txn(|tx| {
        let head = tx.root::<ListNode>("list")?.ok_or_else(|| Error::InvalidArgument { what: "list root missing".into() })?;
        Ok(tx.read(head)?.val)
    })?;
    let open = start.elapsed().as_nanos();
    let at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    if val + 1 != a.n {
        return Err(Error::InvalidArgument { what: format!("first node holds {val}, want {}", a.n - 1) });
    }
    pool.close()?;
    Ok(format!("first-access={at} open={open}"))
}

/// The subcommand's entry point.
pub fn main(a: RestartArgs) -> ExitCode {
    let res = match a.phase.as_str() {
        "fill" => fill(&a).map(|()| String::new()),
        "reopen" => reopen(&a),
        other => Err(Error::InvalidArgument { what: format!("unknown phase {other:?}") }),
    };
    match res {
        Ok(line) => {
            if !line.is_empty() {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("engram-bench restart-one: {e}");
            ExitCode::FAILURE
        }
    }
}
