//! Pool life cycle: create, regions, roots, reopen, growth, GC.

mod common;
use common::TempPool;
use engram::{CreateOptions, Durability, Error, OpenOptions, PPtr, Persistent, Pool};

#[derive(Clone, Copy, Debug, PartialEq, Persistent)]
struct Node {
    value: u64,
    next: PPtr<Node>,
}

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("test").durability(Durability::Process)).unwrap()
}

fn open(t: &TempPool) -> Pool {
    Pool::open(&t.0, OpenOptions::new("test").durability(Durability::Process)).unwrap()
}

fn build_list(pool: &Pool, n: u64) {
    pool.txn(|tx| {
        let mut head = PPtr::null();
        for value in 0..n {
            head = tx.alloc(Node { value, next: head })?;
        }
        tx.set_root("list", head)
    })
    .unwrap();
}

fn sum_list(pool: &Pool) -> (u64, u64) {
    pool.txn(|tx| {
        let mut p = tx.root::<Node>("list")?.unwrap_or_default();
        let (mut sum, mut len) = (0, 0);
        while !p.is_null() {
            let n = tx.read(p)?;
            sum += n.value;
            len += 1;
            p = n.next;
        }
        Ok::<_, Error>((sum, len))
    })
    .unwrap()
}

#[test]
fn list_survives_clean_reopen() {
    let t = TempPool::new("reopen");
    let pool = create(&t);
    // a fresh pool's report: created, and clean (nothing to recover)
    assert!(pool.open_report().created && pool.open_report().was_clean, "{:?}", pool.open_report());
    build_list(&pool, 1000);
    assert_eq!(sum_list(&pool), (499500, 1000));
    pool.close().unwrap();
    let pool = open(&t);
    assert!(pool.open_report().was_clean && !pool.open_report().created);
    assert_eq!(sum_list(&pool), (499500, 1000));
    assert_eq!(pool.info().live_objects, 1000);
    pool.close().unwrap();
}

#[test]
fn err_rolls_back_everything() {
    let t = TempPool::new("rollback");
    let pool = create(&t);
    build_list(&pool, 10);
    let r: Result<(), Error> = pool.txn(|tx| {
        let head = tx.root::<Node>("list")?.unwrap();
        tx.update(head, |n| n.value = 1000)?;
        let extra = tx.alloc(Node { value: 7, next: head })?;
        tx.set_root("list", extra)?;
        Err(Error::Aborted)
    });
    assert!(r.is_err());
    assert_eq!(sum_list(&pool), (45, 10));
    let before = pool.info().live_objects;
    assert_eq!(before, 10, "the rolled-back allocation was freed");
}

#[test]
fn panic_rolls_back_and_propagates() {
    let t = TempPool::new("panic");
    let pool = create(&t);
    build_list(&pool, 3);
    let p2 = pool.clone();
    let caught = std::panic::catch_unwind(move || {
        p2.txn(|tx| {
            let head = tx.root::<Node>("list")?.unwrap();
            tx.update(head, |n| n.value = 99)?;
            if tx.read(head)?.value == 99 {
                panic!("boom");
            }
            Ok::<_, Error>(())
        })
    });
    assert!(caught.is_err());
    assert_eq!(sum_list(&pool), (3, 3));
}

#[test]
fn nested_regions_flatten_and_inner_error_aborts_outer() {
    let t = TempPool::new("nested");
    let pool = create(&t);
    build_list(&pool, 2);
    let r: Result<(), Error> = pool.txn(|tx| {
        let head = tx.root::<Node>("list")?.unwrap();
        tx.update(head, |n| n.value = 50)?;
        let inner: Result<(), Error> = pool.txn(|tx2| {
            tx2.update(head, |n| n.value = 60)?;
            Err(Error::LockTimeout)
        });
        assert!(inner.is_err());
        Ok(()) // the outer swallows the error, but is doomed
    });
    assert!(matches!(r, Err(Error::Aborted)));
    assert_eq!(sum_list(&pool), (1, 2));
    // and a successful nested region commits with the outer one
    pool.txn(|tx| {
        let head = tx.root::<Node>("list")?.unwrap();
        pool.txn(|tx2| tx2.update(head, |n| n.value = 10))?;
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(sum_list(&pool), (10, 2));
}

#[test]
fn growth_keeps_addresses_and_reaches_max() {
    let t = TempPool::new("grow");
    let pool = Pool::create(&t.0, CreateOptions::new("test").durability(Durability::Process).max_size(72 << 20)).unwrap();
    let first = pool.txn(|tx| tx.alloc(Node { value: 1, next: PPtr::null() })).unwrap();
    let size0 = pool.info().size;
    // 1 MiB arrays until the pool is full
    let mut n = 0;
    let err = loop {
        match pool.txn(|tx| {
            let a = tx.alloc_array::<u64>(128 * 1024)?;
            tx.set(a, 0, n)?;
            tx.set_root(&format!("a{n}"), PPtr::<u64>::from_addr(a.addr())).map(|_| ())
        }) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::PoolFull { .. }), "{err}");
    assert!(n >= 50, "only {n} MiB fit");
    assert!(pool.info().size > size0);
    assert_eq!(pool.txn(|tx| tx.read(first)).unwrap().value, 1);
}

#[test]
fn collect_frees_unreachable() {
    let t = TempPool::new("gc");
    let pool = create(&t);
    build_list(&pool, 100);
    pool.txn(|tx| tx.remove_root("list").map(|_| ())).unwrap();
    build_list(&pool, 10);
    let st = pool.collect().unwrap();
    assert_eq!(st.objects, 10);
    assert_eq!(pool.info().live_objects, 10);
    assert_eq!(sum_list(&pool), (45, 10));
}

#[test]
fn crash_without_close_recovers_and_reclaims() {
    let t = TempPool::new("crash");
    let pool = create(&t);
    build_list(&pool, 20);
    // allocated, never linked: garbage after a crash
    pool.txn(|tx| {
        for i in 0..50u64 {
            tx.alloc(i)?;
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    std::mem::forget(pool); // no clean close
    let pool = Pool::open(&t.0, OpenOptions::new("test").durability(Durability::Process));
    // the forgotten handle still holds the flock in this process
    assert!(matches!(pool, Err(Error::AlreadyOpen { .. })));
}

#[test]
fn huge_objects_span_arenas_and_are_reclaimed() {
    let t = TempPool::new("huge");
    let pool = Pool::create(&t.0, CreateOptions::new("test").durability(Durability::Process).max_size(1 << 30)).unwrap();
    let n = 10_000_000u64; // 80 MB: more than one 64 MiB arena
    let a = pool
        .txn(|tx| {
            let a = tx.alloc_array::<u64>(n)?;
            tx.set(a, 0, 11)?;
            tx.set(a, n - 1, 22)?;
            tx.set_root_array("huge", a)?;
            Ok::<_, Error>(a)
        })
        .unwrap();
    // small objects still work around it
    build_list(&pool, 100);
    pool.close().unwrap();
    let pool = open(&t);
    pool.check().unwrap();
    let got = pool.txn(|tx| {
        let b = tx.root_array::<u64>("huge")?.unwrap();
        assert_eq!(b, a);
        Ok::<_, Error>((tx.len(b)?, tx.get(b, 0)?, tx.get(b, n - 1)?))
    });
    assert_eq!(got.unwrap(), (n, 11, 22));
    // crash: still there after recovery GC
    pool.simulate_crash();
    let pool = open(&t);
    assert_eq!(pool.open_report().recovered.unwrap().objects, 101);
    // unlink and collect: the arenas are reused by the next huge object
    pool.txn(|tx| tx.remove_root("huge").map(|_| ())).unwrap();
    pool.collect().unwrap();
    let size = pool.info().size;
    let b = pool.txn(|tx| {
        let b = tx.alloc_array::<u64>(n)?;
        tx.set_root_array("huge2", b)?;
        Ok::<_, Error>(b)
    });
    assert_eq!(b.unwrap(), a, "freed arenas reused");
    assert_eq!(pool.info().size, size, "no growth needed");
    assert_eq!(sum_list(&pool), (4950, 100));
    pool.close().unwrap();
}

/// A region takes slots from its thread cache a batch at a time (its
/// magazine) and hands them back when it ends: between regions the live
/// count is exact after commits, frees, rollbacks and double frees, and a
/// collection and a reopen find the same objects.
#[test]
fn batched_allocation_leaves_exact_live_counts() {
    let t = TempPool::new("magazine");
    let pool = create(&t);
    let base = pool.info().live_objects;
    build_list(&pool, 100);
    assert_eq!(pool.info().live_objects, base + 100);
    // a rolled-back region's allocations (more than one batch) are all returned
    let r: Result<(), Error> = pool.txn(|tx| {
        for value in 0..70 {
            tx.alloc(Node { value, next: PPtr::null() })?;
        }
        Err(Error::Aborted)
    });
    assert!(r.is_err());
    assert_eq!(pool.info().live_objects, base + 100);
    // free the whole list in one region, and refuse a double free
    let freed = pool
        .txn(|tx| {
            let head = tx.root::<Node>("list")?.unwrap_or_default();
            let mut p = head;
            let mut n = 0;
            while !p.is_null() {
                let next = tx.read(p)?.next;
                tx.free(p)?;
                n += 1;
                p = next;
            }
            assert!(matches!(tx.free(head), Err(Error::DoubleFree { .. })));
            tx.remove_root("list")?;
            Ok::<_, Error>(n)
        })
        .unwrap();
    assert_eq!(freed, 100);
    assert_eq!(pool.info().live_objects, base);
    build_list(&pool, 40);
    pool.collect().unwrap();
    assert_eq!(pool.info().live_objects, base + 40);
    drop(pool);
    let pool = open(&t);
    assert_eq!(sum_list(&pool), ((0..40).sum(), 40));
    assert_eq!(pool.info().live_objects, base + 40);
}
