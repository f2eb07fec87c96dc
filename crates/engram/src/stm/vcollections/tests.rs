//! The volatile benchmark structures against a model (`BTreeMap`) on random
//! operations, and under four threads with their shape checked while they
//! run and their contents compared with the model of what committed.

use super::*;
use crate::stm::atomically;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};

fn rng(x: &mut u64) -> u64 {
    *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *x >> 33
}

/// Random ops one transaction each (sometimes three in one), against a model.
fn against_model<M: VMap>(m: &M, keys: u64, ops: usize, seed: u64) {
    let mut model = BTreeMap::new();
    let mut x = seed;
    for i in 0..ops {
        let batch: Vec<(u64, u64)> = (0..if i % 7 == 0 { 3 } else { 1 }).map(|_| (rng(&mut x) % 3, rng(&mut x) % keys)).collect();
        let got = atomically(|tx| {
            batch
                .iter()
                .map(|&(op, k)| match op {
                    0 => m.get(&crate::stm::RTx::over(tx), k).map(|v| v.map_or(0, |v| v + 1)),
                    1 => m.insert(tx, k, k * 10 + i as u64).map(u64::from),
                    _ => m.remove(tx, k).map(u64::from),
                })
                .collect::<StmResult<Vec<u64>>>()
        })
        .unwrap();
        let want: Vec<u64> = batch
            .iter()
            .map(|&(op, k)| match op {
                0 => model.get(&k).map_or(0, |v| v + 1),
                1 => u64::from(model.insert(k, k * 10 + i as u64).is_none()),
                _ => u64::from(model.remove(&k).is_some()),
            })
            .collect();
        assert_eq!(got, want, "op {i}: {batch:?}");
        if i % 97 == 0 {
            assert_eq!(m.check().unwrap(), model.iter().map(|(&k, &v)| (k, v)).collect::<Vec<_>>(), "after op {i}");
        }
    }
    assert_eq!(m.check().unwrap(), model.into_iter().collect::<Vec<_>>());
}

/// Four threads on their own keys (`k % 4 == t`) over shared nodes, and a
/// checker reading the whole shape while they run; at the end the
/// contents are the union of the threads' sequential models.
fn four_threads<M: VMap>(m: &M, keys: u64, ops: usize) {
    let stop = AtomicBool::new(false);
    let models: Vec<HashMap<u64, u64>> = std::thread::scope(|s| {
        let checker = s.spawn(|| {
            let mut checks = 0u32;
            while !stop.load(Ordering::SeqCst) || checks == 0 {
                m.check().unwrap();
                checks += 1;
            }
        });
        let hs: Vec<_> = (0..4u64)
            .map(|t| {
                let m = &m;
                s.spawn(move || {
                    let mut model = HashMap::new();
                    let mut x = 99 + t;
                    for i in 0..ops {
                        let k = (rng(&mut x) % (keys / 4)) * 4 + t;
                        if rng(&mut x) % 2 == 0 {
                            atomically(|tx| m.insert(tx, k, i as u64)).unwrap();
                            model.insert(k, i as u64);
                        } else {
                            atomically(|tx| m.remove(tx, k)).unwrap();
                            model.remove(&k);
                        }
                    }
                    model
                })
            })
            .collect();
        let models = hs.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::SeqCst);
        checker.join().unwrap();
        models
    });
    let mut want: Vec<(u64, u64)> = models.into_iter().flatten().collect();
    want.sort_unstable();
    assert_eq!(m.check().unwrap(), want);
}

macro_rules! both_forms {
    ($name:ident, $ty:ident) => {
        mod $name {
            use super::*;
            #[test]
            fn tvar_agrees_with_the_model() {
                against_model(&$ty::<Boxed>::new(), 300, 3000, 1);
            }
            #[test]
            fn embedded_agrees_with_the_model() {
                against_model(&$ty::<Embedded>::new(), 300, 3000, 2);
            }
            #[test]
            fn tvar_four_threads() {
                four_threads(&$ty::<Boxed>::new(), 256, 1500);
            }
            #[test]
            fn embedded_four_threads() {
                four_threads(&$ty::<Embedded>::new(), 256, 1500);
            }
        }
    };
}

both_forms!(rbtree, RbTree);
both_forms!(treap, Treap);
both_forms!(hamt, Hamt);

#[test]
fn hamt_survives_deep_collisions_of_hash_prefixes() {
    // Keys whose mixed hashes share long prefixes push leaves many levels down.
    let t = Hamt::<Embedded>::new();
    let mut keys: Vec<u64> = (0..1_000_000u64).filter(|&k| mix(k) & 0x7FFF == mix(7) & 0x7FFF).take(8).collect();
    assert!(keys.len() >= 4, "{keys:?}");
    keys.push(7);
    keys.sort_unstable();
    keys.dedup();
    atomically(|tx| keys.iter().try_for_each(|&k| t.insert(tx, k, k).map(drop))).unwrap();
    let mut want: Vec<(u64, u64)> = keys.iter().map(|&k| (k, k)).collect();
    want.sort_unstable();
    want.dedup();
    assert_eq!(t.check().unwrap(), want);
    atomically(|tx| keys.iter().try_for_each(|&k| t.remove(tx, k).map(drop))).unwrap();
    assert_eq!(t.check().unwrap(), vec![]);
}
