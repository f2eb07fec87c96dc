//! Tests of the HTM layer: every abort cause of the emulated backend, the
//! backend's isolation (buffered writes, atomic commit), determinism under a
//! seed, and the real RTM backend where the CPU has it.

use super::abort::{code, Cause, CAPACITY, DEBUG, NESTED};
use super::*;
use std::sync::atomic::AtomicU64;

fn emu(cfg: EmuConfig) -> Htm {
    Htm::emulated(cfg)
}

#[test]
fn emulated_commit_publishes_and_abort_discards() {
    let h = emu(EmuConfig::default());
    let (a, b) = (AtomicU64::new(1), AtomicU64::new(2));
    let mut t = h.begin().unwrap();
    let x = t.load(&a).unwrap();
    t.store(&b, x + 10).unwrap();
    assert_eq!(t.load(&b).unwrap(), 11, "read your writes");
    assert_eq!(b.load(SeqCst), 2, "buffered until commit");
    t.commit().unwrap();
    assert_eq!(b.load(SeqCst), 11);
    let mut t = h.begin().unwrap();
    t.store(&a, 99).unwrap();
    let s = t.abort(code::USER);
    assert_eq!(s.cause(), Cause::Explicit(code::USER));
    assert_eq!(a.load(SeqCst), 1);
}

#[test]
fn emulated_capacity_reads_and_writes() {
    let h = emu(EmuConfig { read_lines: 4, write_lines: 2, ..EmuConfig::default() });
    #[repr(align(64))]
    struct Lines([AtomicU64; 64]);
    let lines = Lines(std::array::from_fn(|i| AtomicU64::new(i as u64)));
    let words = &lines.0;
    let mut t = h.begin().unwrap();
    // 8 words per line: 32 words are 4 lines, the 33rd is the 5th line.
    for w in &words[..32] {
        t.load(w).unwrap();
    }
    assert_eq!(t.load(&words[32]).unwrap_err().cause(), Cause::Capacity);
    let mut t = h.begin().unwrap();
    t.store(&words[0], 0).unwrap();
    t.store(&words[8], 0).unwrap();
    let e = t.store(&words[16], 0).unwrap_err();
    assert_eq!(e.cause(), Cause::Capacity);
    assert!(!e.may_retry());
}

#[test]
fn emulated_real_conflict_by_concurrent_write() {
    let h = emu(EmuConfig::default());
    let (a, b) = (AtomicU64::new(0), AtomicU64::new(0));
    let mut t = h.begin().unwrap();
    t.load(&a).unwrap();
    h.nt_store(&a, 5); // another thread's write to a line we read
    let e = t.load(&b).unwrap_err();
    assert_eq!(e.cause(), Cause::Conflict);
    assert!(e.may_retry());
    // Like hardware, the abort sticks: a body that ignores it cannot commit.
    assert_eq!(t.load(&b).unwrap_err(), e);
    t.store(&b, 1).unwrap_err();
    assert_eq!(t.commit().unwrap_err(), e);
    assert_eq!(b.load(SeqCst), 0);
    // Caught at commit too, and by check().
    let mut t = h.begin().unwrap();
    t.load(&a).unwrap();
    t.store(&b, 1).unwrap();
    h.nt_store(&a, 6);
    assert_eq!(t.check().unwrap_err().cause(), Cause::Conflict);
    let mut t = h.begin().unwrap();
    t.load(&a).unwrap();
    t.store(&b, 1).unwrap();
    let mut u = h.begin().unwrap();
    u.store(&a, 7).unwrap();
    u.commit().unwrap(); // an emulated commit is a conflicting write too
    assert_eq!(t.commit().unwrap_err().cause(), Cause::Conflict);
    assert_eq!(b.load(SeqCst), 0);
}

#[test]
fn emulated_random_conflicts_are_seeded() {
    let run = |seed| {
        let h = emu(EmuConfig { seed, conflict_ppm: 200_000, ..EmuConfig::default() });
        let w = AtomicU64::new(0);
        (0..200)
            .map(|_| {
                let mut t = h.begin().unwrap();
                let r = (0..4).try_for_each(|_| t.load(&w).map(drop));
                r.is_ok() && t.commit().is_ok()
            })
            .collect::<Vec<bool>>()
    };
    let (a, b, c) = (run(3), run(3), run(4));
    assert_eq!(a, b, "same seed, same schedule");
    assert_ne!(a, c);
    let aborted = a.iter().filter(|&&ok| !ok).count();
    assert!(aborted > 50 && aborted < 190, "about 1-0.8^4 = 59% abort: {aborted}");
}

#[test]
fn emulated_forced_and_nested() {
    let h = emu(EmuConfig { max_nest: 2, ..EmuConfig::default() });
    let e = h.emu().unwrap().clone();
    e.inject([Abort(DEBUG), Abort::explicit(9)]);
    let w = AtomicU64::new(0);
    for want in [Cause::Debug, Cause::Explicit(9)] {
        let mut t = h.begin().unwrap();
        t.store(&w, 1).unwrap();
        assert_eq!(t.commit().unwrap_err().cause(), want);
    }
    assert_eq!((e.pending(), w.load(SeqCst)), (0, 0));
    // An abort inside a nested transaction carries the nested bit.
    let mut t = h.begin().unwrap();
    let r: Result<(), Abort> = t.nest(|_| Err(Abort::explicit(3)));
    let s = r.unwrap_err();
    assert!(s.nested() && s.code() == Some(3));
    // Nesting deeper than max_nest aborts.
    let mut t = h.begin().unwrap();
    let r = t.nest(|t| t.nest(|t| t.nest(|_| Ok(()))));
    let s = r.unwrap_err();
    assert!(s.nested() && s.0 & CAPACITY != 0);
    assert_eq!(Abort(NESTED).cause(), Cause::Nested);
    let mut t = h.begin().unwrap();
    t.nest(|t| t.store(&w, 4)).unwrap();
    t.commit().unwrap();
    assert_eq!(w.load(SeqCst), 4);
}

#[test]
fn emulated_commits_are_atomic_to_readers() {
    // Two threads move units between two words in emulated transactions;
    // non-transactional paired reads never see a torn total, given the
    // readers' (seqlock) check of the stripe; emulated reads neither.
    let h = emu(EmuConfig::default());
    let words: Vec<AtomicU64> = (0..2).map(|_| AtomicU64::new(5000)).collect();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut done = 0;
                while done < 2000 {
                    let Ok(mut t) = h.begin() else { continue };
                    let r = (|| {
                        let (x, y) = (t.load(&words[0])?, t.load(&words[1])?);
                        t.store(&words[0], x - 1)?;
                        t.store(&words[1], y + 1)
                    })();
                    if r.is_ok() && t.commit().is_ok() {
                        done += 1;
                    }
                }
            });
        }
        s.spawn(|| {
            for _ in 0..2000 {
                let Ok(mut t) = h.begin() else { continue };
                if let (Ok(x), Ok(y)) = (t.load(&words[0]), t.load(&words[1])) {
                    if t.commit().is_ok() {
                        assert_eq!(x + y, 10_000);
                    }
                }
            }
        });
    });
    assert_eq!((words[0].load(SeqCst), words[1].load(SeqCst)), (1000, 9000));
}

#[test]
fn rtm_backend_where_available() {
    let Some(h) = Htm::rtm() else {
        println!("skipped: no usable RTM on this CPU (cpuid/probe said no)");
        return;
    };
    let (a, b) = (AtomicU64::new(1), AtomicU64::new(0));
    let mut committed = false;
    for _ in 0..1000 {
        let Ok(mut t) = h.begin() else { continue };
        let x = t.load(&a).unwrap();
        t.store(&b, x + 1).unwrap();
        t.commit().unwrap();
        committed = true;
        break;
    }
    assert!(committed && b.load(SeqCst) == 2);
    // Explicit abort: the store is rolled back and the code comes back.
    let mut seen = None;
    for _ in 0..1000 {
        match h.begin() {
            Ok(mut t) => {
                t.store(&b, 77).unwrap();
                let _ = t.abort(code::VALIDATE);
                unreachable!("xabort returned in a transaction");
            }
            Err(s) if s.code().is_some() => {
                seen = Some(s);
                break;
            }
            Err(_) => {}
        }
    }
    assert_eq!(seen.and_then(|s| s.code()), Some(code::VALIDATE));
    assert_eq!(b.load(SeqCst), 2);
    // A dropped handle aborts with DROPPED.
    for _ in 0..1000 {
        match h.begin() {
            Ok(t) => drop(t),
            Err(s) if s.code() == Some(code::DROPPED) => return,
            Err(_) => {}
        }
    }
    panic!("dropped RTM handle never reported DROPPED");
}

/// An emulated commit that validated a word before a non-transactional
/// store to it (the coarse lock's word, `stm/engine/coarse.rs`) is ordered
/// before that store: a `nt_load` after the store (and a SeqCst fence) sees
/// the commit's writes, never the memory before them. A plain load may not
/// (the emulated `xend` publishes after validating): that is the race that
/// made the coarse commit overwrite a level-1 commit's lock. Stress: the
/// plain-load misses are printed, the `nt_load` misses must be 0.
#[test]
fn emulated_commit_is_ordered_before_a_later_nt_store_it_read() {
    use std::sync::atomic::{fence, AtomicBool};
    #[repr(align(128))]
    struct Line(AtomicU64);
    let h = emu(EmuConfig::default());
    let (sub, w) = (Line(AtomicU64::new(0)), Line(AtomicU64::new(0)));
    let (go_a, loaded, done) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let committed = AtomicBool::new(false);
    const ROUNDS: u64 = 8000;
    let wait = |c: &AtomicU64, r: u64| {
        let mut spins = 0u32;
        while c.load(SeqCst) < r {
            spins += 1;
            if spins > 1000 {
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
    };
    let (mut plain_misses, mut nt_misses, mut commits) = (0u64, 0u64, 0u64);
    std::thread::scope(|s| {
        s.spawn(|| {
            for r in 1..=ROUNDS {
                wait(&go_a, r);
                let ok = (|| {
                    let mut t = h.begin()?;
                    let seen = t.load(&sub.0);
                    loaded.store(r, SeqCst);
                    if seen? != 0 {
                        return Err(t.abort(code::LOCKED));
                    }
                    t.store(&w.0, r)?;
                    t.commit()
                })()
                .is_ok();
                committed.store(ok, SeqCst);
                done.store(r, SeqCst);
            }
        });
        for r in 1..=ROUNDS {
            go_a.store(r, SeqCst);
            // the store lands around the transaction's commit
            wait(&loaded, r);
            for _ in 0..(r % 16) {
                std::hint::spin_loop();
            }
            h.nt_store(&sub.0, 1);
            fence(SeqCst);
            let plain = w.0.load(SeqCst);
            let nt = h.nt_load(&w.0);
            wait(&done, r);
            if committed.load(SeqCst) {
                commits += 1;
                plain_misses += u64::from(plain != r);
                nt_misses += u64::from(nt != r);
            }
            h.nt_store(&sub.0, 0);
        }
    });
    println!("{commits} of {ROUNDS} commits before the store; plain loads missed {plain_misses}, nt_load {nt_misses}");
    assert_eq!(nt_misses, 0, "nt_load read a word an emulated commit ordered before it had not yet published");
}
