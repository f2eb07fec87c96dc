//! Crash recovery through failpoints: a region interrupted at every protocol
//! step is all-or-nothing after reopening; relocation rewrites every pointer
//! and resumes after an interrupted swizzle; garbage from a crash is reclaimed.
//!
//! These simulate a *process* crash (memory contents survive). Power failure
//! is the crash explorer's job.

mod common;
use common::TempPool;
use engram::failpoint::{arm, disarm_all, Failpoint, SimulatedCrash};
use engram::{CreateOptions, Durability, Error, OpenOptions, PArray, PPtr, Persistent, Pool};

#[derive(Clone, Copy, Debug, PartialEq, Persistent)]
struct Node {
    value: u64,
    next: PPtr<Node>,
}

#[derive(Clone, Copy, Debug, PartialEq, Persistent)]
struct Bank {
    accounts: PArray<u64>,
    transfers: u64,
    log: PPtr<Node>,
}

const ACCOUNTS: u64 = 16;
const TOTAL: u64 = 16 * 1000;

fn opts() -> OpenOptions {
    OpenOptions::new("bank").durability(Durability::Process)
}

fn setup(t: &TempPool) -> Pool {
    let pool = Pool::create(&t.0, CreateOptions::new("bank").durability(Durability::Process)).unwrap();
    pool.txn(|tx| {
        let accounts = tx.alloc_array::<u64>(ACCOUNTS)?;
        for i in 0..ACCOUNTS {
            tx.set(accounts, i, 1000)?;
        }
        let bank = tx.alloc(Bank { accounts, transfers: 0, log: PPtr::null() })?;
        tx.set_root("bank", bank)
    })
    .unwrap();
    pool
}

/// One region: move money, count it, append a log node, with garbage on the side.
fn transfer(pool: &Pool, i: u64) -> Result<(), Error> {
    pool.txn(|tx| {
        let bank_p = tx.root::<Bank>("bank")?.expect("bank");
        let mut bank = tx.read(bank_p)?;
        let (from, to) = (i % ACCOUNTS, (i * 7 + 3) % ACCOUNTS);
        let a = tx.get(bank.accounts, from)?;
        let amount = a.min(i % 97 + 1);
        tx.set(bank.accounts, from, a - amount)?;
        let _garbage = tx.alloc_array::<u8>(100 + i % 5000)?;
        let b = tx.get(bank.accounts, to)?;
        tx.set(bank.accounts, to, b + amount)?;
        bank.transfers += 1;
        bank.log = tx.alloc(Node { value: bank.transfers, next: bank.log })?;
        tx.write(bank_p, bank)
    })
}

/// Checks every invariant; returns the number of committed transfers.
fn verify(pool: &Pool) -> u64 {
    pool.check().expect("heap consistent");
    pool.txn(|tx| {
        let bank = tx.read(tx.root::<Bank>("bank")?.expect("bank"))?;
        let mut sum = 0;
        for i in 0..ACCOUNTS {
            sum += tx.get(bank.accounts, i)?;
        }
        assert_eq!(sum, TOTAL, "money is conserved");
        let (mut p, mut expect) = (bank.log, bank.transfers);
        while !p.is_null() {
            let n = tx.read(p)?;
            assert_eq!(n.value, expect, "log entries are consecutive");
            expect -= 1;
            p = n.next;
        }
        assert_eq!(expect, 0, "log length equals the transfer count");
        Ok::<_, Error>(bank.transfers)
    })
    .unwrap()
}

fn crash_at(pool: &Pool, point: Failpoint, skip: u64, i: u64) {
    arm(point, skip);
    let r = std::panic::catch_unwind(|| transfer(pool, i));
    disarm_all();
    let payload = r.expect_err(point.name());
    assert!(payload.downcast_ref::<SimulatedCrash>().is_some());
}

#[test]
fn crash_at_every_step_is_all_or_nothing() {
    let points = [
        (Failpoint::LogAfterAppend, 0),
        (Failpoint::LogAfterAppend, 1),
        (Failpoint::LogAfterAppend, 2),
        (Failpoint::TxAfterWrite, 0),
        (Failpoint::TxAfterWrite, 2),
        (Failpoint::TxBeforeCommit, 0),
        (Failpoint::TxAfterCommit, 0),
    ];
    for (point, skip) in points {
        let t = TempPool::new("steps");
        let pool = setup(&t);
        for i in 0..20 {
            transfer(&pool, i).unwrap();
        }
        crash_at(&pool, point, skip, 20);
        drop(pool);
        let pool = Pool::open(&t.0, opts()).unwrap();
        let rep = pool.open_report().clone();
        assert!(!rep.was_clean);
        let n = verify(&pool);
        if point == Failpoint::TxAfterCommit {
            assert_eq!(n, 21, "{point}: committed region survives");
            assert_eq!(rep.undone_regions, 0);
        } else {
            assert_eq!(n, 20, "{point}#{skip}: interrupted region undone");
            assert!(rep.undone_regions <= 1);
        }
        // garbage of the interrupted region (and the crash) was reclaimed
        let live = rep.recovered.expect("recovery GC ran").objects;
        assert_eq!(live, 2 + n, "{point}: bank, accounts, {n} log nodes, no garbage");
        // the pool keeps working
        transfer(&pool, 99).unwrap();
        assert_eq!(verify(&pool), n + 1);
        pool.close().unwrap();
    }
}

#[test]
fn crash_during_recovery_recovers_again() {
    let t = TempPool::new("rerecover");
    let pool = setup(&t);
    for i in 0..5 {
        transfer(&pool, i).unwrap();
    }
    crash_at(&pool, Failpoint::TxBeforeCommit, 0, 5);
    drop(pool);
    // crash while undoing the second entry
    arm(Failpoint::LogUndoEntry, 1);
    let r = std::panic::catch_unwind(|| Pool::open(&t.0, opts()));
    disarm_all();
    assert!(r.is_err(), "the failpoint fired during recovery");
    let pool = Pool::open(&t.0, opts()).unwrap();
    assert_eq!(verify(&pool), 5);
    pool.close().unwrap();
}

#[test]
fn big_region_spills_into_log_chunks_and_rolls_back() {
    let t = TempPool::new("chunks");
    let pool = setup(&t);
    let arr = pool
        .txn(|tx| {
            let a = tx.alloc_array::<u64>(200_000)?;
            for i in 0..200_000 {
                tx.set(a, i, i)?;
            }
            tx.set_root_array("big", a)?;
            Ok::<_, Error>(a)
        })
        .unwrap();
    // every element logged separately: ~6 MB of undo log, many chunks
    let r: Result<(), Error> = pool.txn(|tx| {
        for i in 0..200_000 {
            tx.set(arr, i, 0)?;
        }
        Err(Error::Aborted)
    });
    assert!(r.is_err());
    let ok = pool
        .txn(|tx| {
            for i in (0..200_000).step_by(997) {
                assert_eq!(tx.get(arr, i)?, i);
            }
            Ok::<_, Error>(true)
        })
        .unwrap();
    assert!(ok);
    // and after a crash in the middle of such a region
    arm(Failpoint::LogAfterAppend, 150_000);
    let r = std::panic::catch_unwind(|| {
        pool.txn(|tx| {
            for i in 0..200_000 {
                tx.set(arr, i, 7)?;
            }
            Ok::<_, Error>(())
        })
    });
    disarm_all();
    assert!(r.is_err());
    drop(pool);
    let pool = Pool::open(&t.0, opts()).unwrap();
    assert!(pool.open_report().undone_entries >= 150_000);
    pool.txn(|tx| {
        let a = tx.root_array::<u64>("big")?.unwrap();
        for i in (0..200_000).step_by(991) {
            assert_eq!(tx.get(a, i)?, i);
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(verify(&pool), 0);
    pool.close().unwrap();
}

#[test]
fn relocation_rewrites_every_pointer() {
    let t = TempPool::new("reloc");
    let pool = setup(&t);
    for i in 0..300 {
        transfer(&pool, i).unwrap();
    }
    let old_base = pool.info().base;
    pool.close().unwrap();
    let mut o = opts();
    o.force_relocate = true;
    let pool = Pool::open(&t.0, o).unwrap();
    assert!(pool.open_report().relocated);
    assert_ne!(pool.info().base, old_base);
    assert!(pool.open_report().recovered.unwrap().swizzled >= 300);
    assert_eq!(verify(&pool), 300);
    transfer(&pool, 1000).unwrap();
    pool.close().unwrap();
    // and it stays where it moved
    let pool = Pool::open(&t.0, opts()).unwrap();
    assert!(!pool.open_report().relocated);
    assert_eq!(verify(&pool), 301);
    pool.close().unwrap();
}

#[test]
fn interrupted_relocation_resumes() {
    let t = TempPool::new("reloc-resume");
    let pool = setup(&t);
    for i in 0..200 {
        transfer(&pool, i).unwrap();
    }
    let first_base = pool.info().base;
    pool.close().unwrap();
    for round in 0..3 {
        let mut o = opts();
        o.force_relocate = true;
        arm(Failpoint::GcSwizzle, 50 + round * 20);
        let r = std::panic::catch_unwind(|| Pool::open(&t.0, o));
        disarm_all();
        assert!(r.is_err(), "crash in the middle of swizzling");
    }
    // a fresh open (at whatever base) finishes the job
    let mut o = opts();
    o.force_relocate = true;
    let pool = Pool::open(&t.0, o).unwrap();
    assert_ne!(pool.info().base, first_base);
    assert_eq!(verify(&pool), 200);
    pool.close().unwrap();
}

#[test]
fn unlinked_allocations_are_garbage_after_crash() {
    let t = TempPool::new("garbage");
    let pool = setup(&t);
    pool.txn(|tx| {
        for i in 0..1000u64 {
            tx.alloc(Node { value: i, next: PPtr::null() })?;
        }
        tx.alloc_array::<u8>(1 << 20)?; // a large object too
        Ok::<_, Error>(())
    })
    .unwrap();
    assert!(pool.info().live_objects >= 1002);
    pool.simulate_crash();
    let pool = Pool::open(&t.0, opts()).unwrap();
    assert_eq!(pool.open_report().recovered.unwrap().objects, 2);
    assert_eq!(pool.info().live_objects, 2);
    assert_eq!(verify(&pool), 0);
    pool.close().unwrap();
}

/// A crash can leave a multi-arena huge object's arena-table entries
/// partial (head and tail share one fence): a head without its tail (while
/// it is allocated) or a tail without its head (while it is freed). Such an
/// object is unreachable and its span tables are clean: the open clears the
/// entries (it used to refuse the pool as corrupt), and the arenas serve
/// the next huge object.
#[test]
fn partial_multi_arena_huge_entries_are_cleared_after_a_crash() {
    use engram::format::{arena_off, ARENA_HUGE_HEAD, ARENA_HUGE_TAIL, ARENA_SIZE, ARENA_TABLE_OFF, OBJ_HEADER};
    use std::os::unix::fs::FileExt;
    let entry = |a: u64| ARENA_TABLE_OFF + 8 * a;
    for keep in ["head", "tail"] {
        let t = TempPool::new(&format!("partial-huge-{keep}"));
        let o = CreateOptions::new("bank").durability(Durability::Process).max_size(1 << 30);
        let pool = Pool::create(&t.0, o).unwrap();
        // allocated in a region, never linked
        let a = pool.txn(|tx| tx.alloc_array::<u8>(2 * ARENA_SIZE - OBJ_HEADER)).unwrap();
        let at = a.addr() - pool.info().base - OBJ_HEADER;
        let h = (at - arena_off(0)) / ARENA_SIZE;
        assert_eq!(at, arena_off(h), "a huge object starts an arena");
        pool.simulate_crash();
        let f = std::fs::OpenOptions::new().read(true).write(true).open(&t.0).unwrap();
        let word = |a: u64| {
            let mut b = [0u8; 8];
            f.read_exact_at(&mut b, entry(a)).unwrap();
            u64::from_le_bytes(b)
        };
        assert_eq!((word(h), word(h + 1)), (ARENA_HUGE_HEAD | 2, ARENA_HUGE_TAIL | 1));
        let lost = if keep == "head" { h + 1 } else { h };
        f.write_all_at(&0u64.to_le_bytes(), entry(lost)).unwrap();
        drop(f);
        let pool = Pool::open(&t.0, opts()).unwrap_or_else(|e| panic!("{keep} alone: {e}"));
        pool.check().unwrap();
        let b = pool.txn(|tx| tx.alloc_array::<u8>(2 * ARENA_SIZE - OBJ_HEADER)).unwrap();
        assert_eq!(b.addr() - pool.info().base, arena_off(h) + OBJ_HEADER, "{keep} alone: the arenas are free again");
        pool.txn(|tx| tx.free_array(b)).unwrap();
        pool.close().unwrap();
    }
}
