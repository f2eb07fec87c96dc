//! `engram crashtest`: the crash explorer from the command line.
//!
//! Runs the engine's crash-consistency workloads (`engram::crashtest`) with
//! a progress bar over ordering points, prints for each workload its
//! ordering points, images checked, images skipped by pruning and
//! violations, and fails (exit 1) if there is any violation. The simulated
//! crashes unwind through the engine; the sweep's panic hook keeps them
//! silent (real panics are still printed).

use crate::args::{CrashtestArgs, FlushKindArg};
use crate::error::CliError;
use crate::progress;
use engram::crashtest::{workload, workloads, DoubleSettings, Settings, Workload};
use std::path::PathBuf;

/// Runs the command.
pub fn run(a: &CrashtestArgs) -> Result<(), CliError> {
    let chosen: Vec<Workload> = if a.workload == "all" {
        workloads().to_vec()
    } else {
        let w = workload(&a.workload).ok_or_else(|| CliError::Usage {
            what: format!(
                "unknown workload {:?}; choose one of: all, {}",
                a.workload,
                workloads().iter().map(|w| w.name).collect::<Vec<_>>().join(", ")
            ),
        })?;
        vec![w]
    };
    let dir = a.dir.clone().unwrap_or_else(default_dir).join(format!("engram-crashtest-{}", std::process::id()));
    let mut s = if a.deep { Settings::deep(&dir) } else { Settings::moderate(&dir) };
    if let Some(n) = a.images {
        s.explorer.max_images_per_point = n.max(1);
    }
    if let Some(n) = a.regions {
        s.regions = n.max(1);
    }
    s.explorer.seed = a.seed;
    s.flush_kind = a.flush_kind.map(|k| match k {
        FlushKindArg::Clwb => engram::trace::FlushKind::Clwb,
        FlushKindArg::Clflushopt => engram::trace::FlushKind::Clflushopt,
        FlushKindArg::Clflush => engram::trace::FlushKind::Clflush,
    });
    println!(
        "crash explorer: x86 persistency model, {} sweep, up to {} images per ordering point, {} regions per workload",
        if a.deep { "deep" } else { "moderate" },
        s.explorer.max_images_per_point,
        s.regions
    );
    if a.double {
        let mut d = if a.deep { DoubleSettings::deep() } else { DoubleSettings::moderate() };
        d.first_images = a.first_images.unwrap_or(d.first_images);
        d.per_point = a.per_point.unwrap_or(d.per_point).max(1);
        d.second.seed = a.seed;
        return run_double(&chosen, &s, &d, &dir);
    }
    let (mut violations, mut images) = (0usize, 0u64);
    for w in chosen {
        let pb = progress::steps(0, w.name);
        let r = w.run(&s, &mut |done, total| {
            pb.set_length(total as u64);
            pb.set_position(done as u64);
        });
        pb.finish_and_clear();
        let r = r.map_err(|source| CliError::Engine { path: Some(dir.clone()), source })?;
        println!(
            "{:<14} {:>4} ordering points ({} equivalent), {:>6} images checked, {} skipped, {} violations  [{}]",
            w.name,
            r.points,
            r.points_equivalent,
            r.images_checked,
            r.skipped_text(),
            r.violations.len(),
            w.about
        );
        for v in &r.violations {
            println!("  VIOLATION before trace event {} (fence: {}): {}", v.event_index, v.fence.unwrap_or("end of trace"), v.message);
            println!("    image: {}", v.image);
        }
        violations += r.violations.len();
        images += r.images_checked;
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{images} images checked, {violations} violations");
    if violations > 0 {
        return Err(CliError::Invariant { what: format!("{violations} crash images failed recovery or an invariant") });
    }
    Ok(())
}

/// `--double`: each workload's first crashes, recovered, more work, and
/// a second crash at every point of that (see `engram::crashtest::double`).
fn run_double(chosen: &[Workload], s: &Settings, d: &DoubleSettings, dir: &std::path::Path) -> Result<(), CliError> {
    println!(
        "double-crash mode: up to {} first-crash images per workload ({} per crash point, {} plain), up to {} images per second-crash point",
        d.first_images, d.per_point, d.plain_images, d.second.max_images_per_point
    );
    let (mut violations, mut images) = (0usize, 0u64);
    for w in chosen {
        let r = w.run_double(s, d).map_err(|source| CliError::Engine { path: Some(dir.to_path_buf()), source })?;
        println!("{:<14} {r}", w.name);
        for v in &r.violations {
            println!(
                "  VIOLATION: first crash before trace event {} (fence: {}): {}",
                v.event_index,
                v.fence.unwrap_or("end of trace"),
                v.message
            );
            println!("    first image: {}", v.image);
        }
        violations += r.violations.len();
        images += r.second_images;
    }
    let _ = std::fs::remove_dir_all(dir);
    println!("{images} second-crash images checked, {violations} violations");
    if violations > 0 {
        return Err(CliError::Invariant { what: format!("{violations} double crashes failed recovery or an invariant") });
    }
    Ok(())
}

fn default_dir() -> PathBuf {
    if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    }
}
