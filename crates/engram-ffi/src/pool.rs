//! Pool-level entry points: create, open, close, reports, types, roots
//! listing, persistence of a range, GC and check.
//!
//! Ownership: a pool handle is valid from a successful create/open until a
//! successful `engram_pool_close` (or `engram_pool_abandon`); the pool file
//! stays locked (one open per file, across processes) meanwhile. Strings
//! passed in are borrowed for the call only; strings and arrays passed out
//! are copied into the caller's buffers.

use crate::args::{array, fill, input, opt_text, out, text};
use crate::handles::{add_pool, remove_pool};
use crate::{call, engram_status, invalid, FfiResult};
use engram::{CreateOptions, Durability, OpenOptions, Pool, TypeDesc};
use std::ffi::c_char;
use std::time::Duration;

/// A pool handle (0 is never a valid handle).
pub type engram_pool = u64;

/// Durability modes, for the `durability` fields of the options.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum engram_durability {
    /// `pmem` on a DAX mapping, `msync` on tmpfs, `wal` elsewhere.
    ENGRAM_DURABILITY_AUTO = 0,
    /// CLWB/CLFLUSHOPT/CLFLUSH (by CPUID) + SFENCE.
    ENGRAM_DURABILITY_PMEM = 1,
    /// msync(MS_SYNC) of the dirty pages at each fence: ordinary storage.
    ENGRAM_DURABILITY_MSYNC = 2,
    /// No flushing: survives a process crash, not a power failure.
    ENGRAM_DURABILITY_PROCESS = 3,
    /// Records stores, flushes and fences for the crash explorer (needs a tracer).
    ENGRAM_DURABILITY_TRACE = 4,
    /// Private mapping + write-ahead log: one fdatasync per commit, shared
    /// by concurrent commits (group commit). Ordinary storage.
    ENGRAM_DURABILITY_WAL = 5,
}

/// When a pool opened after a crash collects its garbage
/// (`engram_pool_open_recovery_gc`; docs/gc.md).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum engram_recovery_gc {
    /// `ENGRAM_RECOVERY_GC` (`eager`, `deferred`, `deferred-cards`) if set, else EAGER.
    ENGRAM_RECOVERY_GC_AUTO = 0,
    /// In the open, before it returns.
    ENGRAM_RECOVERY_GC_EAGER = 1,
    /// In the background with the kernel's soft-dirty bits; eager without them.
    ENGRAM_RECOVERY_GC_DEFERRED = 2,
    /// In the background with the regions' card table (any kernel): only
    /// for programs that write the pool through regions alone (no stores
    /// outside a region, e.g. `engram_persist` of data written directly).
    ENGRAM_RECOVERY_GC_DEFERRED_CARDS = 3,
}

/// Options of `engram_pool_create`. Fill with `engram_create_options_init`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct engram_create_options {
    /// Layout name checked on every open (1 to 64 bytes, UTF-8). Required.
    pub layout: *const c_char,
    /// Initial file size in bytes (rounded up; default 16 MiB).
    pub initial_size: u64,
    /// Largest size the pool may grow to (default 64 GiB).
    pub max_size: u64,
    /// A value of `engram_durability` (default AUTO).
    pub durability: u32,
    /// Non-zero: overwrite an existing file instead of failing with EXISTS.
    pub overwrite: u32,
    /// Tracer receiving events in TRACE mode (0 = none; TRACE mode needs one).
    pub tracer: u64,
}

/// Options of `engram_pool_open`. Fill with `engram_open_options_init`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct engram_open_options {
    /// Expected layout name, or NULL to accept any.
    pub layout: *const c_char,
    /// A value of `engram_durability` (default AUTO).
    pub durability: u32,
    /// Non-zero: map privately; nothing is ever written to the file.
    pub read_only: u32,
    /// How long `engram_region_lock` waits before LOCK_TIMEOUT (default 2000).
    pub lock_timeout_ms: u64,
    /// Tracer receiving events in TRACE mode (0 = none).
    pub tracer: u64,
}

/// What happened while opening a pool.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct engram_open_report {
    /// 1 if the pool was closed cleanly last time (no recovery needed).
    pub was_clean: u32,
    /// 1 if the pool was mapped at a new address and its pointers rewritten.
    pub relocated: u32,
    /// Undo-log entries rolled back by recovery.
    pub undone_entries: u64,
    /// Regions rolled back by recovery.
    pub undone_regions: u64,
    /// 1 if the recovery GC ran (the next three fields are then set).
    pub recovered: u32,
    /// Reserved (0).
    pub reserved: u32,
    /// Live objects the recovery GC found.
    pub live_objects: u64,
    /// Live payload bytes the recovery GC found.
    pub live_bytes: u64,
    /// Pointers rewritten by relocation.
    pub swizzled: u64,
}

/// Figures about an open pool (`engram info`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct engram_info {
    /// Format version.
    pub version: u32,
    /// A value of `engram_durability` (never AUTO).
    pub durability: u32,
    /// Address of the pool's first byte: pointers are absolute addresses in
    /// [base, base + max_size).
    pub base: u64,
    /// Bytes mapped now (grows on demand, never moves).
    pub size: u64,
    /// Largest size (the address reservation).
    pub max_size: u64,
    /// Objects allocated and not freed.
    pub live_objects: u64,
    /// Bytes of their slots, headers included.
    pub live_bytes: u64,
    /// Registered types.
    pub types: u32,
    /// Named roots.
    pub roots: u32,
    /// 1 if mapped with MAP_SYNC (DAX).
    pub dax: u32,
    /// Flush instruction in PMEM mode: 1 CLWB, 2 CLFLUSHOPT, 3 CLFLUSH.
    pub flush_instr: u32,
    /// Layout name, NUL-terminated.
    pub layout: [c_char; 72],
    /// UUID, NUL-terminated.
    pub uuid: [c_char; 40],
}

/// A type, as registered by `engram_type_register`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct engram_type_desc {
    /// Stable type name (1 to the engine's maximum bytes, UTF-8). Required.
    pub name: *const c_char,
    /// Size of one value in bytes.
    pub size: u64,
    /// Alignment (a power of two, at most 4096).
    pub align: u32,
    /// Number of entries in `ptr_offsets`.
    pub nptrs: u32,
    /// Offsets of the 8-byte pool pointers in a value (8-aligned, < size).
    pub ptr_offsets: *const u32,
    /// Field description hashed into the layout hash (NULL = the name):
    /// a changed field then changes the hash, and registering the changed
    /// type in an existing pool fails with LAYOUT_MISMATCH.
    pub signature: *const c_char,
}

/// One named root, as listed by `engram_roots_list`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct engram_root_info {
    /// Address of the object (0 for a null root).
    pub addr: u64,
    /// Type id of the object (of the elements for an array).
    pub type_id: u32,
    /// 1 if the root names an array.
    pub array: u32,
    /// Name, NUL-terminated.
    pub name: [c_char; 64],
}

/// What a mark walk found (`engram_collect`, `engram_check`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct engram_mark_stats {
    /// Live objects.
    pub objects: u64,
    /// Live payload bytes.
    pub bytes: u64,
}

pub(crate) fn durability(v: u32, tracer: u64) -> FfiResult<(Option<Durability>, Option<std::sync::Arc<engram::trace::Tracer>>)> {
    let t = if tracer != 0 { Some(crate::explore::tracer(tracer)?) } else { None };
    let d = match v {
        0 => None,
        1 => Some(Durability::Pmem),
        2 => Some(Durability::Msync),
        3 => Some(Durability::Process),
        4 if t.is_some() => Some(Durability::Trace),
        4 => return Err(invalid("TRACE durability needs a tracer")),
        5 => Some(Durability::Wal),
        _ => return Err(invalid(format!("durability {v} is not a value of engram_durability"))),
    };
    Ok((d, t))
}

fn durability_code(d: Durability) -> u32 {
    match d {
        Durability::Pmem => 1,
        Durability::Msync => 2,
        Durability::Process => 3,
        Durability::Trace => 4,
        Durability::Wal => 5,
    }
}

/// Fills `out` with the defaults (layout NULL: set it).
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn engram_create_options_init(opts: *mut engram_create_options) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let o = unsafe { out(opts, "opts") }?;
        let d = CreateOptions::new("x");
        *o = engram_create_options {
            layout: std::ptr::null(),
            initial_size: d.initial_size,
            max_size: d.max_size,
            durability: 0,
            overwrite: 0,
            tracer: 0,
        };
        Ok(())
    })
}

/// Fills `out` with the defaults (any layout, AUTO, 2 s lock timeout).
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn engram_open_options_init(opts: *mut engram_open_options) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let o = unsafe { out(opts, "opts") }?;
        *o = engram_open_options { layout: std::ptr::null(), durability: 0, read_only: 0, lock_timeout_ms: 2000, tracer: 0 };
        Ok(())
    })
}

/// # Safety
/// `o.layout` is NULL or a valid C string.
unsafe fn create_options(o: &engram_create_options) -> FfiResult<CreateOptions> {
    // SAFETY: caller's contract.
    let layout = unsafe { text(o.layout, "opts->layout") }?;
    let mut c = CreateOptions::new(layout).initial_size(o.initial_size).max_size(o.max_size);
    (c.durability, c.tracer) = durability(o.durability, o.tracer)?;
    c.exclusive = o.overwrite == 0;
    c.wal_checkpoint_bytes = wal_checkpoint_env()?;
    Ok(c)
}

/// The environment variable that sets a wal-mode pool's checkpoint size
/// (`OpenOptions::wal_checkpoint_bytes`) for every pool this process
/// creates or opens through the C ABI: a byte count in decimal. Unset or
/// empty: the engine's default (16 MiB). It lets a program's tests make
/// checkpoints frequent without an ABI change (engram-redis's
/// TestKill9Checkpoint runs its server with a few KiB, so kills land
/// during and after checkpoints).
const WAL_CHECKPOINT_ENV: &str = "ENGRAM_WAL_CHECKPOINT_BYTES";

/// `ENGRAM_WAL_CHECKPOINT_BYTES` as a checkpoint size; INVALID_ARGUMENT
/// naming the variable if it is set to anything but a byte count.
fn wal_checkpoint_env() -> FfiResult<Option<u64>> {
    match std::env::var(WAL_CHECKPOINT_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Ok(v) => parse_wal_checkpoint(&v),
        Err(std::env::VarError::NotUnicode(_)) => Err(invalid(format!("{WAL_CHECKPOINT_ENV} is not UTF-8"))),
    }
}

/// Parses a value of `ENGRAM_WAL_CHECKPOINT_BYTES` ("" is unset).
fn parse_wal_checkpoint(v: &str) -> FfiResult<Option<u64>> {
    if v.is_empty() {
        return Ok(None);
    }
    v.parse::<u64>().map(Some).map_err(|_| invalid(format!("{WAL_CHECKPOINT_ENV}={v:?}: expected a byte count in decimal")))
}

/// # Safety
/// `o.layout` is NULL or a valid C string.
unsafe fn open_options(o: &engram_open_options) -> FfiResult<OpenOptions> {
    // SAFETY: caller's contract.
    let layout = unsafe { opt_text(o.layout, "opts->layout") }?;
    let mut p = OpenOptions::any();
    p.layout = layout.map(str::to_string);
    (p.durability, p.tracer) = durability(o.durability, o.tracer)?;
    p.read_only = o.read_only != 0;
    p.lock_timeout = Duration::from_millis(o.lock_timeout_ms);
    p.wal_checkpoint_bytes = wal_checkpoint_env()?;
    Ok(p)
}

/// Creates a pool file at `path` and opens it; `*pool` receives the handle.
///
/// # Safety
/// `path` is a C string; `opts` points to initialised options; `pool` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_pool_create(
    path: *const c_char,
    opts: *const engram_create_options,
    pool: *mut engram_pool,
) -> engram_status {
    call(|| {
        // SAFETY: caller's contract, for each argument.
        let (path, o, dst) = unsafe { (text(path, "path")?, input(opts, "opts")?, out(pool, "pool")?) };
        // SAFETY: `o` came from the caller's options.
        let c = unsafe { create_options(o) }?;
        *dst = add_pool(Pool::create(path, c)?);
        Ok(())
    })
}

/// Opens an existing pool, recovering it if it was not closed cleanly
/// (`engram_pool_open_report` says what recovery did).
///
/// # Safety
/// `path` is a C string; `opts` is NULL (defaults) or initialised options; `pool` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_pool_open(path: *const c_char, opts: *const engram_open_options, pool: *mut engram_pool) -> engram_status {
    // SAFETY: the caller's contract is this function's.
    unsafe { engram_pool_open_recovery_gc(path, opts, 0, pool) }
}

/// `engram_pool_open` with the recovery GC's policy after a crash: a value
/// of `engram_recovery_gc` (`engram_recovery_gc_status` then says where it
/// stands). INVALID_ARGUMENT for another value.
///
/// # Safety
/// As `engram_pool_open`.
#[no_mangle]
pub unsafe extern "C" fn engram_pool_open_recovery_gc(
    path: *const c_char,
    opts: *const engram_open_options,
    recovery_gc: u32,
    pool: *mut engram_pool,
) -> engram_status {
    call(|| {
        // SAFETY: caller's contract, for each argument.
        let (path, dst) = unsafe { (text(path, "path")?, out(pool, "pool")?) };
        let mut o = if opts.is_null() {
            OpenOptions { wal_checkpoint_bytes: wal_checkpoint_env()?, ..OpenOptions::any() }
        } else {
            // SAFETY: caller's contract.
            unsafe { open_options(input(opts, "opts")?) }?
        };
        o.recovery_gc = match recovery_gc {
            0 => engram::RecoveryGc::Auto,
            1 => engram::RecoveryGc::Eager,
            2 => engram::RecoveryGc::Deferred,
            3 => engram::RecoveryGc::DeferredCards,
            v => return Err(invalid(format!("recovery_gc {v} is not a value of engram_recovery_gc"))),
        };
        *dst = add_pool(Pool::open(path, o)?);
        Ok(())
    })
}

/// Opens the pool at `path` (expecting `opts->layout`), or creates it with
/// `opts` if there is no file; `*created` is 1 if it was created (the
/// program's first run, go-pmem's `pmem.Init`), else 0.
///
/// # Safety
/// As `engram_pool_create`; `created` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_pool_open_or_create(
    path: *const c_char,
    opts: *const engram_create_options,
    pool: *mut engram_pool,
    created: *mut u32,
) -> engram_status {
    call(|| {
        // SAFETY: caller's contract, for each argument.
        let (path, o, dst, made) = unsafe { (text(path, "path")?, input(opts, "opts")?, out(pool, "pool")?, out(created, "created")?) };
        // SAFETY: `o` came from the caller's options.
        let c = unsafe { create_options(o) }?;
        let exists = std::path::Path::new(path).exists();
        let p = if exists {
            let mut oo = OpenOptions::new(&c.layout);
            (oo.durability, oo.tracer) = (c.durability, c.tracer.clone());
            oo.wal_checkpoint_bytes = c.wal_checkpoint_bytes;
            Pool::open(path, oo)?
        } else {
            Pool::create(path, c)?
        };
        *dst = add_pool(p);
        *made = u32::from(!exists);
        Ok(())
    })
}

/// Closes the pool cleanly (allocator state written, header marked clean)
/// and invalidates the handle. Fails with BUSY (handle still valid) while
/// regions of the pool are running.
#[no_mangle]
pub extern "C" fn engram_pool_close(pool: engram_pool) -> engram_status {
    call(|| {
        let e = remove_pool(pool)?;
        match std::sync::Arc::try_unwrap(e) {
            Ok(e) => Ok(e.pool.close()?),
            // Another thread is inside a call on this pool: it closes
            // cleanly when that call returns.
            Err(_) => {
                Err(engram::Error::Busy { what: "a call on another thread is using the pool; it closes when that call returns" }.into())
            }
        }
    })
}

/// Abandons the pool as a crash would (nothing more is written; the next
/// open recovers) and invalidates the handle. For crash tests.
#[no_mangle]
pub extern "C" fn engram_pool_abandon(pool: engram_pool) -> engram_status {
    call(|| {
        let e = remove_pool(pool)?;
        e.pool.clone().simulate_crash();
        Ok(())
    })
}

/// What the open did (recovery, relocation).
///
/// # Safety
/// `report` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_pool_open_report(pool: engram_pool, report: *mut engram_open_report) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let dst = unsafe { out(report, "report") }?;
        let p = crate::handles::pool(pool)?;
        let r = p.pool.open_report();
        let g = r.recovered.unwrap_or_default();
        *dst = engram_open_report {
            was_clean: r.was_clean.into(),
            relocated: r.relocated.into(),
            undone_entries: r.undone_entries,
            undone_regions: r.undone_regions,
            recovered: r.recovered.is_some().into(),
            reserved: 0,
            live_objects: g.objects,
            live_bytes: g.bytes,
            swizzled: g.swizzled,
        };
        Ok(())
    })
}

/// Figures about the pool (base address, sizes, mode, counts, names).
///
/// # Safety
/// `info` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_pool_info(pool: engram_pool, info: *mut engram_info) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let dst = unsafe { out(info, "info") }?;
        let i = crate::handles::pool(pool)?.pool.info();
        let mut v = engram_info {
            version: i.version,
            durability: durability_code(i.durability),
            base: i.base,
            size: i.size,
            max_size: i.max_size,
            live_objects: i.live_objects,
            live_bytes: i.live_bytes,
            types: i.types as u32,
            roots: i.roots as u32,
            dax: i.dax.into(),
            flush_instr: match i.flush {
                "clwb" => 1,
                "clflushopt" => 2,
                _ => 3,
            },
            layout: [0; 72],
            uuid: [0; 40],
        };
        fill(&mut v.layout, &i.layout);
        fill(&mut v.uuid, &i.uuid);
        *dst = v;
        Ok(())
    })
}

/// # Safety
/// `desc` points to an initialised description whose pointers are valid.
unsafe fn type_desc(desc: *const engram_type_desc) -> FfiResult<TypeDesc> {
    // SAFETY: caller's contract.
    let d = unsafe { input(desc, "desc") }?;
    // SAFETY: caller's contract for the description's own pointers.
    let (name, ptrs, sig) = unsafe {
        (
            text(d.name, "desc->name")?,
            array(d.ptr_offsets, d.nptrs as usize, "desc->ptr_offsets")?,
            opt_text(d.signature, "desc->signature")?,
        )
    };
    if name.is_empty() {
        return Err(invalid("desc->name is empty"));
    }
    Ok(TypeDesc::new(name, d.size, d.align, ptrs.to_vec(), sig.unwrap_or(name)))
}

/// Registers a type (or finds it by name) and returns its id in `*type_id`.
/// A type of that name with another layout is LAYOUT_MISMATCH naming it.
/// Ids are per pool; register each type after every open. Type id 1 is
/// the built-in byte type (size 1), usable for byte arrays.
///
/// # Safety
/// `desc` points to an initialised description; `type_id` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_type_register(pool: engram_pool, desc: *const engram_type_desc, type_id: *mut u32) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let (d, dst) = unsafe { (type_desc(desc)?, out(type_id, "type_id")?) };
        *dst = crate::handles::pool(pool)?.pool.register_type(&d)?;
        Ok(())
    })
}

/// The layout hash the engine records for `desc` (no pool needed).
///
/// # Safety
/// As `engram_type_register`; `hash` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_type_layout_hash(desc: *const engram_type_desc, hash: *mut u64) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let (d, dst) = unsafe { (type_desc(desc)?, out(hash, "hash")?) };
        *dst = d.hash;
        Ok(())
    })
}

/// Size, alignment and layout hash of a registered type id; the name is
/// copied into `name` (`name_cap` bytes, NUL-terminated, may be NULL/0).
///
/// # Safety
/// The out-pointers are writable; `name` has `name_cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn engram_type_info(
    pool: engram_pool,
    type_id: u32,
    size: *mut u64,
    align: *mut u32,
    hash: *mut u64,
    name: *mut c_char,
    name_cap: usize,
) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let (s, a, h) = unsafe { (out(size, "size")?, out(align, "align")?, out(hash, "hash")?) };
        let d = crate::handles::pool(pool)?.pool.type_desc(type_id).ok_or_else(|| invalid(format!("unknown type id {type_id}")))?;
        (*s, *a, *h) = (d.size, d.align, d.hash);
        if name_cap > 0 {
            // SAFETY: caller's contract: `name` has `name_cap` writable bytes.
            let buf = unsafe { std::slice::from_raw_parts_mut(out(name, "name")?, name_cap) };
            fill(buf, &d.name);
        }
        Ok(())
    })
}

/// Lists the named roots: fills up to `cap` entries of `roots` and sets
/// `*count` to how many roots exist (call again with a larger buffer if
/// `*count > cap`).
///
/// # Safety
/// `roots` has `cap` writable entries (may be NULL when `cap` is 0); `count` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_roots_list(
    pool: engram_pool,
    roots: *mut engram_root_info,
    cap: usize,
    count: *mut usize,
) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let n = unsafe { out(count, "count") }?;
        let list = crate::handles::pool(pool)?.pool.roots()?;
        *n = list.len();
        if cap == 0 {
            return Ok(());
        }
        // SAFETY: caller's contract: `cap` writable entries.
        let buf = unsafe { std::slice::from_raw_parts_mut(out(roots, "roots")?, cap) };
        for (dst, r) in buf.iter_mut().zip(&list) {
            *dst = engram_root_info { addr: r.addr, type_id: r.type_id, array: r.array.into(), name: [0; 64] };
            fill(&mut dst.name, &r.name);
        }
        Ok(())
    })
}

/// Starts writing back `[addr, addr+len)` of the pool; durable after the
/// next `engram_fence` on this thread. BAD_POINTER outside the mapping.
#[no_mangle]
pub extern "C" fn engram_flush(pool: engram_pool, addr: u64, len: u64) -> engram_status {
    call(|| Ok(crate::handles::pool(pool)?.pool.flush(addr, len)?))
}

/// Orders and completes this thread's earlier flushes.
#[no_mangle]
pub extern "C" fn engram_fence(pool: engram_pool) -> engram_status {
    call(|| Ok(crate::handles::pool(pool)?.pool.fence()?))
}

/// Flush then fence: `[addr, addr+len)` is durable on return.
#[no_mangle]
pub extern "C" fn engram_persist(pool: engram_pool, addr: u64, len: u64) -> engram_status {
    call(|| Ok(crate::handles::pool(pool)?.pool.persist(addr, len)?))
}

/// Collects garbage now: everything not reachable from a root (or a
/// running region's log) is freed. Waits for running regions; BUSY if
/// called while this thread is inside a region of the pool. `stats` may be NULL.
///
/// # Safety
/// `stats` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn engram_collect(pool: engram_pool, stats: *mut engram_mark_stats) -> engram_status {
    call(|| {
        let s = crate::handles::pool(pool)?.pool.collect()?;
        if !stats.is_null() {
            // SAFETY: caller's contract.
            *unsafe { out(stats, "stats") }? = engram_mark_stats { objects: s.objects, bytes: s.bytes };
        }
        Ok(())
    })
}

/// Progress of the recovery GC of this open (`engram_recovery_gc_status`).
/// After a crash the garbage is collected in `engram_pool_open`, or in the
/// background while the program runs: with `ENGRAM_RECOVERY_GC=deferred`
/// in the environment (and a kernel that tracks soft-dirty bits), or
/// `deferred-cards` (`engram_recovery_gc`, any kernel, region-only programs).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct engram_recovery_gc_report {
    /// 0 not needed (clean open), 1 collected in open, 2 pending in the
    /// background, 3 finished, 4 stopped by close (the next open recovers
    /// again), 5 failed (`error_code`; the next open recovers again).
    pub state: u32,
    /// With state 5: the error's status code.
    pub error_code: u32,
    /// Objects marked by the concurrent phase.
    pub marked: u64,
    /// Live objects after the sweep.
    pub live_objects: u64,
    /// Slots and objects the sweep freed.
    pub freed: u64,
    /// Pool pages written during the concurrent phase.
    pub dirty_pages: u64,
    /// Pointer fields found pointing at no live object (treated as null).
    pub bad_fields: u64,
    /// Wall time of the concurrent phase, in nanoseconds.
    pub concurrent_ns: u64,
    /// Wall time of the final pause (world stopped), in nanoseconds.
    pub pause_ns: u64,
    /// CPU time of the final pause, in nanoseconds.
    pub pause_cpu_ns: u64,
}

impl From<engram::RecoveryGcStatus> for engram_recovery_gc_report {
    fn from(s: engram::RecoveryGcStatus) -> Self {
        use engram::RecoveryGcState as S;
        let state = match s.state {
            S::NotNeeded => 0,
            S::Eager => 1,
            S::Pending => 2,
            S::Finished => 3,
            S::Stopped => 4,
            S::Failed => 5,
        };
        let ns = |d: Duration| d.as_nanos().min(u64::MAX as u128) as u64;
        engram_recovery_gc_report {
            state,
            error_code: s.error_code,
            marked: s.marked,
            live_objects: s.live_objects,
            freed: s.freed,
            dirty_pages: s.dirty_pages,
            bad_fields: s.bad_fields,
            concurrent_ns: ns(s.concurrent),
            pause_ns: ns(s.pause),
            pause_cpu_ns: ns(s.pause_cpu),
        }
    }
}

/// Where the recovery GC of this open stands (never blocks).
///
/// # Safety
/// `status` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_recovery_gc_status(pool: engram_pool, status: *mut engram_recovery_gc_report) -> engram_status {
    call(|| {
        let s = crate::handles::pool(pool)?.pool.recovery_gc_status();
        // SAFETY: caller's contract.
        *unsafe { out(status, "status") }? = s.into();
        Ok(())
    })
}

/// Waits until a background recovery GC is no longer pending (BUSY inside
/// a region of this thread). `status` may be NULL.
///
/// # Safety
/// `status` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn engram_recovery_gc_wait(pool: engram_pool, status: *mut engram_recovery_gc_report) -> engram_status {
    call(|| {
        let s = crate::handles::pool(pool)?.pool.wait_recovery_gc()?;
        if !status.is_null() {
            // SAFETY: caller's contract.
            *unsafe { out(status, "status") }? = s.into();
        }
        Ok(())
    })
}

/// Checks every reachable object and pointer; CORRUPT or BAD_POINTER names
/// the first inconsistency. `stats` may be NULL.
///
/// # Safety
/// `stats` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn engram_check(pool: engram_pool, stats: *mut engram_mark_stats) -> engram_status {
    call(|| {
        let s = crate::handles::pool(pool)?.pool.check()?;
        if !stats.is_null() {
            // SAFETY: caller's contract.
            *unsafe { out(stats, "stats") }? = engram_mark_stats { objects: s.objects, bytes: s.bytes };
        }
        Ok(())
    })
}

/// The object whose payload starts at `addr`: `*type_id` (of the elements
/// for an array), `*count` (1 for a plain object) and `*array`. BAD_POINTER
/// if no allocated object starts there (an interior or foreign pointer).
///
/// # Safety
/// The out-pointers are writable.
#[no_mangle]
pub unsafe extern "C" fn engram_object_info(
    pool: engram_pool,
    addr: u64,
    type_id: *mut u32,
    count: *mut u64,
    array: *mut u32,
) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let (t, c, a) = unsafe { (out(type_id, "type_id")?, out(count, "count")?, out(array, "array")?) };
        let (id, n, arr) = crate::handles::pool(pool)?.pool.object_at(addr)?;
        (*t, *c, *a) = (id, n, arr.into());
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FfiError;

    #[test]
    fn the_checkpoint_variable_is_a_decimal_byte_count() {
        assert!(matches!(parse_wal_checkpoint(""), Ok(None)));
        assert!(matches!(parse_wal_checkpoint("8192"), Ok(Some(8192))));
        assert!(matches!(parse_wal_checkpoint("0"), Ok(Some(0))));
        for bad in ["8k", "-1", " 12", "0x10", "18446744073709551616"] {
            match parse_wal_checkpoint(bad) {
                Err(FfiError::Code(code, what)) => {
                    assert_eq!(code, crate::engram_code::ENGRAM_ERR_INVALID_ARGUMENT, "{bad}");
                    assert!(what.contains(WAL_CHECKPOINT_ENV), "{what}");
                }
                Ok(v) => panic!("{bad:?} gave {v:?}"),
                Err(FfiError::Engine(e)) => panic!("{bad:?} gave {e}"),
            }
        }
    }
}
