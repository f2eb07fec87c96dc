//! Each misuse gets its own typed error with a stable code (docs/errors.md):
//! the cases that used to share `InvalidArgument`, the renamed
//! `AlreadyOpen`, and the context carried by layout and size errors.

mod common;
use common::TempPool;
use engram::format::MIN_POOL_SIZE;
use engram::stm::{atomically, PTVar, TVar};
use engram::{CreateOptions, Durability, Error, OpenOptions, Pool};

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, CreateOptions::new("errors").durability(Durability::Process)).unwrap()
}

#[test]
fn too_small_pool_states_the_minimum() {
    let t = TempPool::new("err-small");
    let e = Pool::create(&t.0, CreateOptions::new("errors").durability(Durability::Process).max_size(1 << 16)).err().unwrap();
    match &e {
        Error::PoolTooSmall { requested, minimum } => {
            assert_eq!(*requested, 1 << 16);
            assert!(*minimum >= MIN_POOL_SIZE);
            assert!(e.to_string().contains(&minimum.to_string()), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.code(), 24);
}

#[test]
fn double_free_in_one_region() {
    let t = TempPool::new("err-double");
    let pool = create(&t);
    let e = pool
        .txn(|tx| {
            let p = tx.alloc(7u64)?;
            tx.free(p)?;
            tx.free(p)
        })
        .err()
        .unwrap();
    assert!(matches!(e, Error::DoubleFree { .. }), "{e:?}");
    assert_eq!(e.code(), 22);
}

#[test]
fn nested_atomically_is_refused() {
    let v = TVar::new(1u64);
    let inner = atomically(|tx| {
        let _ = tx.read(&v)?;
        Ok(atomically(|tx| tx.read(&v)))
    })
    .unwrap();
    let e = inner.err().unwrap();
    assert!(matches!(e, Error::NestedTransaction { .. }), "{e:?}");
    assert_eq!(e.code(), 21);
}

/// A transaction writing more than a log half holds is no error any more:
/// its redo record overflows into an array of its own (`TxTooLarge`, code
/// 20, is left for records above 4 GiB).
#[test]
fn transaction_larger_than_a_log_half_commits() {
    let t = TempPool::new("err-large");
    let pool = create(&t);
    let vars: Vec<PTVar<u64>> = pool.atomically(|tx| (0..4096).map(|i| PTVar::new(tx, i)).collect()).unwrap();
    pool.atomically(|tx| vars.iter().try_for_each(|v| tx.write(v, 1))).unwrap();
    assert!(pool.atomically(|tx| vars.iter().map(|v| tx.read(v)).collect::<Result<Vec<_>, _>>()).unwrap().iter().all(|&x| x == 1));
}

#[test]
fn second_open_is_already_open_with_code_12() {
    let t = TempPool::new("err-open");
    let _pool = create(&t);
    let e = Pool::open(&t.0, OpenOptions::new("errors").durability(Durability::Process)).err().unwrap();
    assert!(matches!(e, Error::AlreadyOpen { .. }), "{e:?}");
    assert_eq!(e.code(), 12);
}
