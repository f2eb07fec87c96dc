//! Failure-atomic regions as explicit calls, and everything done inside one:
//! allocation, free, logging a range before writing it, locks, roots.
//!
//! Protocol for a front end (see `docs/c-abi.md`):
//!
//! 1. `engram_region_begin(pool, &r)`; a begin on a thread that already runs
//!    a region of that pool returns the same handle one level deeper
//!    (nesting is flattened);
//! 2. before writing any byte of an existing object through a pointer,
//!    `engram_region_log(r, addr, len)` (objects allocated in the region
//!    need no log); writes are plain stores into the mapping;
//! 3. `engram_region_commit(r)` or `engram_region_abort(r)`. An inner
//!    commit only pops a level; an inner abort dooms the region, and the
//!    outermost commit then rolls back and returns ABORTED.
//!
//! Crash behaviour: until the outermost commit returns OK, a crash undoes
//! the region; after, it is durable. A thread that exits with a region open
//! rolls it back. A region handle works only on its own thread.

use crate::args::{out, text};
use crate::handles::{add_region, region_of_pool, take_region, with_region, RegionSlot};
use crate::{call, engram_status, FfiResult};
use std::ffi::c_char;

/// A region handle (0 is never valid). Usable only on the thread that began it.
pub type engram_region = u64;

/// A root as stored, from `engram_root_get`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct engram_root {
    /// 1 if the root exists (the other fields are then set).
    pub found: u32,
    /// 1 if it names an array.
    pub array: u32,
    /// Address of the object (0 for a null root).
    pub addr: u64,
    /// Type id of the object (of the elements for an array).
    pub type_id: u32,
    /// Reserved (0).
    pub reserved: u32,
}

/// Runs `f` with the region's transaction.
fn tx<R>(region: engram_region, f: impl FnOnce(&engram::Tx<'_>) -> engram::Result<R>) -> FfiResult<R> {
    with_region(region, |slot| {
        let r = slot.region.as_ref().expect("a slot in the table holds its region");
        Ok(f(r.tx())?)
    })
}

/// Begins a failure-atomic region on `pool` (or joins the one this thread
/// is running on it); `*region` receives the handle.
///
/// # Safety
/// `region` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_region_begin(pool: crate::engram_pool, region: *mut engram_region) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let dst = unsafe { out(region, "region") }?;
        if let Some(id) = region_of_pool(pool) {
            with_region(id, |s| {
                s.depth += 1;
                Ok(())
            })?;
            *dst = id;
            return Ok(());
        }
        let entry = crate::handles::pool(pool)?;
        let r = entry.pool.begin()?;
        // A front end may link the region's new objects with plain stores
        // after the commit: the commit makes them durable (engram.h).
        r.tx().new_objects_durable_at_commit();
        *dst = add_region(RegionSlot { region: Some(r), pool_id: pool, entry, depth: 1 });
        Ok(())
    })
}

/// Ends one level of the region. At the outermost level: makes everything
/// the region did durable, or, if the region was doomed (an inner abort, a
/// lock timeout), rolls it back and returns ABORTED. The handle is invalid
/// after the outermost end, whatever the status.
#[no_mangle]
pub extern "C" fn engram_region_commit(region: engram_region) -> engram_status {
    call(|| {
        if with_region(region, |s| Ok(pop(s)))? {
            return Ok(());
        }
        let mut slot = take_region(region)?;
        let r = slot.region.take().expect("a slot in the table holds its region");
        Ok(r.commit()?)
    })
}

/// Ends one level of the region by abandoning it. At the outermost level
/// everything the region did is undone; an inner abort dooms the region
/// (the outermost commit then rolls back and returns ABORTED).
#[no_mangle]
pub extern "C" fn engram_region_abort(region: engram_region) -> engram_status {
    call(|| {
        let inner = with_region(region, |s| {
            let inner = pop(s);
            if inner {
                s.region.as_ref().expect("present").tx().doom();
            }
            Ok(inner)
        })?;
        if inner {
            return Ok(());
        }
        let mut slot = take_region(region)?;
        let r = slot.region.take().expect("a slot in the table holds its region");
        Ok(r.abort()?)
    })
}

/// Pops one nesting level; true if the region is still open after it.
fn pop(s: &mut RegionSlot) -> bool {
    if s.depth > 1 {
        s.depth -= 1;
        true
    } else {
        false
    }
}

/// Nesting depth of the region (1 = outermost), in `*depth`.
///
/// # Safety
/// `depth` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_region_depth(region: engram_region, depth: *mut u32) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let dst = unsafe { out(depth, "depth") }?;
        *dst = with_region(region, |s| Ok(s.depth))?;
        Ok(())
    })
}

/// Undo-logs `[addr, addr+len)` so the region may then overwrite it with
/// plain stores. The range must lie inside one object (or the root table);
/// otherwise BAD_POINTER. Ranges already logged, and objects allocated by
/// this region, cost nothing. `len` 0 does nothing.
#[no_mangle]
pub extern "C" fn engram_region_log(region: engram_region, addr: u64, len: u64) -> engram_status {
    // Already logged: answered without the panic guard and the error
    // plumbing (the check cannot panic; see `handles::logged_already`).
    if len != 0 && crate::handles::logged_already(region, addr, len) {
        return 0;
    }
    call(|| {
        if len == 0 {
            return with_region(region, |_| Ok(()));
        }
        with_region(region, |slot| {
            let r = slot.region.as_ref().expect("a slot in the table holds its region");
            Ok(r.log_range(addr, len)?)
        })
    })
}

/// Undo-logs `n` ranges, `ranges[2*i]` the address and `ranges[2*i+1]`
/// the length of the i-th, as `engram_region_log` each, with one fence for
/// all of them instead of one per range (the region may change none of
/// them before the call returns). A bad range gives BAD_POINTER; ranges
/// before it may be logged, which only costs their undo entries. `n` 0
/// does nothing (`ranges` may then be NULL).
///
/// # Safety
/// `ranges` is NULL (with `n` 0) or points to `2*n` readable `uint64_t`s.
#[no_mangle]
pub unsafe extern "C" fn engram_region_log_many(region: engram_region, ranges: *const u64, n: u64) -> engram_status {
    call(|| {
        let Some(count) = usize::try_from(n).ok().and_then(|n| n.checked_mul(2)) else {
            return Err(crate::invalid(format!("ranges: {n} ranges")));
        };
        // SAFETY: caller's contract.
        let words = unsafe { crate::args::array(ranges, count, "ranges") }?;
        tx(region, |t| t.log_ranges(words.chunks_exact(2).map(|r| (r[0], r[1]))))
    })
}

/// Takes the lock `key` (any 64-bit value; an object's address is the
/// convention) until the region ends (two-phase locking). Waits up to the
/// pool's lock timeout, then LOCK_TIMEOUT: the region is doomed and rolls
/// back when it ends.
#[no_mangle]
pub extern "C" fn engram_region_lock(region: engram_region, key: u64) -> engram_status {
    call(|| tx(region, |t| t.lock(key)))
}

/// Allocates one zeroed object of type `type_id`; `*addr` receives its
/// address. Freed again if the region rolls back.
///
/// # Safety
/// `addr` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_alloc(region: engram_region, type_id: u32, addr: *mut u64) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let dst = unsafe { out(addr, "addr") }?;
        *dst = tx(region, |t| t.alloc_object(type_id))?;
        Ok(())
    })
}

/// Allocates a zeroed array of `count` elements of type `type_id` (its
/// length is kept in the object header); `*addr` receives its address.
///
/// # Safety
/// `addr` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_alloc_array(region: engram_region, type_id: u32, count: u64, addr: *mut u64) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let dst = unsafe { out(addr, "addr") }?;
        *dst = tx(region, |t| t.alloc_array_of(type_id, count))?;
        Ok(())
    })
}

/// Frees the object or array at `addr` when the region commits.
/// BAD_POINTER if `addr` is not an allocated object; INVALID_ARGUMENT if
/// freed twice in one region.
#[no_mangle]
pub extern "C" fn engram_free(region: engram_region, addr: u64) -> engram_status {
    call(|| tx(region, |t| t.free_object(addr)))
}

/// Points root `name` at `addr` (0 = null), recording `type_id` and
/// whether it is an array. Undo-logged: atomic with the rest of the region.
///
/// # Safety
/// `name` is a C string.
#[no_mangle]
pub unsafe extern "C" fn engram_root_set(region: engram_region, name: *const c_char, addr: u64, type_id: u32, array: u32) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let name = unsafe { text(name, "name") }?;
        tx(region, |t| t.set_root_addr(name, addr, type_id, array != 0))
    })
}

/// Reads root `name` into `*root` (`found` = 0 if there is no such root).
/// The caller compares `type_id` with the type it expects.
///
/// # Safety
/// `name` is a C string; `root` is writable.
#[no_mangle]
pub unsafe extern "C" fn engram_root_get(region: engram_region, name: *const c_char, root: *mut engram_root) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let (name, dst) = unsafe { (text(name, "name")?, out(root, "root")?) };
        let e = tx(region, |t| t.root_entry(name))?;
        *dst = match e {
            Some(e) => engram_root { found: 1, array: e.array.into(), addr: e.addr, type_id: e.type_id, reserved: 0 },
            None => engram_root::default(),
        };
        Ok(())
    })
}

/// Removes root `name`; `*existed` (may be NULL) says whether it existed.
///
/// # Safety
/// `name` is a C string; `existed` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn engram_root_remove(region: engram_region, name: *const c_char, existed: *mut u32) -> engram_status {
    call(|| {
        // SAFETY: caller's contract.
        let name = unsafe { text(name, "name") }?;
        let had = tx(region, |t| t.remove_root(name))?;
        if !existed.is_null() {
            // SAFETY: caller's contract.
            *unsafe { out(existed, "existed") }? = had.into();
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{engram_create_options, engram_create_options_init, engram_pool_close, engram_pool_create};

    /// A C-ABI region that only allocates and fills a new object still
    /// writes it back and fences at its commit (a front end may link it with
    /// a plain store right after), while the same region in Rust leaves the
    /// write-back to the next fence (`fresh.rs`).
    #[test]
    fn a_commit_that_only_allocated_makes_the_object_durable() {
        let base = if std::path::Path::new("/dev/shm").is_dir() { std::path::PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let file = base.join(format!("engram-ffi-fresh-{}.pool", std::process::id()));
        let path = std::ffi::CString::new(file.to_str().unwrap()).unwrap();
        let layout = std::ffi::CString::new("ffi-fresh").unwrap();
        // SAFETY: all-zero is a valid engram_create_options (null layout,
        // zero sizes), and init fills it before use.
        let mut o: engram_create_options = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointers and NUL-terminated strings that outlive the calls.
        let pool = unsafe {
            assert_eq!(engram_create_options_init(&mut o), 0);
            o.layout = layout.as_ptr();
            o.durability = 1; // ENGRAM_DURABILITY_PMEM
            let mut pool = 0;
            assert_eq!(engram_pool_create(path.as_ptr(), &o, &mut pool), 0);
            pool
        };
        let fences = || engram::pmem::counters().fences;
        let mut r = 0;
        // SAFETY: `r` and `addr` are valid out-pointers; the object is 64
        // bytes of the pool's byte type, written inside its own region.
        unsafe {
            assert_eq!(engram_region_begin(pool, &mut r), 0);
            let mut addr = 0;
            assert_eq!(engram_alloc_array(r, 1, 64, &mut addr), 0);
            std::ptr::write_bytes(addr as *mut u8, 7, 64);
        }
        let before = fences();
        assert_eq!(engram_region_commit(r), 0);
        assert!(fences() > before, "the C ABI's commit of a region that only allocated issued no fence");
        assert_eq!(engram_pool_close(pool), 0);
        let _ = std::fs::remove_file(&file);
    }
}
