//! One bad pointer never bricks a pool (issue 15).
//!
//! Three kinds of bad pointer can end up in a pointer field of an allocated
//! object: a pointer into another pool, a stray `PPtr::from_addr` value, and
//! a pointer left dangling by `Tx::free`. Checked mode (on by default in
//! debug builds) refuses each where the engine can see it: at `alloc`,
//! `write`, `set`, `write_slice`, at commit (raw-pointer stores) and at
//! `set_root`, with `Error::BadPointerField` naming the type and the field.
//! What slips through (planted here with checked mode off) is reported by
//! recovery, `collect`, `check` and `check_report` (object, type, field),
//! treated as null for marking, and the pool opens; `Pool::repair` clears
//! the fields in one undo-logged region. Data reachable through good
//! pointers stays intact throughout.

mod common;
use common::TempPool;
use engram::{CreateOptions, Durability, Error, OpenOptions, PArray, PPtr, Persistent, Pool};

const LAYOUT: &str = "bad-pointers";

#[derive(Clone, Copy, Debug, PartialEq, Persistent)]
struct Node {
    value: u64,
    next: PPtr<Node>,
    other: PPtr<Node>,
}

fn node(value: u64, next: PPtr<Node>) -> Node {
    Node { value, next, other: PPtr::null() }
}

fn create(t: &TempPool, checked: bool) -> Pool {
    Pool::create(&t.0, CreateOptions::new(LAYOUT).durability(Durability::Process).check_pointers(checked)).unwrap()
}

fn open(t: &TempPool, checked: bool) -> Pool {
    Pool::open(&t.0, OpenOptions::new(LAYOUT).durability(Durability::Process).check_pointers(checked)).unwrap()
}

/// A list of `n` nodes (values 0..n) under root "list"; returns the node addresses, head first.
fn build_list(pool: &Pool, n: u64) -> Vec<u64> {
    pool.txn(|tx| {
        let mut head = PPtr::null();
        let mut out = Vec::new();
        for v in 0..n {
            head = tx.alloc(node(v, head))?;
            out.push(head.addr());
        }
        tx.set_root("list", head)?;
        out.reverse();
        Ok::<_, Error>(out)
    })
    .unwrap()
}

/// (length, sum of values) of the list, following `next` only.
fn walk(pool: &Pool) -> (u64, u64) {
    pool.txn(|tx| {
        let mut p = tx.root::<Node>("list")?.unwrap_or_default();
        let (mut len, mut sum) = (0, 0);
        while !p.is_null() {
            let n = tx.read(p)?;
            len += 1;
            sum += n.value;
            p = n.next;
        }
        Ok::<_, Error>((len, sum))
    })
    .unwrap()
}

/// The three kinds of bad value, for a pool holding `nodes`: a pointer into
/// another pool, a stray value (into the middle of a node), and a node freed
/// by `free_node` (which the caller frees).
fn other_pool_pointer() -> (TempPool, u64) {
    let t = TempPool::new("bad-pointers-other");
    let other = create(&t, true);
    let p = other.txn(|tx| tx.alloc(node(99, PPtr::null()))).unwrap().addr();
    other.close().unwrap();
    (t, p)
}

fn assert_bad_field(r: Result<(), Error>, what: &str) {
    match r {
        Err(Error::BadPointerField { type_name, field, .. }) => {
            assert!(type_name.contains("Node") || type_name.starts_with("root"), "{what}: type {type_name}");
            assert!(
                field == 8 || field == 16 || field % 24 == 8 || field % 24 == 16 || type_name.starts_with("root"),
                "{what}: field {field}"
            );
        }
        other => panic!("{what}: expected BadPointerField, got {other:?}"),
    }
}

#[test]
fn checked_mode_refuses_each_kind_at_alloc_write_set_commit_and_root() {
    let t = TempPool::new("bad-pointers-checked");
    let pool = create(&t, true);
    let nodes = build_list(&pool, 4);
    let (_other_t, foreign) = other_pool_pointer();
    let stray = nodes[1] + 8;
    let bads = [("foreign", foreign), ("stray", stray)];
    for (what, v) in bads {
        let bad = PPtr::<Node>::from_addr(v);
        assert_bad_field(pool.txn(|tx| tx.alloc(node(1, bad)).map(|_| ())), &format!("{what} alloc"));
        assert_bad_field(pool.txn(|tx| tx.write(PPtr::from_addr(nodes[2]), node(2, bad))), &format!("{what} write"));
        assert_bad_field(
            pool.txn(|tx| {
                let a = tx.alloc_array::<Node>(3)?;
                tx.set(a, 1, Node { value: 0, next: PPtr::null(), other: bad })
            }),
            &format!("{what} set"),
        );
        assert_bad_field(
            pool.txn(|tx| {
                let a: PArray<Node> = tx.alloc_array(2)?;
                tx.write_slice(a, 0, &[node(0, PPtr::null()), node(1, bad)])
            }),
            &format!("{what} write_slice"),
        );
        // A raw-pointer store (as the front ends make): caught at commit.
        assert_bad_field(
            pool.txn(|tx| {
                let field = nodes[3] + 16;
                tx.log_range(field, 8)?;
                // SAFETY: `field` is the `other` field of a live node, just logged.
                unsafe { (field as *mut u64).write(v) };
                Ok(())
            }),
            &format!("{what} raw store"),
        );
        // (A root naming no object at all was refused before checked mode.)
        assert!(matches!(pool.txn(|tx| tx.set_root("x", bad)), Err(Error::BadPointer { .. })), "{what} root");
    }
    // Dangling root: freed in this region, then named by a root.
    assert_bad_field(
        pool.txn(|tx| {
            let victim = PPtr::<Node>::from_addr(nodes[3]);
            tx.write(PPtr::from_addr(nodes[2]), node(2, PPtr::null()))?;
            tx.free(victim)?;
            tx.set_root("x", victim)
        }),
        "dangling root",
    );
    // Dangling: freed in this region, then stored.
    assert_bad_field(
        pool.txn(|tx| {
            let victim = PPtr::<Node>::from_addr(nodes[3]);
            tx.write(PPtr::from_addr(nodes[2]), node(2, PPtr::null()))?;
            tx.free(victim)?;
            tx.write(PPtr::from_addr(nodes[0]), Node { value: 0, next: PPtr::from_addr(nodes[1]), other: victim })
        }),
        "dangling write",
    );
    // Dangling, stored before the free: caught at commit.
    assert_bad_field(
        pool.txn(|tx| {
            let victim = PPtr::<Node>::from_addr(nodes[3]);
            tx.write(PPtr::from_addr(nodes[0]), Node { value: 0, next: PPtr::from_addr(nodes[1]), other: victim })?;
            tx.write(PPtr::from_addr(nodes[2]), node(2, PPtr::null()))?;
            tx.free(victim)
        }),
        "dangling at commit",
    );
    // Every refused region rolled back.
    assert_eq!(walk(&pool), (4, 6));
    assert_eq!(pool.check().unwrap().objects, 4);
    pool.close().unwrap();
}

/// Plants one of each kind with checked mode off, then crashes; returns the
/// addresses of the three nodes holding them and the dangling target.
fn plant(pool: &Pool, nodes: &[u64], foreign: u64) -> [u64; 3] {
    let holders = [nodes[10], nodes[20], nodes[30]];
    let set_other = |tx: &engram::Tx<'_>, h: u64, v: u64| tx.update(PPtr::<Node>::from_addr(h), |n| n.other = PPtr::from_addr(v));
    pool.txn(|tx| {
        // 1. a pointer into another pool, in `other` of node 10;
        set_other(tx, holders[0], foreign)?;
        // 2. a stray value (the middle of node 5), in `other` of node 20;
        set_other(tx, holders[1], nodes[5] + 8)
    })
    .unwrap();
    // 3. a spare node linked from node 30, freed while still linked.
    let spare = pool
        .txn(|tx| {
            let spare = tx.alloc(node(1000, PPtr::null()))?;
            set_other(tx, holders[2], spare.addr())?;
            Ok::<_, Error>(spare)
        })
        .unwrap();
    pool.txn(|tx| tx.free(spare)).unwrap();
    holders
}

fn assert_reported(bad: &[engram::BadField], holders: &[u64; 3]) {
    assert_eq!(bad.len(), 3, "{bad:#?}");
    for &h in holders {
        assert!(bad.iter().any(|b| b.object == h && b.field == 16 && b.holder.contains("Node")), "{h:#x} not reported in {bad:#?}");
    }
    let text: Vec<String> = bad.iter().map(|b| b.to_string()).collect();
    assert!(text.iter().any(|t| t.contains("another pool")), "{text:?}");
    assert!(text.iter().any(|t| t.contains("stray")), "{text:?}");
    assert!(text.iter().any(|t| t.contains("dangling")), "{text:?}");
}

#[test]
fn planted_bad_pointers_survive_crash_collect_check_and_repair() {
    let t = TempPool::new("bad-pointers-plant");
    let pool = create(&t, false);
    let nodes = build_list(&pool, 40);
    let (_other_t, foreign) = other_pool_pointer();
    let holders = plant(&pool, &nodes, foreign);
    // A crash: the next open runs the recovery GC over the bad fields.
    pool.simulate_crash();
    let pool = open(&t, false);
    let report = pool.open_report().clone();
    assert!(!report.was_clean);
    assert_reported(&report.bad_fields, &holders);
    assert_eq!(report.recovered.unwrap().bad_fields, 3);
    assert_eq!(walk(&pool), (40, 39 * 40 / 2));
    // Online collection works and frees nothing reachable.
    let st = pool.collect().unwrap();
    assert_eq!((st.objects, st.bad_fields), (40, 3));
    assert_eq!(walk(&pool), (40, 39 * 40 / 2));
    // check: a typed error; check_report: the list.
    match pool.check() {
        Err(Error::BadFields { count: 3, first }) => assert!(first.contains("Node"), "{first}"),
        other => panic!("check: {other:?}"),
    }
    assert_reported(&pool.check_report(&|_| {}).unwrap().bad_fields, &holders);
    // Heavy allocation leaves the good data intact, and never hands out the
    // slot the dangling field names (it would then alias a new object).
    pool.txn(|tx| (0..200u64).try_for_each(|v| tx.alloc(node(v, PPtr::null())).map(|_| ()))).unwrap();
    assert_eq!(walk(&pool), (40, 39 * 40 / 2));
    assert_reported(&pool.check_report(&|_| {}).unwrap().bad_fields, &holders);
    // Repair clears the three fields; everything else is untouched.
    let cleared = pool.repair(&|_| {}).unwrap();
    assert_reported(&cleared, &holders);
    assert_eq!(pool.check().unwrap().objects, 40);
    pool.txn(|tx| {
        for &h in &holders {
            assert!(tx.read(PPtr::<Node>::from_addr(h))?.other.is_null());
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(walk(&pool), (40, 39 * 40 / 2));
    pool.close().unwrap();
    // And it stays repaired.
    let pool = open(&t, true);
    assert_eq!(pool.check().unwrap().objects, 40);
    pool.close().unwrap();
}

/// A crash in the middle of a repair undoes it: the fields are reported
/// again on the next open (and still treated as null), never half-cleared
/// into something worse.
#[test]
fn a_crash_during_repair_leaves_the_fields_reported() {
    let t = TempPool::new("bad-pointers-repair-crash");
    let pool = create(&t, false);
    let nodes = build_list(&pool, 40);
    let (_other_t, foreign) = other_pool_pointer();
    let holders = plant(&pool, &nodes, foreign);
    pool.close().unwrap();
    let pool = open(&t, false);
    // Crash after the second field's undo entry: the first field is cleared
    // in place, the region is not committed.
    engram::failpoint::arm(engram::failpoint::Failpoint::LogAfterAppend, 1);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.repair(&|_| {})));
    engram::failpoint::disarm_all();
    assert!(r.as_ref().is_err_and(|p| engram::failpoint::is_crash(&**p)), "the failpoint fired");
    drop(pool);
    let pool = open(&t, false);
    assert_reported(&pool.open_report().bad_fields, &holders);
    assert_eq!(walk(&pool), (40, 39 * 40 / 2));
    assert_eq!(pool.repair(&|_| {}).unwrap().len(), 3);
    assert_eq!(pool.check().unwrap().objects, 40);
    pool.close().unwrap();
}

/// Heap objects carry no checksum, but `check` doubts a live object's
/// header that disagrees with how the engine writes headers: an array count
/// that no longer matches its slot's size class, a plain object's count
/// other than 1, flag bits the engine never sets. Each is reported (not
/// repaired), marking still trusts the object, and the data stays intact;
/// a count changed within its size class is not detectable without a
/// header checksum.
#[test]
fn check_doubts_damaged_object_headers() {
    // (what to change, offset into the 16-byte header, xor mask, on the array)
    let cases: [(&str, u64, u64, bool); 4] = [
        ("array count to another size class", 8, 0x40, true),
        ("plain object count", 8, 0x2, false),
        ("unknown flag bit", 4, 0x100, true),
        ("array count within its size class", 8, 0x1, true),
    ];
    for (what, off, mask, array) in cases {
        let t = TempPool::new("doubt");
        let pool = create(&t, true);
        build_list(&pool, 3);
        let (arr, head) = pool
            .txn(|tx| {
                let a = tx.alloc_array::<u64>(100)?;
                tx.set_root_array("arr", a)?;
                Ok::<_, Error>((a.addr(), tx.root::<Node>("list")?.unwrap().addr()))
            })
            .unwrap();
        pool.close().unwrap();
        let target = if array { arr } else { head } - 16 + off;
        let base = Pool::open(&t.0, OpenOptions::new(LAYOUT).durability(Durability::Process)).unwrap().info().base;
        let mut bytes = std::fs::read(&t.0).unwrap();
        let at = (target - base) as usize;
        let w = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) ^ mask;
        bytes[at..at + 8].copy_from_slice(&w.to_le_bytes());
        std::fs::write(&t.0, &bytes).unwrap();
        let pool = open(&t, false);
        let r = pool.check_report(&|_| {}).unwrap();
        assert!(r.bad_fields.is_empty(), "{what}: {:?}", r.bad_fields);
        if what.contains("within") {
            assert!(r.header_doubts.is_empty(), "{what}: {:?}", r.header_doubts);
        } else {
            assert_eq!(r.header_doubts.len(), 1, "{what}: {:?}", r.header_doubts);
            assert!(matches!(pool.check(), Err(Error::Corrupt { .. })), "{what}");
        }
        assert_eq!(walk(&pool), (3, 3), "{what}: marking still trusts the object");
        pool.close().unwrap();
    }
}

/// Without a crash in between (the freed slot is free in the allocator, not
/// rebuilt from a mark), the dangling pointer is one bad field and nothing
/// more: `check`'s comparison with the allocator skips targets it already
/// reported.
#[test]
fn a_dangling_pointer_in_a_live_pool_is_reported_once() {
    let t = TempPool::new("bad-pointers-live");
    let pool = create(&t, false);
    let nodes = build_list(&pool, 40);
    let (_other_t, foreign) = other_pool_pointer();
    let holders = plant(&pool, &nodes, foreign);
    let r = pool.check_report(&|_| {}).unwrap();
    assert_reported(&r.bad_fields, &holders);
    assert_eq!((r.free_count, r.free_reachable.len()), (0, 0), "{:?}", r.free_reachable);
    assert!(matches!(pool.check(), Err(Error::BadFields { count: 3, .. })));
    assert_eq!(walk(&pool), (40, 39 * 40 / 2));
    pool.close().unwrap();
}

/// Plain data: no pointer field, so checked writes skip validation by
/// `HAS_POINTERS` alone.
#[derive(Clone, Copy, Debug, PartialEq, Persistent)]
struct Plain {
    a: u64,
    b: [u32; 2],
}

/// Lies: lists a pointer offset but says it has none.
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)] // only stored, never read back
struct Liar {
    next: PPtr<Liar>,
}

// SAFETY: a single PPtr field (every bit pattern valid); `HAS_POINTERS`
// deliberately contradicts `pointer_offsets` (the registration must refuse it).
unsafe impl Persistent for Liar {
    const HAS_POINTERS: bool = false;
    fn type_name() -> String {
        "bad_pointers::Liar".into()
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        out.push(at);
    }
}

#[test]
fn has_pointers_is_derived_from_the_fields_and_a_liar_is_refused() {
    use engram::has_pointers;
    assert!(has_pointers::<Node>() && has_pointers::<PPtr<u64>>() && has_pointers::<[Node; 2]>());
    assert!(!has_pointers::<Plain>() && !has_pointers::<u64>() && !has_pointers::<[Node; 0]>());
    let t = TempPool::new("bad-pointers-has-pointers");
    let pool = create(&t, true);
    let p = pool.txn(|tx| tx.alloc(Plain { a: 1, b: [2, 3] })).unwrap();
    pool.txn(|tx| tx.write(p, Plain { a: 4, b: [5, 6] })).unwrap();
    assert_eq!(pool.txn(|tx| tx.read(p)).unwrap(), Plain { a: 4, b: [5, 6] });
    let err = pool.txn(|tx| tx.alloc(Liar { next: PPtr::null() }).map(|_| ())).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    // A stray pointer in a type with pointers is still refused.
    let err = pool.txn(|tx| tx.alloc(node(0, PPtr::from_addr(0x10))).map(|_| ())).unwrap_err();
    assert!(matches!(err, Error::BadPointerField { .. }), "{err:?}");
}

/// `Tx::log_ranges` (several undo entries, one fence: the C ABI's
/// `engram_region_log_many`) logs whole nodes so plain writes need no
/// further log, a rollback restores every one, a commit keeps them, and a
/// range outside any object is refused with `BadPointer`.
#[test]
fn log_ranges_logs_several_and_refuses_a_bad_one() {
    let t = TempPool::new("log-ranges");
    let pool = create(&t, true);
    let addrs = build_list(&pool, 4);
    let size = std::mem::size_of::<Node>() as u64;
    let bump = |by: u64, commit: bool| {
        pool.txn(|tx| {
            tx.log_ranges([(addrs[0], size), (addrs[2], size), (addrs[0], 8)])?;
            for &a in [addrs[0], addrs[2]].iter() {
                let p = PPtr::<Node>::from_addr(a);
                let mut n = tx.read(p)?;
                n.value += by;
                tx.write(p, n)?;
            }
            if !commit {
                return Err(Error::Aborted);
            }
            Ok(())
        })
    };
    let before = walk(&pool);
    assert!(bump(5, false).is_err());
    assert_eq!(walk(&pool), before);
    bump(10, true).unwrap();
    assert_eq!(walk(&pool), (before.0, before.1 + 20));
    let r = pool.txn(|tx| tx.log_ranges([(addrs[1], 8), (8, 8)]));
    assert!(matches!(r, Err(Error::BadPointer { .. })), "{r:?}");
    assert_eq!(walk(&pool), (before.0, before.1 + 20));
}

// ----- the write bounds check (issue 13: `Tx::in_object`) --------------------

/// u64s filling three spans exactly: a large object whose payload ends
/// where its slot does.
const BIG: u64 = (3 * engram::format::SPAN_SIZE - engram::format::OBJ_HEADER) / 8;

/// A small array (4 u64s: a 48-byte slot, payload 32 bytes exactly) and a
/// large one (`BIG` u64s, three spans), under roots.
fn two_arrays(pool: &Pool) -> (u64, u64) {
    pool.txn(|tx| {
        let (s, b) = (tx.alloc_array::<u64>(4)?, tx.alloc_array::<u64>(BIG)?);
        tx.set_root_array("small", s)?;
        tx.set_root_array("big", b)?;
        Ok::<_, Error>((s.addr(), b.addr()))
    })
    .unwrap()
}

fn assert_refused(r: Result<(), Error>, what: &str) {
    assert!(matches!(r, Err(Error::BadPointer { .. })), "{what}: {r:?}");
}

/// A range that starts inside the large object (found by the tables, so
/// remembered as the region's last object) and runs 8 bytes past its end.
fn log_past_the_large_end(pool: &Pool, big: u64) -> Result<(), Error> {
    pool.txn(|tx| {
        tx.log_range(big, 8)?;
        tx.log_range(big + BIG * 8 - 8, 16)
    })
}

/// Every first log of a range (what `write`, `set`, the front ends' log
/// calls and sps pay) is checked to lie inside one allocated object's
/// payload, whichever answer is at hand: the tables (first in a region),
/// the region's span cache (a small object's span seen before), or the
/// object the tables found last (a large one). Ranges that cross a small
/// object's end, a large object's end, or touch a header are refused;
/// ranges in a large object's tail spans are logged and roll back.
#[test]
fn a_first_log_must_lie_inside_one_object() {
    let t = TempPool::new("write-bounds");
    let pool = create(&t, true);
    let (s, b) = two_arrays(&pool);
    // Small object: by the tables, by the span cache, and several at once.
    assert_refused(pool.txn(|tx| tx.log_range(s + 24, 16)), "small, past its end (tables)");
    assert_refused(
        pool.txn(|tx| {
            tx.log_range(s, 8)?;
            tx.log_range(s + 24, 16)
        }),
        "small, past its end (span cache)",
    );
    assert_refused(pool.txn(|tx| tx.log_range(s - 8, 8)), "small, its header");
    assert_refused(pool.txn(|tx| tx.log_ranges([(s, 8), (s + 24, 16)])), "small, several at once");
    // Large object: by the tables, then by the last object.
    assert_refused(pool.txn(|tx| tx.log_range(b + BIG * 8 - 8, 16)), "large, past its end (tables)");
    assert_refused(log_past_the_large_end(&pool, b), "large, past its end (last object)");
    assert_refused(pool.txn(|tx| tx.log_range(b - 8, 8)), "large, its header");
    // Inside: the last word of each, and an element in the large object's
    // third span (its tail entry names the head), logged and rolled back.
    pool.txn(|tx| {
        tx.log_range(s + 24, 8)?;
        tx.log_range(b + BIG * 8 - 8, 8)
    })
    .unwrap();
    let tail = 2 * engram::format::SPAN_SIZE / 8 + 5;
    let big = PArray::<u64>::from_addr(b);
    let r = pool.txn(|tx| {
        tx.set(big, tail, 77)?;
        assert_eq!(tx.get(big, tail)?, 77);
        Err::<(), _>(Error::Aborted)
    });
    assert!(matches!(r, Err(Error::Aborted)), "{r:?}");
    assert_eq!(pool.txn(|tx| tx.get(big, tail)).unwrap(), 0, "the tail element rolled back");
}

/// The bytes at a small span's end that hold no whole slot are no object:
/// 96-byte slots leave 64 bytes (65,536 = 682 x 96 + 64), where a slot 682
/// would put its payload. Found from a run of 682 slots 96 bytes apart.
fn past_the_last_slot(pool: &Pool) -> u64 {
    let mut addrs: Vec<u64> = pool
        .txn(|tx| {
            let mut v = Vec::new();
            for _ in 0..1400 {
                let a = tx.alloc_array::<u64>(10)?;
                v.push(a.addr());
            }
            tx.set_root_array("first96", PArray::<u64>::from_addr(v[0]))?;
            Ok::<_, Error>(v)
        })
        .unwrap();
    addrs.sort_unstable();
    let mut run = 1;
    for w in addrs.windows(2) {
        run = if w[1] - w[0] == 96 { run + 1 } else { 1 };
        if run == 682 {
            return w[1] + 96;
        }
    }
    panic!("no full span of 96-byte slots among {} objects", addrs.len());
}

#[test]
fn a_log_past_a_spans_last_slot_is_refused() {
    let t = TempPool::new("write-bounds-span-end");
    let pool = create(&t, false);
    let p = past_the_last_slot(&pool);
    assert_refused(pool.txn(|tx| tx.log_range(p, 8)), "past the span's last slot");
}

/// Each planted bug in the bounds check makes the scenario above that
/// covers it pass a range it must refuse (so those tests catch it).
#[test]
fn the_bounds_tests_catch_their_planted_bugs() {
    let t = TempPool::new("write-bounds-planted");
    let pool = create(&t, false);
    let (_, b) = two_arrays(&pool);
    let p = past_the_last_slot(&pool);
    engram::failpoint::plant("tx.last_object_ignores_len");
    let r = log_past_the_large_end(&pool, b);
    engram::failpoint::disarm_all();
    assert!(r.is_ok(), "tx.last_object_ignores_len: the range past the large end was refused anyway: {r:?}");
    // (The bytes past the last slot carry no tag: the tag check refuses
    // them too, so the bounds bug shows with that check planted away.)
    engram::failpoint::plant("alloc.slot_past_span_end");
    engram::failpoint::plant("tx.log_skips_tag");
    let r = pool.txn(|tx| tx.log_range(p, 8));
    engram::failpoint::disarm_all();
    assert!(r.is_ok(), "alloc.slot_past_span_end: the range past the last slot was refused anyway: {r:?}");
}

// ----- writes into freed slots (issue 13: `Tx::in_live_object`) --------------

/// Two small objects `x` and `y` (one span, `y` under a root) and a large
/// array `big`, committed; then `x` and `big` freed by a committed region.
/// Returns their addresses; `x` held 7 when freed.
fn freed_objects(pool: &Pool) -> (PPtr<u64>, PPtr<u64>, PArray<u64>) {
    let (x, y, big) = pool
        .txn(|tx| {
            let (x, y) = (tx.alloc(7u64)?, tx.alloc(8u64)?);
            let big = tx.alloc_array::<u64>(BIG)?;
            tx.set_root("y", y)?;
            Ok::<_, Error>((x, y, big))
        })
        .unwrap();
    pool.txn(|tx| {
        tx.free(x)?;
        tx.free_array(big)
    })
    .unwrap();
    (x, y, big)
}

/// Empties the span caches of this thread's next regions: a committed
/// free moves the heap's free count (the object is of another class than
/// `freed_objects`' small ones, so their freed slot is not handed out).
fn forget_spans(pool: &Pool) {
    pool.txn(|tx| {
        let d = tx.alloc_array::<u64>(40)?;
        tx.free_array(d)
    })
    .unwrap();
}

/// A write through a dangling pointer into a slot an earlier region freed
/// is refused at its first log, whichever answer the bounds check has at
/// hand: the tables (first in a region), the span cache (a live object of
/// the same span logged first; it then is the region's last object too),
/// a read of the freed slot by the tables first (answered, but not
/// remembered as a live object), `log_ranges`, and a freed large object.
/// Nothing is stored and the live neighbour's write is undone with its
/// region.
#[test]
fn a_write_into_a_freed_slot_is_refused() {
    let t = TempPool::new("freed-slot");
    let pool = create(&t, false);
    let (x, y, big) = freed_objects(&pool);
    let refused = |r: Result<(), Error>, what: &str| {
        assert!(matches!(r, Err(Error::BadPointer { addr }) if addr == x.addr() || addr == big.addr() + 8000), "{what}: {r:?}");
    };
    refused(
        pool.txn(|tx| {
            assert_eq!(tx.read(x)?, 7, "reads are not checked for the tag");
            tx.write(x, 5)
        }),
        "write after a read of the freed slot (tables)",
    );
    forget_spans(&pool);
    refused(pool.txn(|tx| tx.write(x, 5)), "write (tables)");
    forget_spans(&pool);
    refused(pool.txn(|tx| tx.log_range(x.addr(), 8)), "log_range (tables)");
    refused(
        pool.txn(|tx| {
            tx.write(y, 9)?;
            tx.write(x, 5)
        }),
        "write (span cache, after a live object of the span)",
    );
    refused(pool.txn(|tx| tx.log_ranges([(y.addr(), 8), (x.addr(), 8)])), "log_ranges");
    refused(pool.txn(|tx| tx.log_range(big.addr() + 8000, 8)), "a freed large object");
    pool.txn(|tx| {
        assert_eq!((tx.read(x)?, tx.read(y)?), (7, 8), "nothing stored, y's write undone");
        Ok::<_, Error>(())
    })
    .unwrap();
    // The live neighbour is still writable, and the pool checks.
    pool.txn(|tx| tx.write(y, 10)).unwrap();
    pool.check().unwrap();
}

/// With `tx.log_skips_tag` planted (the first log checks the slot's bounds,
/// not its tag) the write into the freed slot is accepted: the test above
/// catches it. The tag check also refuses the bytes past a span's last
/// slot (no tag there) when the bounds check is planted away alone.
#[test]
fn the_freed_slot_test_catches_its_planted_bug() {
    let t = TempPool::new("freed-slot-planted");
    let pool = create(&t, false);
    let (x, _, _) = freed_objects(&pool);
    engram::failpoint::plant("tx.log_skips_tag");
    let r = pool.txn(|tx| tx.write(x, 5));
    engram::failpoint::disarm_all();
    assert!(r.is_ok(), "tx.log_skips_tag: the write into the freed slot was refused anyway: {r:?}");
    let p = past_the_last_slot(&pool);
    engram::failpoint::plant("alloc.slot_past_span_end");
    let r = pool.txn(|tx| tx.log_range(p, 8));
    engram::failpoint::disarm_all();
    assert_refused(r, "past the last slot, no tag there");
}
