//! The RomulusLog peer's tests: agreement with the model, threads,
//! fences per commit, roll-back, and recovery from a crash in the middle
//! of a transaction (MUTATING: the state before it; COPYING: after it),
//! with a planted bug the crash test must catch.

use std::collections::BTreeMap;

use super::{CrashAt, Plant, RomError, Romulus, RomulusMap, State};
use crate::stm::wordheap::testing::{self, big_change, filled, of, TestFile, BOTH, HEAP};
use crate::stm::wordheap::Peer;
use crate::stm::workload::{Contents, Structure, TxMap};

/// A test file of this peer.
fn test_file(name: &str) -> TestFile {
    TestFile::new::<Romulus>(name)
}

#[test]
fn agrees_with_the_model() {
    testing::agrees_with_the_model::<Romulus>(4);
}

#[test]
fn threads_keep_it_valid() {
    testing::threads_keep_it_valid::<Romulus>();
}

/// Crashes `s`'s big change at `at` (with `plant` armed), reopens the
/// file (IDLE after recovery): what it then holds, and the models before
/// and after (`testing::crash_and_reopen`).
fn crash_and_reopen(s: Structure, at: CrashAt, plant: Option<Plant>) -> (Result<Contents, String>, Contents, Contents) {
    testing::crash_and_reopen::<Romulus>(
        &format!("crash-{at:?}-{plant:?}"),
        s,
        |p| plant.into_iter().for_each(|x| p.plant(x)),
        |m, model| m.peer().update_then_crash(at, |tx| big_change(tx, m.coll(), model)),
        |p| assert_eq!(p.state(), Some(State::Idle)),
    )
}

#[test]
fn a_crash_while_mutating_recovers_the_state_before() {
    for s in BOTH {
        let (got, before, after) = crash_and_reopen(s, CrashAt::AfterStores, None);
        assert_ne!(before, after);
        assert_eq!(got.unwrap(), before, "{}", s.name());
    }
}

#[test]
fn a_crash_while_copying_recovers_the_state_after() {
    for s in BOTH {
        let (got, _, after) = crash_and_reopen(s, CrashAt::MidCopy, None);
        assert_eq!(got.unwrap(), after, "{}", s.name());
    }
}

/// After a crash while copying, `back` was completed too: a second crash,
/// while mutating, recovers the state after the first transaction.
#[test]
fn recovery_from_copying_completes_back() {
    for s in BOTH {
        let f = test_file(&format!("twice-{}", s.name()));
        let (m, mut model) = filled::<Romulus>(&f, s);
        let m2 = &m;
        m.peer().update_then_crash(CrashAt::MidCopy, |tx| big_change(tx, m2.coll(), &mut model)).unwrap();
        drop(m);
        let after = of(&model);
        let m = RomulusMap::open(&f.0, s).unwrap();
        let m2 = &m;
        m.peer().update_then_crash(CrashAt::AfterStores, |tx| big_change(tx, m2.coll(), &mut BTreeMap::new())).unwrap();
        drop(m);
        assert_eq!(RomulusMap::open(&f.0, s).unwrap().contents().unwrap(), after, "{}", s.name());
    }
}

/// Planted bug `NoMutatingState`: the crash test catches it (the reopened
/// structure is not the one before the transaction).
#[test]
fn the_crash_test_catches_a_missing_mutating_state() {
    for s in BOTH {
        let (got, before, _) = crash_and_reopen(s, CrashAt::AfterStores, Some(Plant::NoMutatingState));
        assert!(got != Ok(before), "{}: the planted bug went unnoticed", s.name());
    }
}

#[test]
fn a_failed_transaction_rolls_back() {
    for s in BOTH {
        let f = test_file(&format!("rollback-{}", s.name()));
        let (m, mut model) = filled::<Romulus>(&f, s);
        let before = of(&model);
        let m2 = &m;
        let r = m.peer().update(|tx| {
            big_change(tx, m2.coll(), &mut model)?;
            Err::<(), _>(RomError::Broken("give up".into()))
        });
        assert!(matches!(r, Err(RomError::Broken(_))));
        assert_eq!(m.peer().state(), Some(State::Idle));
        assert_eq!(m.contents().unwrap(), before, "{}", s.name());
        drop(m);
        assert_eq!(RomulusMap::open(&f.0, s).unwrap().contents().unwrap(), before, "{}", s.name());
    }
}

#[test]
fn open_refuses_other_files() {
    let f = test_file("other");
    std::fs::write(&f.0, vec![7u8; 3 * 4096 + 8192]).unwrap();
    assert!(matches!(Romulus::open(&f.0), Err(RomError::NotRomulus(_))));
    std::fs::write(&f.0, b"short").unwrap();
    assert!(matches!(Romulus::open(&f.0), Err(RomError::NotRomulus(_))));
}

/// Flat combining: threads' updates, some failing (rolled back, their
/// error returned to their own thread), end as the successful ones say.
#[test]
fn combined_updates_keep_only_the_successful_ones() {
    let f = test_file("combine");
    let m = RomulusMap::create(&f.0, Structure::Hashtable, HEAP).unwrap();
    let failed = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (m, failed) = (&m, &failed);
            s.spawn(move || {
                for i in 0..300u64 {
                    let k = t * 1000 + i;
                    let r = m.peer().update(|tx| {
                        m.coll().insert(tx, k, k + 1)?;
                        if i % 7 == 0 {
                            return Err(RomError::Broken(format!("refuse {k}")));
                        }
                        Ok(())
                    });
                    match r {
                        Err(RomError::Broken(what)) if i % 7 == 0 => {
                            assert_eq!(what, format!("refuse {k}"));
                            failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        other => assert!(other.is_ok() && i % 7 != 0, "{k}: {other:?}"),
                    }
                }
            });
        }
    });
    let mut model = BTreeMap::new();
    for t in 0..4u64 {
        for i in (0..300u64).filter(|i| i % 7 != 0) {
            model.insert(t * 1000 + i, t * 1000 + i + 1);
        }
    }
    assert_eq!(failed.into_inner(), 4 * 43);
    assert_eq!(m.contents().unwrap(), of(&model));
    assert_eq!(m.peer().state(), Some(State::Idle));
}
