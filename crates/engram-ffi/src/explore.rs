//! The `trace` durability mode and the crash explorer, for front ends.
//!
//! A front end proves its transactions crash-consistent the way the engine
//! does (`engram::crashtest`):
//!
//! 1. `engram_tracer_new`, then create/open a pool with durability TRACE and
//!    that tracer; set up the state to start from;
//! 2. `engram_tracer_start`; run the workload; `engram_tracer_stop`;
//!    `engram_pool_abandon` (as a crash would);
//! 3. `engram_explore`: the explorer crashes the recorded stretch at every
//!    ordering point under the x86 persistency model (Px86), writes each
//!    possible image to a scratch file, opens it with the real recovery code,
//!    runs `check` on it, then the caller's invariant callback on the open
//!    pool. The report counts images and violations and quotes the first.
//!
//! The callback runs on the calling thread, inside `engram_explore`; the
//! pool handle it gets is valid only during the callback (do not close it).

use crate::args::{fill, input, out, text};
use crate::handles::{add_pool, next_id, remove_pool};
use crate::{call, engram_code, engram_status, invalid, FfiError, FfiResult};
use engram::trace::Tracer;
use engram_model::Trace;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::sync::{Arc, OnceLock};

/// A tracer handle (0 is never valid).
pub type engram_tracer = u64;

struct TracerEntry {
    tracer: Arc<Tracer>,
    /// The trace of the last start/stop.
    trace: Option<Trace>,
}

fn tracers() -> &'static Mutex<HashMap<u64, TracerEntry>> {
    static T: OnceLock<Mutex<HashMap<u64, TracerEntry>>> = OnceLock::new();
    T.get_or_init(Default::default)
}

fn closed(id: u64) -> FfiError {
    FfiError::Code(engram_code::ENGRAM_ERR_CLOSED, format!("tracer handle {id} is freed or was never made"))
}

pub(crate) fn tracer(id: u64) -> FfiResult<Arc<Tracer>> {
    tracers().lock().get(&id).map(|t| t.tracer.clone()).ok_or_else(|| closed(id))
}

/// Makes a tracer (not recording yet); `*tracer` receives its handle.
///
/// # Safety
/// `tracer` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_tracer_new(tracer: *mut engram_tracer) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let dst = unsafe { out(tracer, "tracer") }?;
        let id = next_id();
        tracers().lock().insert(id, TracerEntry { tracer: Tracer::new(), trace: None });
        *dst = id;
        Ok(())
    })
}

/// Starts recording (from the pool's current content).
#[no_mangle]
pub extern "C" fn engram_tracer_start(tracer: engram_tracer) -> engram_status {
    call(|| {
        self::tracer(tracer)?.start();
        Ok(())
    })
}

/// Stops recording and keeps the trace for `engram_explore`; `*events`
/// (may be NULL) receives the number of events recorded.
///
/// # Safety
/// `events` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn engram_tracer_stop(tracer: engram_tracer, events: *mut u64) -> engram_status {
    call(|| {
        let t = self::tracer(tracer)?;
        let trace = t.stop();
        if !events.is_null() {
            // SAFETY: caller's contract.
            *unsafe { out(events, "events") }? = trace.events.len() as u64;
        }
        tracers().lock().get_mut(&tracer).ok_or_else(|| closed(tracer))?.trace = Some(trace);
        Ok(())
    })
}

/// Frees the tracer (pools still using it keep it alive until they close).
#[no_mangle]
pub extern "C" fn engram_tracer_free(tracer: engram_tracer) -> engram_status {
    call(|| tracers().lock().remove(&tracer).map(|_| ()).ok_or_else(|| closed(tracer)))
}

/// Invariant callback of `engram_explore`: return 0 if the recovered pool
/// is good; otherwise non-zero, with a description written to `msg`
/// (`msg_cap` bytes, NUL-terminated).
pub type engram_check_fn = Option<unsafe extern "C" fn(user: *mut c_void, pool: crate::engram_pool, msg: *mut c_char, msg_cap: usize) -> i32>;

/// Settings of `engram_explore`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct engram_explore_options {
    /// Layout name every image is opened with (required).
    pub layout: *const c_char,
    /// Directory for the scratch image file (tmpfs is fastest; required).
    pub scratch_dir: *const c_char,
    /// Images checked at one ordering point at most (0 = 12, the `make test` sweep).
    pub max_images_per_point: u32,
    /// Stop after this many violations (0 = 5).
    pub max_violations: u32,
    /// Seed of the explorer's random choices (0 = default).
    pub seed: u64,
}

/// What the explorer did.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct engram_explore_report {
    /// Events in the trace.
    pub stores: u64,
    /// Flushes in the trace.
    pub flushes: u64,
    /// Fences in the trace.
    pub fences: u64,
    /// Ordering points (crash points) in the trace.
    pub points: u64,
    /// Images built and checked.
    pub images_checked: u64,
    /// Images possible but not checked (pruned), saturated at 2^64-1.
    pub images_skipped: u64,
    /// Images that failed (open, check or the invariant).
    pub violations: u64,
    /// The first violation, readable (empty if none).
    pub first_violation: [c_char; 512],
}

/// Explores every crash of the tracer's last recorded stretch (see the
/// module docs). Returns OK when exploring worked, whatever it found: read
/// `report->violations`.
///
/// # Safety
/// `opts` points to initialised options with valid strings; `report` is
/// writable; `check` (may be NULL: only open + check) is callable with `user`.
#[no_mangle]
pub unsafe extern "C" fn engram_explore(tracer: engram_tracer, opts: *const engram_explore_options, check: engram_check_fn, user: *mut c_void, report: *mut engram_explore_report) -> engram_status {
    call(|| {
        // SAFETY: caller's contract, for each argument.
        let (o, dst) = unsafe { (input(opts, "opts")?, out(report, "report")?) };
        // SAFETY: caller's contract for the options' strings.
        let (layout, dir) = unsafe { (text(o.layout, "opts->layout")?, text(o.scratch_dir, "opts->scratch_dir")?) };
        let trace = tracers().lock().get_mut(&tracer).ok_or_else(|| closed(tracer))?.trace.take();
        let trace = trace.ok_or_else(|| invalid("the tracer has no stopped trace (start, run, stop first)"))?;
        let mut cfg = engram_model::Config::default();
        cfg.max_images_per_point = if o.max_images_per_point == 0 { 12 } else { o.max_images_per_point as usize };
        cfg.max_violations = if o.max_violations == 0 { 5 } else { o.max_violations as usize };
        if o.seed != 0 {
            cfg.seed = o.seed;
        }
        std::fs::create_dir_all(dir).map_err(|e| engram::Error::Io { op: "create scratch dir", source: e })?;
        let image = std::path::Path::new(dir).join(format!("engram-explore-{}-{}.image", std::process::id(), next_id()));
        let r = engram_model::explore(&trace, &cfg, &mut |img| check_image(&image, img, layout, check, user), &mut |_, _| {});
        let _ = std::fs::remove_file(&image);
        let mut rep = engram_explore_report {
            stores: r.stores as u64,
            flushes: r.flushes as u64,
            fences: r.fences as u64,
            points: r.points as u64,
            images_checked: r.images_checked,
            images_skipped: r.images_skipped.min(u64::MAX as u128) as u64,
            violations: r.violations.len() as u64,
            first_violation: [0; 512],
        };
        if let Some(v) = r.violations.first() {
            fill(&mut rep.first_violation, &format!("at event {} ({}): {}; {}", v.event_index, v.fence.unwrap_or("end"), v.message, v.image));
        }
        *dst = rep;
        Ok(())
    })
}

/// Writes one crash image, opens it with recovery, checks it, runs `check`.
fn check_image(path: &std::path::Path, img: &[u8], layout: &str, check: engram_check_fn, user: *mut c_void) -> Result<(), String> {
    std::fs::write(path, img).map_err(|e| format!("writing image: {e}"))?;
    let o = engram::OpenOptions::new(layout).durability(engram::Durability::Process);
    let pool = engram::Pool::open(path, o).map_err(|e| format!("open failed: {e}"))?;
    pool.check(&|_| {}).map_err(|e| format!("check failed: {e}"))?;
    let id = add_pool(pool);
    let verdict = match check {
        None => Ok(()),
        Some(f) => {
            let mut msg = [0 as c_char; 512];
            // SAFETY: the caller of engram_explore promised `f` is callable
            // with `user`; `msg` is a live buffer of the length we pass.
            let rc = unsafe { f(user, id, msg.as_mut_ptr(), msg.len()) };
            if rc == 0 {
                Ok(())
            } else {
                msg[msg.len() - 1] = 0;
                // SAFETY: NUL-terminated above.
                let s = unsafe { std::ffi::CStr::from_ptr(msg.as_ptr()) };
                Err(format!("invariant: {}", s.to_string_lossy()))
            }
        }
    };
    let closed = remove_pool(id).map_err(|_| "the invariant callback closed the pool".to_string())?;
    match Arc::try_unwrap(closed) {
        Ok(e) => e.pool.close().map_err(|e| format!("close failed: {e}"))?,
        Err(_) => return Err("the invariant callback kept the pool busy".into()),
    }
    verdict
}
