//! `PTVar` values of any size (issue 14): a value over 40 bytes is boxed
//! transparently. Values of 41 B, 4 KiB and 1 MiB commit, read back (also
//! as the transaction's own write), survive reopen and a crash after the
//! commit fence; the old box is freed by the commit that replaces it, an
//! aborted attempt frees its new box, a boxed update commit issues one
//! fence, and concurrent writers and readers never see a torn value.

mod common;
use common::TempPool;
use engram::failpoint::{self, Failpoint};
use engram::stm::{PTVar, StmError};
use engram::{CreateOptions, Durability, OpenOptions, Pool};

fn create(t: &TempPool, d: Durability) -> Pool {
    Pool::create(&t.0, CreateOptions::new("stm").durability(d)).unwrap()
}

fn reopen(t: &TempPool) -> Pool {
    Pool::open(&t.0, OpenOptions::new("stm").durability(Durability::Process)).unwrap()
}

/// Runs `f` on a thread with a large stack (a 1 MiB value is returned by
/// value, and debug builds copy it a few times).
fn big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new().stack_size(64 << 20).spawn(f).unwrap().join().unwrap();
}

const MIB: usize = 128 * 1024; // u64s: 1 MiB

fn fill<const N: usize>(k: u64) -> Box<[u64; N]> {
    let mut b: Box<[u64; N]> = vec![0u64; N].into_boxed_slice().try_into().unwrap();
    for (i, x) in b.iter_mut().enumerate() {
        *x = k * 1_000_003 + i as u64;
    }
    b
}

fn is_fill<const N: usize>(a: &[u64; N], k: u64) -> bool {
    a.iter().enumerate().all(|(i, &x)| x == k * 1_000_003 + i as u64)
}

#[test]
fn values_of_41_bytes_4_kib_and_1_mib_commit_read_and_reopen() {
    big_stack(|| {
        const { assert!(PTVar::<[u8; 41]>::BOXED && PTVar::<[u64; 512]>::BOXED && !PTVar::<[u64; 5]>::BOXED) };
        let t = TempPool::new("stm-boxed-sizes");
        let pool = create(&t, Durability::Process);
        let small: PTVar<[u8; 41]> = pool.root("small", || [1u8; 41]).unwrap();
        let page: PTVar<[u64; 512]> = pool.root("page", || *fill::<512>(1)).unwrap();
        let huge: PTVar<[u64; MIB]> = pool.root("huge", || *fill::<MIB>(1)).unwrap();
        assert_eq!(pool.atomically(|tx| tx.read(&small)).unwrap(), [1u8; 41]);
        assert!(is_fill(&pool.atomically(|tx| tx.read(&page)).unwrap(), 1));
        assert!(is_fill(&Box::new(pool.atomically(|tx| tx.read(&huge)).unwrap()), 1));
        // Write all three, read the own writes back in the same transaction.
        let own = pool
            .atomically(|tx| {
                tx.write(&small, [2u8; 41])?;
                tx.write(&page, *fill::<512>(2))?;
                tx.write(&huge, *fill::<MIB>(2))?;
                Ok(tx.read(&small)? == [2u8; 41] && is_fill(&tx.read(&page)?, 2) && is_fill(&tx.read(&huge)?, 2))
            })
            .unwrap();
        assert!(own, "a transaction reads its own boxed writes");
        pool.close().unwrap();
        let pool = reopen(&t);
        let small: PTVar<[u8; 41]> = pool.root("small", || [0u8; 41]).unwrap();
        let page: PTVar<[u64; 512]> = pool.root("page", || [0; 512]).unwrap();
        let huge: PTVar<[u64; MIB]> = pool.root("huge", || [0; MIB]).unwrap();
        assert_eq!(pool.atomically(|tx| tx.read(&small)).unwrap(), [2u8; 41]);
        assert!(is_fill(&pool.atomically(|tx| tx.read(&page)).unwrap(), 2));
        assert!(pool.atomically(|tx| Ok(is_fill(&tx.read(&huge)?, 2))).unwrap());
        pool.check().unwrap();
        pool.close().unwrap();
    });
}

#[test]
fn the_old_box_is_freed_at_commit_and_an_abort_frees_the_new_one() {
    big_stack(|| {
        let t = TempPool::new("stm-boxed-free");
        let pool = create(&t, Durability::Process);
        let page: PTVar<[u64; 512]> = pool.root("page", || *fill::<512>(0)).unwrap();
        let huge: PTVar<[u64; MIB]> = pool.root("huge", || *fill::<MIB>(0)).unwrap();
        pool.atomically(|tx| tx.write(&page, *fill::<512>(1))).unwrap();
        let live = || pool.info().live_objects;
        let (objects, size) = (live(), pool.info().size);
        for k in 2..40 {
            pool.atomically(|tx| tx.write(&page, *fill::<512>(k))).unwrap();
            pool.atomically(|tx| tx.write(&huge, *fill::<MIB>(k))).unwrap();
        }
        assert_eq!(live(), objects, "each commit frees the box it replaces");
        assert!(pool.info().size <= size + (4 << 20), "38 MiB written through a 1 MiB variable: the pool did not grow by it");
        // An attempt that fails after materialising its boxes (it read
        // its own writes) frees them.
        let r = pool.atomically(|tx| {
            tx.write(&page, *fill::<512>(99))?;
            tx.write(&huge, *fill::<MIB>(99))?;
            assert!(is_fill(&tx.read(&page)?, 99) && is_fill(&tx.read(&huge)?, 99));
            Err::<(), _>(StmError::Failed(engram::Error::BadPointer { addr: 0 }))
        });
        assert!(r.is_err());
        assert_eq!(live(), objects, "the aborted attempt's boxes are freed");
        assert!(is_fill(&pool.atomically(|tx| tx.read(&page)).unwrap(), 39));
        // Nothing unreachable is left: a collection finds every live object.
        assert_eq!(pool.collect().unwrap().objects, objects);
        pool.close().unwrap();
    });
}

#[test]
fn a_crash_after_a_boxed_commit_fence_is_replayed_without_leak() {
    let t = TempPool::new("stm-boxed-crash");
    let pool = create(&t, Durability::Process);
    let page: PTVar<[u64; 512]> = pool.root("page", || *fill::<512>(0)).unwrap();
    let small: PTVar<u64> = pool.root("small", || 0).unwrap();
    pool.atomically(|tx| tx.write(&page, *fill::<512>(1))).unwrap();
    failpoint::arm(Failpoint::StmAfterFence, 0);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.atomically(|tx| {
            tx.write(&small, 2)?;
            tx.write(&page, *fill::<512>(2))
        })
    }));
    failpoint::disarm_all();
    assert!(r.is_err(), "the failpoint fired");
    pool.simulate_crash();
    let pool = reopen(&t);
    assert!(pool.open_report().stm.unwrap().replayed >= 2);
    let page: PTVar<[u64; 512]> = pool.root("page", || [0; 512]).unwrap();
    let small: PTVar<u64> = pool.root("small", || 9).unwrap();
    assert_eq!(pool.atomically(|tx| Ok((tx.read(&small)?, is_fill(&tx.read(&page)?, 2)))).unwrap(), (2, true));
    // The recovery GC freed the replaced box: everything live is reachable.
    let live = pool.info().live_objects;
    assert_eq!(pool.check().unwrap().objects, live);
    pool.atomically(|tx| tx.write(&page, *fill::<512>(3))).unwrap();
    assert_eq!(pool.info().live_objects, live);
    pool.close().unwrap();
}

#[test]
fn a_boxed_update_commit_issues_one_fence() {
    let t = TempPool::new("stm-boxed-fence");
    let pool = create(&t, Durability::Pmem);
    let page: PTVar<[u64; 64]> = pool.root("page", || [0; 64]).unwrap();
    for k in 0..3 {
        pool.atomically(|tx| tx.write(&page, [k; 64])).unwrap();
    }
    let before = engram::pmem::counters().fences;
    for k in 0..10 {
        pool.atomically(|tx| tx.write(&page, [k; 64])).unwrap();
    }
    // (A clock reservation crossed meanwhile would add one.)
    assert!(engram::pmem::counters().fences - before <= 11);
    assert!(engram::pmem::counters().fences - before >= 10);
    pool.close().unwrap();
}

/// Two writers replace one boxed variable's value while two readers check
/// every value whole: boxes replaced by the other thread are freed once
/// their creator has fenced again, and a reader copying a box that is
/// freed and reused meanwhile runs again rather than see it torn.
#[test]
fn concurrent_writers_and_readers_never_see_a_torn_box() {
    let t = TempPool::new("stm-boxed-threads");
    let pool = create(&t, Durability::Process);
    let v: PTVar<[u64; 64]> = pool.root("v", || [0; 64]).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let torn = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let pool = &pool;
                s.spawn(move || {
                    for i in 0..300u64 {
                        let k = w * 1_000_000 + i;
                        pool.atomically(|tx| tx.write(&v, [k; 64])).unwrap();
                    }
                })
            })
            .collect();
        for _ in 0..2 {
            s.spawn(|| {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let a = pool.atomically(|tx| tx.read(&v)).unwrap();
                    if a.iter().any(|&x| x != a[0]) {
                        torn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(torn.into_inner(), 0);
    let live = pool.info().live_objects;
    let reachable = pool.collect().unwrap().objects;
    // Only boxes made in a writer's last two commits can still wait for
    // their creator's next fence: garbage for the GC, never live data lost.
    assert!(live >= reachable && live - reachable <= 4, "live {live}, reachable {reachable}");
    pool.check().unwrap();
    pool.close().unwrap();
}
