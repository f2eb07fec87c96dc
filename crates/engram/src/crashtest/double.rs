//! The double-crash mode of the crash explorer.
//!
//! The single-crash explorer crashes one traced stretch and recovers each
//! image once. Some losses need two crashes: a first crash whose recovery
//! leaves the pool consistent but not *safe* (a log that recovery should
//! have retired left live, a replay cleared before its values are durable),
//! then more work, then a second crash whose recovery trusts what the first
//! left (78040e5: a record-committed region whose bump was lost, recovered
//! by moving the generation on by one instead of two, left the next
//! region's early entries live; regions on other slots then changed their
//! bytes, and a second crash undid those regions). This mode, for a
//! workload:
//!
//! 1. records the workload and explores its crash points as the single
//!    mode does (the same images, in the same order);
//! 2. takes a bounded sample of the first-crash images on: at evenly
//!    spread crash points (`first_images / per_point` of them, offset by
//!    the seed), up to `per_point` images each, skipping the explorer's two
//!    extremes (nothing / everything unflushed persisted) where a point has
//!    more: the mixed images are where a partial recovery bites;
//! 3. opens each with recovery *traced* (its stores, flushes and fences go
//!    to the same persistency model). A recovery that undid or completed a
//!    region or replayed STM records (it issued a fence `crate::fences`
//!    declares [`fences::Stage::Recovery`]) is *recovering*; one that had nothing
//!    to do (*plain*) is taken on only while `plain_images` allows. An
//!    open that issued a fence declared neither `Recovery` nor `Open` is
//!    a violation of the declarations, reported as such: a new recovery
//!    fence cannot be left undeclared, which would make every image plain;
//! 4. on each taken image, after the traced recovery, runs more work on the
//!    recovered pool, still traced ([`more_work`]): a ledger workload's
//!    regions first on another log slot (the opening thread holds its slot
//!    in an idle region meanwhile, so the recovered slot's log halves stay
//!    as recovery left them while other regions change the data they
//!    cover), then on the opening thread's slot again (its halves reused);
//!    a bank workload's STM transfers, first on a new thread (which adopts
//!    or creates a redo log), then on the opening thread; other workloads
//!    run recovery alone (a crash *during* recovery is the classic double
//!    crash);
//! 5. crashes that second trace at every ordering point (its own budget,
//!    [`DoubleSettings::second`]), recovering and checking each image as
//!    the single mode does (`check_image`: open, `Pool::check`, the
//!    invariant, and the new work on a ledger if `second_new_work`). What
//!    the second images must keep: the state the
//!    first recovery produced (the ledger's count or the bank's transfers
//!    right after the open: a recovered state is one the program may have
//!    seen) and every commit of the more work that had returned.
//!
//! A violation names both crashes: the first crash point, fence and image
//! (as the single mode's), and in its message the second crash point,
//! fence, what failed, and the second image.
//!
//! Nothing here writes a pool the check does not own: images go to scratch
//! files in the settings' directory, removed at the end.

use super::{
    check_image, check_settled_logs, ledger_step, move_money, note_returned_at, returned_before, write_image, Checks, Harness, Invariant,
    Ledger, QuietUnwinds, RETURNED,
};
use crate::error::{Error, Result};
use crate::fences;
use crate::trace::Tracer;
use crate::{OpenOptions, Pool, RecoveryGc};
use engram_model::{explore_indexed, Config, Report, Trace, Violation};
use std::path::PathBuf;
use std::sync::Arc;

/// How the double-crash mode runs.
#[derive(Clone, Debug)]
pub struct DoubleSettings {
    /// First-crash images taken on per crash point, at most.
    pub per_point: usize,
    /// Recovering first-crash images taken on in all, about (whole crash
    /// points: `first_images / per_point` of them, spread evenly).
    pub first_images: usize,
    /// Plain first-crash images (recovery had nothing to do) taken on.
    pub plain_images: usize,
    /// Explorer settings of each second crash; its seed also offsets the
    /// sample of first images.
    pub second: Config,
    /// Whether each second-crash image of a ledger workload also gets the
    /// single mode's new work (a ledger region and the allocator churn)
    /// after its checks; the workload's own invariant runs either way.
    pub second_new_work: bool,
}

impl DoubleSettings {
    /// The sweep of `cargo test`: six first images per workload, two
    /// images (the extremes) per second-crash point.
    pub fn moderate() -> Self {
        DoubleSettings {
            per_point: 2,
            first_images: 6,
            plain_images: 1,
            second: Config { max_images_per_point: 2, max_violations: 1, ..Config::default() },
            second_new_work: false,
        }
    }

    /// The deep sweep (`engram crashtest --double --deep`).
    pub fn deep() -> Self {
        DoubleSettings {
            per_point: 4,
            first_images: 32,
            plain_images: 4,
            second: Config { max_images_per_point: 8, max_violations: 1, ..Config::default() },
            second_new_work: true,
        }
    }
}

/// What the double-crash mode did.
#[derive(Clone, Debug, Default)]
pub struct DoubleReport {
    /// The first (the workload's) trace, as the single mode explores it
    /// (its `images_checked`: the first-crash images there are to take).
    pub first: Report,
    /// First-crash images taken on whose recovery had work to do / had none.
    pub recovering: usize,
    /// See `recovering`.
    pub plain: usize,
    /// First-crash images taken on to a second crash.
    pub taken: usize,
    /// Ordering points of the second traces, summed.
    pub second_points: usize,
    /// Second-crash images checked, summed.
    pub second_images: u64,
    /// Second-crash images pruned, summed.
    pub second_skipped: u128,
    /// Violations, by first crash (the second crash in the message).
    pub violations: Vec<Violation>,
}

impl std::fmt::Display for DoubleReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let skipped = Report { images_skipped: self.second_skipped, ..Default::default() };
        write!(
            f,
            "first trace: {} ordering points, {} images; {} taken on ({} recovering, {} plain): {} second-crash points, {} images \
             checked, {} skipped; {} violations",
            self.first.points,
            self.first.images_checked,
            self.taken,
            self.recovering,
            self.plain,
            self.second_points,
            self.second_images,
            skipped.skipped_text(),
            self.violations.len()
        )
    }
}

/// Scratch files of one run.
struct Files {
    first: PathBuf,
    second: PathBuf,
}

impl super::Workload {
    /// Records the workload and explores a sample of its first crashes
    /// each followed by recovery, more work and a second crash (see the
    /// module documentation).
    pub fn run_double(&self, settings: &super::Settings, double: &DoubleSettings) -> Result<DoubleReport> {
        std::fs::create_dir_all(&settings.dir).map_err(|e| Error::io("create crashtest directory", e))?;
        let tag = format!("{}-{}-{:?}-dc", self.name, std::process::id(), std::thread::current().id());
        let tag: String = tag.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        let h = Harness { settings: settings.clone(), pool_path: settings.dir.join(format!("{tag}.pool")), check: Default::default() };
        let files = Files { first: settings.dir.join(format!("{tag}.first")), second: settings.dir.join(format!("{tag}.second")) };
        let _quiet = QuietUnwinds::install();
        RETURNED.with(|r| *r.borrow_mut() = (None, Vec::new()));
        let result = (self.run)(&h).map(|trace| {
            let notes = RETURNED.with(|r| std::mem::take(&mut *r.borrow_mut())).1;
            let extra = h.check.borrow();
            Run { h: &h, double, files: &files, notes, extra: extra.as_deref() }.explore(&trace)
        });
        RETURNED.with(|r| *r.borrow_mut() = (None, Vec::new()));
        for p in [&h.pool_path, &files.first, &files.second] {
            let _ = std::fs::remove_file(p);
        }
        result
    }
}

/// One workload's double-crash exploration.
struct Run<'a> {
    h: &'a Harness,
    double: &'a DoubleSettings,
    files: &'a Files,
    /// The first trace's returned commits.
    notes: Vec<(usize, u64)>,
    /// The workload's own invariant.
    extra: Option<&'a Invariant>,
}

/// Which first-crash images a run takes on, decided as they come.
struct Sample {
    /// Images per crash point (the explorer's choice), by point.
    images: std::collections::BTreeMap<usize, usize>,
    /// The crash points whose images may be taken.
    points: std::collections::BTreeSet<usize>,
    /// The current point, the rank of the current image there, and how
    /// many were taken there.
    at: (usize, usize, usize),
}

impl Sample {
    /// The points to take images at: every point (one with no image is
    /// never offered), or `budget / per_point` of them spread evenly,
    /// offset by the seed.
    fn new(images: std::collections::BTreeMap<usize, usize>, d: &DoubleSettings) -> Self {
        let all: Vec<usize> = images.keys().copied().collect();
        let want = (d.first_images / d.per_point.max(1)).max(1);
        let points = if all.len() <= want {
            all.into_iter().collect()
        } else {
            let stride = all.len() as f64 / want as f64;
            let offset = (d.second.seed % 997) as f64 / 997.0 * stride;
            (0..want).map(|j| all[((offset + j as f64 * stride) as usize).min(all.len() - 1)]).collect()
        };
        Sample { images, points, at: (usize::MAX, 0, 0) }
    }

    /// Whether the next image, at `point`, is a candidate: at a chosen
    /// point, below the point's quota, and not one of the two extremes
    /// (the explorer's first two images) where the point has more.
    fn offer(&mut self, point: usize, per_point: usize) -> bool {
        if self.at.0 == point {
            self.at.1 += 1;
        } else {
            self.at = (point, 0, 0);
        }
        let n = self.images.get(&point).copied().unwrap_or(0);
        self.points.contains(&point) && self.at.2 < per_point && (n <= 2 || self.at.1 >= 2)
    }

    fn took(&mut self) {
        self.at.2 += 1;
    }
}

impl Run<'_> {
    /// Counts the first-crash images per point, then takes the sample on
    /// (see the module documentation), and reports.
    fn explore(&self, trace: &Trace) -> DoubleReport {
        let cfg = &self.h.settings.explorer;
        let mut images = std::collections::BTreeMap::new();
        let first = explore_indexed(trace, cfg, &mut |p, _| (*images.entry(p).or_insert(0) += 1, Ok(())).1, &mut |_, _| {});
        let mut sample = Sample::new(images, self.double);
        let mut report = DoubleReport { first, ..Default::default() };
        let mut second = |point: usize, img: &[u8]| {
            if !sample.offer(point, self.double.per_point)
                || report.taken >= self.double.first_images.saturating_add(self.double.plain_images)
            {
                return Ok(());
            }
            let plain_left = report.plain < self.double.plain_images;
            match self.twice(point, img, plain_left, &mut report) {
                Taken::No => Ok(()),
                Taken::Yes(r) => {
                    sample.took();
                    report.taken += 1;
                    r
                }
            }
        };
        let mut cfg = cfg.clone();
        cfg.max_violations = self.double.second.max_violations.max(1);
        let r = explore_indexed(trace, &cfg, &mut second, &mut |_, _| {});
        report.violations = r.violations;
        report
    }

    /// Opens a first-crash image with its recovery traced.
    fn recover(&self, img: &[u8]) -> Result<(Pool, Arc<Tracer>)> {
        write_image(&self.files.first, img).map_err(|e| Error::io("write first-crash image", e))?;
        let tracer = Tracer::starting_on_attach();
        if let Some(k) = self.h.settings.flush_kind {
            tracer.force_flush_kind(k);
        }
        RETURNED.with(|r| *r.borrow_mut() = (Some(tracer.clone()), Vec::new()));
        let o = OpenOptions::new(super::LAYOUT).trace(tracer.clone()).recovery_gc(RecoveryGc::Eager);
        match Pool::open(&self.files.first, o) {
            Ok(pool) => Ok((pool, tracer)),
            Err(e) => {
                tracer.stop();
                Err(e)
            }
        }
    }

    /// First crash at `point` with image `img`: recovery and more work
    /// traced, then every second crash of that trace checked; an image
    /// whose recovery had nothing to do is taken only if `plain` (else
    /// `Taken::No`). `Err` names the first second-crash violation.
    fn twice(&self, point: usize, img: &[u8], plain: bool, report: &mut DoubleReport) -> Taken {
        let (pool, tracer) = match self.recover(img) {
            Ok(p) => p,
            Err(e) => return Taken::Yes(Err(format!("the first recovery failed: {e}"))),
        };
        let opened = tracer.position();
        let issued = tracer.fences();
        if let Some(w) = issued.iter().find(|w| !fences::issued_by_open(w)) {
            tracer.stop();
            pool.simulate_crash();
            return Taken::Yes(Err(format!(
                "the first recovery issued the fence {w:?}, which `engram::fences` declares neither Recovery nor Open"
            )));
        }
        let recovering = issued.iter().any(|w| fences::is_recovery(w));
        if let Err(m) = if self.h.settings.settled_logs { check_settled_logs(&pool) } else { Ok(()) } {
            tracer.stop();
            pool.simulate_crash();
            return Taken::Yes(Err(format!("the first recovery left its logs unsettled: {m}")));
        }
        if !recovering && !plain {
            tracer.stop();
            pool.simulate_crash();
            return Taken::No;
        }
        if recovering {
            report.recovering += 1;
        } else {
            report.plain += 1;
        }
        let floor = returned_before(&self.notes, point);
        let more = more_work(&pool, &tracer, floor);
        let trace = tracer.stop();
        pool.simulate_crash();
        let notes = RETURNED.with(|r| std::mem::take(&mut *r.borrow_mut())).1;
        let (what, own) = match more {
            Ok(m) => m,
            Err(e) => return Taken::Yes(Err(format!("the work after the first recovery failed: {e}"))),
        };
        let inv: Option<&Invariant> = own.as_deref().or(self.extra);
        let checks = Checks { new_work: self.double.second_new_work, settled_logs: self.h.settings.settled_logs };
        let mut check = |p: usize, img: &[u8]| check_image(&self.files.second, img, returned_before(&notes, p), inv, checks);
        let r = explore_indexed(&trace, &self.double.second, &mut check, &mut |_, _| {});
        report.second_points += r.points;
        report.second_images += r.images_checked;
        report.second_skipped = report.second_skipped.saturating_add(r.images_skipped);
        Taken::Yes(match r.violations.first() {
            None => Ok(()),
            Some(v) => Err(format!(
                "{} a second crash before event {} of {} ({}, {}): {} [second image: {}]",
                if recovering { "recovery had work to do;" } else { "recovery had nothing to do;" },
                v.event_index,
                trace.events.len(),
                if v.event_index <= opened { "during the first recovery".to_string() } else { format!("during {what}") },
                v.fence.unwrap_or("end of trace"),
                v.message,
                v.image
            )),
        })
    }
}

/// Whether a first image was taken on, and what its second crashes found.
enum Taken {
    No,
    Yes(std::result::Result<(), String>),
}

/// The invariant the second crashes are checked against, when the work
/// brings its own (`None`: the workload's).
type Own = Option<Box<Invariant>>;

/// Runs more of the workload on a pool just recovered from a first crash
/// (traced), noting its returned commits; the state the recovery produced
/// is noted first, at position 0 (`floor`: what the first crash had to
/// keep, for workloads without a ledger or a bank). Returns what it did and
/// the invariant to check, if not the workload's.
fn more_work(pool: &Pool, tracer: &Tracer, floor: u64) -> Result<(String, Own)> {
    if let Some(count) = ledger_count(pool)? {
        note_returned_at(0, count);
        ledger_more(pool, tracer)?;
        return Ok((format!("{LEDGER_REGIONS} ledger regions (the first {OTHER_SLOT} on another log slot)"), None));
    }
    if let Some(own) = super::stm::bank_more(pool, tracer)? {
        return Ok((format!("{} STM transfers (the first on a new thread)", super::stm::BANK_MORE), Some(own)));
    }
    note_returned_at(0, floor);
    Ok(("nothing more (a crash during recovery)".to_string(), None))
}

/// The ledger's count, if the pool has a ledger.
fn ledger_count(pool: &Pool) -> Result<Option<u64>> {
    pool.txn(|tx| match tx.root::<Ledger>("ledger")? {
        Some(l) => Ok(Some(tx.read(l)?.count)),
        None => Ok(None),
    })
}

/// Ledger regions after the first recovery, and how many of them run on
/// another slot.
const LEDGER_REGIONS: u64 = 3;
const OTHER_SLOT: u64 = 2;

/// The ledger's more work: regions `0..OTHER_SLOT` on a second thread while
/// this one holds its log slot (the lowest free one, which its regions used
/// before the crash) in an idle region, then the rest on this thread.
/// Region 0 changes every account and the ledger header (a transfer around
/// the ring of accounts, committed by record: 2 fences, bump pending), so
/// an undo entry the first recovery wrongly left live covers bytes it
/// changed; region 1 is an allocating ledger step (3 fences); region 2 a
/// transfer by record on the recovered slot.
fn ledger_more(pool: &Pool, tracer: &Tracer) -> Result<()> {
    let switches = crate::failpoint::switches();
    let notes = pool.txn(|_| {
        std::thread::scope(|s| {
            s.spawn(|| {
                crate::failpoint::adopt_switches(&switches);
                ledger_regions(pool, tracer, 0..OTHER_SLOT)
            })
            .join()
            .unwrap_or_else(|_| Err(Error::corrupt("a workload thread panicked")))
        })
    })?;
    let rest = ledger_regions(pool, tracer, OTHER_SLOT..LEDGER_REGIONS)?;
    for (at, n) in notes.into_iter().chain(rest) {
        note_returned_at(at, n);
    }
    Ok(())
}

/// Regions `ks` of [`ledger_more`]: (trace position after each returned,
/// the count it wrote).
fn ledger_regions(pool: &Pool, tracer: &Tracer, ks: std::ops::Range<u64>) -> Result<Vec<(usize, u64)>> {
    let mut notes = Vec::new();
    for k in ks {
        let i = 200 + k;
        let count = pool.txn(|tx| if k % 2 == 0 { counted_transfer(tx, k == 0) } else { ledger_step(tx, i, 40, 3) })?;
        notes.push((tracer.position(), count));
    }
    Ok(notes)
}

/// A region that only logs (committed by record): moves `a + 1` from
/// account `a` to the next, for every account (`ring`) or for account 0,
/// and counts itself. The count has no log entry, so it unlinks the
/// ledger's log (left to the GC): the entries must run down from the count.
fn counted_transfer(tx: &crate::Tx<'_>, ring: bool) -> Result<u64> {
    let lp = tx.root::<Ledger>("ledger")?.ok_or_else(|| Error::corrupt("no ledger"))?;
    tx.lock_ptr(lp)?;
    let l = tx.read(lp)?;
    let n = if ring { super::ACCOUNTS } else { 1 };
    for a in 0..n {
        move_money(tx, l.accounts, a, (a + 1) % super::ACCOUNTS, a + 1)?;
    }
    let l = Ledger { count: l.count + 1, log: crate::PPtr::null(), ..l };
    tx.write(lp, l)?;
    Ok(l.count)
}
