//! `TWord`s inline in `TBox`ed structs (`stm/tword.rs`): the volatile
//! transactional word on the node's own line.
//!
//! - `word_transfers_keep_the_total`: writers move amounts between six
//!   accounts, two per box (each account a balance word and its complement
//!   word, written together), while full transactions and read-only ones
//!   (`stm::atomically_read`) audit, with the gap between a read's word and
//!   value loads widened: every audit sees the total, and every account's
//!   two words agree (else the account counts as far more than the total).
//! - `word_audits_catch_a_missing_recheck` / `..._snapshot_check`: with
//!   the read-only re-check or snapshot check planted out on the readers,
//!   they see a torn total (the stress test catches those bugs).
//! - `a_box_outlives_the_attempts_that_read_it`: an attempt reads a word
//!   and writes one, its box's last handle is dropped by another thread
//!   meanwhile: the box is not dropped while the attempt runs, the commit
//!   installs, and the box is dropped exactly once afterwards.
//!
//! Counts and invariants only, no timing (a watchdog bounds each body).

mod common;
use engram::stm::{atomically, atomically_read, ReadTx, STx, StmResult, TBox, TWord};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const BOUND: Duration = Duration::from_secs(120);
const START: u64 = 1000;

/// Two accounts in one allocation: each a balance and its complement.
struct Pair {
    bal: [TWord<u64>; 2],
    neg: [TWord<u64>; 2],
}

fn accounts() -> Vec<TBox<Pair>> {
    (0..3).map(|_| TBox::new(Pair { bal: [TWord::new(START), TWord::new(START)], neg: [TWord::new(!START), TWord::new(!START)] })).collect()
}

/// What a balance whose two words disagree counts as: far more than the
/// total, so an audit that saw one sees a torn total.
const TORN: u64 = 1 << 40;

/// Account `i`'s balance, checked against its complement word ([`TORN`]
/// if they disagree: a torn read).
fn balance<T: ReadTx>(tx: &T, boxes: &[TBox<Pair>], i: usize) -> StmResult<u64> {
    let (r, k) = (boxes[i / 2].as_ref(), i % 2);
    let (b, n) = (tx.get(&r.word(|s| &s.bal[k]))?, tx.get(&r.word(|s| &s.neg[k]))?);
    Ok(if b == !n { b } else { TORN })
}

fn set_balance(tx: &STx<'_>, boxes: &[TBox<Pair>], i: usize, v: u64) -> StmResult<()> {
    let (r, k) = (boxes[i / 2].as_ref(), i % 2);
    tx.write(&r.word(|s| &s.bal[k]), v)?;
    tx.write(&r.word(|s| &s.neg[k]), !v)
}

fn total<T: ReadTx>(tx: &T, boxes: &[TBox<Pair>]) -> StmResult<u64> {
    (0..6).try_fold(0, |s, i| Ok(s + balance(tx, boxes, i)?))
}

/// Writers transfer among the six accounts; `ro` readers audit with
/// read-only transactions (`bugs` planted on them), `full` readers with
/// full ones. Returns the torn totals the read-only readers saw and their
/// audits; `until_torn` stops at the first torn total.
fn audits(bugs: &'static [&'static str], per_writer: u64, full: usize, until_torn: bool) -> (u64, u64) {
    let boxes = accounts();
    let want = 6 * START;
    let (stop, torn, seen) = (AtomicBool::new(false), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        let mut ws = Vec::new();
        for t in 0..2u64 {
            let (boxes, stop) = (&boxes, &stop);
            ws.push(s.spawn(move || {
                let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                for _ in 0..per_writer {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let (i, j) = ((x % 6) as usize, ((x >> 8) % 6) as usize);
                    if i == j {
                        continue;
                    }
                    atomically(|tx| {
                        let (a, b) = (balance(tx, boxes, i)?, balance(tx, boxes, j)?);
                        let m = (x % 50).min(a);
                        set_balance(tx, boxes, i, a - m)?;
                        set_balance(tx, boxes, j, b + m)
                    })
                    .unwrap();
                }
            }));
        }
        let mut rs = Vec::new();
        for _ in 0..2 {
            let (boxes, stop, torn, seen) = (&boxes, &stop, &torn, &seen);
            rs.push(s.spawn(move || {
                common::Audit { stop, seen, torn, until_torn }.run(bugs, want, || atomically_read(|tx| total(tx, boxes)).unwrap());
            }));
        }
        for _ in 0..full {
            let (boxes, stop) = (&boxes, &stop);
            rs.push(s.spawn(move || {
                engram::failpoint::stretch_reads(true);
                while !stop.load(Ordering::Acquire) {
                    assert_eq!(atomically(|tx| total(tx, boxes)).unwrap(), want, "a full transaction saw an inconsistent state");
                }
                engram::failpoint::stretch_reads(false);
            }));
        }
        common::join_writers_then_readers(ws, &stop, rs);
    });
    assert_eq!(atomically(|tx| total(tx, &boxes)).unwrap(), want, "the writers lost money");
    (torn.into_inner(), seen.into_inner())
}

#[test]
fn word_transfers_keep_the_total() {
    common::bounded("tword transfers", BOUND, || {
        let (torn, seen) = audits(&[], 40_000, 2, false);
        assert_eq!(torn, 0, "a read-only transaction saw a torn total ({seen} audits)");
        assert!(seen > 0);
    });
}

#[test]
fn word_audits_catch_a_missing_recheck() {
    common::bounded("tword audits, no re-check", BOUND, || {
        assert!(audits(&["stm.ro_no_recheck"], 2_000_000, 0, true).0 > 0, "no torn total without the re-check");
    });
}

#[test]
fn word_audits_catch_a_missing_snapshot_check() {
    common::bounded("tword audits, no rv check", BOUND, || {
        assert!(audits(&["stm.ro_no_rv_check"], 2_000_000, 0, true).0 > 0, "no torn total without the rv check");
    });
}

static GONE: AtomicU64 = AtomicU64::new(0);
/// The `b` word a dropped `Witness` held.
static LAST_B: AtomicU64 = AtomicU64::new(0);

/// A boxed struct that counts its drops.
struct Witness {
    a: TWord<u64>,
    b: TWord<u64>,
}

impl Drop for Witness {
    fn drop(&mut self) {
        LAST_B.store(self.b.load(), Ordering::SeqCst);
        GONE.fetch_add(1, Ordering::SeqCst);
    }
}

/// An attempt reads one word of a box and writes another, drops its own
/// handle, and another thread drops the last one: the box (whose words the
/// read and write sets name) must outlive the attempt, so it is not
/// dropped while the body runs, and the commit installs the write before
/// it is (the drop sees the new value). Once the attempt is over and the
/// epoch moves on, it is dropped once.
#[test]
fn a_box_outlives_the_attempts_that_read_it() {
    common::bounded("tword lifetime", BOUND, || {
        let x = TBox::new(Witness { a: TWord::new(5), b: TWord::new(0) });
        let other = x.clone();
        let (to_b, at_b) = std::sync::mpsc::channel::<TBox<Witness>>();
        let (done_b, b_done) = std::sync::mpsc::channel::<()>();
        let b = std::thread::spawn(move || {
            drop(at_b.recv().unwrap());
            done_b.send(()).unwrap();
        });
        let (mut mine, mut theirs) = (Some(x), Some(other));
        atomically(|tx| {
            if let Some(x) = mine.take() {
                // The write first: the read after it is recorded, so the
                // commit validates it rather than requiring that no other
                // test's commit took a timestamp meanwhile.
                tx.write(&x.as_ref().word(|s| &s.b), 6)?;
                assert_eq!(tx.read(&x.as_ref().word(|s| &s.a))?, 5);
                drop(x);
                to_b.send(theirs.take().unwrap()).unwrap();
                b_done.recv().unwrap();
                assert_eq!(GONE.load(Ordering::SeqCst), 0, "the box was freed under an attempt that used it");
            }
            Ok(())
        })
        .unwrap();
        b.join().unwrap();
        let mut rounds = 0u64;
        while GONE.load(Ordering::SeqCst) == 0 && rounds < 200_000 {
            crossbeam_epoch::pin().flush();
            rounds += 1;
        }
        assert_eq!(GONE.load(Ordering::SeqCst), 1, "the box was not dropped exactly once");
        assert_eq!(LAST_B.load(Ordering::SeqCst), 6, "the commit did not install its write before the box went");
    });
}
