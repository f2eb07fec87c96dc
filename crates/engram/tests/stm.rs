//! Persistent STM: PTVar/TVar transactions, copy-on-commit, retry, or_else,
//! durability across reopen and crashes, GC of old values, fence counts,
//! and multi-threaded invariants.

mod common;
use common::TempPool;
use engram::failpoint::{self, Failpoint};
use engram::stm::{atomically, PSlice, PStr, PTVar, StmError, TVar};
use engram::{CreateOptions, Durability, OpenOptions, PPtr, Pool};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

fn create(t: &TempPool, d: Durability) -> Pool {
    Pool::create(&t.0, CreateOptions::new("stm").durability(d)).unwrap()
}

fn reopen(t: &TempPool) -> Pool {
    Pool::open(&t.0, OpenOptions::new("stm").durability(Durability::Process)).unwrap()
}

#[test]
fn values_commit_and_survive_reopen() {
    let t = TempPool::new("stm-basic");
    let pool = create(&t, Durability::Process);
    let n: PTVar<u64> = pool.root("n", || 1).unwrap();
    let s: PTVar<String> = pool.root("s", || "hello".to_string()).unwrap();
    pool.atomically(|tx| {
        let x = tx.read(&n)?;
        tx.write(&n, x + 41)?;
        tx.write(&s, format!("hello {}", x + 41))
    })
    .unwrap();
    pool.close().unwrap();
    let pool = reopen(&t);
    let n: PTVar<u64> = pool.root("n", || 0).unwrap();
    let s: PTVar<String> = pool.root("s", String::new).unwrap();
    let (a, b) = pool.atomically(|tx| Ok((tx.read(&n)?, tx.read(&s)?.as_str(tx)?.to_string()))).unwrap();
    assert_eq!((a, b.as_str()), (42, "hello 42"));
    pool.close().unwrap();
}

#[test]
fn ordinary_values_are_copied_with_sharing_and_cycles() {
    let t = TempPool::new("stm-copy");
    let pool = create(&t, Durability::Process);
    let v: PTVar<Vec<String>> = pool.root("v", Vec::new).unwrap();
    let o: PTVar<Option<u64>> = pool.root("o", || None).unwrap();
    let pair: PTVar<(u64, String)> = pool.root("pair", || (0, String::new())).unwrap();
    let shared: PTVar<(Rc<u64>, Rc<u64>)> = pool.root("shared", || (Rc::new(0), Rc::new(0))).unwrap();
    pool.atomically(|tx| {
        tx.write(&v, vec!["a".into(), "bc".into()])?;
        tx.write(&o, Some(7))?;
        tx.write(&pair, (3, "three".to_string()))?;
        let r = Rc::new(99u64);
        tx.write(&shared, (r.clone(), r))
    })
    .unwrap();
    pool.atomically(|tx| {
        let items: PSlice<PStr> = tx.read(&v)?;
        let items: Vec<String> = items.as_slice(tx)?.iter().map(|s| s.as_str(tx).map(str::to_string)).collect::<Result<_, _>>()?;
        assert_eq!(items, vec!["a", "bc"]);
        assert_eq!(tx.read(&o)?.get(), Some(7));
        let p = tx.read(&pair)?;
        assert_eq!((p.a, p.b.as_str(tx)?), (3, "three"));
        let sh = tx.read(&shared)?;
        assert_eq!(sh.a, sh.b, "an Rc reached twice is copied once");
        Ok(())
    })
    .unwrap();
    // a cycle through Rc<RefCell<_>>: node -> node
    struct Node {
        value: u64,
        next: Option<Rc<RefCell<Node>>>,
    }
    #[derive(Clone, Copy, Default, engram::Persistent)]
    struct PNode {
        value: u64,
        next: PPtr<PNode>,
    }
    impl engram::stm::Persist for Node {
        type P = PNode;
        fn persist(&self, cx: &mut engram::stm::CopyCx<'_>) -> engram::Result<PNode> {
            let next = match &self.next {
                Some(n) => n.persist(cx)?,
                None => PPtr::null(),
            };
            Ok(PNode { value: self.value, next })
        }
    }
    let ring: PTVar<Rc<RefCell<Node>>> = pool.root("ring", || Rc::new(RefCell::new(Node { value: 0, next: None }))).unwrap();
    let a = Rc::new(RefCell::new(Node { value: 1, next: None }));
    let b = Rc::new(RefCell::new(Node { value: 2, next: Some(a.clone()) }));
    a.borrow_mut().next = Some(b.clone());
    // copied at commit, as it is then
    pool.atomically(|tx| tx.write(&ring, a.clone())).unwrap();
    a.borrow_mut().next = None; // break the volatile cycle (the pool keeps its copy)
    pool.close().unwrap();
    let pool = reopen(&t);
    pool.check().unwrap();
    let ring: PTVar<Rc<RefCell<Node>>> = pool.root("ring", || Rc::new(RefCell::new(Node { value: 0, next: None }))).unwrap();
    pool.txn(|tx| {
        let head = pool_read_root(tx, &ring)?;
        let a = tx.read(head)?;
        let b = tx.read(a.next)?;
        assert_eq!((a.value, b.value), (1, 2));
        assert_eq!(b.next, head, "the cycle is a cycle in the pool");
        Ok::<_, engram::Error>(())
    })
    .unwrap();
    pool.close().unwrap();
}

/// Reads a PTVar's committed value outside STM (single-threaded checks).
fn pool_read_root<T: engram::stm::Persist>(tx: &engram::Tx<'_>, v: &PTVar<T>) -> engram::Result<T::P> {
    Ok(tx.read(v.cell())?.value)
}

#[test]
fn bank_invariant_under_threads() {
    let t = TempPool::new("stm-bank");
    let pool = create(&t, Durability::Process);
    let accounts: Vec<PTVar<u64>> = (0..16).map(|i| pool.root(&format!("acct{i}"), || 1000).unwrap()).collect();
    let accounts = Arc::new(accounts);
    let mut hs = Vec::new();
    for th in 0..4u64 {
        let (pool, accounts) = (pool.clone(), accounts.clone());
        hs.push(std::thread::spawn(move || {
            let mut x = th * 7919 + 1;
            for _ in 0..2000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let (a, b) = ((x >> 33) as usize % 16, (x >> 45) as usize % 16);
                pool.atomically(|tx| {
                    let va = tx.read(&accounts[a])?;
                    let amt = va.min(x % 50);
                    tx.write(&accounts[a], va - amt)?;
                    let vb = tx.read(&accounts[b])?;
                    tx.write(&accounts[b], vb + amt)
                })
                .unwrap();
            }
        }));
    }
    let auditor = {
        let (pool, accounts) = (pool.clone(), accounts.clone());
        std::thread::spawn(move || {
            for _ in 0..300 {
                let sum: u64 = pool.atomically(|tx| accounts.iter().map(|a| tx.read(a)).sum()).unwrap();
                assert_eq!(sum, 16000, "a read-only transaction saw an inconsistent state");
            }
        })
    };
    for h in hs {
        h.join().unwrap();
    }
    auditor.join().unwrap();
    let sum: u64 = pool.atomically(|tx| accounts.iter().map(|a| tx.read(a)).sum()).unwrap();
    assert_eq!(sum, 16000);
    drop(accounts);
    pool.close().unwrap();
}

#[test]
fn retry_blocks_until_a_read_variable_changes() {
    let t = TempPool::new("stm-retry");
    let pool = create(&t, Durability::Process);
    let q: PTVar<u64> = pool.root("q", || 0).unwrap();
    let consumer = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            pool.atomically(|tx| {
                let n = tx.read(&q)?;
                if n == 0 {
                    return tx.retry();
                }
                tx.write(&q, n - 1).map(|_| n)
            })
            .unwrap()
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(!consumer.is_finished(), "retry must block while nothing changes");
    pool.atomically(|tx| tx.write(&q, 5)).unwrap();
    assert_eq!(consumer.join().unwrap(), 5);
    assert_eq!(pool.atomically(|tx| tx.read(&q)).unwrap(), 4);
}

#[test]
fn or_else_drops_the_first_branch_writes() {
    let t = TempPool::new("stm-orelse");
    let pool = create(&t, Durability::Process);
    let a: PTVar<u64> = pool.root("a", || 0).unwrap();
    let b: PTVar<u64> = pool.root("b", || 0).unwrap();
    let vol = TVar::new(0u64);
    let which = pool
        .atomically(|tx| {
            tx.or_else(
                |tx| {
                    tx.write(&a, 111)?;
                    tx.write(&vol, 1)?;
                    tx.retry()
                },
                |tx| {
                    tx.write(&b, 222)?;
                    Ok("second")
                },
            )
        })
        .unwrap();
    assert_eq!(which, "second");
    let (x, y, v) = pool.atomically(|tx| Ok((tx.read(&a)?, tx.read(&b)?, tx.read(&vol)?))).unwrap();
    assert_eq!((x, y, v), (0, 222, 0));
}

#[test]
fn volatile_and_persistent_change_together() {
    let t = TempPool::new("stm-mixed");
    let pool = create(&t, Durability::Process);
    let p: PTVar<u64> = pool.root("p", || 10).unwrap();
    let v = TVar::new(10u64);
    pool.atomically(|tx| {
        let x = tx.read(&p)?;
        tx.write(&p, x - 3)?;
        let y = tx.read(&v)?;
        tx.write(&v, y + 3)
    })
    .unwrap();
    assert_eq!(v.load(), 13);
    assert_eq!(pool.atomically(|tx| tx.read(&p)).unwrap(), 7);
    // volatile-only transactions need no pool
    let w = TVar::new(String::from("x"));
    atomically(|tx| {
        let s = tx.read(&w)?;
        tx.write(&w, s + "y")
    })
    .unwrap();
    assert_eq!(w.load(), "xy");
    // and persistent variables refuse to work without one
    let r = atomically(|tx| tx.read(&p));
    assert!(r.is_err());
    let _ = StmError::Conflict;
}

#[test]
fn crash_after_the_commit_fence_is_replayed_and_before_is_lost() {
    for (point, committed) in [(Failpoint::StmAfterFence, true), (Failpoint::StmAfterApply, true)] {
        let t = TempPool::new("stm-crash");
        let pool = create(&t, Durability::Process);
        let a: PTVar<u64> = pool.root("a", || 1).unwrap();
        let s: PTVar<String> = pool.root("s", || "old".into()).unwrap();
        failpoint::arm(point, 0);
        let r = std::panic::catch_unwind(|| {
            pool.atomically(|tx| {
                tx.write(&a, 2)?;
                tx.write(&s, "new".to_string())
            })
        });
        failpoint::disarm_all();
        assert!(r.is_err(), "{point} fired");
        pool.simulate_crash();
        let pool = reopen(&t);
        let rep = pool.open_report().stm.unwrap();
        assert!(rep.records >= 1, "{point}: {rep:?}");
        let a: PTVar<u64> = pool.root("a", || 0).unwrap();
        let s: PTVar<String> = pool.root("s", String::new).unwrap();
        let (x, y) = pool.atomically(|tx| Ok((tx.read(&a)?, tx.read(&s)?.as_str(tx)?.to_string()))).unwrap();
        assert_eq!(committed, x == 2 && y == "new", "{point}: a = {x}, s = {y}");
        pool.check().unwrap();
        pool.close().unwrap();
    }
}

#[test]
fn old_values_are_garbage() {
    let t = TempPool::new("stm-gc");
    let pool = create(&t, Durability::Process);
    let s: PTVar<String> = pool.root("s", String::new).unwrap();
    pool.collect().unwrap();
    let base = pool.info().live_objects;
    for i in 0..500 {
        pool.atomically(|tx| tx.write(&s, format!("value number {i}"))).unwrap();
    }
    assert!(pool.info().live_objects >= base + 500);
    let st = pool.collect().unwrap();
    assert_eq!(pool.info().live_objects, base, "{st:?}");
    let v = pool.atomically(|tx| Ok(tx.read(&s)?.as_str(tx)?.to_string())).unwrap();
    assert_eq!(v, "value number 499");
}

/// Runs `body` as the only test of a child process (this binary, `--exact
/// name`), so no other test's pool moves the process-wide clock meanwhile:
/// a reopened pool raises the clock past its old reservation, which may
/// cross this test's pool's reservation and add a reservation fence to the
/// count (one run in a few did, with the tests run in parallel).
fn alone(name: &str, body: fn()) {
    if std::env::var_os("ENGRAM_STM_TEST_ALONE").is_some() {
        body();
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--test-threads=1"])
        .env("ENGRAM_STM_TEST_ALONE", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1 passed"), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn one_fence_per_update_commit_none_for_read_only() {
    alone("one_fence_per_update_commit_none_for_read_only", one_fence_per_update_commit_none_for_read_only_body);
}

fn one_fence_per_update_commit_none_for_read_only_body() {
    let t = TempPool::new("stm-fences");
    let pool = create(&t, Durability::Pmem);
    let a: PTVar<u64> = pool.root("a", || 0).unwrap();
    let b: PTVar<u64> = pool.root("b", || 0).unwrap();
    pool.atomically(|tx| tx.write(&a, 1)).unwrap(); // first commit: log set up, clock reserved
    let before = engram::pmem::counters();
    for i in 0..100 {
        pool.atomically(|tx| {
            tx.write(&a, i)?;
            tx.write(&b, i)
        })
        .unwrap();
    }
    let mid = engram::pmem::counters();
    assert_eq!(mid.fences - before.fences, 100, "one fence per update commit");
    for _ in 0..100 {
        pool.atomically(|tx| Ok(tx.read(&a)? + tx.read(&b)?)).unwrap();
    }
    let after = engram::pmem::counters();
    assert_eq!(after.fences, mid.fences, "read-only transactions fence nothing");
    assert_eq!(after.flushes, mid.flushes, "read-only transactions flush nothing");
}

/// Regression: a transaction that wrote `d` and then extends its snapshot
/// (reading `c`, which is newer) must not take another committer's lock on
/// `d` for its own: that lost updates.
#[test]
fn snapshot_extension_does_not_lose_updates() {
    let c = TVar::new(0u64);
    let d = TVar::new(0u64);
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let (c, d) = (c.clone(), d.clone());
            std::thread::spawn(move || {
                for _ in 0..5000 {
                    atomically(|tx| {
                        let v = tx.read(&c)?;
                        tx.write(&c, v + 1)
                    })
                    .unwrap();
                    atomically(|tx| {
                        let v = tx.read(&d)?;
                        tx.write(&d, v + 1)?;
                        tx.read(&c).map(|_| ())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!((c.load(), d.load()), (20000, 20000));
}

/// Objects allocated by a transaction that writes no variable are still
/// made durable at its commit (whoever links them next relies on it).
#[test]
fn allocation_only_transactions_persist_what_they_allocate() {
    alone("allocation_only_transactions_persist_what_they_allocate", allocation_only_body);
}

fn allocation_only_body() {
    let t = TempPool::new("stm-alloconly");
    let pool = create(&t, Durability::Pmem);
    let _warm: PTVar<u64> = pool.root("warm", || 0).unwrap();
    let before = engram::pmem::counters();
    for i in 0..10u64 {
        pool.atomically(|tx| PTVar::<u64>::new(tx, i).map(|_| ())).unwrap();
    }
    let after = engram::pmem::counters();
    assert_eq!(after.fences - before.fences, 10, "one fence per allocating commit");
    assert!(after.flushes - before.flushes >= 10);
}

/// Fences per kind of commit, counted by this thread's pmem-seam counters
/// (issue 14): a read-only commit issues none, an update commit one, an
/// update commit that also creates a transactional object (a tree insert's
/// new node) two: the new object is fenced before the record that links
/// it (carrying it in the record instead is not done: docs/stm.md, "Open").
#[test]
fn fences_per_commit_kind_read_only_update_allocating() {
    alone("fences_per_commit_kind_read_only_update_allocating", fences_per_commit_kind_body);
}

fn fences_per_commit_kind_body() {
    use engram::stm::PTField;
    let t = TempPool::new("stm-fence-kinds");
    let pool = create(&t, Durability::Pmem);
    let v: PTVar<u64> = pool.root("v", || 0).unwrap();
    let root: PTVar<PPtr<ImmNode>> = pool.root("node", PPtr::null).unwrap();
    // Warm: the log linked, the clock reserved, the node type registered
    // and its size class given a span (each persisted with a fence of its own).
    pool.atomically(|tx| tx.write(&v, 1)).unwrap();
    pool.atomically(|tx| tx.alloc(ImmNode { key: PTField::new(0), value: PTField::new(0) }).map(|_| ())).unwrap();
    let fences = |f: &mut dyn FnMut()| {
        let before = engram::pmem::counters().fences;
        for _ in 0..10 {
            f();
        }
        engram::pmem::counters().fences - before
    };
    let read_only = fences(&mut || {
        pool.atomically(|tx| tx.read(&v).map(|_| ())).unwrap();
    });
    let update = fences(&mut || {
        pool.atomically(|tx| tx.modify(&v, |x| x + 1)).unwrap();
    });
    let mut k = 0;
    let allocating = fences(&mut || {
        k += 1;
        pool.atomically(|tx| {
            let n = tx.alloc(ImmNode { key: PTField::new(k), value: PTField::new(k) })?;
            tx.write(&root, n)
        })
        .unwrap();
    });
    // An allocating commit carries its new objects in the redo record: one
    // fence, as any update commit (issue 14).
    assert_eq!((read_only, update, allocating), (0, 10, 10), "fences for 10 commits of each kind");
    pool.close().unwrap();
}

/// Helping only where it is needed (issue 14; docs/stm.md, "Round 8"):
/// thread A creates a node, links it and stays idle, its record (carrying
/// the node) retained. Thread B's update commits that leave the node alone
/// issue one fence each and help nobody, however often B reuses its log
/// halves. Once B changes the node, the commit that overwrites the record
/// of that change clears A's record first (two more fences, one help).
#[test]
fn young_records_are_helped_only_when_their_objects_changed() {
    alone("young_records_are_helped_only_when_their_objects_changed", || {
        assert_eq!(young_help_counts(None), [(10, 0), (5, 1)], "(fences, helps): 10 commits beside A's node, then 3 changing it");
    });
}

/// The same with the planted `stm.young_help_always` (B helps whenever A's
/// record is older, as before this rule): B's first ten commits help too.
#[test]
fn helping_commits_that_leave_young_objects_alone_is_caught() {
    alone("helping_commits_that_leave_young_objects_alone_is_caught", || {
        assert_eq!(young_help_counts(Some("stm.young_help_always"))[0], (12, 1), "the planted bug should help once");
    });
}

/// Two threads taking turns (a token passed after every transaction),
/// each inserting and removing keys of one hash table at random: the
/// overlap in which the old rule helped on most overwrites (1.18-1.20
/// fences per update commit at two threads on a quiet machine,
/// docs/bench/stm.md). Now a thread helps only when the record it
/// overwrites changed the other's newest node, which these keys almost
/// never do; with the planted old rule (`stm.young_help_always`) the
/// same run issues many more fences.
#[test]
fn taking_turns_hash_updates_issue_one_fence_per_commit() {
    alone("taking_turns_hash_updates_issue_one_fence_per_commit", || {
        for tree in [false, true] {
            let (fences, commits, helps) = turns_fences(None, tree);
            println!("tree {tree}, rule of round 8: {fences} fences, {commits} update commits, {helps} helps");
            assert!(fences * 1000 <= commits * 1005, "tree {tree}: {fences} fences for {commits} update commits ({helps} helps)");
        }
        let (fences, commits, helps) = turns_fences(Some("stm.young_help_always"), false);
        println!("planted old rule: {fences} fences, {commits} update commits, {helps} helps");
        // (1.09 fences per commit since round 25: an insert into an empty
        // bucket makes no node, so fewer records carry young objects)
        assert!(fences * 100 >= commits * 105, "the planted old rule: {fences} fences for {commits} commits ({helps} helps)");
        let (fences, commits, helps) = turns_fences(Some("stm.young_help_always"), true);
        println!("tree, planted old rule: {fences} fences, {commits} update commits, {helps} helps");
    });
}

/// (fences, update commits, helps) of two threads taking turns, 2 x 2,000
/// transactions of a 50 % insert / 50 % remove mix on 100,000 keys
/// (20,000 inserted first), on a
/// hash table or (`tree`) a red-black tree.
fn turns_fences(plant: Option<&str>, tree: bool) -> (u64, u64, u64) {
    use engram::stm::collections::{HashTable, RbTree};
    use rand::{Rng, SeedableRng};
    let t = TempPool::new("stm-turns");
    let pool = create(&t, Durability::Pmem);
    let ht = HashTable::<u64, u64>::root(&pool, "ht", 65536).unwrap();
    let rb = RbTree::<u64, u64>::root(&pool, "rb").unwrap();
    let insert = |tx: &engram::stm::STx<'_>, k: u64| if tree { rb.insert(tx, k, k) } else { ht.insert(tx, k, k) };
    let remove = |tx: &engram::stm::STx<'_>, k: u64| if tree { rb.remove(tx, &k) } else { ht.remove(tx, &k) };
    // 20,000 keys first (the benchmark's tables hold 50,000): in a small
    // tree most inserts land next to one of the newest nodes.
    for batch in 0..20u64 {
        pool.atomically(|tx| (0..1000).try_for_each(|i| insert(tx, (batch * 1000 + i) * 5).map(drop))).unwrap();
    }
    let turn = (std::sync::Mutex::new(0usize), std::sync::Condvar::new());
    let helps0 = engram::stm::young_helps();
    let per_thread: Vec<(u64, u64)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2usize)
            .map(|me| {
                let (pool, turn, insert, remove) = (&pool, &turn, &insert, &remove);
                s.spawn(move || {
                    if let Some(bug) = plant {
                        failpoint::plant(bug);
                    }
                    let mut rng = rand::rngs::StdRng::seed_from_u64(7 + me as u64);
                    // Warm (log, clock reservation, size class), not counted.
                    pool.atomically(|tx| insert(tx, 1_000_000 + me as u64).map(drop)).unwrap();
                    let (mut fences, mut commits) = (0, 0);
                    for _ in 0..2000 {
                        let mut t = turn.0.lock().unwrap();
                        while *t % 2 != me {
                            t = turn.1.wait(t).unwrap();
                        }
                        let (key, ins) = (rng.gen_range(0..100_000u64), rng.gen_bool(0.5));
                        let f0 = engram::pmem::counters().fences;
                        let wrote = pool
                            .atomically(|tx| if ins { insert(tx, key).map(|_| true) } else { remove(tx, key).map(|r| r.is_some()) })
                            .unwrap();
                        fences += engram::pmem::counters().fences - f0;
                        commits += wrote as u64;
                        *t += 1;
                        turn.1.notify_all();
                    }
                    failpoint::disarm_all();
                    (fences, commits)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    pool.close().unwrap();
    let (f, c) = per_thread.iter().fold((0, 0), |(f, c), &(x, y)| (f + x, c + y));
    (f, c, engram::stm::young_helps() - helps0)
}

/// B's (fences, helps) for its ten commits beside A's new node, then for
/// the three commits that change it and overwrite that change's record.
fn young_help_counts(plant_b: Option<&str>) -> [(u64, u64); 2] {
    let t = TempPool::new("stm-young-help");
    let pool = create(&t, Durability::Pmem);
    let v: PTVar<u64> = pool.root("v", || 0).unwrap();
    let root: PTVar<PPtr<ImmNode>> = pool.root("node", PPtr::null).unwrap();
    // B's log linked, the clock reserved.
    pool.atomically(|tx| tx.write(&v, 1)).unwrap();
    let (made, done) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    let counts = || (engram::pmem::counters().fences, engram::stm::young_helps());
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            publish_imm_node(&pool, &root, 1);
            made.wait();
            done.wait(); // alive: its log, and the record in it, stay its own
        });
        made.wait();
        if let Some(bug) = plant_b {
            failpoint::plant(bug);
        }
        let n = pool.atomically(|tx| tx.read(&root)).unwrap();
        let c0 = counts();
        for _ in 0..10 {
            pool.atomically(|tx| tx.modify(&v, |x| x + 1)).unwrap();
        }
        let c1 = counts();
        pool.atomically(|tx| tx.write(&engram::field!(n, ImmNode, value), 5)).unwrap();
        for _ in 0..2 {
            pool.atomically(|tx| tx.modify(&v, |x| x + 1)).unwrap();
        }
        let c2 = counts();
        failpoint::disarm_all();
        done.wait();
        [(c1.0 - c0.0, c1.1 - c0.1), (c2.0 - c1.0, c2.1 - c1.1)]
    });
    pool.close().unwrap();
    out
}

/// Issue 15: every open/close in which threads ran transactions used to
/// leave each thread's 64 KiB redo log linked for ever, so a pool reopened
/// daily grew without bound. Logs recorded by earlier opens are adopted.
#[test]
fn redo_logs_of_earlier_opens_are_adopted() {
    const THREADS: usize = 4;
    let t = TempPool::new("stm-log-leak");
    let pool = create(&t, Durability::Process);
    pool.close().unwrap();
    let mut reachable = Vec::new();
    for cycle in 0..6u64 {
        let pool = reopen(&t);
        let v: PTVar<u64> = pool.root("n", || 0).unwrap();
        // All threads alive at once, so each needs a log of its own.
        let barrier = Arc::new(std::sync::Barrier::new(THREADS));
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                let (pool, v, barrier) = (pool.clone(), v, barrier.clone());
                s.spawn(move || {
                    pool.atomically(|tx| {
                        let x = tx.read(&v)?;
                        tx.write(&v, x + 1)
                    })
                    .unwrap();
                    barrier.wait();
                });
            }
        });
        assert_eq!(pool.atomically(|tx| tx.read(&v)).unwrap(), (cycle + 1) * THREADS as u64);
        reachable.push(pool.check().unwrap().bytes);
        pool.close().unwrap();
    }
    // After the first cycles the logs exist; later cycles reuse them.
    println!("reachable bytes after each cycle: {reachable:?}");
    assert_eq!(reachable[1], reachable[5], "reachable bytes per cycle: {reachable:?}");
}

/// Issue 15: a failure-atomic region inside an STM body (which may run
/// several times) is refused with a typed error, and the body sees it.
#[test]
fn region_inside_atomically_is_refused() {
    let t = TempPool::new("stm-txn-inside");
    let pool = create(&t, Durability::Process);
    let v: PTVar<u64> = pool.root("n", || 7).unwrap();
    let r = pool.atomically(|tx| {
        let x = tx.read(&v)?;
        let inner = pool.txn(|ptx| ptx.alloc(1u64).map(|_| ()));
        assert!(matches!(inner, Err(engram::Error::TxnInAtomically)), "{inner:?}");
        tx.write(&v, x + 1)?;
        inner.map_err(StmError::from)
    });
    assert!(matches!(r, Err(engram::Error::TxnInAtomically)), "{r:?}");
    // Nothing of the body committed; regions outside work as before.
    assert_eq!(pool.atomically(|tx| tx.read(&v)).unwrap(), 7);
    pool.txn(|tx| tx.alloc(2u64).map(|_| ())).unwrap();
    pool.close().unwrap();
}

/// A node whose key is written once, before the node is linked.
#[repr(C)]
#[derive(Clone, Copy, engram::Persistent)]
#[engram(name = "stm-test.KeyNode")]
struct KeyNode {
    key: engram::stm::PTField<u64>,
    value: engram::stm::PTField<u64>,
}

/// `read_immutable` sees the key as committed, and a transaction's own
/// write of it; it adds no read-set entry, so a transaction that wrote the
/// value in between still commits and the reader runs once.
#[test]
fn immutable_fields_read_without_a_read_set_entry() {
    use engram::stm::PTField;
    let t = TempPool::new("stm-immutable");
    let pool = create(&t, Durability::Process);
    let root: PTVar<PPtr<KeyNode>> = pool.root("node", PPtr::null).unwrap();
    pool.atomically(|tx| {
        let n = tx.alloc(KeyNode { key: PTField::new(7), value: PTField::new(1) })?;
        assert_eq!(tx.read_immutable(&engram::field!(n, KeyNode, key))?, 7);
        tx.write(&root, n)
    })
    .unwrap();
    let mut runs = 0;
    let (k, v) = pool
        .atomically(|tx| {
            runs += 1;
            let n = tx.read(&root)?;
            Ok((tx.read_immutable(&engram::field!(n, KeyNode, key))?, tx.read(&engram::field!(n, KeyNode, value))?))
        })
        .unwrap();
    assert_eq!((k, v, runs), (7, 1, 1));
    // Own writes are seen (the key of a node this transaction made).
    let k2 = pool
        .atomically(|tx| {
            let n = tx.alloc(KeyNode { key: PTField::new(0), value: PTField::new(0) })?;
            tx.write(&engram::field!(n, KeyNode, key), 9)?;
            tx.read_immutable(&engram::field!(n, KeyNode, key))
        })
        .unwrap();
    assert_eq!(k2, 9);
    pool.close().unwrap();
}

/// The same node with its key declared `#[immutable]` in the derive:
/// `engram::field!` gives a read-only handle for it.
#[repr(C)]
#[derive(Clone, Copy, engram::Persistent)]
#[engram(name = "stm-test.ImmNode")]
struct ImmNode {
    #[immutable]
    key: engram::stm::PTField<u64>,
    value: engram::stm::PTField<u64>,
}

/// Makes an `ImmNode` and publishes it in `root`.
fn publish_imm_node(pool: &Pool, root: &PTVar<PPtr<ImmNode>>, key: u64) -> PPtr<ImmNode> {
    use engram::stm::PTField;
    pool.atomically(|tx| {
        let n = tx.alloc(ImmNode { key: PTField::new(key), value: PTField::new(1) })?;
        tx.write(root, n)?;
        Ok(n)
    })
    .unwrap()
}

/// Runs an update transaction on this thread that reads field `which` of
/// `n` (0: the immutable key, through `field!`; 1: the value), and in its
/// first run lets another thread commit a change of that field (the key
/// through the raw `PTField::at` handle, the only way to write it) before
/// it commits. Returns how many times the body ran.
fn runs_after_concurrent_write(pool: &Pool, n: PPtr<ImmNode>, which: usize, out: &PTVar<u64>) -> u32 {
    let mut runs = 0;
    pool.atomically(|tx| {
        runs += 1;
        let x = if which == 0 { tx.read(&engram::field!(n, ImmNode, key))? } else { tx.read(&engram::field!(n, ImmNode, value))? };
        if runs == 1 {
            std::thread::scope(|s| {
                s.spawn(|| {
                    let f = engram::stm::PTField::<u64>::at(n.addr(), 16 * which);
                    pool.atomically(|tx2| tx2.write(&f, 100)).unwrap();
                });
            });
        }
        tx.write(out, x)
    })
    .unwrap();
    runs
}

/// `#[immutable]` in `#[derive(Persistent)]`: the key reads through
/// `tx.read(&field!(..))` as committed, with no read-set entry (a
/// concurrent change of it does not make the reader run again, one of the
/// mutable value does), and it has no write (`tx.write` on it is a compile
/// error: the doc test of `ImmutableRef`).
#[test]
fn derive_immutable_fields_have_no_read_set_entry_and_no_write() {
    let t = TempPool::new("stm-derive-immutable");
    let pool = create(&t, Durability::Process);
    let root: PTVar<PPtr<ImmNode>> = pool.root("node", PPtr::null).unwrap();
    let out: PTVar<u64> = pool.root("out", || 0).unwrap();
    let n = publish_imm_node(&pool, &root, 7);
    let k = pool.atomically(|tx| tx.read(&engram::field!(tx.read(&root)?, ImmNode, key))).unwrap();
    assert_eq!(k, 7);
    // The key's handle is an ImmutableRef (read only); the value's a FieldRef.
    let _: engram::stm::ImmutableRef<u64> = engram::field!(n, ImmNode, key);
    let _: engram::stm::FieldRef<u64> = engram::field!(n, ImmNode, value);
    assert_eq!(runs_after_concurrent_write(&pool, n, 1, &out), 2, "a changed mutable field is in the read set");
    assert_eq!(runs_after_concurrent_write(&pool, n, 0, &out), 1, "an immutable field is not");
    assert_eq!(pool.atomically(|tx| tx.read(&out)).unwrap(), 7, "the key as of the snapshot");
    pool.close().unwrap();
}

/// An update that writes a variable and a node's field, then reads both
/// back (and a field next to them it did not write), in one transaction
/// that then abandons itself (with the planted bug its commit would not
/// validate: its own locked words look foreign): what it read. `plant`: a
/// bug planted on this thread for the run.
fn own_writes_read_back(pool: &Pool, plant: Option<&str>) -> [u64; 3] {
    let root: PTVar<PPtr<ImmNode>> = pool.root("own-node", PPtr::null).unwrap();
    let v: PTVar<u64> = pool.root("own-v", || 1).unwrap();
    let n = publish_imm_node(pool, &root, 9);
    if let Some(b) = plant {
        failpoint::plant(b);
    }
    let seen = std::cell::Cell::new([0u64; 3]);
    let r = pool.atomically(|tx| {
        tx.write(&v, 2)?;
        tx.write(&engram::field!(n, ImmNode, value), 3)?;
        seen.set([tx.read(&v)?, tx.read(&engram::field!(n, ImmNode, value))?, tx.read(&engram::field!(n, ImmNode, key))?]);
        Err::<(), _>(StmError::Failed(engram::Error::Aborted))
    });
    failpoint::disarm_all();
    assert!(matches!(r, Err(engram::Error::Aborted)), "{r:?}");
    seen.get()
}

/// Read-your-writes after the write set's filter (`State::wbits`): reads
/// of an update after its first write skip the write-set scan unless the
/// word's bit is set. The written values read back, the unwritten key as
/// committed; with the planted `stm.write_filter_unset` (a write sets no
/// bit) the reads miss the transaction's own writes.
#[test]
fn reads_after_writes_see_their_own_values() {
    let t = TempPool::new("stm-own-writes");
    let pool = create(&t, Durability::Process);
    assert_eq!(own_writes_read_back(&pool, None), [2, 3, 9]);
    assert_eq!(own_writes_read_back(&pool, Some("stm.write_filter_unset")), [1, 1, 9], "the planted bug reads committed values");
    pool.close().unwrap();
}

/// A write through a raw handle just past an object the transaction
/// allocated (the next slot's header): refused with `BadPointer`, although
/// the write set's known-cell shortcut (writes into the attempt's own new
/// objects skip the allocator) is armed. Returns the write's outcome; the
/// transaction never commits. `plant`: a bug planted for the run.
fn write_past_a_new_object(pool: &Pool, plant: Option<&str>) -> Result<(), engram::Error> {
    if let Some(b) = plant {
        failpoint::plant(b);
    }
    let r = pool.atomically(|tx| {
        use engram::stm::PTField;
        let n = tx.alloc(ImmNode { key: PTField::new(1), value: PTField::new(2) })?;
        tx.write(&engram::field!(n, ImmNode, value), 4)?;
        let past = PTField::<u64>::at(n.addr(), std::mem::size_of::<ImmNode>());
        match tx.write(&past, 5) {
            Ok(()) => Err(StmError::Failed(engram::Error::Aborted)),
            Err(e) => Err(e),
        }
    });
    failpoint::disarm_all();
    match r {
        Err(engram::Error::Aborted) => Ok(()),
        Err(e) => Err(e),
        Ok(()) => Ok(()),
    }
}

/// Writes skip the allocator's lookup only where the attempt knows the
/// cell lies inside one object; a write outside every object is still
/// refused. With the planted `stm.known_cell_any` (any write of an attempt
/// that allocated is taken as inside) it is accepted.
#[test]
fn writes_past_a_new_object_are_refused() {
    let t = TempPool::new("stm-known-cell");
    let pool = create(&t, Durability::Process);
    let r = write_past_a_new_object(&pool, None);
    assert!(matches!(r, Err(engram::Error::BadPointer { .. })), "{r:?}");
    assert!(write_past_a_new_object(&pool, Some("stm.known_cell_any")).is_ok(), "the planted bug accepts the write");
    pool.close().unwrap();
}

/// An object made by `make` (never linked, so garbage) is written twice
/// on this thread, each in an aborted transaction: the first write looks
/// the object up (or finds what its allocation taught) and keeps it, the
/// second is answered by what was kept (`Located` for a large object, the
/// span cache for a small one). Then the object is collected and written
/// again through the stale address: refused with `BadPointer`. Returns
/// that write's outcome; `plant`: a bug planted for the last write.
fn write_into_a_collected_object(
    pool: &Pool,
    make: impl Fn(&engram::stm::STx<'_>) -> engram::stm::StmResult<u64>,
    plant: Option<&str>,
) -> Result<(), engram::Error> {
    use engram::stm::PTField;
    let addr = pool.atomically(|tx| make(tx)).unwrap();
    let aborted = |r: Result<(), engram::Error>| match r {
        Err(engram::Error::Aborted) => Ok(()),
        r => r,
    };
    let write = |i: usize| {
        pool.atomically(|tx| {
            tx.write(&PTField::<u64>::at(addr, 16 * i), 5)?;
            Err::<(), _>(StmError::Failed(engram::Error::Aborted))
        })
    };
    aborted(write(1)).unwrap();
    aborted(write(2)).unwrap();
    pool.collect().unwrap();
    if let Some(b) = plant {
        failpoint::plant(b);
    }
    let r = aborted(write(3));
    failpoint::disarm_all();
    r
}

/// [`write_into_a_collected_object`] for a hash table's bucket array:
/// 4096 buckets of 32 bytes, a large object (above the small classes).
fn write_into_a_collected_array(pool: &Pool, plant: Option<&str>) -> Result<(), engram::Error> {
    use engram::stm::collections::HashTable;
    write_into_a_collected_object(pool, |tx| Ok(HashTable::<u64, u64>::new(tx, 4096)?.addr()), plant)
}

/// Writes into a large object found by an earlier write skip the lookup
/// only until the heap frees something (its free count): a write into
/// the object after it was collected is refused. With the planted
/// `stm.located_ignore_frees` it is accepted.
#[test]
fn writes_into_a_collected_large_object_are_refused() {
    let t = TempPool::new("stm-located");
    let pool = create(&t, Durability::Process);
    let r = write_into_a_collected_array(&pool, None);
    assert!(matches!(r, Err(engram::Error::BadPointer { .. })), "{r:?}");
    let r = write_into_a_collected_array(&pool, Some("stm.located_ignore_frees"));
    assert!(r.is_ok(), "the planted bug accepts the write: {r:?}");
    pool.close().unwrap();
}

/// [`write_into_a_collected_object`] for a small object of 480 bytes (a
/// 496-byte slot, of a class no other object of a fresh pool uses, so its
/// span empties and is freed when it is collected).
fn write_into_a_collected_small_object(pool: &Pool, plant: Option<&str>) -> Result<(), engram::Error> {
    write_into_a_collected_object(pool, |tx| Ok(tx.alloc([0u64; 60])?.addr()), plant)
}

/// Writes into small objects skip the span tables through the thread's
/// span cache only until the heap frees something (a sweep may free the
/// span): a write into a collected small object is refused. With the
/// planted `tx.kept_spans_ignore_frees` (the cache kept whatever the free
/// count) it is accepted.
#[test]
fn writes_into_a_collected_small_object_are_refused() {
    for plant in [None, Some("tx.kept_spans_ignore_frees")] {
        let t = TempPool::new("stm-spans");
        let pool = create(&t, Durability::Process);
        let r = write_into_a_collected_small_object(&pool, plant);
        match plant {
            None => assert!(matches!(r, Err(engram::Error::BadPointer { .. })), "{r:?}"),
            Some(_) => assert!(r.is_ok(), "the planted bug accepts the write: {r:?}"),
        }
        pool.close().unwrap();
    }
}

/// One thread alternates between two pools, closes one and opens it again:
/// each transaction runs on its own pool's state and redo log (the thread
/// keeps one entry per open pool, and a closed pool's entry is not reused).
#[test]
fn one_thread_alternates_between_pools_and_reopens() {
    let (ta, tb) = (TempPool::new("stm-two-a"), TempPool::new("stm-two-b"));
    let a = create(&ta, Durability::Process);
    let b = create(&tb, Durability::Process);
    let va: PTVar<u64> = a.root("v", || 0).unwrap();
    let vb: PTVar<u64> = b.root("v", || 100).unwrap();
    for _ in 0..10 {
        a.atomically(|tx| tx.modify(&va, |x| x + 1)).unwrap();
        b.atomically(|tx| tx.modify(&vb, |x| x + 2)).unwrap();
    }
    // A transaction uses one pool: another pool's variable is refused.
    assert!(matches!(a.atomically(|tx| tx.read(&vb)), Err(engram::Error::CrossPool { .. })));
    assert!(matches!(a.atomically(|tx| tx.write(&vb, 1)), Err(engram::Error::CrossPool { .. })));
    b.close().unwrap();
    a.atomically(|tx| tx.modify(&va, |x| x + 1)).unwrap();
    let b = reopen(&tb);
    let vb: PTVar<u64> = b.root("v", || 0).unwrap();
    b.atomically(|tx| tx.modify(&vb, |x| x + 2)).unwrap();
    assert_eq!(a.atomically(|tx| tx.read(&va)).unwrap(), 11);
    assert_eq!(b.atomically(|tx| tx.read(&vb)).unwrap(), 122);
    a.close().unwrap();
    b.close().unwrap();
    let a = reopen(&ta);
    let va: PTVar<u64> = a.root("v", || 0).unwrap();
    assert_eq!(a.atomically(|tx| tx.read(&va)).unwrap(), 11);
    a.close().unwrap();
}

/// No write-set limit: one transaction writes 100,000 variables (a redo
/// record of 2.4 MB, 75 times a log half, moved to an overflow array). A
/// crash right after its fence is replayed from the overflow array; later
/// overflowing commits free the arrays of the records they replace.
#[test]
fn a_transaction_writes_any_number_of_variables() {
    const N: usize = 100_000;
    type Cells = Vec<PPtr<engram::stm::VarCell<u64>>>;
    let t = TempPool::new("stm-overflow");
    let pool = create(&t, Durability::Process);
    let vars: PTVar<Cells> = pool.root("vars", Vec::new).unwrap();
    pool.atomically(|tx| {
        let cells = (0..N).map(|_| PTVar::new(tx, 0u64).map(|v| v.cell())).collect::<Result<Cells, _>>()?;
        tx.write(&vars, cells)
    })
    .unwrap();
    let write_all = |pool: &Pool, k: u64| {
        pool.atomically(|tx| {
            let cells = tx.read(&vars)?.as_slice(tx)?.to_vec();
            for (i, c) in cells.into_iter().enumerate() {
                tx.write(&PTVar::<u64>::from_cell(c), k + i as u64)?;
            }
            Ok(())
        })
    };
    for k in 1..=3 {
        write_all(&pool, k).unwrap();
    }
    failpoint::arm(Failpoint::StmAfterFence, 0);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write_all(&pool, 7)));
    failpoint::disarm_all();
    assert!(r.is_err(), "the failpoint fired");
    pool.simulate_crash();
    let pool = reopen(&t);
    let rep = pool.open_report().stm.unwrap();
    assert!(rep.replayed >= N as u64, "{rep:?}");
    let vars: PTVar<Cells> = pool.root("vars", Vec::new).unwrap();
    let read_all = |pool: &Pool| {
        pool.atomically(|tx| {
            let cells = tx.read(&vars)?.as_slice(tx)?.to_vec();
            cells.into_iter().map(|c| tx.read(&PTVar::<u64>::from_cell(c))).collect::<Result<Vec<u64>, _>>()
        })
        .unwrap()
    };
    let got = read_all(&pool);
    assert!(got.iter().enumerate().all(|(i, &v)| v == 7 + i as u64), "replayed values");
    pool.check().unwrap();
    // Clean path: commits, close, reopen; the overflow arrays are garbage.
    write_all(&pool, 9).unwrap();
    write_all(&pool, 11).unwrap();
    pool.close().unwrap();
    let pool = reopen(&t);
    let vars2: PTVar<Cells> = pool.root("vars", Vec::new).unwrap();
    assert_eq!(vars2, vars);
    let got = read_all(&pool);
    assert!(got.iter().enumerate().all(|(i, &v)| v == 11 + i as u64), "values after reopen");
    pool.collect().unwrap();
    pool.check().unwrap();
    pool.close().unwrap();
}

/// A value larger than a log half (1 MiB here) is a copy-on-commit value
/// behind a pointer (`Vec`, `String`, `Box`): its redo entry is the 8-byte
/// pointer plus a checksum of the copy, so it commits, survives a crash
/// right after the fence, and reopens whole. (A `PTVar<T>` whose pool form
/// itself exceeds 40 bytes is boxed transparently: tests/stm_boxed.rs.)
#[test]
fn values_larger_than_a_log_half_commit_and_replay() {
    const LEN: usize = 128 * 1024; // u64s: 1 MiB
    let t = TempPool::new("stm-bigvalue");
    let pool = create(&t, Durability::Process);
    let v: PTVar<Vec<u64>> = pool.root("v", Vec::new).unwrap();
    pool.atomically(|tx| tx.write(&v, (0..LEN as u64).collect())).unwrap();
    failpoint::arm(Failpoint::StmAfterFence, 0);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.atomically(|tx| tx.write(&v, (0..LEN as u64).map(|x| x * 3).collect()))
    }));
    failpoint::disarm_all();
    assert!(r.is_err(), "the failpoint fired");
    pool.simulate_crash();
    let pool = reopen(&t);
    assert!(pool.open_report().stm.unwrap().replayed >= 1);
    let v: PTVar<Vec<u64>> = pool.root("v", Vec::new).unwrap();
    let got = pool.atomically(|tx| Ok(tx.read(&v)?.as_slice(tx)?.to_vec())).unwrap();
    assert_eq!(got.len(), LEN);
    assert!(got.iter().enumerate().all(|(i, &x)| x == 3 * i as u64));
    pool.check().unwrap();
    pool.close().unwrap();
}

/// One transaction uses one pool: a variable of another pool, read or
/// written inside `pool.atomically`, is refused with a typed error naming
/// both pools (`CrossPool`, code 29), and nothing is written.
#[test]
fn a_variable_of_another_pool_is_refused() {
    let (ta, tb) = (TempPool::new("stm-two-a"), TempPool::new("stm-two-b"));
    let (a, b) = (create(&ta, Durability::Process), create(&tb, Durability::Process));
    let x: PTVar<u64> = a.root("x", || 1).unwrap();
    let y: PTVar<u64> = b.root("y", || 2).unwrap();
    let r = a.atomically(|tx| tx.read(&y));
    match &r {
        Err(e @ engram::Error::CrossPool { pool, other }) => {
            assert_eq!((pool.as_path(), other.as_path()), (ta.0.as_path(), tb.0.as_path()));
            assert_eq!(e.code(), 29);
        }
        r => panic!("expected CrossPool, got {r:?}"),
    }
    let r = a.atomically(|tx| {
        tx.write(&x, 10)?;
        tx.write(&y, 20)
    });
    assert!(matches!(r, Err(engram::Error::CrossPool { .. })), "{r:?}");
    assert_eq!(a.atomically(|tx| tx.read(&x)).unwrap(), 1);
    assert_eq!(b.atomically(|tx| tx.read(&y)).unwrap(), 2);
    a.close().unwrap();
    b.close().unwrap();
}
