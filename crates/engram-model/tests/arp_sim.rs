//! The PM-controller simulator: Algorithm 1's epochs (and the baselines')
//! never order less than the model they implement, persists-per-epoch on
//! hand-written traces, and the timing model runs every write to completion.

mod arp_common;
use arp_common::{build, program};
use engram_model::arp::sim::{epochs, simulate, SimModel, Timing};
use engram_model::arp::{pmo, ArpTrace, MemOrder, Model, Op, Space};
use proptest::prelude::*;

fn implements(sim: SimModel) -> Model {
    match sim {
        SimModel::Scp => Model::Scp,
        SimModel::Rcbsp => Model::Rcbsp,
        SimModel::RcbspVa => Model::ArpVa, // RCBSP+VA is at least as strong as ARP+VA
        SimModel::Arp => Model::Arp,
        SimModel::ArpVa | SimModel::Ideal => Model::ArpVa,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// If the model orders persist a before b (different events, each thread
    /// persisting to its own words), b's epoch waits for a's.
    #[test]
    fn epochs_respect_persist_memory_order(steps in program()) {
        let t = build(&steps, false);
        for sim in [SimModel::Scp, SimModel::Rcbsp, SimModel::RcbspVa, SimModel::Arp, SimModel::ArpVa] {
            let ep = epochs(&t, sim);
            let p = pmo(&t, implements(sim));
            for b in 0..p.atoms.len() {
                for a in p.below[b].iter() {
                    let (ea, eb) = (ep.of_event[&p.atoms[a].event], ep.of_event[&p.atoms[b].event]);
                    let same_word = p.atoms[a].addr / 8 == p.atoms[b].addr / 8;
                    prop_assert!(ea == eb && same_word || ep.precedes(ea, eb), "{:?}: atoms {} {} epochs {} {}\n{}", sim, a, b, ea, eb, t.to_text());
                }
            }
        }
    }

    #[test]
    fn every_write_completes(steps in program()) {
        let t = build(&steps, true);
        for sim in SimModel::ALL {
            let r = simulate(&t, sim, &Timing::default());
            prop_assert_eq!(r.persists, t.events.iter().filter(|e| e.persist().is_some()).count());
            prop_assert!((0.0..=1.0).contains(&r.page_miss_rate));
            prop_assert!(!r.deadlocked, "{:?}\n{}", sim, t.to_text());
        }
    }
}

fn st(t: &mut ArpTrace, th: u32, addr: u64) {
    t.push(th, Op::Store { addr, data: vec![1; 8], space: Space::Persistent, order: MemOrder::Relaxed }, false);
}

/// Two threads hand a lock back and forth; each critical section writes two
/// persists, then one persist after the release (outside the lock).
fn handoff(va_lock: bool) -> ArpTrace {
    let mut t = ArpTrace::new(vec![0; 4096]);
    let mut last = None;
    for round in 0..4u64 {
        let th = (round % 2) as u32;
        t.push(th, Op::Rmw { addr: 0x1000, data: vec![1], space: Space::Volatile, order: MemOrder::Acquire, rf: last }, va_lock);
        st(&mut t, th, 64 * round);
        st(&mut t, th, 64 * round + 8);
        last = Some(t.push(th, Op::Store { addr: 0x1000, data: vec![0], space: Space::Volatile, order: MemOrder::Release }, va_lock));
        st(&mut t, th, 1024 + 64 * round);
    }
    t
}

#[test]
fn persists_per_epoch_on_a_lock_handoff() {
    let t = handoff(false);
    // 12 persists. SCP: 12 epochs. RCBSP: per round [cs] [after] = 8 epochs.
    assert_eq!(epochs(&t, SimModel::Scp).persists_per_epoch(), 1.0);
    assert_eq!(epochs(&t, SimModel::Rcbsp).persists_per_epoch(), 1.5);
    // ARP: the persist after a release joins the critical section's epoch,
    // unless another thread's acquire closed it first (it always does here)
    let arp = epochs(&t, SimModel::Arp);
    assert!(arp.persists_per_epoch() >= 1.5, "{}", arp.persists_per_epoch());
    // with the lock annotated volatile, nothing reaches the controller: one
    // epoch per thread
    let va = handoff(true);
    assert_eq!(epochs(&va, SimModel::ArpVa).persists_per_epoch(), 6.0);
    assert_eq!(epochs(&va, SimModel::Arp).persists_per_epoch(), arp.persists_per_epoch());
}

#[test]
fn ideal_takes_64_persists_per_epoch() {
    let mut t = ArpTrace::new(vec![0; 1 << 16]);
    for i in 0..128 {
        st(&mut t, 0, 8 * i);
        t.push(0, Op::SeqPoint, false);
    }
    assert_eq!(epochs(&t, SimModel::Ideal).persists_per_epoch(), 64.0);
    assert_eq!(epochs(&t, SimModel::Arp).persists_per_epoch(), 1.0);
}

#[test]
fn fewer_epochs_never_take_longer_on_a_single_thread() {
    // one thread, sequential addresses: bigger epochs let the banks overlap
    let mut t = ArpTrace::new(vec![0; 1 << 16]);
    for i in 0..256 {
        st(&mut t, 0, 64 * i);
        if i % 8 == 7 {
            t.push(0, Op::SeqPoint, false);
        }
    }
    let timing = Timing::default();
    let scp = simulate(&t, SimModel::Scp, &timing);
    let arp = simulate(&t, SimModel::Arp, &timing);
    let ideal = simulate(&t, SimModel::Ideal, &timing);
    assert!(arp.time_ns <= scp.time_ns && ideal.time_ns <= arp.time_ns, "{scp:?} {arp:?} {ideal:?}");
}

/// Every image Px86 allows at any point of a one-thread trace mapped to
/// x86 is one the language-level model allows: the mapping table is sound.
fn px86_images(t: &engram_model::Trace) -> std::collections::HashSet<Vec<u8>> {
    let mut m = engram_model::px86::Px86::new(t.base.clone());
    let mut out: std::collections::HashSet<Vec<u8>> = m.crash_state().all_images().into_iter().collect();
    for e in &t.events {
        m.apply(e);
        out.extend(m.crash_state().all_images());
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn x86_mapping_is_sound_under_px86(steps in program()) {
        let one: Vec<_> = steps.iter().map(|&(_, k, o, f)| (0, k, o, f)).collect();
        let t = build(&one, true);
        for m in [Model::Scp, Model::Epoch, Model::Rcbsp, Model::Arp, Model::ArpVa] {
            let mapped = engram_model::arp::x86::map(&t, m);
            let x86 = px86_images(&engram_model::arp::x86::to_px86(&mapped));
            let allowed = engram_model::arp::check::all_images(&t, m);
            for img in &x86 {
                prop_assert!(allowed.contains(img), "{:?}: Px86 allows an image the model forbids\n{}", m, mapped.to_text());
            }
        }
    }
}
