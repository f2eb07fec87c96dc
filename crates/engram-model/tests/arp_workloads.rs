//! The six ARP workloads (cq, pc, sps, TATP, TPCC, YCSB-A; 8 workers and 2
//! volatile antagonists) are correct under ARP and ARP+VA: the checker finds
//! no crash image, among those it samples, that recovery cannot repair. The
//! same programs with a missing release, or with a release wrongly marked
//! volatile, are caught.

use engram_model::arp::check::CheckConfig;
use engram_model::arp::workloads::record::Mutation;
use engram_model::arp::workloads::{check_image, record, Bench, Params};
use engram_model::arp::{check, Model};

fn params() -> Params {
    Params { workers: 8, ops: 10, antagonist_ops: 10, seed: 7 }
}

fn cfg() -> CheckConfig {
    CheckConfig { max_images: 400, ..CheckConfig::default() }
}

#[test]
fn every_workload_is_correct_under_arp_and_arp_va() {
    let p = params();
    for b in Bench::ALL {
        let t = record(b, &p, Mutation::None);
        assert_eq!(t.threads(), 10, "{b:?}");
        for m in [Model::Arp, Model::ArpVa] {
            let r = check(&t, m, &cfg(), &mut |img| check_image(b, &p, img));
            assert!(r.violations.is_empty(), "{} under {}: {r}\n{:?}", b.name(), m.name(), r.violations.first());
            assert!(r.images_checked >= 100, "{r}");
        }
    }
}

#[test]
fn a_missing_release_is_caught_under_arp() {
    let p = params();
    let caught: Vec<&str> = [Bench::Sps, Bench::Tatp, Bench::Cq]
        .into_iter()
        .filter(|&b| {
            let t = record(b, &p, Mutation::MissingRelease);
            !check(&t, Model::Arp, &cfg(), &mut |img| check_image(b, &p, img)).violations.is_empty()
        })
        .map(Bench::name)
        .collect();
    assert!(!caught.is_empty(), "no workload with a missing release was caught");
}

#[test]
fn a_release_wrongly_marked_volatile_is_caught_under_arp_va_only() {
    let p = params();
    let mut caught = Vec::new();
    for b in [Bench::Sps, Bench::Tatp, Bench::Cq] {
        let t = record(b, &p, Mutation::ReleaseMarkedVolatile);
        let arp = check(&t, Model::Arp, &cfg(), &mut |img| check_image(b, &p, img));
        assert!(arp.violations.is_empty(), "ARP ignores annotations: {arp}");
        if !check(&t, Model::ArpVa, &cfg(), &mut |img| check_image(b, &p, img)).violations.is_empty() {
            caught.push(b.name());
        }
    }
    assert!(!caught.is_empty(), "no workload with a release wrongly marked volatile was caught");
}
