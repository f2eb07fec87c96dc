//! The deferred recovery GC (docs/gc.md): after a crash the pool opens with
//! its heap sealed and collects in the background while the program keeps
//! mutating it; afterwards every reachable object is intact (checked
//! against a model), the crash's garbage is freed and `check` is clean. A
//! crash while it runs recovers on the next open; a clean close before it
//! finished leaves the next open recovering again; the eager fallbacks
//! (forced, or a kernel without soft-dirty bits) collect in open.

mod common;
use common::TempPool;
use engram::{CreateOptions, Durability, OpenOptions, PArray, PPtr, Persistent, Pool, RecoveryGc, RecoveryGcHook, RecoveryGcState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The soft-dirty bits are per process: one deferred GC at a time, so
/// these tests take turns (a second one would fall back to eager).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Clone, Copy, Debug, PartialEq, Persistent)]
struct Node {
    value: u64,
    next: PPtr<Node>,
}

/// Lists per root array; two root arrays ("left", "right").
const LISTS: u64 = 32;
const ROOTS: [&str; 2] = ["left", "right"];

/// The program's view: the values of every list, head first.
type Model = Vec<Vec<Vec<u64>>>;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("lists").durability(Durability::Process)).unwrap()
}

/// `Deferred` here means the regions' card table (`DeferredCards`): the
/// kernel this runs on may lack soft-dirty bits (see
/// `kernel_soft_dirty_or_the_eager_fallback` for the kernel's own).
fn opts(when: RecoveryGc) -> OpenOptions {
    let when = if when == RecoveryGc::Deferred { RecoveryGc::DeferredCards } else { when };
    OpenOptions::new("lists").durability(Durability::Process).recovery_gc(when)
}

/// Builds the two root arrays with `per_list` nodes in each list, plus
/// `garbage` unlinked nodes; returns the model.
fn build(pool: &Pool, per_list: u64, garbage: u64, rng: &mut Rng) -> Model {
    let mut model = vec![vec![Vec::new(); LISTS as usize]; 2];
    for (r, name) in ROOTS.iter().enumerate() {
        pool.txn(|tx| {
            let arr = tx.alloc_array::<PPtr<Node>>(LISTS)?;
            tx.set_root_array(name, arr)
        })
        .unwrap();
        for l in 0..LISTS {
            pool.txn(|tx| {
                let arr = tx.root_array::<PPtr<Node>>(name)?.expect("root");
                for _ in 0..per_list {
                    let v = rng.next();
                    let head = tx.get(arr, l)?;
                    tx.set(arr, l, tx.alloc(Node { value: v, next: head })?)?;
                    model[r][l as usize].insert(0, v);
                }
                Ok::<_, engram::Error>(())
            })
            .unwrap();
        }
    }
    pool.txn(|tx| {
        for g in 0..garbage {
            tx.alloc(Node { value: g, next: PPtr::null() })?;
        }
        Ok::<_, engram::Error>(())
    })
    .unwrap();
    model
}

fn arrays(tx: &engram::Tx<'_>) -> engram::Result<[PArray<PPtr<Node>>; 2]> {
    Ok([tx.root_array(ROOTS[0])?.expect("left"), tx.root_array(ROOTS[1])?.expect("right")])
}

/// One region of mutation: move a list between roots, unlink a node and
/// relink it elsewhere, allocate, or free; the model follows.
fn mutate(pool: &Pool, model: &mut Model, rng: &mut Rng) {
    let (r1, l1, r2, l2) = (rng.below(2) as usize, rng.below(LISTS), rng.below(2) as usize, rng.below(LISTS));
    // moving or relinking onto the same list allocates instead
    let op = match rng.below(5) {
        0 | 1 | 4 if (r1, l1) == (r2, l2) => 3,
        op => op,
    };
    let v = rng.next();
    pool.txn(|tx| {
        let a = arrays(tx)?;
        match op {
            // move a whole list (a subtree) onto the front of another
            0 if (r1, l1) != (r2, l2) => {
                let head = tx.get(a[r1], l1)?;
                if head.is_null() {
                    return Ok(());
                }
                let mut last = head;
                while !tx.read(last)?.next.is_null() {
                    last = tx.read(last)?.next;
                }
                let other = tx.get(a[r2], l2)?;
                tx.update(last, |n| n.next = other)?;
                tx.set(a[r2], l2, head)?;
                tx.set(a[r1], l1, PPtr::null())?;
            }
            // unlink the second node and relink it at the front of another list
            1 if (r1, l1) != (r2, l2) => {
                let head = tx.get(a[r1], l1)?;
                if head.is_null() || tx.read(head)?.next.is_null() {
                    return Ok(());
                }
                let second = tx.read(head)?.next;
                let after = tx.read(second)?.next;
                tx.update(head, |n| n.next = after)?;
                let other = tx.get(a[r2], l2)?;
                tx.update(second, |n| n.next = other)?;
                tx.set(a[r2], l2, second)?;
            }
            // free the head
            2 => {
                let head = tx.get(a[r1], l1)?;
                if head.is_null() {
                    return Ok(());
                }
                tx.set(a[r1], l1, tx.read(head)?.next)?;
                tx.free(head)?;
            }
            // move a whole list behind 1-3 fresh nodes at the tail of
            // another: the only pointer to its head is then a store into a
            // fresh object, which is never logged
            4 => {
                let head = tx.get(a[r1], l1)?;
                if head.is_null() {
                    return Ok(());
                }
                let mut first = head;
                for i in (0..fresh_count(v)).rev() {
                    first = tx.alloc(Node { value: v.wrapping_add(i), next: first })?;
                }
                tx.set(a[r1], l1, PPtr::null())?;
                let mut last = tx.get(a[r2], l2)?;
                if last.is_null() {
                    return tx.set(a[r2], l2, first);
                }
                while !tx.read(last)?.next.is_null() {
                    last = tx.read(last)?.next;
                }
                tx.update(last, |n| n.next = first)?;
            }
            // allocate a new head
            _ => {
                let head = tx.get(a[r1], l1)?;
                tx.set(a[r1], l1, tx.alloc(Node { value: v, next: head })?)?;
            }
        }
        Ok::<_, engram::Error>(())
    })
    .unwrap();
    apply(model, op, (r1, l1 as usize), (r2, l2 as usize), v);
}

fn apply(model: &mut Model, op: u64, (r1, l1): (usize, usize), (r2, l2): (usize, usize), v: u64) {
    let same = (r1, l1) == (r2, l2);
    match op {
        0 if !same => {
            let moved = std::mem::take(&mut model[r1][l1]);
            let mut to = moved;
            to.extend(model[r2][l2].iter().copied());
            model[r2][l2] = to;
        }
        1 if !same => {
            if model[r1][l1].len() >= 2 {
                let x = model[r1][l1].remove(1);
                model[r2][l2].insert(0, x);
            }
        }
        4 if !same => {
            if !model[r1][l1].is_empty() {
                let moved = std::mem::take(&mut model[r1][l1]);
                model[r2][l2].extend((0..fresh_count(v)).map(|i| v.wrapping_add(i)));
                model[r2][l2].extend(moved);
            }
        }
        0 | 1 | 4 => {}
        2 => {
            if !model[r1][l1].is_empty() {
                model[r1][l1].remove(0);
            }
        }
        _ => model[r1][l1].insert(0, v),
    }
}

/// Allocates `n` nodes over whatever the allocator has free (the GC's
/// sweep put freed slots there) and rolls the region back: a reachable
/// node the GC wrongly freed is overwritten, which `verify` then sees (a
/// freed slot keeps its old contents, so without this a lost node would
/// still read back right, and `check` only marks).
fn scribble_free_slots(pool: &Pool, n: u64) {
    let r = pool.txn(|tx| {
        for _ in 0..n {
            tx.alloc(Node { value: 0xDEAD_BEEF, next: PPtr::null() })?;
        }
        tx.doom();
        Ok::<_, engram::Error>(())
    });
    assert!(matches!(r, Err(engram::Error::Aborted)), "{r:?}");
}

/// How many fresh nodes op 4 puts in front of the list it moves.
fn fresh_count(v: u64) -> u64 {
    1 + v % 3
}

/// Every list holds what the model says; returns the reachable nodes.
fn verify(pool: &Pool, model: &Model) -> u64 {
    pool.txn(|tx| {
        let a = arrays(tx)?;
        let mut n = 0;
        for r in 0..2 {
            for l in 0..LISTS {
                let mut got = Vec::new();
                let mut p = tx.get(a[r], l)?;
                while !p.is_null() {
                    let node = tx.read(p)?;
                    got.push(node.value);
                    p = node.next;
                }
                let want = &model[r][l as usize];
                assert!(got == *want, "list {r}/{l}: {} values, the model has {}", got.len(), want.len());
                n += got.len() as u64;
            }
        }
        Ok::<_, engram::Error>(n)
    })
    .unwrap()
}

/// A hook that holds the GC at its first stop check until `go` is set
/// (or the pool stops), counting its calls.
fn holding_hook(go: Arc<AtomicBool>, calls: Arc<AtomicU64>) -> RecoveryGcHook {
    RecoveryGcHook(Arc::new(move |_, stopping| {
        calls.fetch_add(1, Ordering::Relaxed);
        while !go.load(Ordering::Acquire) && !stopping() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }))
}

/// A hook that sets `done` when the collection reaches its final pause
/// (`n == u64::MAX`) and holds it there until `go`; with `hold_mark`, it
/// holds every earlier call (the concurrent mark) until `go` too.
fn final_pause_hook(go: &Arc<AtomicBool>, done: &Arc<AtomicBool>, hold_mark: bool) -> RecoveryGcHook {
    let (go, done) = (go.clone(), done.clone());
    RecoveryGcHook(Arc::new(move |n, stopping| {
        let last = n == u64::MAX;
        if last {
            done.store(true, Ordering::Release);
        }
        if last || hold_mark {
            while !go.load(Ordering::Acquire) && !stopping() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }))
}

/// Waits until `final_pause_hook` saw the final pause or the collection is
/// no longer pending.
fn wait_final_pause(pool: &Pool, done: &AtomicBool) {
    while !done.load(Ordering::Acquire) && pool.recovery_gc_status().state == RecoveryGcState::Pending {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Crash with garbage, reopen deferred, mutate while the GC is held
/// mid-mark (and then while it runs freely), check everything after.
fn run_seed(seed: u64, hold: bool) {
    let _turn = serial();
    let t = TempPool::new("deferred");
    let mut rng = Rng(seed | 1);
    let pool = create(&t);
    let mut model = build(&pool, 300, 5000, &mut rng);
    pool.simulate_crash();

    let (go, calls) = (Arc::new(AtomicBool::new(!hold)), Arc::new(AtomicU64::new(0)));
    let mut o = opts(RecoveryGc::Deferred);
    o.recovery_gc_hook = Some(holding_hook(go.clone(), calls.clone()));
    let pool = Pool::open(&t.0, o).unwrap();
    let report = pool.open_report().clone();
    assert!(report.deferred_gc, "the deferred GC was chosen: {report:?}");
    assert_eq!(report.recovered, None);
    for _ in 0..1500 {
        mutate(&pool, &mut model, &mut rng);
    }
    go.store(true, Ordering::Release);
    for _ in 0..500 {
        mutate(&pool, &mut model, &mut rng);
    }
    let st = pool.wait_recovery_gc().unwrap();
    assert_eq!(st.state, RecoveryGcState::Finished, "{st:?}");
    assert!(calls.load(Ordering::Relaxed) >= 1, "the hook ran");
    assert!(st.freed >= 5000, "the crash's garbage was freed: {st:?}");
    assert_eq!(st.bad_fields, 0, "{st:?}");
    scribble_free_slots(&pool, 40_000);
    let reachable = verify(&pool, &model);
    let checked = pool.check().expect("check is clean after the deferred GC");
    // the nodes, the two arrays
    assert_eq!(checked.objects, reachable + 2);
    // more regions after the GC, then a clean close and reopen
    for _ in 0..200 {
        mutate(&pool, &mut model, &mut rng);
    }
    let after = pool.collect().unwrap();
    assert_eq!(after.objects, verify(&pool, &model) + 2);
    pool.close().unwrap();
    let pool = Pool::open(&t.0, opts(RecoveryGc::Deferred)).unwrap();
    assert!(pool.open_report().was_clean && !pool.open_report().deferred_gc);
    verify(&pool, &model);
    pool.check().unwrap();
    pool.close().unwrap();
}

#[test]
fn held_mid_mark_while_the_program_mutates() {
    for seed in [1, 2, 3] {
        run_seed(seed * 0x9E37_79B9, true);
    }
}

#[test]
fn free_running_while_the_program_mutates() {
    for seed in [4, 5] {
        run_seed(seed * 0x9E37_79B9, false);
    }
}

#[test]
fn a_crash_during_the_deferred_phase_recovers() {
    let _turn = serial();
    let t = TempPool::new("deferred-crash");
    let mut rng = Rng(77);
    let pool = create(&t);
    let mut model = build(&pool, 200, 3000, &mut rng);
    pool.simulate_crash();
    let (go, calls) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let mut o = opts(RecoveryGc::Deferred);
    o.recovery_gc_hook = Some(holding_hook(go, calls));
    let pool = Pool::open(&t.0, o).unwrap();
    assert!(pool.open_report().deferred_gc);
    for _ in 0..800 {
        mutate(&pool, &mut model, &mut rng);
    }
    // held mid-mark: the crash stops it before anything is freed
    pool.simulate_crash();
    let pool = Pool::open(&t.0, opts(RecoveryGc::Deferred)).unwrap();
    assert!(pool.open_report().deferred_gc);
    let st = pool.wait_recovery_gc().unwrap();
    assert_eq!(st.state, RecoveryGcState::Finished);
    assert!(st.freed >= 3000, "{st:?}");
    verify(&pool, &model);
    pool.check().unwrap();
    pool.close().unwrap();
}

#[test]
fn a_clean_close_before_it_finished_recovers_again() {
    let _turn = serial();
    let t = TempPool::new("deferred-close");
    let mut rng = Rng(99);
    let pool = create(&t);
    let mut model = build(&pool, 100, 1000, &mut rng);
    pool.simulate_crash();
    let (go, calls) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let mut o = opts(RecoveryGc::Deferred);
    o.recovery_gc_hook = Some(holding_hook(go, calls));
    let pool = Pool::open(&t.0, o).unwrap();
    for _ in 0..300 {
        mutate(&pool, &mut model, &mut rng);
    }
    pool.close().unwrap();
    let pool = Pool::open(&t.0, opts(RecoveryGc::Eager)).unwrap();
    let r = pool.open_report();
    assert!(!r.was_clean, "sealed bitmaps were not saved as exact: {r:?}");
    assert_eq!(pool.recovery_gc_status().state, RecoveryGcState::Eager);
    let reachable = verify(&pool, &model);
    assert_eq!(r.recovered.unwrap().objects, reachable + 2);
    pool.check().unwrap();
    pool.close().unwrap();
}

#[test]
fn without_soft_dirty_bits_recovery_is_eager() {
    let _turn = serial();
    let t = TempPool::new("deferred-nosd");
    let mut rng = Rng(5);
    let pool = create(&t);
    let model = build(&pool, 50, 500, &mut rng);
    pool.simulate_crash();
    let mut o = opts(RecoveryGc::Eager).recovery_gc(RecoveryGc::Deferred);
    o.no_soft_dirty = true;
    let pool = Pool::open(&t.0, o).unwrap();
    let r = pool.open_report().clone();
    assert!(!r.deferred_gc);
    assert_eq!(r.recovered.unwrap().objects, verify(&pool, &model) + 2);
    assert_eq!(pool.recovery_gc_status().state, RecoveryGcState::Eager);
    pool.close().unwrap();
}

#[test]
fn kernel_soft_dirty_or_the_eager_fallback() {
    let _turn = serial();
    let t = TempPool::new("deferred-kernel");
    let mut rng = Rng(11);
    let pool = create(&t);
    let mut model = build(&pool, 100, 2000, &mut rng);
    pool.simulate_crash();
    let o = opts(RecoveryGc::Eager).recovery_gc(RecoveryGc::Deferred);
    let pool = Pool::open(&t.0, o).unwrap();
    for _ in 0..300 {
        mutate(&pool, &mut model, &mut rng);
    }
    let st = pool.wait_recovery_gc().unwrap();
    if pool.open_report().deferred_gc {
        assert_eq!(st.state, RecoveryGcState::Finished, "{st:?}");
        assert!(st.freed >= 2000, "{st:?}");
    } else {
        // this kernel does not track soft-dirty bits: collected in open
        assert_eq!(st.state, RecoveryGcState::Eager);
    }
    let reachable = verify(&pool, &model);
    assert_eq!(pool.check().unwrap().objects, reachable + 2);
    pool.close().unwrap();
}

/// The STM's writes set no region cards: with the card table collecting,
/// the first transaction waits for the GC to finish (and inside a region,
/// where it cannot wait, fails with BUSY).
#[test]
fn the_stm_waits_for_a_card_tracked_gc() {
    let _turn = serial();
    let t = TempPool::new("deferred-stm");
    let mut rng = Rng(31);
    let pool = create(&t);
    let mut model = build(&pool, 50, 800, &mut rng);
    pool.simulate_crash();
    let (go, calls) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let mut o = opts(RecoveryGc::Deferred);
    o.recovery_gc_hook = Some(holding_hook(go.clone(), calls));
    let pool = Pool::open(&t.0, o).unwrap();
    assert!(pool.open_report().deferred_gc);
    for _ in 0..50 {
        mutate(&pool, &mut model, &mut rng);
    }
    let inside = pool.txn(|_| Ok::<_, engram::Error>(pool.atomically(|_| Ok(1u64))));
    assert!(matches!(inside, Ok(Err(engram::Error::Busy { .. }))), "{inside:?}");
    assert_eq!(pool.recovery_gc_status().state, RecoveryGcState::Pending);
    let seen = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let v = pool.root::<u64>("counter", || 7).unwrap();
            pool.atomically(|tx| tx.write(&v, 8)).unwrap();
            pool.recovery_gc_status().state
        });
        go.store(true, Ordering::Release);
        h.join().unwrap()
    });
    assert_eq!(seen, RecoveryGcState::Finished);
    verify(&pool, &model);
    pool.check().unwrap();
    pool.close().unwrap();
}

/// The case the allocation card exists for: inside one region, a fresh
/// object is linked from a holder the concurrent mark has not scanned yet,
/// the mark then runs to its end (scanning the fresh object while its
/// field is still null), and only then does the region store the only
/// pointer to the rest of a long list into the fresh object (a store that
/// is never logged). The final pause must rescan the fresh object because
/// its allocation carded its page; without that card the tail is swept.
#[test]
fn a_fresh_object_scanned_before_its_only_store() {
    const N: u64 = 12_000;
    const AT: u64 = 8_000; // far beyond what is marked at the first stop check (4096)
    let _turn = serial();
    let t = TempPool::new("deferred-fresh");
    let pool = create(&t);
    pool.txn(|tx| tx.set_root_array("chain", tx.alloc_array::<PPtr<Node>>(1)?)).unwrap();
    for batch in 0..N / 1000 {
        pool.txn(|tx| {
            let arr = tx.root_array::<PPtr<Node>>("chain")?.expect("chain");
            for i in 0..1000 {
                let head = tx.get(arr, 0)?;
                tx.set(arr, 0, tx.alloc(Node { value: N - (batch * 1000 + i), next: head })?)?;
            }
            Ok::<_, engram::Error>(())
        })
        .unwrap();
    }
    pool.txn(|tx| (0..1000).try_for_each(|g| tx.alloc(Node { value: g, next: PPtr::null() }).map(|_| ()))).unwrap();
    pool.simulate_crash();

    let (go, done) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let mut o = opts(RecoveryGc::Deferred);
    o.recovery_gc_hook = Some(final_pause_hook(&go, &done, true));
    let pool = Pool::open(&t.0, o).unwrap();
    assert!(pool.open_report().deferred_gc);
    pool.txn(|tx| {
        let mut k = tx.get(tx.root_array::<PPtr<Node>>("chain")?.expect("chain"), 0)?;
        for _ in 1..AT {
            k = tx.read(k)?.next;
        }
        let rest = tx.read(k)?.next;
        let fresh = tx.alloc(Node { value: 0, next: PPtr::null() })?;
        tx.update(k, |n| n.next = fresh)?;
        go.store(true, Ordering::Release);
        // the concurrent mark ends (its final pause waits for this region)
        wait_final_pause(&pool, &done);
        tx.update(fresh, |n| n.next = rest)
    })
    .unwrap();
    assert!(done.load(Ordering::Acquire), "the concurrent mark ended inside the region");
    let st = pool.wait_recovery_gc().unwrap();
    assert_eq!(st.state, RecoveryGcState::Finished, "{st:?}");
    assert_eq!(st.live_objects, N + 2, "every node, the fresh one and the array are live: {st:?}");
    scribble_free_slots(&pool, 2 * N);
    let values = pool
        .txn(|tx| {
            let mut p = tx.get(tx.root_array::<PPtr<Node>>("chain")?.expect("chain"), 0)?;
            let mut v = Vec::new();
            while !p.is_null() {
                let n = tx.read(p)?;
                v.push(n.value);
                p = n.next;
            }
            Ok::<_, engram::Error>(v)
        })
        .unwrap();
    let want: Vec<u64> = (1..=AT).chain([0]).chain(AT + 1..=N).collect();
    assert_eq!(values.len(), want.len(), "the list after the fresh node survived the GC");
    assert_eq!(values, want);
    assert_eq!(pool.check().unwrap().objects, N + 2);
    assert!(st.freed >= 1000, "{st:?}");
    pool.close().unwrap();
}

/// Card tables are per pool: two pools recovered at once in one process
/// both collect in the background (soft-dirty bits would admit one).
#[test]
fn two_card_tracked_pools_at_once() {
    let _turn = serial();
    let (t1, t2) = (TempPool::new("deferred-two-a"), TempPool::new("deferred-two-b"));
    let mut rng = Rng(123);
    let (p1, p2) = (create(&t1), create(&t2));
    let (mut m1, mut m2) = (build(&p1, 20, 300, &mut rng), build(&p2, 20, 300, &mut rng));
    p1.simulate_crash();
    p2.simulate_crash();
    let go = Arc::new(AtomicBool::new(false));
    let open = |t: &TempPool| {
        let mut o = opts(RecoveryGc::Deferred);
        o.recovery_gc_hook = Some(holding_hook(go.clone(), Arc::new(AtomicU64::new(0))));
        Pool::open(&t.0, o).unwrap()
    };
    let (p1, p2) = (open(&t1), open(&t2));
    assert!(p1.open_report().deferred_gc && p2.open_report().deferred_gc);
    for _ in 0..100 {
        mutate(&p1, &mut m1, &mut rng);
        mutate(&p2, &mut m2, &mut rng);
    }
    go.store(true, Ordering::Release);
    for (p, m) in [(&p1, &m1), (&p2, &m2)] {
        let st = p.wait_recovery_gc().unwrap();
        assert_eq!(st.state, RecoveryGcState::Finished, "{st:?}");
        assert!(st.freed >= 300, "{st:?}");
        scribble_free_slots(p, 5_000);
        assert_eq!(p.check().unwrap().objects, verify(p, m) + 2);
    }
    p1.close().unwrap();
    p2.close().unwrap();
}

/// Undo-log chunks are linked without logging: a region whose log outgrows
/// the chunk its slot already had links a new chunk into that chunk's
/// header (log.rs `new_chunk`), a store no card sees. If the concurrent
/// mark scanned the old chunk first, only the final pause's walk of every
/// slot's whole chunk chain keeps the new chunk; otherwise the sweep frees
/// a chunk the log still uses (the heap then counts fewer objects than
/// are reachable).
#[test]
fn a_log_chunk_linked_during_the_mark_stays_live() {
    const X: u64 = 3 << 17; // u64s: 3 MiB, fills the 4 MiB chunk mostly
    const Y: u64 = 2 << 17; // 2 MiB more: a second chunk linked behind it
    let _turn = serial();
    let t = TempPool::new("deferred-chunk");
    let pool = create(&t);
    pool.txn(|tx| {
        tx.set_root_array("x", tx.alloc_array::<u64>(X)?)?;
        tx.set_root_array("y", tx.alloc_array::<u64>(Y)?)
    })
    .unwrap();
    let log_all = |pool: &Pool, v: u64, both: bool| {
        pool.txn(|tx| {
            let x = tx.root_array::<u64>("x")?.expect("x");
            tx.write_slice(x, 0, &vec![v; X as usize])?;
            if both {
                let y = tx.root_array::<u64>("y")?.expect("y");
                tx.write_slice(y, 0, &vec![v; Y as usize])?;
            }
            Ok::<_, engram::Error>(())
        })
        .unwrap()
    };
    // slot 0 (the lowest free one, as every region here) gets one chunk
    log_all(&pool, 1, false);
    pool.txn(|tx| (0..500).try_for_each(|g| tx.alloc(Node { value: g, next: PPtr::null() }).map(|_| ()))).unwrap();
    pool.simulate_crash();

    let (go, done) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let mut o = opts(RecoveryGc::Deferred);
    o.recovery_gc_hook = Some(final_pause_hook(&go, &done, false));
    let pool = Pool::open(&t.0, o).unwrap();
    assert!(pool.open_report().deferred_gc);
    wait_final_pause(&pool, &done);
    // the concurrent mark is over (it saw the old chunk's link empty)
    log_all(&pool, 2, true);
    go.store(true, Ordering::Release);
    let st = pool.wait_recovery_gc().unwrap();
    assert_eq!(st.state, RecoveryGcState::Finished, "{st:?}");
    let reachable = pool.check().unwrap().objects;
    assert_eq!(pool.info().live_objects, reachable, "every reachable object (log chunks too) is live after the sweep: {st:?}");
    // the chain is used again, and the data is intact
    log_all(&pool, 3, true);
    pool.txn(|tx| {
        let (x, y) = (tx.root_array::<u64>("x")?.expect("x"), tx.root_array::<u64>("y")?.expect("y"));
        assert_eq!((tx.get(x, X - 1)?, tx.get(y, Y - 1)?), (3, 3));
        Ok::<_, engram::Error>(())
    })
    .unwrap();
    pool.close().unwrap();
}
