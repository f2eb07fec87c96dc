//! Litmus tests for the Px86 model (small traces with known reachable
//! states) and a cross-check of the model against the brute-force
//! operational semantics on random tiny traces.

use engram_model::brute;
use engram_model::px86::Px86;
use engram_model::{explore, Config, Event, FlushKind, Trace};
use std::collections::BTreeSet;

fn st(addr: u64, v: u8) -> Event {
    Event::Store { addr, data: vec![v] }
}
fn fl(addr: u64) -> Event {
    Event::Flush { addr, kind: FlushKind::Clwb }
}
fn fence() -> Event {
    Event::Fence { what: "test" }
}

/// Images at the end of `events` (on 128 zero bytes), as (byte at a, byte at b).
fn finals(events: Vec<Event>, a: usize, b: usize) -> BTreeSet<(u8, u8)> {
    let mut m = Px86::new(vec![0; 128]);
    for e in &events {
        m.apply(e);
    }
    m.crash_state().all_images().into_iter().map(|i| (i[a], i[b])).collect()
}

fn set(v: &[(u8, u8)]) -> BTreeSet<(u8, u8)> {
    v.iter().copied().collect()
}

#[test]
fn unflushed_store_may_or_may_not_persist() {
    assert_eq!(finals(vec![st(0, 1)], 0, 1), set(&[(0, 0), (1, 0)]));
}

#[test]
fn flush_then_fence_persists() {
    assert_eq!(finals(vec![st(0, 1), fl(0), fence()], 0, 1), set(&[(1, 0)]));
}

#[test]
fn flush_without_fence_does_not() {
    assert_eq!(finals(vec![st(0, 1), fl(0)], 0, 1), set(&[(0, 0), (1, 0)]));
}

#[test]
fn different_lines_are_unordered() {
    assert_eq!(finals(vec![st(0, 1), st(64, 1)], 0, 64), set(&[(0, 0), (1, 0), (0, 1), (1, 1)]));
}

#[test]
fn same_line_persists_in_order() {
    // x then y in one line: never y without x
    assert_eq!(finals(vec![st(0, 1), st(8, 1)], 0, 8), set(&[(0, 0), (1, 0), (1, 1)]));
}

#[test]
fn store_after_flush_is_not_covered() {
    // flush covers only earlier stores: x persisted, y free
    assert_eq!(finals(vec![st(0, 1), fl(0), st(64, 1), fence()], 0, 64), set(&[(1, 0), (1, 1)]));
    // and a store to the same line after the flush may be lost
    assert_eq!(finals(vec![st(0, 1), fl(0), st(8, 1), fence()], 0, 8), set(&[(1, 0), (1, 1)]));
}

#[test]
fn fence_orders_flushed_line_before_later_stores() {
    // the undo-log pattern: log, flush, fence, then data: never data without log
    assert_eq!(finals(vec![st(0, 1), fl(0), fence(), st(64, 1)], 0, 64), set(&[(1, 0), (1, 1)]));
    // without the fence, data can persist without the log
    assert!(finals(vec![st(0, 1), fl(0), st(64, 1)], 0, 64).contains(&(0, 1)));
}

#[test]
fn clflush_persists_before_the_next_event() {
    let cl = Event::Flush { addr: 0, kind: FlushKind::Clflush };
    // in flight right after it
    assert_eq!(finals(vec![st(0, 1), cl.clone()], 0, 64), set(&[(0, 0), (1, 0)]));
    // done once anything later executed, without a fence
    assert_eq!(finals(vec![st(0, 1), cl, st(64, 1)], 0, 64), set(&[(1, 0), (1, 1)]));
}

#[test]
fn eight_byte_atomicity() {
    // an aligned 8-byte store is all or nothing
    let mut m = Px86::new(vec![0; 64]);
    m.apply(&Event::Store { addr: 0, data: vec![1; 8] });
    let imgs: BTreeSet<Vec<u8>> = m.crash_state().all_images().into_iter().map(|i| i[..8].to_vec()).collect();
    assert_eq!(imgs.len(), 2);
    // an unaligned one splits at the word boundary: prefix order within the line
    let mut m = Px86::new(vec![0; 64]);
    m.apply(&Event::Store { addr: 4, data: vec![1; 8] });
    let imgs: BTreeSet<Vec<u8>> = m.crash_state().all_images().into_iter().map(|i| i[..16].to_vec()).collect();
    assert_eq!(imgs.len(), 3);
}

/// A tiny random trace over two lines.
fn random_trace(seed: u64) -> Trace {
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = Trace::new(vec![0; 128]);
    let n = 3 + next() % 5;
    for i in 0..n {
        let r = next() % 10;
        let addr = [0u64, 8, 64, 72][(next() % 4) as usize];
        let e = match r {
            0..=4 => Event::Store { addr, data: vec![(i + 1) as u8] },
            5..=6 => Event::Flush { addr, kind: [FlushKind::Clflush, FlushKind::Clwb, FlushKind::Clflushopt][(next() % 3) as usize] },
            7..=8 => Event::Fence { what: "t" },
            _ => Event::Rmw { addr, data: vec![(i + 100) as u8] },
        };
        t.push(e);
    }
    t
}

#[test]
fn model_matches_brute_force_on_tiny_traces() {
    let mut checked = 0;
    for seed in 1..400u64 {
        let t = random_trace(seed);
        let points: Vec<usize> = (0..=t.events.len()).collect();
        let reference = brute::reachable(&t, &points);
        let mut m = Px86::new(t.base.clone());
        for k in 0..=t.events.len() {
            let got: BTreeSet<Vec<u8>> = m.crash_state().all_images().into_iter().collect();
            assert_eq!(got, reference[&k], "seed {seed}, point {k}, trace {:?}", t.events);
            checked += 1;
            if let Some(e) = t.events.get(k) {
                m.apply(e);
            }
        }
    }
    assert!(checked > 1000);
}

/// Every image the explorer checks (unbounded budget).
fn explored(t: &Trace) -> BTreeSet<Vec<u8>> {
    let mut seen = BTreeSet::new();
    let cfg = Config { max_images_per_point: 1 << 20, ..Default::default() };
    explore(
        t,
        &cfg,
        &mut |img| {
            seen.insert(img.to_vec());
            Ok(())
        },
        &mut |_, _| {},
    );
    seen
}

/// A CLFLUSH persists its line without a fence: the durable state grows
/// between fences, and the images from before that growth must be checked.
#[test]
fn explorer_offers_images_from_before_a_clflush_completes() {
    let cl = |addr| Event::Flush { addr, kind: FlushKind::Clflush };
    let mut t = Trace::new(vec![0; 192]);
    for e in [st(0, 1), cl(0), st(64, 1), cl(64), st(128, 1), fence()] {
        t.push(e);
    }
    let seen: BTreeSet<(u8, u8, u8)> = explored(&t).iter().map(|i| (i[0], i[64], i[128])).collect();
    assert!(seen.contains(&(1, 0, 0)), "x=1,y=0,z=0 never offered: {seen:?}");
    assert!(seen.contains(&(1, 1, 0)), "x=1,y=1,z=0 never offered: {seen:?}");
    // and never y without x
    assert!(!seen.iter().any(|&(x, y, _)| y == 1 && x == 0), "{seen:?}");
}

/// With an unbounded budget, the explorer checks exactly the images a crash
/// *anywhere* in the trace may leave (the union over every point of the
/// brute-force semantics): no missing crash point, no impossible image.
#[test]
fn explorer_checks_every_reachable_image_of_tiny_traces() {
    for seed in 1..400u64 {
        let t = random_trace(seed);
        let points: Vec<usize> = (0..=t.events.len()).collect();
        let reference: BTreeSet<Vec<u8>> = brute::reachable(&t, &points).into_values().flatten().collect();
        assert_eq!(explored(&t), reference, "seed {seed}, trace {:?}", t.events);
    }
}

#[test]
fn explorer_sees_every_image_when_small_and_reports_pruning_when_large() {
    // 10 independent unflushed lines: 1024 images at the end
    let mut t = Trace::new(vec![0; 64 * 10]);
    for l in 0..10 {
        t.push(st(l * 64, 1));
    }
    let mut seen = BTreeSet::new();
    let r = explore(
        &t,
        &Config { max_images_per_point: 2000, ..Default::default() },
        &mut |img| {
            seen.insert(img.to_vec());
            Ok(())
        },
        &mut |_, _| {},
    );
    assert_eq!(r.images_checked, 1024);
    assert_eq!(seen.len(), 1024);
    assert_eq!(r.images_skipped, 0);
    let r = explore(&t, &Config { max_images_per_point: 50, ..Default::default() }, &mut |_| Ok(()), &mut |_, _| {});
    assert_eq!(r.images_checked, 50);
    assert_eq!(r.images_skipped, 1024 - 50);
}

#[test]
fn explorer_finds_a_missing_fence() {
    // "commit flag" protocol: data, flush, [fence], flag. Invariant: flag => data.
    let build = |with_fence: bool| {
        let mut t = Trace::new(vec![0; 128]);
        t.push(st(0, 7));
        t.push(fl(0));
        if with_fence {
            t.push(fence());
        }
        t.push(st(64, 1));
        t.push(fl(64));
        t.push(fence());
        t
    };
    let mut check = |img: &[u8]| if img[64] == 1 && img[0] != 7 { Err("flag without data".to_string()) } else { Ok(()) };
    let good = explore(&build(true), &Config::default(), &mut check, &mut |_, _| {});
    assert!(good.violations.is_empty(), "{good}");
    let bad = explore(&build(false), &Config::default(), &mut check, &mut |_, _| {});
    assert_eq!(bad.violations.len(), 1, "{bad}");
    let v = &bad.violations[0];
    assert!(v.image.contains("line 0x0"), "{}", v.image);
    assert_eq!(v.message, "flag without data");
}

/// A missing fence between two steps that each wrote several lines: the
/// witness (every line of the later step persisted, every line of the
/// earlier ones lost) is one image among 2^8, and the moderate budget (12)
/// must still offer it (the clean close's bitmaps and its multi-line header
/// copy are this shape).
#[test]
fn explorer_offers_the_newer_step_alone_when_a_fence_is_missing() {
    let mut t = Trace::new(vec![0; 64 * 8]);
    for l in 0..5 {
        t.push(st(l * 64, 1)); // "bitmaps": five lines, each its own flush
        t.push(fl(l * 64));
    }
    for l in 5..8 {
        t.push(st(l * 64, 1)); // "header copy": three lines, valid only whole
    }
    for l in 5..8 {
        t.push(fl(l * 64));
    }
    t.push(fence());
    // As with checksummed bitmaps: a partly written set of bitmaps fails
    // its checksum and is rebuilt; only all of them lost (the old, stale
    // ones still consistent) under a whole new header is harmful.
    let mut check = |img: &[u8]| {
        let header = (5..8).all(|l| img[l * 64] == 1);
        if header && (0..5).all(|l| img[l * 64] == 0) {
            Err("header over stale bitmaps".to_string())
        } else {
            Ok(())
        }
    };
    let cfg = Config { max_images_per_point: 12, max_violations: 1, ..Default::default() };
    let r = explore(&t, &cfg, &mut check, &mut |_, _| {});
    assert_eq!(r.violations.len(), 1, "{r}");
    assert!(r.images_skipped > 0, "the point must be pruned for this test to mean anything: {r}");
}

/// Two threads in one merged trace: a fence completes only the flushes of
/// the thread that issued it.
#[test]
fn a_fence_completes_only_its_own_threads_flushes() {
    let th = |id| Event::Thread { id };
    // A flushes x; B fences: x may still be lost. Then A fences: x is durable.
    assert_eq!(finals(vec![th(1), st(0, 1), fl(0), th(2), fence()], 0, 64), set(&[(0, 0), (1, 0)]));
    assert_eq!(finals(vec![th(1), st(0, 1), fl(0), th(2), fence(), th(1), fence()], 0, 64), set(&[(1, 0)]));
    // B's flush of a line A stored covers A's store (flushes act on lines).
    assert_eq!(finals(vec![th(1), st(0, 1), th(2), fl(0), fence()], 0, 64), set(&[(1, 0)]));
    // The cross-thread bug: A writes an object and flushes it without a
    // fence; B links it and makes the link durable with B's own fence.
    let linked_without_object = finals(vec![th(1), st(0, 7), fl(0), th(2), st(64, 1), fl(64), fence()], 0, 64);
    assert!(linked_without_object.contains(&(0, 1)), "{linked_without_object:?}");
}
