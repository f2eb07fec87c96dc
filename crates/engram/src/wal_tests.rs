//! Unit tests of the write-ahead log (`wal.rs`): replay order, torn
//! records, the mapped and the `pwrite` replay, checkpoints, and commits
//! from several threads sharing writes.

use super::*;

fn files(dir: &Path) -> (PathBuf, File) {
    let p = dir.join("p.pool");
    let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
    // Written, not `set_len`: a pool file's blocks are allocated (it
    // grows with `fallocate`), which the mapped replay needs.
    f.write_all_at(&[0; 8192], 0).unwrap();
    (p, f)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("engram-wal-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The merged extents leave exactly the bytes the pieces, applied one
/// by one in order, leave, and write nothing no piece covered; touching
/// pieces become one run.
#[test]
fn merged_pieces_match_applying_them_in_order() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(8);
    for round in 0..300 {
        let mut model = vec![None::<u8>; 600];
        let mut ext = Extents::default();
        for _ in 0..rng.gen_range(1..40) {
            let off = rng.gen_range(0..560u64);
            let len = rng.gen_range(1..40usize);
            let b: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            ext.insert(off, &b);
            for (i, &x) in b.iter().enumerate() {
                model[off as usize + i] = Some(x);
            }
        }
        let mut got = vec![None::<u8>; 600];
        let mut last_end = None;
        for (&off, v) in &ext.runs {
            assert!(last_end.is_none_or(|e| e < off), "round {round}: runs overlap or touch");
            for (i, &x) in v.iter().enumerate() {
                got[off as usize + i] = Some(x);
            }
            last_end = Some(off + v.len() as u64);
        }
        assert_eq!(got, model, "round {round}");
        assert_eq!(ext.bytes, model.iter().filter(|b| b.is_some()).count() as u64);
    }
}

#[test]
fn records_replay_in_order_and_stop_at_a_torn_one() {
    let d = scratch("replay");
    let (p, f) = files(&d);
    let (wal, n) = Wal::open(&p, &f, None).unwrap();
    assert_eq!(n, 0);
    let s1 = wal.record([(100u64, &b"first"[..]), (200, &b"x"[..])].into_iter());
    wal.wait_durable(s1).unwrap();
    let s2 = wal.record([(100u64, &b"second"[..])].into_iter());
    wal.wait_durable(s2).unwrap();
    let s3 = wal.record([(300u64, &b"torn"[..])].into_iter());
    wal.wait_durable(s3).unwrap();
    // Tear the last record (40 + 16 + 8 bytes after two records of 88
    // and 64): its last payload byte changes.
    let log = std::fs::OpenOptions::new().write(true).open(log_path(&p)).unwrap();
    log.write_all_at(&[0xFF], LOG_HEADER + 88 + 64 + 63).unwrap();
    drop(wal);
    let pieces = pending_pieces(&p).unwrap();
    assert_eq!(pieces.len(), 3);
    assert_eq!(replay_and_remove(&p, &f).unwrap(), 2);
    let mut b = [0u8; 6];
    f.read_exact_at(&mut b, 100).unwrap();
    assert_eq!(&b, b"second");
    f.read_exact_at(&mut b[..4], 300).unwrap();
    assert_eq!(&b[..4], &[0; 4]);
    assert!(!log_path(&p).exists());
    std::fs::remove_dir_all(&d).unwrap();
}

/// The log is written in whole blocks at block offsets, records packed
/// back to back: a record that starts inside a block rewrites the block's
/// earlier bytes as they are (from the kept tail, or read back after the
/// zeros written ahead), so every record written replays; with the
/// planted bug `wal.tail_not_rewritten` the second record destroys the
/// first, and the replay stops there.
#[test]
fn records_sharing_a_block_all_replay() {
    blocks_replay("blocks", 30);
    #[cfg(feature = "failpoints")]
    {
        crate::failpoint::plant("wal.tail_not_rewritten");
        let got = std::panic::catch_unwind(|| blocks_replay("blocks-clobbered", 30));
        crate::failpoint::disarm_all();
        assert!(got.is_err(), "the planted bug went unnoticed");
    }
}

fn blocks_replay(name: &str, n: u64) {
    let d = scratch(name);
    let (p, f) = files(&d);
    let rec = Recorder::new();
    let (wal, _) = Wal::open(&p, &f, Some(rec.clone())).unwrap();
    for i in 0..n {
        // 8-aligned sizes from 16 to 4000 bytes: records start anywhere in a block.
        let v = vec![i as u8 + 1; (i as usize * 1361) % 4000 + 16];
        let s = wal.record([(i * 8, &v[..8])].into_iter().chain([(4096u64, &v[..])]));
        wal.wait_durable(s).unwrap();
    }
    for e in rec.events() {
        if let IoEvent::LogWrite { off, data } = e {
            assert!(off % LOG_BLOCK as u64 == 0 && data.len() % LOG_BLOCK == 0, "a write of {} bytes at {off}", data.len());
        }
    }
    drop(wal);
    assert_eq!(replay_and_remove(&p, &f).unwrap(), n);
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, (n - 1) * 8).unwrap();
    assert_eq!(b, [n as u8; 8]);
    std::fs::remove_dir_all(&d).unwrap();
}

/// A replay copies pieces through a shared mapping of the pool file; a
/// piece that crosses the file's end is written at its turn, so a later
/// piece over the same bytes still wins, and the file grows to hold it.
#[test]
fn replay_keeps_log_order_across_the_files_end() {
    let d = scratch("end");
    let (p, f) = files(&d);
    let (wal, _) = Wal::open(&p, &f, None).unwrap();
    let s = wal.record([(8190u64, &b"ABCD"[..]), (8188, &b"wx"[..]), (8189, &b"yz"[..]), (4, &b"head"[..])].into_iter());
    wal.wait_durable(s).unwrap();
    drop(wal);
    assert_eq!(replay_and_remove(&p, &f).unwrap(), 1);
    assert_eq!(f.metadata().unwrap().len(), 8194);
    let mut b = [0u8; 6];
    f.read_exact_at(&mut b, 8188).unwrap();
    assert_eq!(&b, b"wyzBCD");
    f.read_exact_at(&mut b[..4], 4).unwrap();
    assert_eq!(&b[..4], b"head");
    std::fs::remove_dir_all(&d).unwrap();
}

/// A sparse pool file is replayed to the same bytes: through the
/// mapping where its blocks could be reserved, and (the planted bug
/// `wal.reserve_fails`: a full disk, or no `fallocate`) with a `pwrite`
/// per piece where they could not.
#[test]
fn a_sparse_pool_file_is_replayed_by_pwrite() {
    sparse_replay("sparse");
    #[cfg(feature = "failpoints")]
    {
        crate::failpoint::plant("wal.reserve_fails");
        sparse_replay("sparse-unreserved");
        crate::failpoint::disarm_all();
    }
}

fn sparse_replay(name: &str) {
    let d = scratch(name);
    let p = d.join("p.pool");
    let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
    f.set_len(1 << 20).unwrap();
    let (wal, _) = Wal::open(&p, &f, None).unwrap();
    let s = wal.record([(4096u64, &b"aaaa"[..]), (4098, &b"bb"[..]), (9000, &b"c"[..])].into_iter());
    wal.wait_durable(s).unwrap();
    drop(wal);
    assert_eq!(replay_and_remove(&p, &f).unwrap(), 1);
    let mut b = [0u8; 4];
    f.read_exact_at(&mut b, 4096).unwrap();
    assert_eq!(&b, b"aabb");
    f.read_exact_at(&mut b[..1], 9000).unwrap();
    assert_eq!(b[0], b'c');
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_checkpoint_empties_the_log_and_old_records_are_not_replayed() {
    let d = scratch("ckpt");
    let (p, f) = files(&d);
    let (wal, _) = Wal::open(&p, &f, None).unwrap();
    let s = wal.record([(10u64, &b"abc"[..])].into_iter());
    wal.wait_durable(s).unwrap();
    wal.checkpoint().unwrap();
    assert_eq!(pending_pieces(&p).unwrap().len(), 0);
    let mut b = [0u8; 3];
    f.read_exact_at(&mut b, 10).unwrap();
    assert_eq!(&b, b"abc");
    f.write_all_at(b"zzz", 10).unwrap();
    drop(wal);
    let (_wal, n) = Wal::open(&p, &f, None).unwrap();
    assert_eq!(n, 0);
    f.read_exact_at(&mut b, 10).unwrap();
    assert_eq!(&b, b"zzz");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn concurrent_commits_share_writes() {
    let d = scratch("group");
    let (p, f) = files(&d);
    let rec = Recorder::new();
    let (wal, _) = Wal::open(&p, &f, Some(rec.clone())).unwrap();
    let wal = Arc::new(wal);
    let before = rec.events().len();
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let wal = wal.clone();
            std::thread::spawn(move || {
                for i in 0..50u64 {
                    let v = (t * 1000 + i).to_le_bytes();
                    let s = wal.record([(t * 8, &v[..])].into_iter());
                    wal.wait_durable(s).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let syncs = rec.events()[before..].iter().filter(|e| **e == IoEvent::LogSync).count();
    assert!((1..=400).contains(&syncs));
    wal.checkpoint().unwrap();
    for t in 0..8u64 {
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, t * 8).unwrap();
        assert_eq!(u64::from_le_bytes(b), t * 1000 + 49);
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// A lone committer never gathers (its own arrival is the whole group
/// the last flush released), so it never waits for anyone: one flush per
/// commit, each returning durable.
#[test]
fn a_lone_thread_never_gathers() {
    let d = scratch("lone");
    let (p, f) = files(&d);
    let rec = Recorder::new();
    let (wal, _) = Wal::open(&p, &f, Some(rec.clone())).unwrap();
    let before = rec.events().len();
    for i in 0..40u64 {
        let s = wal.record([(8u64, &i.to_le_bytes()[..])].into_iter());
        wal.wait_durable(s).unwrap();
    }
    let syncs = rec.events()[before..].iter().filter(|e| **e == IoEvent::LogSync).count();
    assert_eq!(syncs, 40);
    assert_eq!(wal.gathers(), 0);
    drop(wal);
    std::fs::remove_dir_all(&d).unwrap();
}
