//! Cross-checks of the language-level persistency models on small random
//! multi-threaded traces: the one-pass persist memory order
//! (`arp::order`) against the definitional one (`arp::brute`: explicit
//! edges, Warshall closure, every subset), for every model; and the
//! strength lattice SCP ⊆ RCBSP ⊆ ARP ⊆ ARP+VA, ARP ⊆ Epoch on the images.

use engram_model::arp::check::all_images;
use engram_model::arp::{brute, Model};
use proptest::prelude::*;

mod arp_common;
use arp_common::{build, program};

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn one_pass_order_matches_the_definitions(steps in program()) {
        let t = build(&steps, true);
        prop_assert!(t.validate().is_ok());
        for m in Model::ALL {
            prop_assert_eq!(all_images(&t, m), brute::images(&t, m), "model {:?}\n{}", m, t.to_text());
        }
    }

    #[test]
    fn stronger_models_allow_fewer_images(steps in program()) {
        let t = build(&steps, true);
        let img = |m| all_images(&t, m);
        let (scp, rcbsp, epoch, arp, va) = (img(Model::Scp), img(Model::Rcbsp), img(Model::Epoch), img(Model::Arp), img(Model::ArpVa));
        prop_assert!(scp.is_subset(&rcbsp));
        prop_assert!(rcbsp.is_subset(&arp));
        prop_assert!(arp.is_subset(&va));
        prop_assert!(rcbsp.is_subset(&epoch));
        prop_assert!(arp.is_subset(&epoch));
    }
}
