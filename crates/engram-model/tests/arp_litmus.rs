//! Litmus tests for the language-level persistency models (SCP, Epoch,
//! RCBSP, ARP, ARP+VA): small multi-threaded traces, each with the crash
//! images the definitions in `engram_model::arp` imply, plus programs shown
//! correct under ARP and wrong with a missing release or a release wrongly
//! annotated volatile.

use engram_model::arp::check::all_images;
use engram_model::arp::{check, pmo, ArpTrace, CheckConfig, MemOrder, Model, Op, Space};
use std::collections::BTreeSet;

const X: u64 = 0;
const Y: u64 = 64;
const L: u64 = 0x1000;
const M: u64 = 0x1008;

struct B(ArpTrace);

impl B {
    fn new() -> Self {
        B(ArpTrace::new(vec![0; 256]))
    }
    fn st(&mut self, t: u32, addr: u64, v: u8) -> usize {
        self.0.push(t, Op::Store { addr, data: vec![v], space: Space::Persistent, order: MemOrder::Relaxed }, false)
    }
    fn pst(&mut self, t: u32, addr: u64, v: u8, order: MemOrder) -> usize {
        self.0.push(t, Op::Store { addr, data: vec![v], space: Space::Persistent, order }, false)
    }
    fn rel(&mut self, t: u32, lock: u64) -> usize {
        self.0.push(t, Op::Store { addr: lock, data: vec![1], space: Space::Volatile, order: MemOrder::Release }, false)
    }
    fn rel_va(&mut self, t: u32, lock: u64) -> usize {
        self.0.push(t, Op::Store { addr: lock, data: vec![1], space: Space::Volatile, order: MemOrder::Release }, true)
    }
    fn rlx(&mut self, t: u32, lock: u64) -> usize {
        self.0.push(t, Op::Store { addr: lock, data: vec![1], space: Space::Volatile, order: MemOrder::Relaxed }, false)
    }
    fn acq(&mut self, t: u32, lock: u64, rf: Option<usize>) -> usize {
        self.0.push(t, Op::Load { addr: lock, len: 1, space: Space::Volatile, order: MemOrder::Acquire, rf }, false)
    }
    fn pacq(&mut self, t: u32, addr: u64, rf: Option<usize>) -> usize {
        self.0.push(t, Op::Load { addr, len: 1, space: Space::Persistent, order: MemOrder::Acquire, rf }, false)
    }
    fn sp(&mut self, t: u32) {
        self.0.push(t, Op::SeqPoint, false);
    }
    fn fence(&mut self, t: u32) {
        self.0.push(t, Op::Fence, false);
    }
    /// Crash images under `m`, as (byte at X, byte at Y).
    fn xy(&self, m: Model) -> BTreeSet<(u8, u8)> {
        all_images(&self.0, m).into_iter().map(|i| (i[X as usize], i[Y as usize])).collect()
    }
}

fn set(v: &[(u8, u8)]) -> BTreeSet<(u8, u8)> {
    v.iter().copied().collect()
}

const ORDERED: &[(u8, u8)] = &[(0, 0), (1, 0), (1, 1)];
const FREE: &[(u8, u8)] = &[(0, 0), (1, 0), (0, 1), (1, 1)];

#[test]
fn sequence_point_orders_persists_of_one_thread() {
    let mut b = B::new();
    b.st(0, X, 1);
    b.sp(0);
    b.st(0, Y, 1);
    for m in Model::ALL {
        assert_eq!(b.xy(m), set(ORDERED), "{m:?}");
    }
}

#[test]
fn without_sequence_point_only_scp_orders() {
    let mut b = B::new();
    b.st(0, X, 1);
    b.st(0, Y, 1);
    assert_eq!(b.xy(Model::Scp), set(ORDERED));
    for m in [Model::Epoch, Model::Rcbsp, Model::Arp, Model::ArpVa] {
        assert_eq!(b.xy(m), set(FREE), "{m:?}");
    }
}

#[test]
fn full_fence_is_two_sided() {
    let mut b = B::new();
    b.st(0, X, 1);
    b.fence(0);
    b.st(0, Y, 1);
    for m in Model::ALL {
        assert_eq!(b.xy(m), set(ORDERED), "{m:?}");
    }
}

#[test]
fn release_is_one_sided_in_arp_but_a_barrier_in_rcbsp() {
    // x; release; y: ARP orders x before the release, not the release before y
    let mut b = B::new();
    b.st(0, X, 1);
    b.rel(0, L);
    b.st(0, Y, 1);
    assert_eq!(b.xy(Model::Arp), set(FREE));
    assert_eq!(b.xy(Model::Rcbsp), set(ORDERED));
}

#[test]
fn acquire_is_one_sided_in_arp_but_a_barrier_in_rcbsp() {
    let mut b = B::new();
    b.st(0, X, 1);
    b.acq(0, L, None);
    b.st(0, Y, 1);
    assert_eq!(b.xy(Model::Arp), set(FREE));
    assert_eq!(b.xy(Model::Rcbsp), set(ORDERED));
}

#[test]
fn release_then_acquire_in_one_thread_is_not_ordered() {
    // x; rel L; acq M; y: x ≤p rel, acq ≤p y, but rel and acq are unordered
    let mut b = B::new();
    b.st(0, X, 1);
    b.rel(0, L);
    b.acq(0, M, None);
    b.st(0, Y, 1);
    assert_eq!(b.xy(Model::Arp), set(FREE));
    assert_eq!(b.xy(Model::Rcbsp), set(ORDERED));
    // acquire then release encloses: a persist between them is ordered after
    // the acquire and before the release, but x and y stay free of each other
    let mut c = B::new();
    c.st(0, X, 1);
    c.acq(0, M, None);
    c.rel(0, L);
    c.st(0, Y, 1);
    assert_eq!(c.xy(Model::Arp), set(FREE));
}

#[test]
fn synchronization_guarantee_orders_across_threads() {
    // T0: x; rel L.  T1: acq L (reads T0's release); y
    let mut b = B::new();
    b.st(0, X, 1);
    let r = b.rel(0, L);
    b.acq(1, L, Some(r));
    b.st(1, Y, 1);
    for m in [Model::Scp, Model::Rcbsp, Model::Arp, Model::ArpVa] {
        assert_eq!(b.xy(m), set(ORDERED), "{m:?}");
    }
    // epoch persistency: no sequence point, so nothing is ordered
    assert_eq!(b.xy(Model::Epoch), set(FREE));
}

#[test]
fn acquire_of_another_value_does_not_synchronize() {
    // T1's acquire reads the initial value: no synchronizes-with, no order
    let mut b = B::new();
    b.st(0, X, 1);
    b.rel(0, L);
    b.acq(1, L, None);
    b.st(1, Y, 1);
    assert_eq!(b.xy(Model::Arp), set(FREE));
}

#[test]
fn missing_release_loses_the_order() {
    let mut b = B::new();
    b.st(0, X, 1);
    let r = b.rlx(0, L);
    b.acq(1, L, Some(r));
    b.st(1, Y, 1);
    assert_eq!(b.xy(Model::Arp), set(FREE));
}

#[test]
fn volatile_annotation_removes_the_order_only_under_arp_va() {
    let mut b = B::new();
    b.st(0, X, 1);
    let r = b.rel_va(0, L);
    b.acq(1, L, Some(r));
    b.st(1, Y, 1);
    assert_eq!(b.xy(Model::Arp), set(ORDERED));
    assert_eq!(b.xy(Model::ArpVa), set(FREE));
    assert_eq!(b.xy(Model::Rcbsp), set(ORDERED));
}

#[test]
fn transitivity_through_volatile_synchronization() {
    // T0: x; rel L.  T1: acq L; rel M (no persists).  T2: acq M; y
    let mut b = B::new();
    b.st(0, X, 1);
    let r1 = b.rel(0, L);
    b.acq(1, L, Some(r1));
    let r2 = b.rel(1, M);
    b.acq(2, M, Some(r2));
    b.st(2, Y, 1);
    for m in [Model::Scp, Model::Rcbsp, Model::Arp, Model::ArpVa] {
        assert_eq!(b.xy(m), set(ORDERED), "{m:?}");
    }
}

#[test]
fn transitivity_through_persistent_synchronization() {
    // the release is itself a persist (a flag in persistent memory)
    const F: u64 = 128;
    let mut b = B::new();
    b.st(0, X, 1);
    let r = b.pst(0, F, 1, MemOrder::Release);
    b.pacq(1, F, Some(r));
    b.st(1, Y, 1);
    let imgs = all_images(&b.0, Model::Arp);
    let triples: BTreeSet<(u8, u8, u8)> = imgs.iter().map(|i| (i[0], i[128], i[64])).collect();
    // y needs the flag, the flag needs x
    let want: BTreeSet<(u8, u8, u8)> = [(0, 0, 0), (1, 0, 0), (1, 1, 0), (1, 1, 1)].into_iter().collect();
    assert_eq!(triples, want);
}

#[test]
fn epoch_orders_through_happens_before_of_a_sequence_point() {
    // T0: x; sp; rel L.  T1: acq L; y: x ≤hb sp ≤hb y
    let mut b = B::new();
    b.st(0, X, 1);
    b.sp(0);
    let r = b.rel(0, L);
    b.acq(1, L, Some(r));
    b.st(1, Y, 1);
    assert_eq!(b.xy(Model::Epoch), set(ORDERED));
    // and a sequence point in the acquiring thread works the same way
    let mut c = B::new();
    c.st(0, X, 1);
    let r = c.rel(0, L);
    c.acq(1, L, Some(r));
    c.sp(1);
    c.st(1, Y, 1);
    assert_eq!(c.xy(Model::Epoch), set(ORDERED));
}

#[test]
fn same_address_persists_are_coherent() {
    let mut b = B::new();
    b.st(0, X, 1);
    b.st(1, X + 1, 2); // same 8-byte word, other thread, no synchronization
    let p = pmo(&b.0, Model::ArpVa);
    assert!(p.ordered(0, 1));
    b.st(1, Y, 3);
    let p = pmo(&b.0, Model::ArpVa);
    assert!(!p.ordered(1, 2));
}

#[test]
fn eight_byte_atomicity_tears_wider_stores() {
    let mut b = B::new();
    b.0.push(0, Op::Store { addr: 0, data: vec![1; 16], space: Space::Persistent, order: MemOrder::Relaxed }, false);
    let halves: BTreeSet<(u8, u8)> = all_images(&b.0, Model::Arp).into_iter().map(|i| (i[0], i[8])).collect();
    assert_eq!(halves, set(FREE));
}

/// A record published through a flag: recovery accepts an image if a set
/// flag comes with complete data (x and y both 1). `flag_order` and `va`
/// choose how the flag store is annotated; T1 then acquires the flag and
/// links the record (z = 1), which must also imply complete data.
fn publish(flag_order: MemOrder, va: bool) -> ArpTrace {
    let mut b = B::new();
    b.st(0, X, 1);
    b.st(0, Y, 1);
    let r = b.0.push(0, Op::Store { addr: L, data: vec![1], space: Space::Volatile, order: flag_order }, va);
    b.acq(1, L, Some(r));
    b.st(1, 128, 1);
    b.0
}

fn publish_invariant(img: &[u8]) -> Result<(), String> {
    if img[128] == 1 && (img[0] != 1 || img[64] != 1) {
        return Err(format!("linked record incomplete: x={} y={}", img[0], img[64]));
    }
    Ok(())
}

#[test]
fn checker_shows_publish_correct_under_arp_and_wrong_with_weaker_annotations() {
    let cfg = CheckConfig::default();
    let ok = publish(MemOrder::Release, false);
    for m in [Model::Scp, Model::Rcbsp, Model::Arp, Model::ArpVa] {
        let r = check(&ok, m, &cfg, &mut publish_invariant);
        assert!(r.violations.is_empty(), "{r}");
        assert!(r.images_checked > 0);
    }
    let missing = publish(MemOrder::Relaxed, false);
    let r = check(&missing, Model::Arp, &cfg, &mut publish_invariant);
    assert!(!r.violations.is_empty(), "missing release must be caught: {r}");
    let wrongly_volatile = publish(MemOrder::Release, true);
    assert!(check(&wrongly_volatile, Model::Arp, &cfg, &mut publish_invariant).violations.is_empty());
    let r = check(&wrongly_volatile, Model::ArpVa, &cfg, &mut publish_invariant);
    assert!(!r.violations.is_empty(), "a release wrongly marked volatile must be caught: {r}");
    assert!(r.violations[0].message.contains("incomplete"));
}
