//! `engram create`, `info` and `gc`: thin wrappers over the engine
//! (`check` is in `check.rs`).
//!
//! `info` and `check` open the pool with `OpenOptions::read_only`: the file
//! is mapped privately, so the recovery a crashed pool needs runs on a
//! copy-on-write view and what it did is reported without the file changing.
//! `gc` opens read-write and closes cleanly. A crash in the middle of any of
//! these leaves the pool as the engine's own crash rules say: `info` and
//! `check` wrote nothing, `gc` is recovered on the next open.

use crate::args::CreateArgs;
use crate::error::CliError;
use crate::progress;
use crate::size::show;
use engram::{CreateOptions, Durability, OpenOptions, Pool, PoolInfo, RootInfo};
use std::fmt::Write as _;
use std::path::Path;

/// Opens `path` read-only; errors carry the path.
fn open_read_only(path: &Path) -> Result<Pool, CliError> {
    Pool::open(path, OpenOptions::any().read_only()).map_err(|e| CliError::from(e).at(path))
}

/// `engram create`: makes the file, prints what it made, closes cleanly.
pub fn create(a: &CreateArgs) -> Result<(), CliError> {
    let mut o = CreateOptions::new(&a.layout);
    if let Some(s) = a.size {
        o = o.initial_size(s);
    }
    if let Some(m) = a.max_size {
        o = o.max_size(m);
    }
    if let Some(d) = a.durability {
        o = o.durability(d.into());
    }
    let at = |e: engram::Error| CliError::from(e).at(&a.path);
    let pool = Pool::create(&a.path, o).map_err(at)?;
    let i = pool.info();
    println!(
        "created {}: layout {:?}, {}, may grow to {}, durability {} this session",
        a.path.display(),
        i.layout,
        show(i.size),
        show(i.max_size),
        i.durability.name()
    );
    pool.close().map_err(at)
}

/// What `engram info` reports about one pool.
struct Facts {
    info: PoolInfo,
    roots: Vec<RootInfo>,
    /// Mode a read-write open would pick, and why.
    mode: Durability,
    why: &'static str,
}

fn gather(path: &Path) -> Result<Facts, CliError> {
    let pool = open_read_only(path)?;
    let info = pool.info();
    let roots = pool.roots().map_err(|e| CliError::from(e).at(path))?;
    // A read-only open maps privately and runs in `process` mode, and a
    // private mapping is never MAP_SYNC, so `info.dax` is false there; probe
    // the file the way a read-write open would map it.
    let dax = info.dax || dax::probe(path);
    let default = std::fs::File::open(path).map(|f| engram::default_durability(&f)).unwrap_or(Durability::Wal);
    let (mode, why) = if dax {
        (Durability::Pmem, "the file is on a DAX file system (MAP_SYNC mapping)")
    } else if default == Durability::Msync {
        (Durability::Msync, "the file is on tmpfs (no device flush to save)")
    } else {
        (Durability::Wal, "the file is not on a DAX file system or tmpfs (no MAP_SYNC)")
    };
    Ok(Facts { info, roots, mode, why })
}

/// `engram info`: text or JSON on stdout.
pub fn info(path: &Path, json: bool) -> Result<(), CliError> {
    let f = gather(path)?;
    print!("{}", if json { render_json(&f) } else { render_text(&f) });
    Ok(())
}

fn mode_effect(mode: Durability, flush: &str) -> String {
    match mode {
        Durability::Pmem => format!("commits flush cache lines with {flush} + sfence"),
        Durability::Msync => format!("commits msync(MS_SYNC) their dirty pages; pmem mode would flush with {flush} + sfence"),
        Durability::Wal => {
            "commits append one checksummed record to the pool's .wal log and fdatasync it, shared by concurrent commits".to_string()
        }
        Durability::Process => "nothing is flushed; survives a process crash, not a power failure".to_string(),
        Durability::Trace => "stores, flushes and fences are recorded for the crash explorer".to_string(),
    }
}

fn recovery_text(i: &PoolInfo) -> String {
    let o = &i.open;
    let mut s = String::new();
    if o.was_clean {
        s.push_str("nothing to recover");
    } else {
        let r = o.recovered.unwrap_or_default();
        let _ = write!(
            s,
            "would undo {} region(s) ({} log entries) and keep {} reachable objects ({} bytes), freeing the rest",
            o.undone_regions, o.undone_entries, r.objects, r.bytes
        );
    }
    if o.relocated {
        s.push_str("; the preferred base is taken in this process, so pointers would be rewritten");
    }
    if !o.bad_fields.is_empty() {
        let _ = write!(
            s,
            "; {} pointer field(s) point at no live object and are treated as null (`engram check` lists them, `--repair` clears them)",
            o.bad_fields.len()
        );
    }
    s
}

fn render_text(f: &Facts) -> String {
    let i = &f.info;
    let mut s = String::new();
    let mut line = |k: &str, v: String| {
        let _ = writeln!(s, "{k:<12} {v}");
    };
    line("pool", i.path.display().to_string());
    line("format", format!("version {}", i.version));
    line("layout", format!("{:?}", i.layout));
    line("uuid", i.uuid.clone());
    line("size", format!("{}, may grow to {}", show(i.size), show(i.max_size)));
    line("base", format!("{:#x}", i.base));
    line("durability", format!("{} by default, because {}", f.mode.name(), f.why));
    line("", mode_effect(f.mode, i.flush));
    line("flush", format!("{} (the best cache-line write-back this CPU offers)", i.flush));
    line("live", format!("{} objects, {}", i.live_objects, show(i.live_bytes)));
    line("free", show(i.heap.free_bytes));
    line("types", format!("{} registered", i.types));
    line("roots", f.roots.len().to_string());
    for r in &f.roots {
        let ty = if r.array { format!("[{}]", r.type_name) } else { r.type_name.clone() };
        line("", format!("{:?} -> {ty} at {:#x}", r.name, r.addr));
    }
    let clean = if i.open.was_clean { "clean" } else { "not clean (the last process crashed or was killed)" };
    line("last close", clean.to_string());
    line("recovery", recovery_text(i));
    s
}

fn json_str(v: &str) -> String {
    let mut s = String::from("\"");
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

fn render_json(f: &Facts) -> String {
    let i = &f.info;
    let o = &i.open;
    let r = o.recovered.unwrap_or_default();
    let roots: Vec<String> = f
        .roots
        .iter()
        .map(|r| {
            format!("{{\"name\":{},\"type\":{},\"array\":{},\"addr\":{}}}", json_str(&r.name), json_str(&r.type_name), r.array, r.addr)
        })
        .collect();
    let mut s = String::from("{");
    let _ = write!(
        s,
        "\"path\":{},\"version\":{},\"layout\":{},\"uuid\":{},\"size\":{},\"max_size\":{},\"base\":{},",
        json_str(&i.path.display().to_string()),
        i.version,
        json_str(&i.layout),
        json_str(&i.uuid),
        i.size,
        i.max_size,
        i.base
    );
    let _ = write!(
        s,
        "\"durability\":{{\"mode\":{},\"dax\":{},\"reason\":{},\"flush\":{}}},",
        json_str(f.mode.name()),
        f.mode == Durability::Pmem,
        json_str(f.why),
        json_str(i.flush)
    );
    let _ = write!(
        s,
        "\"live_objects\":{},\"live_bytes\":{},\"free_bytes\":{},\"types\":{},\"roots\":[{}],",
        i.live_objects,
        i.live_bytes,
        i.heap.free_bytes,
        i.types,
        roots.join(",")
    );
    let _ = write!(
        s,
        "\"last_close_clean\":{},\"recovery\":{{\"undone_regions\":{},\"undone_entries\":{},\"recovered_objects\":{},\"recovered_bytes\":{},\"relocated\":{},\"bad_fields\":{}}}}}",
        o.was_clean, o.undone_regions, o.undone_entries, r.objects, r.bytes, o.relocated, o.bad_fields.len()
    );
    s.push('\n');
    s
}

/// `engram gc`: collects and reports live figures before and after.
pub fn gc(path: &Path) -> Result<(), CliError> {
    let at = |e: engram::Error| CliError::from(e).at(path);
    let pool = Pool::open(path, OpenOptions::any()).map_err(at)?;
    let report = pool.open_report().clone();
    if !report.was_clean {
        println!("recovered: undid {} region(s) ({} log entries) left by a crash", report.undone_regions, report.undone_entries);
    }
    let before = pool.info();
    let pb = progress::objects("collecting");
    let result = pool.collect_with_progress(&|n| pb.set_position(n));
    pb.finish_and_clear();
    let st = result.map_err(at)?;
    let after = pool.info();
    println!("before: {} objects live, {}", before.live_objects, show(before.live_bytes));
    println!(
        "after:  {} objects live, {} ({} objects freed; {} reachable)",
        after.live_objects,
        show(after.live_bytes),
        before.live_objects.saturating_sub(after.live_objects),
        st.objects
    );
    println!("free:   {}", show(after.heap.free_bytes));
    if st.bad_fields > 0 {
        println!(
            "warning: {} pointer field(s) point at no live object and were treated as null; `engram check --repair {}` clears them",
            st.bad_fields,
            path.display()
        );
    }
    pool.close().map_err(at)
}

/// Whether the file can be mapped with MAP_SYNC (it is on a DAX file system).
mod dax {
    use std::os::fd::AsRawFd;
    use std::path::Path;

    /// Maps the first page read-only with `MAP_SHARED_VALIDATE | MAP_SYNC`,
    /// which only DAX file systems accept, and unmaps it at once.
    pub fn probe(path: &Path) -> bool {
        let Ok(file) = std::fs::File::open(path) else { return false };
        // SAFETY: a fresh read-only mapping chosen by the kernel (no
        // MAP_FIXED), never dereferenced, unmapped just below.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC, file.as_raw_fd(), 0)
        };
        if p == libc::MAP_FAILED {
            return false;
        }
        // SAFETY: `p` is the 4096-byte mapping made above and nothing refers to it.
        unsafe { libc::munmap(p, 4096) };
        true
    }
}

#[cfg(test)]
mod tests {
    use super::json_str;

    #[test]
    fn json_escapes() {
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
