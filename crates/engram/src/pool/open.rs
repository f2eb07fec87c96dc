//! Creating, opening (with recovery), collecting and closing a pool.
//!
//! Open is a pipeline of small verbs, each safe to interrupt:
//!
//! 1. `read_header`: pick the valid header copy with the larger sequence
//!    number; a foreign, truncated, unknown-version or corrupt file is a typed
//!    error before anything is mapped. Before it, a write-ahead log beside
//!    the pool (`wal` mode, `wal.rs`) is replayed into the file (read-only:
//!    overlaid on the header and the private mapping);
//! 2. `map`: reserve the preferred range (or another one) and map the file;
//!    if the base moved, record the old base in the header *first*, so an
//!    interrupted relocation resumes;
//! 3. `undo_logs`: roll back every region that was running at the crash;
//! 4. heap state: after a clean close, read the span tables and bitmaps
//!    (O(metadata)); otherwise mark from the roots (swizzling pointers if the
//!    base moved) and sweep, which frees everything allocated and never linked;
//! 5. mark the pool open (clean = 0) so a crash from now on is recovered.

use super::deferred::{RecoveryGc, RecoveryGcState};
use super::map::{random_base, Mapping};
use super::space::{size_new_file, Space};
use super::{CreateOptions, OpenOptions, OpenReport, PoolInner};
use crate::alloc::Heap;
use crate::error::{Error, Result};
use crate::format::*;
use crate::gc::{MarkStats, Reloc};
use crate::pmem::{Durability, Persister};
use crate::pointers::BadField;
use crate::types::TypeTable;
use parking_lot::Mutex;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Takes the pool's file lock (`flock`: one open pool per file, across
/// processes). A child process forked by another thread holds a copy of
/// our descriptors until it execs, so a lock that was just released may
/// still be held for a moment: a held lock is retried for up to 200 ms
/// before the pool is reported `AlreadyOpen`.
fn lock_file(file: &File, path: &Path, shared: bool) -> Result<()> {
    let op = if shared { libc::LOCK_SH } else { libc::LOCK_EX } | libc::LOCK_NB;
    for attempt in 0..20 {
        // SAFETY: flock on an fd we own; the lock is released when it closes.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(Error::io("flock pool file", e));
        }
        if attempt < 19 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    Err(Error::AlreadyOpen { path: path.to_path_buf() })
}

fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

pub(super) fn create(path: &Path, o: &CreateOptions) -> Result<PoolInner> {
    if o.layout.is_empty() || o.layout.len() > LAYOUT_MAX {
        return Err(Error::invalid(format!("layout name must be 1 to {LAYOUT_MAX} bytes")));
    }
    let max = (o.max_size / SPAN_SIZE * SPAN_SIZE).min(MAX_POOL_SIZE);
    let initial = round_up(o.initial_size.max(MIN_POOL_SIZE), SPAN_SIZE);
    let smallest = round_up(MIN_POOL_SIZE, SPAN_SIZE);
    if max < smallest {
        return Err(Error::PoolTooSmall { requested: o.max_size, minimum: smallest });
    }
    if initial > max {
        return Err(Error::invalid(format!("initial size {initial} exceeds maximum size {max}")));
    }
    let mut oo = std::fs::OpenOptions::new();
    oo.read(true).write(true);
    if o.exclusive {
        oo.create_new(true);
    } else {
        // Truncated only once we hold the lock: never under an open pool.
        oo.create(true).truncate(false);
    }
    let file = oo.open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => Error::Exists { path: path.to_path_buf() },
        _ => Error::io("create pool file", e),
    })?;
    lock_file(&file, path, false)?;
    file.set_len(0).map_err(|e| Error::io("truncate pool file", e))?;
    size_new_file(&file, initial)?;
    // A log left by an earlier pool at this path belongs to that pool.
    match std::fs::remove_file(crate::wal::log_path(path)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io("remove old log", e)),
        _ => {}
    }
    let mode = choose_mode(o.durability, &file);
    let wal = start_wal(mode, path, &file, o.wal_recorder.clone(), o.wal_checkpoint_bytes)?;
    let uuid = *uuid::Uuid::new_v4().as_bytes();
    let (map, _) = Mapping::reserve(random_base(&uuid), max, &[], mode == Durability::Wal)?;
    map.map_to(&file, initial)?;
    let mut h = PoolHeader::from_bytes(&[0; 512]);
    h.magic = MAGIC;
    h.version = FORMAT_VERSION;
    h.header_len = 512;
    h.uuid = uuid;
    h.layout[..o.layout.len()].copy_from_slice(o.layout.as_bytes());
    h.base = map.base();
    h.max_size = max;
    h.size = initial;
    h.heap_off = HEAP_OFF;
    h.arena_table_off = ARENA_TABLE_OFF;
    h.roots_off = ROOTS_OFF;
    h.types_off = TYPES_OFF;
    h.log_off = LOG_OFF;
    h.roots_cap = ROOTS_CAP;
    h.types_cap = TYPES_CAP;
    h.log_slots = LOG_SLOTS;
    h.log_slot_size = LOG_SLOT_SIZE;
    h.created_unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let persist = with_wal(Persister::new(mode, o.tracer.clone()), wal, &map);
    let space = Space::new(map, persist, file, path.to_path_buf(), h, false);
    TypeTable::init_builtins(&space)?;
    // Log generations start at 1, so a zeroed entry never matches one.
    for slot in 0..LOG_SLOTS {
        space.write(crate::log::slot_off(slot), &log_gen_word(1))?;
        space.flush(crate::log::slot_off(slot), 8);
    }
    // Both copies get the header (seq 1 and 2); before this the file is not a pool.
    space.update_header(|_| {})?;
    space.update_header(|_| {})?;
    let types = TypeTable::load(&space)?;
    let heap = Heap::load(&space)?;
    let report = OpenReport { was_clean: true, created: true, ..OpenReport::default() };
    let mut inner = assemble(space, heap, types, report, MarkStats::default(), std::time::Duration::from_secs(2));
    inner.check_pointers = o.check_pointers;
    Ok(inner)
}

/// The durability mode for `file`: the one asked for, else `pmem` on a DAX
/// file system, `msync` on tmpfs (where it costs no device flush), and `wal`
/// on every other file system.
fn choose_mode(asked: Option<Durability>, file: &File) -> Durability {
    asked.unwrap_or_else(|| default_durability(file))
}

/// The mode a pool in `file` gets when none is asked for: `pmem` on a DAX
/// file system, `msync` on tmpfs, `wal` elsewhere.
pub fn default_durability(file: &File) -> Durability {
    if super::map::probe_dax(file.as_raw_fd()) {
        return Durability::Pmem;
    }
    // SAFETY: fstatfs fills the zeroed struct for an fd we own.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let tmpfs = unsafe { libc::fstatfs(file.as_raw_fd(), &mut fs) } == 0 && fs.f_type == libc::TMPFS_MAGIC;
    if tmpfs {
        Durability::Msync
    } else {
        Durability::Wal
    }
}

/// In `wal` mode, opens the pool's log (replaying what it holds into the
/// pool file first); in other modes, replays and removes a log left by an
/// earlier `wal`-mode open. Runs before the header is read. `checkpoint`
/// is the log size that triggers a checkpoint (`None`: the default).
fn start_wal(
    mode: Durability,
    path: &Path,
    file: &File,
    rec: Option<std::sync::Arc<crate::wal::Recorder>>,
    checkpoint: Option<u64>,
) -> Result<Option<std::sync::Arc<crate::wal::Wal>>> {
    if mode == Durability::Wal {
        let (wal, _replayed) = crate::wal::Wal::open(path, file, rec)?;
        if let Some(bytes) = checkpoint {
            wal.set_checkpoint_bytes(bytes);
        }
        return Ok(Some(std::sync::Arc::new(wal)));
    }
    crate::wal::replay_and_remove(path, file)?;
    Ok(None)
}

fn with_wal(p: Persister, wal: Option<std::sync::Arc<crate::wal::Wal>>, map: &Mapping) -> Persister {
    match wal {
        Some(w) => p.with_wal(w, map.base()),
        None => p,
    }
}

fn assemble(
    space: Space,
    heap: Heap,
    types: TypeTable,
    report: OpenReport,
    stats: MarkStats,
    lock_timeout: std::time::Duration,
) -> PoolInner {
    PoolInner {
        space,
        heap,
        types,
        slots: crate::tx::SlotSet::new(LOG_SLOTS),
        locks: crate::tx::LockTable::new(),
        gate: Default::default(),
        lock_timeout,
        report,
        stats: Mutex::new(stats),
        closed: std::sync::atomic::AtomicBool::new(false),
        crashed: std::sync::atomic::AtomicBool::new(false),
        layer_state: Mutex::new(None),
        check_pointers: false,
        deferred: Default::default(),
    }
}

/// Step 1: the current header, or a typed error.
/// `overlay`: pieces of a write-ahead log not yet in the file (read-only opens).
pub(crate) fn read_header(file: &File, path: &Path, overlay: &[(u64, Vec<u8>)]) -> Result<PoolHeader> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata().map_err(|e| Error::io("stat pool file", e))?.len();
    let mut buf = vec![0u8; (2 * HEADER_SLOT).min(len) as usize];
    file.read_exact_at(&mut buf, 0).map_err(|e| Error::io("read pool header", e))?;
    overlay_bytes(&mut buf, 0, overlay);
    let copy = |i: usize| -> Option<PoolHeader> {
        let b: &[u8; 512] = buf.get(i * HEADER_SLOT as usize..i * HEADER_SLOT as usize + 512)?.try_into().ok()?;
        Some(PoolHeader::from_bytes(b))
    };
    let copies: Vec<PoolHeader> = (0..2).filter_map(copy).filter(|h| h.magic == MAGIC).collect();
    if copies.is_empty() {
        if buf.len() >= 8 && buf[..8] == MAGIC {
            return Err(Error::Truncated { path: path.to_path_buf(), expected: MIN_POOL_SIZE, actual: len });
        }
        return Err(Error::NotAPool { path: path.to_path_buf() });
    }
    let h = copies
        .into_iter()
        .filter(|h| h.compute_crc() == h.crc)
        .max_by_key(|h| h.seq)
        .ok_or_else(|| Error::BadChecksum { path: path.to_path_buf() })?;
    if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&h.version) {
        return Err(Error::UnsupportedVersion { path: path.to_path_buf(), found: h.version, supported: FORMAT_VERSION });
    }
    validate_geometry(&h)?;
    if len < h.size {
        return Err(Error::Truncated { path: path.to_path_buf(), expected: h.size, actual: len });
    }
    Ok(h)
}

/// Copies the parts of `overlay`'s pieces that fall in `buf` (which holds
/// the file's bytes from offset `at`).
fn overlay_bytes(buf: &mut [u8], at: u64, overlay: &[(u64, Vec<u8>)]) {
    let end = at + buf.len() as u64;
    for (off, bytes) in overlay {
        let (s, e) = ((*off).max(at), (off + bytes.len() as u64).min(end));
        if s < e {
            buf[(s - at) as usize..(e - at) as usize].copy_from_slice(&bytes[(s - off) as usize..(e - off) as usize]);
        }
    }
}

fn validate_geometry(h: &PoolHeader) -> Result<()> {
    let fixed = h.header_len == 512
        && h.heap_off == HEAP_OFF
        && h.arena_table_off == ARENA_TABLE_OFF
        && h.roots_off == ROOTS_OFF
        && h.types_off == TYPES_OFF
        && h.log_off == LOG_OFF
        && h.roots_cap == ROOTS_CAP
        && h.types_cap == TYPES_CAP
        && h.log_slots == LOG_SLOTS
        && h.log_slot_size == LOG_SLOT_SIZE;
    let sizes = h.size >= MIN_POOL_SIZE
        && h.size <= h.max_size
        && h.max_size <= MAX_POOL_SIZE
        && h.size % SPAN_SIZE == 0
        && h.max_size % SPAN_SIZE == 0;
    let base = h.base % 4096 == 0 && h.base >= 0x1_0000 && h.base.checked_add(h.max_size).is_some_and(|e| e <= 0x7FFF_FFFF_F000);
    let reloc = h.reloc_count <= 4 && h.clean <= 1;
    if fixed && sizes && base && reloc {
        Ok(())
    } else {
        Err(Error::corrupt(format!(
            "header geometry is inconsistent (size {:#x}, max {:#x}, base {:#x}, fixed fields {})",
            h.size,
            h.max_size,
            h.base,
            if fixed { "ok" } else { "bad" }
        )))
    }
}

/// Opens the pool; with a claim on the soft-dirty bits when the recovery
/// GC is left to the background (`deferred.rs`, which the caller starts).
pub(super) fn open(path: &Path, o: &OpenOptions) -> Result<(PoolInner, Option<super::softdirty::Claim>)> {
    let file = std::fs::OpenOptions::new().read(true).write(!o.read_only).open(path).map_err(|e| Error::io("open pool file", e))?;
    lock_file(&file, path, o.read_only)?;
    let mode = if o.read_only { Durability::Process } else { choose_mode(o.durability, &file) };
    // 1a. a write-ahead log: replayed into the file, or (read-only) overlaid.
    let (wal, overlay) = if o.read_only {
        (None, crate::wal::pending_pieces(path)?)
    } else {
        (start_wal(mode, path, &file, o.wal_recorder.clone(), o.wal_checkpoint_bytes)?, Vec::new())
    };
    let h = read_header(&file, path, &overlay)?;
    if let Some(want) = &o.layout {
        if *want != h.layout_name() {
            return Err(Error::WrongLayout { path: path.to_path_buf(), expected: want.clone(), found: h.layout_name() });
        }
    }
    // 2. map, recording a move before anything depends on it.
    let mut avoid: Vec<u64> = h.reloc_from[..h.reloc_count as usize].to_vec();
    avoid.push(h.base);
    let preferred = if o.force_relocate { 0 } else { h.base };
    let (map, at_pref) = Mapping::reserve(preferred, h.max_size, &avoid, o.read_only || mode == Durability::Wal)?;
    map.map_to(&file, h.size)?;
    let persist = with_wal(Persister::new(mode, o.tracer.clone()), wal, &map);
    let space = Space::new(map, persist, file, path.to_path_buf(), h, o.read_only);
    for (off, bytes) in &overlay {
        if off.checked_add(bytes.len() as u64).is_some_and(|e| e <= space.size()) {
            space.write_bytes(*off, bytes)?;
        }
    }
    let reloc = plan_relocation(&space, &h, at_pref)?;
    let types = TypeTable::load(&space)?;
    let mut report = OpenReport { was_clean: h.clean == 1 && reloc.is_none(), relocated: reloc.is_some(), ..Default::default() };
    // 3. roll back interrupted regions.
    let translate = |v: u64| reloc.as_ref().map_or(v, |r| r.translate(v));
    for slot in 0..LOG_SLOTS {
        let n = crate::log::recover_slot(&space, slot, &translate, h.version >= 3)?;
        report.undone_entries += n;
        report.undone_regions += (n > 0) as u64;
    }
    // 3b. layers replay their durable records (the STM: commits whose
    //     in-place values may be missing), before the GC: the records
    //     reference objects nothing else links yet.
    super::layer::recover_all(&space, &translate, &mut report)?;
    // 4. heap state: the saved bitmaps after a clean close, unless one
    //    fails its checksum; then (as after a crash) marking rebuilds them.
    let clean_heap = if report.was_clean && report.undone_entries == 0 { Heap::load_clean(&space)? } else { None };
    report.bitmaps_rebuilt = report.was_clean && clean_heap.is_none();
    let mut claim = None;
    let mut gc_state = RecoveryGcState::NotNeeded;
    let (heap, stats) = if let Some(heap) = clean_heap {
        let stats = MarkStats { objects: h.stat_objects, bytes: h.stat_bytes, ..Default::default() };
        (heap, stats)
    } else {
        let heap = Heap::load(&space)?;
        claim = deferred_claim(o, mode, reloc.is_some());
        if claim.is_some() {
            // 4b. deferred: sealed now, collected in the background.
            heap.seal_small_spans();
            if !uses_cards(o) {
                super::softdirty::clear()?;
            }
            report.deferred_gc = true;
            (heap, MarkStats::default())
        } else {
            let (stats, bad) = collect_parts(&space, &heap, &types, reloc.as_ref(), &|_| {})?;
            report.recovered = Some(stats);
            report.bad_fields = bad;
            gc_state = RecoveryGcState::Eager;
            (heap, stats)
        }
    };
    // 5. relocation done; the pool is open.
    space.update_header(|h| {
        h.reloc_count = 0;
        h.reloc_from = [0; 4];
        h.clean = 0;
        // From here on the logs may hold commit records and use both halves
        // of a slot (version 3); recovery above read a version-2 pool's logs
        // as that version wrote them.
        h.version = FORMAT_VERSION;
    })?;
    let mut inner = assemble(space, heap, types, report, stats, o.lock_timeout);
    inner.check_pointers = o.check_pointers;
    inner.deferred = super::deferred::Deferred::settled(gc_state);
    inner.deferred.hook = o.recovery_gc_hook.clone();
    if claim.is_some() && uses_cards(o) {
        inner.deferred.cards = Some(super::deferred::Cards::new(h.max_size));
        inner.deferred.carding = true.into();
    }
    Ok((inner, claim))
}

/// Whether a deferred recovery GC of this open learns the written pages
/// from the regions' card table rather than the soft-dirty bits
/// (`o.recovery_gc` was resolved from the environment by `Pool::open`).
fn uses_cards(o: &OpenOptions) -> bool {
    o.region_write_cards || o.recovery_gc == RecoveryGc::DeferredCards
}

/// The soft-dirty bits for a deferred recovery GC, if this open may use
/// one: asked for, not read-only, not relocated (swizzling is eager), not
/// `trace` mode (the crash explorer replays one thread), and either the
/// regions' card table asked for (any number of pools at once) or a kernel
/// that tracks soft-dirty bits and no other soft-dirty deferred GC in this
/// process.
fn deferred_claim(o: &OpenOptions, mode: Durability, relocated: bool) -> Option<super::softdirty::Claim> {
    // The probe clears the whole process's soft-dirty bits (every page's
    // next write then faults once), so only an open that could defer asks.
    let wanted = matches!(o.recovery_gc, RecoveryGc::Deferred | RecoveryGc::DeferredCards);
    if !wanted || o.read_only || relocated || mode == Durability::Trace {
        return None;
    }
    if uses_cards(o) {
        // The card table is the pool's own: no process-wide bits to hold.
        return Some(super::softdirty::Claim::none());
    }
    if o.no_soft_dirty || !super::softdirty::available() {
        return None;
    }
    super::softdirty::Claim::take()
}

/// Decides whether pointers must be rewritten, and records the move in the
/// header before any pointer is touched.
fn plan_relocation(space: &Space, h: &PoolHeader, at_pref: bool) -> Result<Option<Reloc>> {
    let mut from: Vec<u64> = h.reloc_from[..h.reloc_count as usize].to_vec();
    if !at_pref {
        if from.len() >= 4 {
            return Err(Error::corrupt("more than four interrupted relocations"));
        }
        from.push(h.base);
        let new_base = space.base();
        let list = from.clone();
        space.update_header(|h| {
            h.base = new_base;
            h.reloc_count = list.len() as u32;
            h.reloc_from = [0; 4];
            h.reloc_from[..list.len()].copy_from_slice(&list);
        })?;
    }
    from.retain(|&b| b != space.base());
    Ok((!from.is_empty()).then(|| Reloc { from, to: space.base(), len: h.max_size }))
}

/// Mark and sweep over the parts of a pool (caller holds it exclusively).
/// Bad pointer fields are treated as null and returned.
fn collect_parts(
    space: &Space,
    heap: &Heap,
    types: &TypeTable,
    reloc: Option<&Reloc>,
    progress: &dyn Fn(u64),
) -> Result<(MarkStats, Vec<BadField>)> {
    heap.drain_caches(space);
    heap.prune_caches(space);
    let m = crate::gc::mark(space, types, reloc, progress)?;
    // No freed object may be reused while a logged range in it belongs to
    // a region whose generation bump is not durable (`log.rs`, step 4').
    space.persist.settle_bumps(crate::fences::BUMPS_BEFORE_SWEEP)?;
    heap.sweep(space, &m.marks)?;
    Ok((m.stats, m.bad))
}

/// Online collection (caller holds the GC gate exclusively).
pub(super) fn collect(inner: &PoolInner, reloc: Option<&Reloc>, progress: &dyn Fn(u64)) -> Result<MarkStats> {
    if inner.space.read_only {
        return Err(Error::ReadOnly);
    }
    super::layer::quiesce_all(inner)?;
    let (stats, _) = collect_parts(&inner.space, &inner.heap, &inner.types, reloc, progress)?;
    *inner.stats.lock() = stats;
    Ok(stats)
}

pub(super) fn close(inner: PoolInner) -> Result<()> {
    shutdown(&inner)
}

/// Clean close: allocator state written out, everything persisted, then clean = 1.
pub(super) fn shutdown(inner: &PoolInner) -> Result<()> {
    use std::sync::atomic::Ordering;
    if inner.closed.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    inner.heap.retire();
    if inner.space.read_only {
        return Ok(());
    }
    let _excl = inner.gate.write();
    let space = &inner.space;
    super::layer::quiesce_all(inner)?;
    inner.heap.drain_caches(space);
    // 1. bitmaps durable before the flag that says they are valid; sealed
    //    ones (a deferred recovery GC that did not finish) are not exact:
    //    the pool stays unclean and the next open recovers again.
    let exact = !inner.deferred.unfinished();
    if exact {
        inner.heap.save_bitmaps(space)?;
    }
    if space.persist.mode() == Durability::Msync {
        space.map.sync_all()?;
    }
    if space.persist.mode() == Durability::Wal {
        space.wal_sync_all()?;
    }
    let (objects, bytes) = inner.heap.live();
    // 2. the clean flag (two-copy header protocol).
    if exact {
        space.update_header(|h| {
            h.clean = 1;
            h.stat_objects = objects;
            h.stat_bytes = bytes;
        })?;
    }
    // 3. wal mode: the flag into the pool file; the log, empty now, goes
    //    (were the removal lost, its new generation holds no record).
    if let Some(w) = space.persist.wal() {
        w.checkpoint()?;
        std::fs::remove_file(crate::wal::log_path(&space.path)).map_err(|e| Error::io("remove log", e))?;
    }
    Ok(())
}
