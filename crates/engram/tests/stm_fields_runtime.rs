//! Embedded transactional fields (`TField`) and the volatile benchmark
//! structures (`stm::vcollections`) under every STM runtime
//! (`Runtime::ALL`), on the *emulated* HTM backend with 2 % spurious
//! conflicts per access, so level 1 (the body in hardware, where a
//! `TField` read goes through the subscribed-word read), the hardware
//! commit and the software fallbacks all run on any machine.
//!
//! - each structure in each layout, 4 threads on their own keys over shared
//!   nodes under each runtime: the end state equals the union of the
//!   threads' models and the shape checks; under `Hybrid` some operations
//!   commit at level 1;
//! - a `TField` counter bumped by 4 threads under each runtime ends exact.
//!
//! The tests share the process's backend, so they run one at a time.

use engram::htm::EmuConfig;
use engram::stm::runtime::{self, Runtime};
use engram::stm::vcollections::{Boxed, Embedded, Hamt, RbTree, Treap, VMap};
use engram::stm::{atomically, atomically_read, TField, TStruct};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

static LOCK: Mutex<()> = Mutex::new(());

fn setup() -> MutexGuard<'static, ()> {
    let g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    runtime::configure_emulated(EmuConfig { conflict_ppm: 20_000, ..EmuConfig::default() });
    assert!(runtime::htm_armed());
    g
}

fn rng(x: &mut u64) -> u64 {
    *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *x >> 33
}

/// 4 threads under `rt`, each on keys `k % 4 == t`; returns the level-1
/// commits the threads counted.
fn four_threads(m: &dyn VMap, rt: Runtime, ops: u64) -> u64 {
    let results: Vec<(HashMap<u64, u64>, u64)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4u64)
            .map(|t| {
                s.spawn(move || {
                    runtime::set_thread_runtime(Some(rt)).unwrap();
                    let l1 = runtime::stats().l1_commits;
                    let mut model = HashMap::new();
                    let mut x = 5 + t;
                    for i in 0..ops {
                        let k = (rng(&mut x) % 64) * 4 + t;
                        match rng(&mut x) % 3 {
                            0 => assert_eq!(atomically_read(|tx| m.get(tx, k)).unwrap(), model.get(&k).copied()),
                            1 => {
                                atomically(|tx| m.insert(tx, k, i)).unwrap();
                                model.insert(k, i);
                            }
                            _ => {
                                atomically(|tx| m.remove(tx, k)).unwrap();
                                model.remove(&k);
                            }
                        }
                    }
                    (model, runtime::stats().l1_commits - l1)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let l1 = results.iter().map(|r| r.1).sum();
    let mut want: Vec<(u64, u64)> = results.into_iter().flat_map(|r| r.0).collect();
    want.sort_unstable();
    assert_eq!(m.check().unwrap(), want, "{rt:?}");
    l1
}

#[test]
fn structures_under_every_runtime() {
    let _g = setup();
    for &rt in Runtime::ALL {
        let maps: Vec<Box<dyn VMap>> = vec![
            Box::new(RbTree::<Boxed>::new()),
            Box::new(RbTree::<Embedded>::new()),
            Box::new(Hamt::<Boxed>::new()),
            Box::new(Hamt::<Embedded>::new()),
            Box::new(Treap::<Boxed>::new()),
            Box::new(Treap::<Embedded>::new()),
        ];
        for m in &maps {
            let l1 = four_threads(m.as_ref(), rt, 400);
            if rt == Runtime::Hybrid {
                assert!(l1 > 0, "no operation committed at level 1");
            }
        }
    }
}

#[derive(TStruct)]
struct Counter {
    #[immutable]
    name: &'static str,
    n: TField<u64>,
    log: TField<Vec<u8>>,
}

#[test]
fn a_field_counter_under_every_runtime() {
    let _g = setup();
    for &rt in Runtime::ALL {
        let c = Arc::new(Counter { name: "c", n: TField::new(0), log: TField::new(Vec::new()) });
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let c = &c;
                s.spawn(move || {
                    runtime::set_thread_runtime(Some(rt)).unwrap();
                    for _ in 0..200 {
                        atomically(|tx| {
                            c.set_n(tx, c.n(tx)? + 1)?;
                            let mut l = c.log(tx)?;
                            l.push(t);
                            c.set_log(tx, l)
                        })
                        .unwrap();
                    }
                });
            }
        });
        assert_eq!((c.name, c.n.load(), c.log.load().len()), ("c", 800, 800), "{rt:?}");
    }
}
