//! Persistent laziness and memoization (`engram::lazy`): thunks forced once
//! and reused after reopening, inside and outside transactions, by racing
//! threads (blackholing); unregistered functions; restartable streams; the
//! trie and HAMT memo tables against the volatile one; a kill -9 during a
//! long memoized computation and a restart that reuses what was finished.
//! (Crash consistency under power failure: the `lazy-*` explorer workloads.)

mod common;
use common::TempPool;
use engram::lazy::{self, Cx, HashMemo, Memo, PLazy, PStream, TrieMemo, VolatileMemo};
use engram::{CreateOptions, Durability, Error, OpenOptions, Pool, Result};
use num_bigint::BigUint;
use std::sync::atomic::{AtomicU64, Ordering};

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("lazy").durability(Durability::Process)).unwrap()
}

fn reopen(t: &TempPool) -> Pool {
    Pool::open(&t.0, OpenOptions::new("lazy").durability(Durability::Process)).unwrap()
}

/// fib through a memo, recursing through it.
fn fib<M: Memo<BigUint>>(memo: &M, n: u64) -> Result<BigUint> {
    memo.get_or_compute(n, |n, memo| if n < 2 { Ok(BigUint::from(n)) } else { Ok(fib(memo, n - 1)? + fib(memo, n - 2)?) })
}

/// Runs `f` on a thread with a 256 MiB stack (deep memo recursion).
fn big_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::Builder::new().stack_size(256 << 20).spawn(f).unwrap().join().unwrap()
}

static SQUARES: AtomicU64 = AtomicU64::new(0);

#[test]
fn a_thunk_is_evaluated_once_and_survives_reopen() {
    lazy::register("test.square-string", |_cx: &Cx<'_>, n: u64| {
        SQUARES.fetch_add(1, Ordering::SeqCst);
        Ok(format!("{n} squared is {}", n * n))
    })
    .unwrap();
    let t = TempPool::new("lazy-thunk");
    let pool = create(&t);
    let th: PLazy<String> = PLazy::root(&pool, "sq", "test.square-string", 12).unwrap();
    assert!(!th.is_evaluated(&pool).unwrap());
    let before = lazy::stats();
    assert_eq!(th.force(&pool).unwrap(), "12 squared is 144");
    assert_eq!(th.force(&pool).unwrap(), "12 squared is 144");
    assert_eq!(SQUARES.load(Ordering::SeqCst), 1);
    let after = lazy::stats();
    assert_eq!(after.updates - before.updates, 1);
    assert!(after.bytes_copied > before.bytes_copied);
    pool.close().unwrap();

    let pool = reopen(&t);
    let th: PLazy<String> = PLazy::root(&pool, "sq", "test.square-string", 0).unwrap();
    assert!(th.is_evaluated(&pool).unwrap());
    assert_eq!(th.force(&pool).unwrap(), "12 squared is 144");
    assert_eq!(SQUARES.load(Ordering::SeqCst), 1, "reopened thunk evaluated again");
    pool.collect().unwrap();
    assert_eq!(th.force(&pool).unwrap(), "12 squared is 144", "GC lost the result");
    pool.close().unwrap();
}

#[test]
fn an_unregistered_function_is_a_typed_error() {
    let t = TempPool::new("lazy-unreg");
    let pool = create(&t);
    let th: PLazy<u64> = PLazy::root(&pool, "x", "test.nobody-registered-this", 1).unwrap();
    match th.force(&pool) {
        Err(e @ Error::UnknownFunction { .. }) => {
            assert_eq!(e.code(), 28);
            assert!(e.to_string().contains("test.nobody-registered-this"), "{e}");
        }
        other => panic!("expected UnknownFunction, got {other:?}"),
    }
    assert!(!th.is_evaluated(&pool).unwrap());
    // Registered with other types: a layout error naming the function.
    lazy::register("test.typed", |_cx: &Cx<'_>, n: u64| Ok(n as i32)).unwrap();
    let th: PLazy<u64> = PLazy::root(&pool, "y", "test.typed", 1).unwrap();
    assert!(matches!(th.force(&pool), Err(Error::LayoutMismatch { .. })));
    assert!(PLazy::<u64>::root(&pool, "z", &"n".repeat(41), 1).is_err());
    pool.close().unwrap();
}

static SLOW: AtomicU64 = AtomicU64::new(0);

#[test]
fn racing_threads_share_one_evaluation() {
    lazy::register("test.slow-sum", |_cx: &Cx<'_>, n: u64| {
        SLOW.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(20));
        Ok((0..=n).collect::<Vec<u64>>())
    })
    .unwrap();
    let t = TempPool::new("lazy-race");
    let pool = create(&t);
    let th: PLazy<Vec<u64>> = PLazy::root(&pool, "v", "test.slow-sum", 100).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let pool = pool.clone();
            std::thread::spawn(move || th.force(&pool).unwrap().iter().sum::<u64>())
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 5050);
    }
    assert_eq!(SLOW.load(Ordering::SeqCst), 1, "blackholing let two threads evaluate");
    pool.close().unwrap();
}

#[test]
fn thunks_force_inside_transactions_and_other_thunks() {
    lazy::register("test.double", |_cx: &Cx<'_>, n: u64| Ok(2 * n)).unwrap();
    lazy::register("test.plus-forced", |cx: &Cx<'_>, p: PLazy<u64>| Ok(p.force_with(cx)? + 1)).unwrap();
    lazy::register("test.loop", |cx: &Cx<'_>, p: engram::PPtr<lazy::ThunkObj<u64>>| PLazy::<u64>::from_ptr(p).force_with(cx)).unwrap();
    let t = TempPool::new("lazy-tx");
    let pool = create(&t);
    let var = pool.root("holder", || 0u64).unwrap();
    let (a, b) = pool
        .atomically(|tx| {
            let a = PLazy::<u64>::new(tx, "test.double", 21)?;
            let b = PLazy::<u64, PLazy<u64>>::new(tx, "test.plus-forced", a)?;
            tx.write(&var, 1)?;
            Ok((a, b))
        })
        .unwrap();
    // Forced inside a transaction: b forces a.
    let v = pool.atomically(|tx| b.force_in(tx)).unwrap();
    assert_eq!(v, 43);
    assert!(a.is_evaluated(&pool).unwrap());
    // A thunk whose function forces itself is a <<loop>> error, not a hang.
    let l = pool
        .atomically(|tx| {
            let l = PLazy::<u64, engram::PPtr<lazy::ThunkObj<u64>>>::new(tx, "test.loop", engram::PPtr::null())?;
            Ok(l)
        })
        .unwrap();
    let self_ref = pool.txn(|tx| {
        let mut o = tx.read(l.ptr())?;
        o.args = engram::PPtr::from_addr(l.ptr().addr());
        tx.write(l.ptr(), o)?;
        Ok::<_, Error>(())
    });
    self_ref.unwrap();
    assert!(matches!(l.force(&pool), Err(Error::InvalidArgument { .. })));
    pool.close().unwrap();
}

static STEPS: AtomicU64 = AtomicU64::new(0);

#[test]
fn a_stream_resumes_from_its_last_evaluated_cell() {
    // Collatz-style unfold: state (n), element n*n, ends after 100 cells.
    PStream::<u64, u64>::register("test.squares", |_cx, n| {
        STEPS.fetch_add(1, Ordering::SeqCst);
        Ok((n < 100).then(|| (n * n, n + 1)))
    })
    .unwrap();
    let t = TempPool::new("lazy-stream");
    let pool = create(&t);
    let s = PStream::<u64, u64>::root(&pool, "squares", "test.squares", 0).unwrap();
    let first: Vec<u64> = s.iter(&pool).take(40).collect::<Result<_>>().unwrap();
    assert_eq!(first.len(), 40);
    assert_eq!(s.evaluated(&pool).unwrap(), (40, false));
    pool.simulate_crash();

    let pool = reopen(&t);
    let s = PStream::<u64, u64>::root(&pool, "squares", "test.squares", 0).unwrap();
    assert_eq!(s.evaluated(&pool).unwrap(), (40, false));
    let before = STEPS.load(Ordering::SeqCst);
    let all: Vec<u64> = s.iter(&pool).collect::<Result<_>>().unwrap();
    assert_eq!(all, (0..100).map(|n| n * n).collect::<Vec<_>>());
    // 60 new cells and the end marker; the first 40 were loaded.
    assert_eq!(STEPS.load(Ordering::SeqCst) - before, 61);
    assert_eq!(s.evaluated(&pool).unwrap(), (100, true));
    pool.close().unwrap();
}

#[test]
fn memo_tables_agree_and_are_reused_after_reopen() {
    big_stack(memo_tables_body);
}

fn memo_tables_body() {
    let t = TempPool::new("lazy-memo");
    let pool = create(&t);
    let n = 600;
    let volatile = VolatileMemo::default();
    let want = fib(&volatile, n).unwrap();
    let trie = TrieMemo::<BigUint>::root(&pool, "trie").unwrap();
    let hash = HashMemo::<BigUint>::root(&pool, "hash").unwrap();
    let before = lazy::stats();
    assert_eq!(fib(&trie, n).unwrap(), want);
    assert_eq!(lazy::stats().updates - before.updates, n + 1);
    assert_eq!(fib(&hash, n).unwrap(), want);
    // Keys across trie levels (0, 63, 64, 4095, 4096, big).
    let keys = TrieMemo::<BigUint>::root(&pool, "keys").unwrap();
    for k in [0u64, 63, 64, 4095, 4096, 1 << 40, u64::MAX] {
        assert_eq!(keys.get_or_compute(k, |k, _| Ok(BigUint::from(k) * 3u32)).unwrap(), BigUint::from(k) * 3u32);
    }
    drop((trie, hash, keys));
    pool.close().unwrap();

    let pool = reopen(&t);
    let keys = TrieMemo::<BigUint>::root(&pool, "keys").unwrap();
    let trie = TrieMemo::<BigUint>::root(&pool, "trie").unwrap();
    let hash = HashMemo::<BigUint>::root(&pool, "hash").unwrap();
    let before = lazy::stats();
    assert_eq!(fib(&trie, n).unwrap(), want);
    assert_eq!(fib(&hash, n).unwrap(), want);
    assert_eq!(keys.get(u64::MAX).unwrap(), Some(BigUint::from(u64::MAX) * 3u32));
    assert_eq!(lazy::stats().updates, before.updates, "a reopened memo recomputed something");
    pool.collect().unwrap();
    assert_eq!(trie.get(n).unwrap(), Some(want.clone()));
    assert_eq!(hash.get(n - 1).unwrap(), Some(fib(&volatile, n - 1).unwrap()));
    assert_eq!(keys.get(4096).unwrap(), Some(BigUint::from(4096u32 * 3)));
    drop((trie, hash, keys));
    pool.close().unwrap();
}

#[test]
fn concurrent_memo_users_compute_each_entry_once() {
    let t = TempPool::new("lazy-memo-mt");
    let pool = create(&t);
    let trie = std::sync::Arc::new(TrieMemo::<BigUint>::root(&pool, "trie").unwrap());
    let updates: u64 = (0..3)
        .map(|_| {
            let trie = trie.clone();
            std::thread::Builder::new()
                .stack_size(64 << 20)
                .spawn(move || {
                    let b = lazy::stats().updates;
                    fib(&*trie, 300).unwrap();
                    lazy::stats().updates - b
                })
                .unwrap()
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .sum();
    assert_eq!(updates, 301, "an entry was computed twice");
    drop(trie);
    pool.close().unwrap();
}

/// The child of the kill test: fills the memo bottom-up, printing progress.
fn kill_child(path: &str, n: u64) {
    let pool = Pool::open(path, OpenOptions::new("lazy").durability(Durability::Process)).unwrap();
    let memo = TrieMemo::<BigUint>::root(&pool, "fib").unwrap();
    for i in 0..=n {
        fib(&memo, i).unwrap();
        println!("done {i}");
    }
    // Then wait to be killed.
    std::thread::sleep(std::time::Duration::from_secs(600));
}

#[test]
fn kill_9_during_a_memoized_computation_then_restart_reuses_it() {
    if let Ok(spec) = std::env::var("ENGRAM_LAZY_KILL_CHILD") {
        let (path, n) = spec.split_once('|').unwrap();
        kill_child(path, n.parse().unwrap());
        return;
    }
    use std::io::BufRead;
    let t = TempPool::new("lazy-kill");
    create(&t).close().unwrap();
    let n = 4000u64;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "kill_9_during_a_memoized_computation_then_restart_reuses_it", "--nocapture", "--test-threads=1"])
        .env("ENGRAM_LAZY_KILL_CHILD", format!("{}|{n}", t.0.display()))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = 0;
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        if let Some(i) = line.unwrap().strip_prefix("done ") {
            seen = i.parse::<u64>().unwrap();
            if seen >= 1000 {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(seen >= 1000, "the child stopped early");

    let pool = reopen(&t);
    let memo = TrieMemo::<BigUint>::root(&pool, "fib").unwrap();
    // Everything the child finished is there (a process kill keeps the page cache).
    let kept = (0..=n).take_while(|&i| memo.get(i).unwrap().is_some()).count() as u64;
    assert!(kept > seen, "kept {kept} entries, the child had finished {seen}");
    let (memo, got, updates) = big_stack(move || {
        let before = lazy::stats().updates;
        let r = fib(&memo, n).unwrap();
        (memo, r, lazy::stats().updates - before)
    });
    assert_eq!(got, big_stack(move || fib(&VolatileMemo::default(), n).unwrap()));
    assert_eq!(updates, n + 1 - kept, "the restart recomputed finished entries");
    drop(memo);
    pool.close().unwrap();
}

#[test]
fn thunks_streams_and_memos_survive_relocation() {
    lazy::register("test.reloc-vec", |_cx: &Cx<'_>, n: u64| Ok(vec![n; 100])).unwrap();
    PStream::<String, u64>::register("test.reloc-stream", |_cx, n| Ok((n < 10).then(|| (format!("cell {n}"), n + 1)))).unwrap();
    let t = TempPool::new("lazy-reloc");
    let pool = create(&t);
    PLazy::<Vec<u64>>::root(&pool, "v", "test.reloc-vec", 7).unwrap().force(&pool).unwrap();
    let s = PStream::<String, u64>::root(&pool, "s", "test.reloc-stream", 0).unwrap();
    assert_eq!(s.iter(&pool).take(5).count(), 5);
    let trie = TrieMemo::<BigUint>::root(&pool, "trie").unwrap();
    let want = big_stack({
        let trie = TrieMemo::<BigUint>::root(&pool, "trie").unwrap();
        move || fib(&trie, 300).unwrap()
    });
    drop(trie);
    let old_base = pool.info().base;
    pool.close().unwrap();

    let mut o = OpenOptions::new("lazy").durability(Durability::Process);
    o.force_relocate = true;
    let pool = Pool::open(&t.0, o).unwrap();
    assert!(pool.open_report().relocated && pool.info().base != old_base);
    let before = lazy::stats().updates;
    assert_eq!(PLazy::<Vec<u64>>::root(&pool, "v", "test.reloc-vec", 0).unwrap().force(&pool).unwrap(), vec![7; 100]);
    let s = PStream::<String, u64>::root(&pool, "s", "test.reloc-stream", 0).unwrap();
    assert_eq!(s.evaluated(&pool).unwrap(), (5, false));
    let cells: Vec<String> = s.iter(&pool).collect::<Result<_>>().unwrap();
    assert_eq!(cells.len(), 10);
    assert_eq!(cells[3], "cell 3");
    let trie = TrieMemo::<BigUint>::root(&pool, "trie").unwrap();
    assert_eq!(trie.get(300).unwrap(), Some(want));
    assert_eq!(lazy::stats().updates - before, 6, "only the 5 new cells and the end were evaluated");
    drop(trie);
    pool.close().unwrap();
}
