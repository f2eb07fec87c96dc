//! Cross-checks of the language-level persistency models on small random
//! multi-threaded traces: the one-pass persist memory order
//! (`arp::order`) against the definitional one (`arp::brute`: explicit
//! edges, Warshall closure, every subset), for every model; and the
//! strength lattice SCP ⊆ RCBSP ⊆ ARP ⊆ ARP+VA, ARP ⊆ Epoch on the images.

use engram_model::arp::check::all_images;
use engram_model::arp::{brute, ArpTrace, MemOrder, Model, Op, Space};
use proptest::prelude::*;

/// One step of a random program: (thread, kind, operand, flag).
fn program() -> impl Strategy<Value = Vec<(u32, u8, u8, bool)>> {
    prop::collection::vec((0u32..3, 0u8..9, 0u8..4, any::<bool>()), 1..14)
}

/// Builds a trace; persists are single bytes (one atom each) at four words
/// across two lines; synchronization on two volatile variables, each load
/// reading from the latest store to its variable.
fn build(steps: &[(u32, u8, u8, bool)]) -> ArpTrace {
    let mut t = ArpTrace::new(vec![0; 128]);
    let mut last: [Option<usize>; 2] = [None, None];
    let mut persists = 0;
    for &(th, kind, k, flag) in steps {
        let var = (k % 2) as usize;
        let vaddr = 0x1000 + 8 * var as u64;
        let order = if flag { MemOrder::Release } else { MemOrder::Relaxed };
        match kind {
            0..=2 if persists < 10 => {
                persists += 1;
                let addr = [0u64, 8, 64, 72][k as usize];
                t.push(th, Op::Store { addr, data: vec![t.events.len() as u8 + 1], space: Space::Persistent, order: MemOrder::Relaxed }, false);
            }
            3 | 4 => {
                last[var] = Some(t.push(th, Op::Store { addr: vaddr, data: vec![1], space: Space::Volatile, order: MemOrder::Release }, flag && k > 1));
            }
            5 | 6 => {
                let ord = if kind == 5 { MemOrder::Acquire } else { order };
                t.push(th, Op::Load { addr: vaddr, len: 1, space: Space::Volatile, order: ord, rf: last[var] }, flag && k > 1);
            }
            7 => {
                let rf = last[var];
                last[var] = Some(t.push(th, Op::Rmw { addr: vaddr, data: vec![2], space: Space::Volatile, order: MemOrder::AcqRel, rf }, false));
            }
            _ => {
                t.push(th, if flag { Op::SeqPoint } else { Op::Fence }, false);
            }
        }
    }
    t
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn one_pass_order_matches_the_definitions(steps in program()) {
        let t = build(&steps);
        prop_assert!(t.validate().is_ok());
        for m in Model::ALL {
            prop_assert_eq!(all_images(&t, m), brute::images(&t, m), "model {:?}\n{}", m, t.to_text());
        }
    }

    #[test]
    fn stronger_models_allow_fewer_images(steps in program()) {
        let t = build(&steps);
        let img = |m| all_images(&t, m);
        let (scp, rcbsp, epoch, arp, va) = (img(Model::Scp), img(Model::Rcbsp), img(Model::Epoch), img(Model::Arp), img(Model::ArpVa));
        prop_assert!(scp.is_subset(&rcbsp));
        prop_assert!(rcbsp.is_subset(&arp));
        prop_assert!(arp.is_subset(&va));
        prop_assert!(rcbsp.is_subset(&epoch));
        prop_assert!(arp.is_subset(&epoch));
    }
}
