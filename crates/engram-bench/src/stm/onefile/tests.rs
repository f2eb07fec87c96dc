//! The OneFile-LF peer's tests: agreement with the model, threads (with
//! helping), fences per commit, a failed closure, and recovery from a
//! crash before the CAS on `curTx` (none of the transaction) and in the
//! middle of applying it (all of it), with a planted bug the crash test
//! must catch.

use std::collections::BTreeMap;

use super::{CrashAt, OfError, OneFile, OneFileMap, Plant};
use crate::stm::wordheap::testing::{self, big_change, filled, of, TestFile, BOTH, HEAP};
use crate::stm::wordheap::Peer;
use crate::stm::workload::{Contents, Structure, TxMap};

/// A test file of this peer.
fn test_file(name: &str) -> TestFile {
    TestFile::new::<OneFile>(name)
}

#[test]
fn agrees_with_the_model() {
    testing::agrees_with_the_model::<OneFile>(2);
}

#[test]
fn threads_keep_it_valid() {
    testing::threads_keep_it_valid::<OneFile>();
}

/// Threads adding disjoint keys, each insert one transaction: every one
/// is there at the end (no lost update among conflicting commits).
#[test]
fn concurrent_inserts_all_land() {
    let f = test_file("disjoint");
    let m = OneFileMap::create(&f.0, Structure::Rbtree, HEAP).unwrap();
    std::thread::scope(|sc| {
        for t in 0..4u64 {
            let m = &m;
            sc.spawn(move || (0..300u64).for_each(|i| m.insert_batch(&[(t * 1000 + i, i)]).unwrap()));
        }
    });
    let model: BTreeMap<u64, u64> = (0..4u64).flat_map(|t| (0..300u64).map(move |i| (t * 1000 + i, i))).collect();
    assert_eq!(m.contents().unwrap(), of(&model));
    assert!(m.peer().seq() > 1200, "one commit per insert");
}

/// Crashes `s`'s big change at `at` (with `plant` armed), reopens the
/// file: what it then holds, and the models before and after
/// (`testing::crash_and_reopen`).
fn crash_and_reopen(s: Structure, at: CrashAt, plant: Option<Plant>) -> (Result<Contents, String>, Contents, Contents) {
    testing::crash_and_reopen::<OneFile>(
        &format!("crash-{at:?}-{plant:?}"),
        s,
        |p| plant.into_iter().for_each(|x| p.plant(x)),
        |m, model| m.peer().update_then_crash(at, |tx| big_change(tx, m.coll(), model)),
        |_| (),
    )
}

#[test]
fn a_crash_before_the_cas_keeps_none_of_the_transaction() {
    for s in BOTH {
        let (got, before, after) = crash_and_reopen(s, CrashAt::BeforeCas, None);
        assert_ne!(before, after);
        assert_eq!(got.unwrap(), before, "{}", s.name());
    }
}

#[test]
fn a_crash_mid_apply_keeps_all_of_the_transaction() {
    for s in BOTH {
        let (got, _, after) = crash_and_reopen(s, CrashAt::MidApply, None);
        assert_eq!(got.unwrap(), after, "{}", s.name());
    }
}

/// Planted bug `NoLog`: the crash test catches it (the reopened structure
/// is not the one after the transaction).
#[test]
fn the_crash_test_catches_a_missing_log() {
    for s in BOTH {
        let (got, _, after) = crash_and_reopen(s, CrashAt::MidApply, Some(Plant::NoLog));
        assert!(!matches!(got, Ok(c) if c == after), "{}: the planted bug went unnoticed", s.name());
    }
}

/// A log buffer torn after the crash (its checksum no longer matches) is
/// not applied.
#[test]
fn recovery_refuses_a_torn_buffer() {
    let f = test_file("torn");
    let (m, mut model) = filled::<OneFile>(&f, Structure::Hashtable);
    let m2 = &m;
    m.peer().update_then_crash(CrashAt::MidApply, |tx| big_change(tx, m2.coll(), &mut model)).unwrap();
    let cur = m.peer().cur_tx().load(std::sync::atomic::Ordering::Relaxed);
    let buf = m.peer().log(super::buffer_of(cur));
    let mut entries = Vec::new();
    assert!(buf.recoverable(cur, &mut entries));
    entries[0].1 ^= 1;
    buf.write(cur, &entries);
    // SAFETY: the checksum word of the buffer's header, inside the mapping.
    unsafe {
        (buf.addr() as *const std::sync::atomic::AtomicU64).add(2).as_ref().unwrap().fetch_xor(1, std::sync::atomic::Ordering::Relaxed)
    };
    assert!(!buf.recoverable(cur, &mut entries));
}

#[test]
fn a_failed_transaction_keeps_nothing() {
    for s in BOTH {
        let f = test_file(&format!("fail-{}", s.name()));
        let (m, mut model) = filled::<OneFile>(&f, s);
        let before = of(&model);
        let m2 = &m;
        let r = m.peer().update(|tx| {
            big_change(tx, m2.coll(), &mut model)?;
            Err::<(), _>(OfError::Broken("give up".into()))
        });
        assert!(matches!(r, Err(OfError::Broken(_))));
        assert_eq!(m.contents().unwrap(), before, "{}", s.name());
        drop(m);
        assert_eq!(OneFileMap::open(&f.0, s).unwrap().contents().unwrap(), before, "{}", s.name());
    }
}

#[test]
fn open_refuses_other_files() {
    let f = test_file("other");
    std::fs::write(&f.0, b"short").unwrap();
    assert!(matches!(OneFile::open(&f.0), Err(OfError::NotOneFile(_))));
    drop(OneFile::create(&f.0, HEAP).unwrap());
    let file = std::fs::OpenOptions::new().write(true).open(&f.0).unwrap();
    std::os::unix::fs::FileExt::write_at(&file, b"ROMLOG01", 0).unwrap();
    assert!(matches!(OneFile::open(&f.0), Err(OfError::NotOneFile(_))));
}
