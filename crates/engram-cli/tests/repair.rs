//! `engram info`, `check` and `check --repair` on a pool holding bad pointer
//! fields (issue 15): a pointer from another pool, a stray value and a
//! dangling pointer, planted with checked mode off, then a crash. The pool
//! still opens; `info` says how many fields recovery treated as null;
//! `check` lists them (object, type, field) and exits 1; `--repair` asks
//! first (answering no changes nothing), `--repair --yes` clears them, and
//! the data reachable through good pointers is intact.

use engram::{CreateOptions, Durability, OpenOptions, PPtr, Persistent, Pool};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_engram");

#[derive(Clone, Copy, Debug, Persistent)]
struct Node {
    value: u64,
    next: PPtr<Node>,
    other: PPtr<Node>,
}

struct Temp(PathBuf);

impl Temp {
    fn new(tag: &str) -> Self {
        let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let p = dir.join(format!("engram-cli-repair-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        Temp(p)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn run(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(BIN).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn opts() -> OpenOptions {
    OpenOptions::new("repair").durability(Durability::Process).check_pointers(false)
}

/// A 30-node list under "list"; bad `other` fields in nodes 5, 15 and 25.
fn plant(path: &Path, foreign: u64) {
    let pool = Pool::create(path, CreateOptions::new("repair").durability(Durability::Process).check_pointers(false)).unwrap();
    let nodes = pool
        .txn(|tx| {
            let mut head = PPtr::null();
            let mut out = Vec::new();
            for value in 0..30 {
                head = tx.alloc(Node { value, next: head, other: PPtr::null() })?;
                out.push(head);
            }
            tx.set_root("list", head)?;
            Ok::<_, engram::Error>(out)
        })
        .unwrap();
    let spare = pool
        .txn(|tx| {
            tx.update(nodes[5], |n| n.other = PPtr::from_addr(foreign))?;
            tx.update(nodes[15], |n| n.other = PPtr::from_addr(nodes[3].addr() + 8))?;
            let spare = tx.alloc(Node { value: 99, next: PPtr::null(), other: PPtr::null() })?;
            tx.update(nodes[25], |n| n.other = spare)?;
            Ok::<_, engram::Error>(spare)
        })
        .unwrap();
    pool.txn(|tx| tx.free(spare)).unwrap();
    pool.simulate_crash();
}

fn list_sum(path: &Path) -> (u64, u64) {
    let pool = Pool::open(path, opts()).unwrap();
    let r = pool
        .txn(|tx| {
            let mut p = tx.root::<Node>("list")?.unwrap();
            let (mut n, mut sum) = (0, 0);
            while !p.is_null() {
                let node = tx.read(p)?;
                n += 1;
                sum += node.value;
                p = node.next;
            }
            Ok::<_, engram::Error>((n, sum))
        })
        .unwrap();
    pool.close().unwrap();
    r
}

#[test]
fn check_lists_and_repair_clears_bad_pointer_fields() {
    let other = Temp::new("other");
    let foreign = {
        let p = Pool::create(&other.0, CreateOptions::new("other").durability(Durability::Process)).unwrap();
        let a = p.txn(|tx| tx.alloc(7u64)).unwrap().addr();
        p.close().unwrap();
        a
    };
    let t = Temp::new("pool");
    plant(&t.0, foreign);
    let path = t.0.to_str().unwrap();

    let info = run(&["info", path], "");
    assert!(info.status.success(), "{}", text(&info));
    assert!(text(&info).contains("3 pointer field(s) point at no live object"), "{}", text(&info));

    let check = run(&["check", path], "");
    let out = text(&check);
    assert_eq!(check.status.code(), Some(1), "{out}");
    assert!(!out.contains("panicked"), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("  field +16 of repair::Node at ")).count(), 3, "{out}");
    for why in ["another pool", "stray", "dangling"] {
        assert!(out.contains(why), "{why}: {out}");
    }

    // Declined: nothing changes.
    let no = run(&["check", "--repair", path], "n\n");
    assert_eq!(no.status.code(), Some(1), "{}", text(&no));
    assert!(text(&no).contains("nothing changed"), "{}", text(&no));
    assert_eq!(run(&["check", path], "").status.code(), Some(1));

    let yes = run(&["check", "--repair", "--yes", path], "");
    assert!(yes.status.success(), "{}", text(&yes));
    assert!(text(&yes).contains("cleared 3 field(s)"), "{}", text(&yes));
    let again = run(&["check", path], "");
    assert!(again.status.success(), "{}", text(&again));
    assert!(text(&again).contains("consistent: 30 objects"), "{}", text(&again));
    assert_eq!(list_sum(&t.0), (30, 29 * 30 / 2));
}
