//! The crash explorer of the `wal` durability mode.
//!
//! The x86 explorer (`engram-model`) decides which stores a crash keeps in
//! persistent memory; in `wal` mode nothing reaches the disk but file
//! writes, so this explorer works on those instead. A workload runs ledger
//! regions (transfers, log entries, frees, growth, a forced checkpoint, the
//! clean close) on a real `wal`-mode pool while a [`Recorder`] notes every
//! write to the log and to the pool file, every `fdatasync`/`fsync`, and
//! every commit that returned. Then, for every cut point (after each event),
//! crash states are built from the files as they were before the workload:
//!
//! - everything written so far reached the disk, and only what was synced;
//! - the last unsynced log write torn: a prefix of it (the rest of the
//!   record as the file held it before, stale bytes of an older generation
//!   included), or all of it but one sector-sized hole (writes of several
//!   sectors land in any order), both where the write changes the file
//!   (a record's first block writes the end of the record before it again,
//!   unchanged, and its last block ends in zeros);
//! - unsynced pool-file writes (a checkpoint, the close) reordered: each one
//!   lost alone, and seeded random subsets.
//!
//! Each state is written to scratch files, opened with the real recovery
//! code (`wal` mode, so the log is replayed), and checked: the heap
//! (`Pool::check`), the ledger (money conserved, a well-formed log, at
//! least as many regions as had returned before the cut), and a new region
//! on the recovered pool. Fault switches (planted bugs) prove the checks can
//! fail: `wal.skip_fdatasync` (commits return before their record is
//! durable), `wal.skip_checksum` (recovery replays torn records) and
//! `wal.tail_not_rewritten` (a record's first block clobbers the end of
//! the record before it).

use super::{ledger_step, make_ledger, verify_ledger, Ledger, LAYOUT};
use crate::error::{Error, Result};
use crate::pmem::Durability;
use crate::wal::{log_path, IoEvent, Recorder};
use crate::{CreateOptions, OpenOptions, Pool};
use std::path::{Path, PathBuf};

/// How the WAL explorer runs.
#[derive(Clone, Debug)]
pub struct WalSettings {
    /// Scratch directory (tmpfs is best).
    pub dir: PathBuf,
    /// Regions in the recorded stretch (per thread).
    pub regions: u64,
    /// Threads committing at once (group commit).
    pub threads: u32,
    /// At most this many crash states are checked (spread over the cuts).
    pub max_states: usize,
    /// Checkpoint whenever the log passes this many bytes (the engine's
    /// 16 MiB when `None`): small, checkpoints run beside the commits.
    pub checkpoint_bytes: Option<u64>,
}

impl WalSettings {
    /// The sweep of `cargo test` (a few hundred states).
    pub fn moderate(dir: &Path) -> Self {
        WalSettings { dir: dir.to_path_buf(), regions: 6, threads: 1, max_states: 160, checkpoint_bytes: None }
    }
}

/// What the WAL explorer did and found.
#[derive(Clone, Debug, Default)]
pub struct WalReport {
    /// File events recorded.
    pub events: usize,
    /// Log syncs among them.
    pub syncs: usize,
    /// Pool-file syncs among them (checkpoints, growth, the close).
    pub pool_syncs: usize,
    /// Crash states checked.
    pub states: usize,
    /// Commits that returned during the stretch.
    pub returned: u64,
    /// Violations: cut point, kind of state, what the check found.
    pub violations: Vec<String>,
}

impl WalReport {
    /// An empty report of the recorded `events`: their counts, nothing
    /// checked yet.
    fn of_recording(events: &[IoEvent]) -> Self {
        WalReport {
            events: events.len(),
            syncs: events.iter().filter(|e| **e == IoEvent::LogSync).count(),
            pool_syncs: events.iter().filter(|e| **e == IoEvent::PoolSync).count(),
            ..Default::default()
        }
    }
}

impl std::fmt::Display for WalReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} file events ({} log syncs, {} pool syncs, {} commits returned), {} crash states, {} violations",
            self.events,
            self.syncs,
            self.pool_syncs,
            self.returned,
            self.states,
            self.violations.len()
        )?;
        for v in self.violations.iter().take(5) {
            write!(f, "\n  {v}")?;
        }
        Ok(())
    }
}

/// One file as a crash may leave it: what is synced, and what is not yet.
#[derive(Clone, Default)]
struct FileModel {
    synced: Vec<u8>,
    unsynced: Vec<Op>,
}

#[derive(Clone)]
enum Op {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

fn apply(img: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write(off, data) => {
            let end = *off as usize + data.len();
            if img.len() < end {
                img.resize(end, 0);
            }
            img[*off as usize..end].copy_from_slice(data);
        }
        Op::SetLen(n) => img.resize(*n as usize, 0),
    }
}

impl FileModel {
    fn with(&self, keep: impl Fn(usize) -> bool) -> Vec<u8> {
        let mut img = self.synced.clone();
        for (i, op) in self.unsynced.iter().enumerate() {
            if keep(i) {
                apply(&mut img, op);
            }
        }
        img
    }

    fn all(&self) -> Vec<u8> {
        self.with(|_| true)
    }

    fn sync(&mut self) {
        self.synced = self.all();
        self.unsynced.clear();
    }
}

/// A crash state: the two files and what it models.
struct State {
    kind: String,
    pool: Vec<u8>,
    log: Vec<u8>,
}

/// Runs the workload and checks every crash state (see the module docs).
pub fn explore(s: &WalSettings) -> Result<WalReport> {
    std::fs::create_dir_all(&s.dir).map_err(|e| Error::io("create crashtest directory", e))?;
    let tag = format!("wal-{}-{:?}", std::process::id(), std::thread::current().id());
    let tag: String = tag.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
    let path = s.dir.join(format!("{tag}.pool"));
    let image = s.dir.join(format!("{tag}.image"));
    let _quiet = super::QuietUnwinds::install();
    let r = explore_at(s, &path, &image);
    for p in [&path, &image] {
        let _ = std::fs::remove_file(p);
        let _ = std::fs::remove_file(log_path(p));
    }
    r
}

fn explore_at(s: &WalSettings, path: &Path, image: &Path) -> Result<WalReport> {
    let (base_pool, base_log) = prepare(path)?;
    let rec = Recorder::new();
    record(s, path, &rec)?;
    let events = rec.events();
    let mut report = WalReport::of_recording(&events);
    check_all(&events, &base_pool, &base_log, s.max_states, |cut, returned, st| {
        report.states += 1;
        report.returned = report.returned.max(returned);
        if let Err(e) = check_state(image, &st, returned) {
            report.violations.push(format!("after event {cut} ({}; {returned} commits had returned): {e}", st.kind));
        }
    });
    Ok(report)
}

/// The double-crash mode of the `wal` explorer: for `first` crash states
/// (spread over the cut points as [`explore`] spreads its own, plus every
/// state of the last cut, the clean close), the files
/// are opened with recovery recorded (the log replayed into the pool file,
/// a new generation started), two more ledger regions run and the pool is
/// closed; then every cut point of *that* recording is crashed (at most
/// `second` states each time), over the first state's files, and checked
/// as [`explore`] checks: what the first recovery produced (the ledger's
/// count right after the open) and every region that returned since must
/// survive.
pub fn explore_double(s: &WalSettings, first: usize, second: usize) -> Result<WalReport> {
    std::fs::create_dir_all(&s.dir).map_err(|e| Error::io("create crashtest directory", e))?;
    let tag = format!("wal2-{}-{:?}", std::process::id(), std::thread::current().id());
    let tag: String = tag.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
    let paths = [s.dir.join(format!("{tag}.pool")), s.dir.join(format!("{tag}.first")), s.dir.join(format!("{tag}.image"))];
    let _quiet = super::QuietUnwinds::install();
    let r = double_at(s, first, second, &paths);
    for p in &paths {
        let _ = std::fs::remove_file(p);
        let _ = std::fs::remove_file(log_path(p));
    }
    r
}

fn double_at(s: &WalSettings, first: usize, second: usize, [path, first_path, image]: &[PathBuf; 3]) -> Result<WalReport> {
    let (base_pool, base_log) = prepare(path)?;
    let rec = Recorder::new();
    record(s, path, &rec)?;
    let events = rec.events();
    let mut report = WalReport::of_recording(&events);
    check_all(&events, &base_pool, &base_log, first, |cut, returned, st| {
        report.returned = report.returned.max(returned);
        let again = record_after(first_path, &st).map(|rec2| {
            let events2 = rec2.events();
            let mut found = Vec::new();
            check_all(&events2, &st.pool, &st.log, second, |cut2, returned2, st2| {
                report.states += 1;
                if let Err(e) = check_state(image, &st2, returned2) {
                    found.push(format!("then after event {cut2} of the recovery and 2 regions ({}): {e}", st2.kind));
                }
            });
            found
        });
        let first_kind = &st.kind;
        match again {
            Ok(found) => {
                report.violations.extend(found.into_iter().take(1).map(|v| format!("first crash after event {cut} ({first_kind}), {v}")))
            }
            Err(e) => report
                .violations
                .push(format!("first crash after event {cut} ({first_kind}): the recovery or the work after it failed: {e}")),
        }
    });
    Ok(report)
}

/// Writes a first crash state, opens it with recovery recorded, notes the
/// ledger's count, runs two ledger regions (noting each) and closes.
fn record_after(path: &Path, st: &State) -> Result<std::sync::Arc<Recorder>> {
    let write = |p: &Path, b: &[u8]| std::fs::write(p, b).map_err(|e| Error::io("write first-crash state", e));
    write(path, &st.pool)?;
    write(&log_path(path), &st.log)?;
    let rec = Recorder::new();
    let mut o = OpenOptions::new(LAYOUT).durability(Durability::Wal);
    o.wal_recorder = Some(rec.clone());
    let pool = Pool::open(path, o)?;
    let count = |pool: &Pool| {
        pool.txn(|tx| {
            let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
            Ok::<_, Error>(tx.read(lp)?.count)
        })
    };
    rec.note_returned(count(&pool)?);
    for i in 0..2 {
        let n = pool.txn(|tx| ledger_step(tx, 500 + i, [40, 3000][i as usize], 2))?;
        rec.note_returned(n);
    }
    pool.close()?;
    Ok(rec)
}

/// A `wal`-mode pool with a ledger, closed cleanly: the files the recorded
/// stretch starts from.
fn prepare(path: &Path) -> Result<(Vec<u8>, Vec<u8>)> {
    let _ = std::fs::remove_file(path);
    let opts = CreateOptions::new(LAYOUT).initial_size(0).max_size(1 << 30).durability(Durability::Wal);
    let pool = Pool::create(path, opts)?;
    make_ledger(&pool)?;
    pool.close()?;
    let read = |p: &Path| std::fs::read(p).map_err(|e| Error::io("read base image", e));
    // A clean close removes the log.
    Ok((read(path)?, read(&log_path(path)).unwrap_or_default()))
}

/// The recorded stretch: ledger regions on `threads` threads (2PL on the
/// ledger), a growth, a checkpoint halfway, then the clean close.
fn record(s: &WalSettings, path: &Path, rec: &std::sync::Arc<Recorder>) -> Result<()> {
    let mut o = OpenOptions::new(LAYOUT).durability(Durability::Wal);
    o.wal_recorder = Some(rec.clone());
    let pool = Pool::open(path, o)?;
    if let (Some(n), Some(w)) = (s.checkpoint_bytes, pool.inner().space.persist.wal()) {
        w.set_checkpoint_bytes(n);
    }
    let switches = crate::failpoint::switches();
    // One thread grows the pool (a 2 MB payload); threads stay small (the
    // images are written for every crash state).
    let big = if s.threads > 1 { 20_000 } else { 2_000_000 };
    let sizes = [40u64, 3000, 200, big, 64];
    let work = |t: u32| -> Result<()> {
        crate::failpoint::adopt_switches(&switches);
        for i in 0..s.regions {
            let n = t as u64 * 1000 + i;
            let count = pool.txn(|tx| {
                let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
                tx.lock_ptr(lp)?;
                ledger_step(tx, n, sizes[i as usize % sizes.len()], 2)?;
                Ok::<_, Error>(tx.read(lp)?.count)
            })?;
            rec.note_returned(count);
            if t == 0 && i == s.regions / 2 {
                if let Some(w) = pool.inner().space.persist.wal() {
                    w.checkpoint()?;
                }
            }
        }
        Ok(())
    };
    if s.threads <= 1 {
        work(0)?;
    } else {
        std::thread::scope(|sc| {
            let hs: Vec<_> = (0..s.threads).map(|t| sc.spawn(move || work(t))).collect();
            hs.into_iter().try_for_each(|h| h.join().unwrap_or_else(|_| Err(Error::corrupt("a workload thread panicked"))))
        })?;
    }
    pool.close()
}

/// A crash state at one cut point, before its files are built.
#[derive(Clone, Debug)]
enum Spec {
    /// Every write so far reached the disk.
    All,
    /// Only what was synced.
    Synced,
    /// The last unsynced log write kept only `cut` bytes, over what was
    /// there before (the earlier unsynced writes kept) or over the synced file.
    Torn { cut: usize, over_synced: bool },
    /// The last unsynced log write reached the disk but for a hole.
    Hole { at: usize, len: usize },
    /// Every unsynced pool write kept but this one.
    PoolLost(usize),
    /// Unsynced pool writes kept where `true`.
    PoolSubset(Vec<bool>),
}

/// Replays `events` into file models, calling `at(cut, returned, pool, log)`
/// after each one.
fn walk(events: &[IoEvent], base_pool: &[u8], base_log: &[u8], mut at: impl FnMut(usize, u64, &FileModel, &FileModel)) {
    let mut pool = FileModel { synced: base_pool.to_vec(), unsynced: Vec::new() };
    let mut log = FileModel { synced: base_log.to_vec(), unsynced: Vec::new() };
    let mut returned = 0;
    for (i, e) in events.iter().enumerate() {
        match e {
            IoEvent::LogWrite { off, data } => log.unsynced.push(Op::Write(*off, data.clone())),
            IoEvent::LogSync => log.sync(),
            IoEvent::PoolWrite { off, data } => pool.unsynced.push(Op::Write(*off, data.clone())),
            IoEvent::PoolSetLen(n) => pool.unsynced.push(Op::SetLen(*n)),
            IoEvent::PoolSync => pool.sync(),
            IoEvent::Returned(n) => returned = returned.max(*n),
        }
        at(i, returned, &pool, &log);
    }
}

/// Checks the crash states of every cut point, at most `max` of them
/// (spread evenly; the last cut's, the clean close, always).
fn check_all(events: &[IoEvent], base_pool: &[u8], base_log: &[u8], max: usize, mut check: impl FnMut(usize, u64, State)) {
    let mut total = 0usize;
    let mut last_first = 0;
    walk(events, base_pool, base_log, |_, _, pool, log| {
        last_first = total;
        total += specs_at(pool, log, 0).len();
    });
    let step = (total as f64 / max as f64).max(1.0);
    let keep: std::collections::BTreeSet<usize> = (0..max.min(total)).map(|k| (k as f64 * step) as usize).collect();
    let mut k = 0usize;
    walk(events, base_pool, base_log, |cut, returned, pool, log| {
        for spec in specs_at(pool, log, cut as u64) {
            if keep.contains(&k) || k >= last_first {
                check(cut, returned, build(&spec, pool, log));
            }
            k += 1;
        }
    });
}

/// The bytes of the last unsynced log write that change the file, from
/// its first to its last differing byte (offsets into the write): the log
/// is written in whole blocks, so a record's write starts with the end of
/// the record before it, written again as it is, and ends with zeros.
fn changed_span(log: &FileModel) -> Option<(usize, usize)> {
    let Some(Op::Write(off, data)) = log.unsynced.last() else { return None };
    let before = log.with(|i| i + 1 != log.unsynced.len());
    let old = |i: usize| before.get(*off as usize + i).copied().unwrap_or(0);
    let a = (0..data.len()).find(|&i| data[i] != old(i))?;
    let b = (a..data.len()).rev().find(|&i| data[i] != old(i))? + 1;
    Some((a, b))
}

/// The crash states at one cut point.
fn specs_at(pool: &FileModel, log: &FileModel, seed: u64) -> Vec<Spec> {
    let mut out = vec![Spec::All];
    if !pool.unsynced.is_empty() || !log.unsynced.is_empty() {
        out.push(Spec::Synced);
    }
    if let Some((a, b)) = changed_span(log) {
        // Cuts and holes fall where the write changes the file.
        let len = b - a;
        for cut in [a + len / 3, a + len / 2, b - 1] {
            if cut > 0 {
                out.push(Spec::Torn { cut, over_synced: false });
                out.push(Spec::Torn { cut, over_synced: true });
            }
        }
        let hole = 512.min(len / 4).max(8);
        for k in 1..4 {
            let at = (a + len * k / 4).next_multiple_of(hole);
            if at + hole <= b {
                out.push(Spec::Hole { at, len: hole });
            }
        }
    }
    let n = pool.unsynced.len();
    if n >= 2 {
        out.extend((0..n.min(6)).map(|j| Spec::PoolLost(n - 1 - j)));
        for k in 0..2u64 {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(k + 1) | 1;
            let keep = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x & 1 == 1
                })
                .collect();
            out.push(Spec::PoolSubset(keep));
        }
    }
    out
}

/// The files of a crash state.
fn build(spec: &Spec, pool: &FileModel, log: &FileModel) -> State {
    let last = log.unsynced.len().saturating_sub(1);
    let (kind, p, l) = match spec {
        Spec::All => ("everything written".to_string(), pool.all(), log.all()),
        Spec::Synced => ("only what was synced".to_string(), pool.synced.clone(), log.synced.clone()),
        Spec::Torn { cut, over_synced } => {
            let mut img = if *over_synced { log.synced.clone() } else { log.with(|i| i != last) };
            if let Some(Op::Write(off, data)) = log.unsynced.last() {
                let (off, end) = (*off as usize, *off as usize + data.len());
                if img.len() < end {
                    img.resize(end, 0);
                }
                img[off..off + cut].copy_from_slice(&data[..*cut]);
            }
            (format!("last log write torn after {cut} bytes (over_synced {over_synced})"), pool.all(), img)
        }
        Spec::Hole { at, len } => {
            let mut img = log.all();
            if let Some(Op::Write(off, _)) = log.unsynced.last() {
                let h = *off as usize + at;
                img[h..h + len].fill(0);
            }
            (format!("last log write with a {len}-byte hole at {at}"), pool.all(), img)
        }
        Spec::PoolLost(j) => (format!("pool write {j} of {} lost", pool.unsynced.len()), pool.with(|i| i != *j), log.all()),
        Spec::PoolSubset(keep) => (format!("a random subset of {} pool writes", keep.len()), pool.with(|i| keep[i]), log.all()),
    };
    State { kind, pool: p, log: l }
}

/// Writes a crash state to the scratch files, recovers it and checks it.
fn check_state(image: &Path, st: &State, returned: u64) -> std::result::Result<(), String> {
    let write = |p: &Path, b: &[u8]| std::fs::write(p, b).map_err(|e| format!("writing the image: {e}"));
    write(image, &st.pool)?;
    write(&log_path(image), &st.log)?;
    let pool = Pool::open(image, OpenOptions::new(LAYOUT).durability(Durability::Wal)).map_err(|e| format!("open failed: {e}"))?;
    pool.check().map_err(|e| format!("check failed: {e}"))?;
    if !verify_ledger(&pool, returned)? {
        return Err("the ledger is gone".into());
    }
    pool.txn(|tx| ledger_step(tx, 7, 200, 2)).map_err(|e| format!("a region after recovery: {e}"))?;
    verify_ledger(&pool, 0).map_err(|e| format!("after a region on the recovered pool: {e}"))?;
    pool.close().map_err(|e| format!("close failed: {e}"))
}
