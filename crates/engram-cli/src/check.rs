//! `engram check` and `engram check --repair`.
//!
//! `check` opens the pool read-only (a crashed pool is recovered on a
//! private copy-on-write view, the file is not changed) and walks every
//! reachable object. Pointer fields that point at no live object (a pointer
//! from another pool, a stray value, a dangling pointer) are listed, with
//! the object, its type and the field's offset; the walk treats them as
//! null, and the command exits 1. Live objects whose header fields disagree
//! with how the engine writes headers (heap objects carry no checksum) are
//! listed too (exit 1); `--repair` does not touch them.
//!
//! `--repair` then asks for confirmation (`--yes` skips it), opens the pool
//! read-write and clears those fields with `Pool::repair`: one undo-logged
//! region, so a crash during the repair changes nothing (the next open rolls
//! it back and the fields are reported again), followed by a collection.

use crate::error::CliError;
use crate::progress;
use engram::{BadField, OpenOptions, Pool};
use std::io::{BufRead, Write};
use std::path::Path;

/// `engram check [--repair [--yes]]`.
pub fn check(path: &Path, repair: bool, yes: bool) -> Result<(), CliError> {
    let at = |e: engram::Error| CliError::from(e).at(path);
    let bad = {
        let pool = Pool::open(path, OpenOptions::any().read_only()).map_err(at)?;
        let roots = pool.info().roots;
        let report = pool.open_report().clone();
        let pb = progress::objects("checking");
        let result = pool.check_report(&|n| pb.set_position(n));
        pb.finish_and_clear();
        let r = result.map_err(at)?;
        let after = if report.was_clean {
            String::new()
        } else {
            format!(" (after recovery on a private copy undid {} region(s); the file is unchanged)", report.undone_regions)
        };
        if !r.header_doubts.is_empty() {
            // Heap objects carry no checksum: headers that disagree with how
            // the engine writes them are reported, not repaired.
            println!("{}: {} object header(s) look damaged:", path.display(), r.header_doubts.len());
            for d in &r.header_doubts {
                println!("  {d}");
            }
            if r.bad_fields.is_empty() {
                return Err(at(engram::Error::Corrupt { what: format!("{} damaged object header(s)", r.header_doubts.len()) }));
            }
        }
        if r.free_count > 0 {
            // A reachable object in a free slot would be handed out again
            // while linked: reported, not repaired (nothing says which side
            // is wrong, the link or the allocator's record).
            println!("{}: {} reachable object(s) the allocator holds as free:", path.display(), r.free_count);
            for d in &r.free_reachable {
                println!("  {d}");
            }
            if r.bad_fields.is_empty() {
                return Err(at(engram::Error::Corrupt { what: format!("{} reachable object(s) in free slots", r.free_count) }));
            }
        }
        if r.bad_fields.is_empty() {
            println!(
                "{}: consistent: {} objects ({} bytes) reachable from {} root(s){after}",
                path.display(),
                r.stats.objects,
                r.stats.bytes,
                roots
            );
            return Ok(());
        }
        println!(
            "{}: {} objects ({} bytes) reachable from {} root(s){after}; {} pointer field(s) point at no live object (treated as null):",
            path.display(),
            r.stats.objects,
            r.stats.bytes,
            roots,
            r.bad_fields.len()
        );
        print_fields(&r.bad_fields);
        r.bad_fields
    };
    if !repair {
        println!("run `engram check --repair {}` to clear them", path.display());
        return Err(bad_fields(path, &bad));
    }
    if !yes && !confirm(&format!("clear these {} field(s), setting them to null? [y/N] ", bad.len())) {
        println!("nothing changed");
        return Err(bad_fields(path, &bad));
    }
    repair_now(path)
}

/// Opens read-write, clears the bad fields, collects, closes cleanly.
fn repair_now(path: &Path) -> Result<(), CliError> {
    let at = |e: engram::Error| CliError::from(e).at(path);
    let pool = Pool::open(path, OpenOptions::any()).map_err(at)?;
    let pb = progress::objects("repairing");
    let result = pool.repair(&|n| pb.set_position(n));
    pb.finish_and_clear();
    let cleared = result.map_err(at)?;
    println!("cleared {} field(s):", cleared.len());
    print_fields(&cleared);
    let st = pool.check().map_err(at)?;
    println!("{}: consistent: {} objects ({} bytes) reachable", path.display(), st.objects, st.bytes);
    pool.close().map_err(at)
}

fn print_fields(bad: &[BadField]) {
    for b in bad {
        println!("  {b}");
    }
}

fn bad_fields(path: &Path, bad: &[BadField]) -> CliError {
    let first = bad.first().map(ToString::to_string).unwrap_or_default();
    CliError::from(engram::Error::BadFields { count: bad.len() as u64, first }).at(path)
}

/// Asks `question` on stdout; true for an answer of y or yes.
fn confirm(question: &str) -> bool {
    print!("{question}");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}
