//! A region's allocation record (issue 13): what a region allocated is the
//! run of slots its magazine handed out (no per-object entry), and the new
//! objects' words are marked "logged" lazily, on the region's first log of
//! a range not yet covered. These tests pin the behaviour that must not
//! change: a rollback frees exactly what the region allocated (across
//! batches and size classes, and large objects), stores into new objects
//! need no undo but are durable at commit, and no mark outlives its region
//! (a later region's store to the same words is logged and undone).
//! Crash behaviour is covered by the crash explorer's region workloads.

mod common;
use common::TempPool;
use engram::{CreateOptions, Durability, Error, OpenOptions, PArray, PPtr, Persistent, Pool};

#[derive(Clone, Copy, Debug, PartialEq, Persistent)]
struct Small {
    a: u64,
    b: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Persistent)]
struct Wide {
    w: [u64; 12],
}

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("test").durability(Durability::Process)).unwrap()
}

fn open(t: &TempPool) -> Pool {
    Pool::open(&t.0, OpenOptions::new("test").durability(Durability::Process)).unwrap()
}

fn live(pool: &Pool) -> u64 {
    pool.info().live_objects
}

#[test]
fn rollback_frees_every_batch_and_class() {
    let t = TempPool::new("ra-rollback");
    let pool = create(&t);
    let before = live(&pool);
    // Interleaved classes end a batch at every switch; 1000 objects of one
    // class span many batches; a large array is recorded apart.
    let r: Result<(), Error> = pool.txn(|tx| {
        for i in 0..300u64 {
            tx.alloc(Small { a: i, b: i })?;
            if i % 3 == 0 {
                tx.alloc(Wide { w: [i; 12] })?;
            }
        }
        for i in 0..1000u64 {
            tx.alloc(Small { a: i, b: 0 })?;
        }
        tx.alloc_array::<u64>(100_000)?;
        Err(Error::Aborted)
    });
    assert!(r.is_err());
    assert_eq!(live(&pool), before, "a rolled-back region leaves nothing allocated");
    // The slots are usable again, and a committed region keeps what it made.
    pool.txn(|tx| {
        let mut head = PPtr::<Small>::null();
        for i in 0..500u64 {
            let _ = tx.alloc(Wide { w: [i; 12] })?;
            head = tx.alloc(Small { a: i, b: head.addr() })?;
        }
        tx.set_root("head", head)
    })
    .unwrap();
    assert_eq!(live(&pool), before + 1000);
    pool.close().unwrap();
}

#[test]
fn stores_into_new_objects_need_no_undo_and_are_durable() {
    let t = TempPool::new("ra-fresh");
    let pool = create(&t);
    pool.txn(|tx| {
        let old = tx.alloc(Small { a: 1, b: 2 })?;
        tx.set_root("old", old)
    })
    .unwrap();
    pool.txn(|tx| {
        let a = tx.alloc(Small { a: 0, b: 0 })?;
        // a logged store to an old object first: marks the new objects
        let old = tx.root::<Small>("old")?.unwrap();
        tx.write(old, Small { a: 10, b: 20 })?;
        let arr: PArray<u64> = tx.alloc_array(5)?;
        // stores through raw pointers after `log_range`, as front ends do,
        // into objects allocated before and after the first log
        tx.log_range(a.addr(), 16)?;
        // SAFETY: `a` is a live 16-byte object of this region, logged above.
        unsafe { std::ptr::write(a.addr() as *mut Small, Small { a: 7, b: 8 }) };
        tx.log_range(arr.addr() + 8, 8)?;
        // SAFETY: element 1 of the 5-element array, logged above.
        unsafe { std::ptr::write((arr.addr() + 8) as *mut u64, 99) };
        tx.set_root("a", a)?;
        tx.set_root_array("arr", arr)
    })
    .unwrap();
    pool.close().unwrap();
    let pool = open(&t);
    pool.txn(|tx| {
        assert_eq!(tx.read(tx.root::<Small>("a")?.unwrap())?, Small { a: 7, b: 8 });
        assert_eq!(tx.read(tx.root::<Small>("old")?.unwrap())?, Small { a: 10, b: 20 });
        assert_eq!(tx.get(tx.root_array::<u64>("arr")?.unwrap(), 1)?, 99);
        Ok::<_, Error>(())
    })
    .unwrap();
    pool.close().unwrap();
}

/// A region that marked its new objects (committed or rolled back) leaves
/// no mark behind: the next region's store to the same words is logged,
/// so its rollback restores them.
#[test]
fn no_mark_outlives_its_region() {
    let t = TempPool::new("ra-marks");
    let pool = create(&t);
    let keep = pool
        .txn(|tx| {
            let keep = tx.alloc(Small { a: 1, b: 1 })?;
            let old = tx.alloc(Small { a: 0, b: 0 })?;
            tx.write(old, Small { a: 5, b: 5 })?; // first log: marks `keep`
            tx.set_root("keep", keep)?;
            Ok::<_, Error>(keep)
        })
        .unwrap();
    let r: Result<(), Error> = pool.txn(|tx| {
        tx.write(keep, Small { a: 2, b: 2 })?;
        Err(Error::Aborted)
    });
    assert!(r.is_err());
    pool.txn(|tx| {
        assert_eq!(tx.read(keep)?, Small { a: 1, b: 1 });
        Ok::<_, Error>(())
    })
    .unwrap();
    // The same after a rolled-back region that marked: its slots are
    // handed out again (the thread cache is LIFO) to a committed object.
    let r: Result<(), Error> = pool.txn(|tx| {
        let old = tx.root::<Small>("keep")?.unwrap();
        for i in 0..40u64 {
            tx.alloc(Small { a: i, b: i })?;
        }
        tx.write(old, Small { a: 3, b: 3 })?;
        Err(Error::Aborted)
    });
    assert!(r.is_err());
    let again = pool
        .txn(|tx| {
            let mut all = Vec::new();
            for i in 0..40u64 {
                all.push(tx.alloc(Small { a: i, b: 100 + i })?);
            }
            tx.set_root("again", all[39])?;
            Ok::<_, Error>(all)
        })
        .unwrap();
    let r: Result<(), Error> = pool.txn(|tx| {
        for &p in &again {
            tx.write(p, Small { a: 0, b: 0 })?;
        }
        Err(Error::Aborted)
    });
    assert!(r.is_err());
    pool.txn(|tx| {
        for (i, &p) in again.iter().enumerate() {
            assert_eq!(tx.read(p)?, Small { a: i as u64, b: 100 + i as u64 });
        }
        assert_eq!(tx.read(keep)?, Small { a: 1, b: 1 });
        Ok::<_, Error>(())
    })
    .unwrap();
    pool.close().unwrap();
}

#[derive(Clone, Copy, Debug, PartialEq, Persistent)]
struct LinkA {
    next: PPtr<LinkA>,
    v: u64,
}

/// Same size class as `LinkA`, its pointer in the other word.
#[derive(Clone, Copy, Debug, PartialEq, Persistent)]
struct LinkB {
    v: u64,
    next: PPtr<LinkB>,
}

/// The object header `Tx::alloc` stored for the payload at `p`: (type id, flags, count).
fn header(p: u64) -> (u32, u32, u64) {
    // SAFETY: `p` is the payload of a live object of an open pool; its
    // 16-byte header (type id, flags, count) precedes it.
    unsafe { (*((p - 16) as *const u32), *((p - 12) as *const u32), *((p - 8) as *const u64)) }
}

/// `Tx::alloc`'s fast path (magazine pop, the region's cached type id, the
/// header stored in place) writes the header `alloc_raw` writes: two types
/// of one size class, interleaved in one region across many batches, each
/// object carries its own type's id (a wrong one would make the collector
/// trace the wrong word and free the chain), and both chains survive a
/// collection and a reopen.
#[test]
fn interleaved_types_of_one_class_keep_their_own_headers() {
    let t = TempPool::new("ra-types");
    let pool = create(&t);
    let n = 300u64;
    pool.txn(|tx| {
        let (mut a, mut b) = (PPtr::<LinkA>::null(), PPtr::<LinkB>::null());
        for i in 0..n {
            a = tx.alloc(LinkA { next: a, v: i })?;
            b = tx.alloc(LinkB { v: i, next: b })?;
        }
        tx.set_root("a", a)?;
        tx.set_root("b", b)
    })
    .unwrap();
    let walk = |pool: &Pool| {
        pool.txn(|tx| {
            let (ta, tb) = (tx.root_entry("a")?.unwrap().type_id, tx.root_entry("b")?.unwrap().type_id);
            assert_ne!(ta, tb);
            let (mut a, mut b) = (tx.root::<LinkA>("a")?.unwrap(), tx.root::<LinkB>("b")?.unwrap());
            for i in (0..n).rev() {
                assert_eq!(header(a.addr()), (ta, 0xE9A0_0000, 1), "LinkA {i}");
                assert_eq!(header(b.addr()), (tb, 0xE9A0_0000, 1), "LinkB {i}");
                let (x, y) = (tx.read(a)?, tx.read(b)?);
                assert_eq!((x.v, y.v), (i, i));
                (a, b) = (x.next, y.next);
            }
            assert!(a.is_null() && b.is_null());
            Ok::<_, Error>(())
        })
        .unwrap()
    };
    walk(&pool);
    let before = live(&pool);
    pool.collect().unwrap();
    assert_eq!(live(&pool), before, "the collector traced both chains");
    walk(&pool);
    pool.close().unwrap();
    let pool = open(&t);
    walk(&pool);
    pool.close().unwrap();
}

/// What `free` answered for each case of [`free_cases`], in order.
type FreeAnswers = Vec<Result<(), Error>>;

/// `Tx::free` of objects in spans the region has already read from (so
/// the region's span cache answers, not the tables): an interior pointer
/// (16-aligned, into an object whose payload starts with what looks like
/// a tagged header), a header address, an object freed twice in one
/// region, an object freed by an earlier region; then 62 objects freed,
/// their slots handed out again and freed again, region after region on
/// this thread.
fn free_cases(pool: &Pool) -> FreeAnswers {
    let forged = Wide { w: [0xE9A0_0000u64 << 32, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] };
    let (wide, objs) = pool
        .txn(|tx| Ok::<_, Error>((tx.alloc(forged)?, (0..64u64).map(|i| tx.alloc(Small { a: i, b: i })).collect::<Result<Vec<_>, _>>()?)))
        .unwrap();
    let (keep, p) = (objs[0], objs[1]);
    let mut out = Vec::new();
    // Each region reads `keep` and `wide` first: their spans (and `p`'s,
    // the same batch as `keep`) are then in the region's span cache.
    let free_in_region = |addr: u64, twice: bool| {
        pool.txn(|tx| {
            tx.read(keep)?;
            tx.read(wide)?;
            tx.free(PPtr::<Small>::from_addr(addr))?;
            if twice {
                tx.free(PPtr::<Small>::from_addr(addr))?;
            }
            Ok::<_, Error>(())
        })
    };
    out.push(free_in_region(wide.addr() + 16, false));
    out.push(free_in_region(p.addr() - 16, false));
    out.push(free_in_region(p.addr(), true));
    out.push(free_in_region(p.addr(), false));
    out.push(free_in_region(p.addr(), false));
    // Reuse: the freed slots come back from the thread's cache.
    let mut last: Vec<u64> = objs[2..].iter().map(|q| q.addr()).collect();
    let mut reused = 0;
    for round in 0..4u64 {
        let r = pool.txn(|tx| {
            tx.read(keep)?;
            last.iter().try_for_each(|&a| tx.free(PPtr::<Small>::from_addr(a)))
        });
        out.push(r);
        let next: Vec<u64> = pool.txn(|tx| (0..62).map(|i| tx.alloc(Small { a: round, b: i }).map(|q| q.addr())).collect()).unwrap();
        reused += next.iter().filter(|a| last.contains(a)).count();
        last = next;
    }
    assert!(reused > 0, "no freed slot was handed out again: the reuse cases test nothing");
    out
}

/// The answers [`free_cases`] must get.
fn free_answers_ok(got: &FreeAnswers) -> bool {
    let kinds: Vec<&str> = got
        .iter()
        .map(|r| match r {
            Ok(()) => "ok",
            Err(Error::BadPointer { .. }) => "bad",
            Err(Error::DoubleFree { .. }) => "double",
            Err(_) => "other",
        })
        .collect();
    kinds == ["bad", "bad", "double", "ok", "bad", "ok", "ok", "ok", "ok"]
}

/// `Tx::free` through the region's span cache (`SpanCache::payload_class`,
/// no table lookup) refuses what the tables' path refuses, with the same
/// errors: not a payload start (`BadPointer`), freed twice in the region
/// (`DoubleFree`), freed by an earlier region (`BadPointer`: its tag is
/// gone); and the region's double-free set is emptied at its end, so a
/// slot freed, handed out again and freed again is accepted each time.
#[test]
fn free_through_the_span_cache_refuses_what_the_tables_refuse() {
    let t = TempPool::new("ra-free-cached");
    let pool = create(&t);
    let got = free_cases(&pool);
    assert!(free_answers_ok(&got), "{got:?}");
    pool.close().unwrap();
}

/// Each planted bug in `free`'s checks (a tag not checked, an interior
/// address taken for a payload start, a double-free set not emptied at the
/// region's end) changes an answer of [`free_cases`].
#[test]
fn free_cases_catch_the_planted_bugs() {
    for bug in ["tx.free_skips_tag", "tx.free_any_slot_address", "tx.freed_set_kept"] {
        let t = TempPool::new("ra-free-planted");
        let pool = create(&t);
        engram::failpoint::plant(bug);
        let got = free_cases(&pool);
        engram::failpoint::disarm_all();
        assert!(!free_answers_ok(&got), "{bug}: not caught: {got:?}");
        drop(pool);
    }
}

/// Blocks the pool file holds, in bytes (`st_blocks` counts 512-byte units,
/// including blocks allocated ahead of use).
fn file_blocks(t: &TempPool) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(&t.0).unwrap().blocks() * 512
}

/// Allocates `n` arrays of 4 KiB in one region; returns them.
fn alloc_pages(pool: &Pool, n: u64, fill: u64) -> Result<Vec<PArray<u64>>, Error> {
    pool.txn(|tx| {
        let mut out = Vec::new();
        for _ in 0..n {
            let a = tx.alloc_array::<u64>(500)?;
            tx.write_slice(a, 0, &[fill; 500])?;
            out.push(a);
        }
        Ok(out)
    })
}

/// Lazy backing (issue 13, the pool's up-front fill): a new pool's heap is
/// a hole in its file; the allocator allocates the file's blocks span by
/// span before it hands them out, and a file system that cannot (a full
/// disk, simulated by the `space.backing_fails` fault switch) fails the
/// allocating region with `Io`, rolled back, with the pool intact.
#[test]
fn fresh_heap_spans_are_backed_on_first_use_and_a_full_disk_is_an_error() {
    use engram::failpoint;
    let t = TempPool::new("ra-backing");
    let pool = Pool::create(&t.0, CreateOptions::new("test").durability(Durability::Process).initial_size(256 << 20)).unwrap();
    let before = file_blocks(&t);
    assert!(before < 32 << 20, "a new 256 MiB pool allocates only its metadata: {before} bytes");
    let kept = alloc_pages(&pool, 4000, 7).unwrap(); // ~16 MiB of 4 KiB slots
    assert!(file_blocks(&t) >= before + (16 << 20) * 9 / 10, "the used spans are backed");
    let live_before = live(&pool);
    failpoint::plant("space.backing_fails");
    let err = alloc_pages(&pool, 8000, 9).unwrap_err();
    failpoint::disarm_all();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert_eq!(live(&pool), live_before, "the failed region's objects were freed");
    let more = alloc_pages(&pool, 8000, 9).unwrap();
    pool.txn(|tx| {
        assert!(kept.iter().all(|&a| tx.get(a, 499).unwrap() == 7));
        assert!(more.iter().all(|&a| tx.get(a, 0).unwrap() == 9));
        tx.set_root_array("kept", kept[0])
    })
    .unwrap();
    drop(pool);
    let pool = open(&t);
    let a = pool.txn(|tx| tx.root_array::<u64>("kept")).unwrap().unwrap();
    assert_eq!(pool.txn(|tx| tx.get(a, 250)).unwrap(), 7);
}
