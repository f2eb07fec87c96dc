//! The pool's bytes: the mapping, the file behind it, the current header, and
//! bounds-checked access to persistent memory.
//!
//! What it keeps true:
//! - every access through [`Space`] stays inside the mapped prefix of the file
//!   (checked on every call, except [`Space::write_known`], whose caller
//!   names a place the allocator or a pointer check already located: an
//!   allocated slot's header, a located object's flags word);
//! - the header is rewritten by the two-copy protocol: the copy *not* holding
//!   the current sequence number is overwritten with `seq + 1` and persisted,
//!   so a torn header write leaves the previous copy valid;
//! - growth first extends the file (with `fallocate`, so a full disk is an
//!   error now rather than a SIGBUS later), then maps the new bytes at the
//!   next address of the reservation, then persists the new size in the
//!   header. A crash before the header write leaves a longer file, which is
//!   harmless: nothing in the new part was linked yet.
//! - the file's blocks under every byte the engine stores to are allocated
//!   before the first store (so a full disk is an error, never a SIGBUS):
//!   a new pool allocates only its metadata (the first `HEAP_OFF` bytes and
//!   each arena's metadata spans), the rest of its length is a hole; the
//!   allocator calls [`Space::back`] before it hands out spans beyond the
//!   watermark `backed` (everything below it is allocated), and growth
//!   allocates the whole new part as before. A hole reads as zeros, the
//!   same bytes an allocated block holds, so nothing that reaches the media
//!   changes and a crash sees the same pool; only the time the file system
//!   spends allocating and zeroing blocks moves from creation to first use.

use super::map::Mapping;
use crate::error::{Error, Result};
use crate::format::{PoolHeader, HEADER_SLOT};
use crate::pmem::Persister;
use parking_lot::Mutex;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// Growth step when the heap needs more room: at least this, or doubling.
const GROW_MIN: u64 = 16 * 1024 * 1024;

/// [`Space::back`] allocates the file ahead of use in steps of this.
const BACKING_STEP: u64 = 2 * 1024 * 1024;

/// The mapped pool and its header.
pub(crate) struct Space {
    pub map: Mapping,
    pub persist: Persister,
    pub file: File,
    pub path: PathBuf,
    pub read_only: bool,
    /// The current header (the durable copy with the larger `seq`).
    header: Mutex<PoolHeader>,
    /// Bytes from the file's start whose blocks are known to be allocated
    /// (`back`); only grows while the pool is open.
    backed: Mutex<u64>,
}

impl Space {
    pub fn new(map: Mapping, persist: Persister, file: File, path: PathBuf, header: PoolHeader, read_only: bool) -> Self {
        if let Some(t) = persist.tracer() {
            t.attach(map.base(), map.mapped());
        }
        persist.bumps().attach(map.base());
        persist.retires().attach(map.base());
        let backed = Mutex::new(crate::format::arena_off(0) + crate::format::ARENA_META_SPANS * crate::format::SPAN_SIZE);
        Space { map, persist, file, path, read_only, header: Mutex::new(header), backed }
    }

    /// Makes sure the file's blocks under `[0, end)` are allocated before
    /// anything is stored there (rounded up to `BACKING_STEP`, clipped to
    /// the mapped size): one `fallocate` per step of fresh heap, none for
    /// bytes below the watermark. A full disk is an `Io` error here.
    pub fn back(&self, end: u64) -> Result<()> {
        let mut backed = self.backed.lock();
        if end <= *backed || self.read_only {
            return Ok(());
        }
        let to = end.next_multiple_of(BACKING_STEP).min(self.size());
        if crate::failpoint::planted("space.backing_fails") {
            return Err(Error::io("allocate pool blocks", std::io::Error::from_raw_os_error(libc::ENOSPC)));
        }
        allocate_range(&self.file, *backed, to.saturating_sub(*backed))?;
        *backed = (*backed).max(to);
        Ok(())
    }

    /// First address of the pool.
    #[inline]
    pub fn base(&self) -> u64 {
        self.map.base()
    }

    /// Bytes mapped and usable.
    #[inline]
    pub fn size(&self) -> u64 {
        self.map.mapped()
    }

    /// A copy of the current header.
    pub fn header(&self) -> PoolHeader {
        *self.header.lock()
    }

    /// Whether `[addr, addr+len)` lies in the mapped pool.
    #[inline]
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.base() && addr.checked_add(len).is_some_and(|e| e <= self.base() + self.size())
    }

    /// Reads a `T` at pool offset `off` (bounds-checked).
    pub fn read<T: Copy>(&self, off: u64) -> Result<T> {
        let addr = self.base() + off;
        if !self.contains(addr, std::mem::size_of::<T>() as u64) {
            return Err(Error::corrupt(format!("read of {} bytes at offset {off:#x} is outside the pool", std::mem::size_of::<T>())));
        }
        // SAFETY: the range is inside the live mapping (checked above); T is a
        // plain-data on-media struct for which every bit pattern is valid.
        Ok(unsafe { std::ptr::read_unaligned(addr as *const T) })
    }

    /// Writes `v` at pool offset `off` (bounds-checked, not flushed).
    pub fn write<T: Copy>(&self, off: u64, v: &T) -> Result<()> {
        let addr = self.base() + off;
        if !self.contains(addr, std::mem::size_of::<T>() as u64) {
            return Err(Error::corrupt(format!("write at offset {off:#x} is outside the pool")));
        }
        let len = std::mem::size_of::<T>() as u64;
        if let Some(t) = self.persist.tracer() {
            t.before_store(addr, len);
        }
        // SAFETY: inside the live, writable mapping (checked above).
        unsafe { std::ptr::write_unaligned(addr as *mut T, *v) };
        if let Some(t) = self.persist.tracer() {
            t.store(addr, len);
        }
        Ok(())
    }

    /// [`Space::write`] at absolute `addr` without the bounds check, for a
    /// caller that already knows the place (a slot its allocator handed out,
    /// an object its pointer check located): the store is reported to a
    /// tracer like any other (not flushed).
    ///
    /// # Safety
    /// `[addr, addr + size_of::<T>())` lies inside the live, writable mapping.
    #[inline]
    pub unsafe fn write_known<T: Copy>(&self, addr: u64, v: T) {
        debug_assert!(self.contains(addr, std::mem::size_of::<T>() as u64), "write_known at {addr:#x} outside the pool");
        let len = std::mem::size_of::<T>() as u64;
        if let Some(t) = self.persist.tracer() {
            t.before_store(addr, len);
        }
        // SAFETY: inside the live, writable mapping (the caller's contract).
        unsafe { std::ptr::write_unaligned(addr as *mut T, v) };
        if let Some(t) = self.persist.tracer() {
            t.store(addr, len);
        }
    }

    /// Writes `bytes` at pool offset `off` (bounds-checked, not flushed).
    pub fn write_bytes(&self, off: u64, bytes: &[u8]) -> Result<()> {
        let addr = self.base() + off;
        if !self.contains(addr, bytes.len() as u64) {
            return Err(Error::corrupt(format!("write at offset {off:#x} is outside the pool")));
        }
        if let Some(t) = self.persist.tracer() {
            t.before_store(addr, bytes.len() as u64);
        }
        // SAFETY: inside the live, writable mapping (checked above); `bytes`
        // is volatile memory, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
        if let Some(t) = self.persist.tracer() {
            t.store(addr, bytes.len() as u64);
        }
        Ok(())
    }

    /// Flushes `len` bytes at pool offset `off` (durable after the next fence).
    /// A range reaching outside the mapping is clipped to it (an engine bug;
    /// debug builds assert).
    #[inline]
    pub fn flush(&self, off: u64, len: u64) {
        let (addr, len) = self.clip(off, len);
        // SAFETY: `clip` keeps the range inside the live mapping, which stays
        // mapped while `self` lives.
        unsafe { self.persist.flush(addr as *const u8, len as usize) };
    }

    /// `[base+off, base+off+len)` intersected with the mapping.
    #[inline]
    fn clip(&self, off: u64, len: u64) -> (u64, u64) {
        debug_assert!(off.checked_add(len).is_some_and(|e| e <= self.size()), "flush of {off:#x}+{len} outside the pool");
        let off = off.min(self.size());
        (self.base() + off, len.min(self.size() - off))
    }

    /// Reports stores just made through raw pointers to `[addr, addr+len)`
    /// (absolute), so a tracer records them in program order. Free when
    /// not tracing.
    #[inline]
    pub fn traced(&self, addr: u64, len: u64) {
        if let Some(t) = self.persist.tracer() {
            t.store(addr, len);
        }
    }

    /// [`Space::flush`] under a name a fault-injection test can drop.
    pub fn flush_named(&self, off: u64, len: u64, what: &'static str) {
        let (addr, len) = self.clip(off, len);
        // SAFETY: as in `flush`.
        unsafe { self.persist.flush_named(addr as *const u8, len as usize, what) };
    }

    /// Writes `v` at `off`, flushes it and fences.
    pub fn write_persist<T: Copy>(&self, off: u64, v: &T, what: &'static str) -> Result<()> {
        self.write(off, v)?;
        self.flush(off, std::mem::size_of::<T>() as u64);
        self.persist.fence(what)
    }

    /// Rewrites the header with `f` applied, by the two-copy protocol.
    pub fn update_header(&self, f: impl FnOnce(&mut PoolHeader)) -> Result<()> {
        if self.read_only {
            let mut h = self.header.lock();
            f(&mut h);
            return Ok(());
        }
        let mut h = self.header.lock();
        let mut next = *h;
        f(&mut next);
        next.seq = h.seq + 1;
        next.crc = next.compute_crc();
        // 1. write the copy that does not hold the current header; a crash
        //    while it is being written leaves a bad CRC there and the current
        //    copy intact.
        let slot = (next.seq % 2) * HEADER_SLOT;
        crate::failpoint::Failpoint::HeaderBeforeWrite.hit();
        self.write_persist(slot, &next, crate::fences::HEADER_COPY)?;
        *h = next;
        Ok(())
    }

    /// Grows the pool so that at least `need` bytes are mapped.
    pub fn grow(&self, need: u64) -> Result<()> {
        let mut h = self.header.lock();
        if need <= self.size() {
            return Ok(());
        }
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        let max = h.max_size;
        if need > max {
            return Err(Error::PoolFull { requested: need - self.size(), max_size: max });
        }
        let target = need.max(self.size() * 2).max(self.size() + GROW_MIN).min(max);
        // 1. make the file long enough, failing now if the disk is full.
        allocate_file(&self.file, target)?;
        // 1b. wal mode: the new length is durable before the log records a
        //     header that relies on it (the log does not cover the length).
        if let Some(w) = self.persist.wal() {
            w.pool_grown(target)?;
        }
        // 2. map the new bytes into the reservation; nothing moves.
        self.map.map_to(&self.file, target)?;
        if let Some(t) = self.persist.tracer() {
            t.extend(target);
        }
        // 3. record the size: the header write protocol, inline (we hold the lock).
        let mut next = *h;
        next.size = target;
        next.seq = h.seq + 1;
        next.crc = next.compute_crc();
        let slot = (next.seq % 2) * HEADER_SLOT;
        self.write_persist(slot, &next, crate::fences::GROWN_SIZE)?;
        *h = next;
        Ok(())
    }
}

impl Space {
    /// Clean close in wal mode (no region or transaction running): the
    /// log's records into the pool file, then every privately modified
    /// page (stores that were never flushed too, as `msync` mode's close
    /// writes them), then `fsync`.
    pub fn wal_sync_all(&self) -> Result<()> {
        let Some(wal) = self.persist.wal() else { return Ok(()) };
        // 1. everything committed into the file, the log emptied.
        wal.checkpoint()?;
        // 2. the private copies: all of them are committed state now, or
        //    unflushed stores that may survive a crash anyway.
        for (off, len) in self.map.private_dirty_runs() {
            // SAFETY: the run lies in the live mapping (pagemap reported it
            // below `mapped()`), and nothing writes the pool during close.
            let bytes = unsafe { std::slice::from_raw_parts((self.base() + off) as *const u8, len as usize) };
            wal.write_pool(off, bytes)?;
        }
        wal.sync_pool()
    }
}

impl Drop for Space {
    fn drop(&mut self) {
        // The mapping goes away with our fields: the tracer must stop reading it.
        if let Some(t) = self.persist.tracer() {
            t.detach();
        }
    }
}

/// Allocates the blocks of `file` under `[off, off+len)` where the file
/// system supports it (the length does not change: `FALLOC_FL_KEEP_SIZE`).
/// The kernel call, never glibc's emulation (which would write bytes into
/// a file that is mapped and in use).
pub(crate) fn allocate_range(file: &File, off: u64, len: u64) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    match reserve_blocks(file, off, len) {
        Ok(()) => Ok(()),
        // Nothing to allocate ahead on this file system: stores allocate.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)) => Ok(()),
        Err(e) => Err(Error::io("allocate pool blocks", e)),
    }
}

/// The kernel's `fallocate(FALLOC_FL_KEEP_SIZE)` of `[off, off+len)` of
/// `file`: `Ok` only if the blocks are now allocated (the wal checkpoint
/// needs that answer; [`allocate_range`] forgives a file system without it).
pub(crate) fn reserve_blocks(file: &File, off: u64, len: u64) -> std::io::Result<()> {
    // SAFETY: plain syscall on an fd we own; no memory is passed.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, off as i64, len as i64) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Makes `file` `len` bytes long (sparse) and allocates the blocks of the
/// pool's metadata: the first `HEAP_OFF` bytes and every arena's metadata
/// spans below `len` (the heap's spans are allocated on first use,
/// [`Space::back`]).
pub(crate) fn size_new_file(file: &File, len: u64) -> Result<()> {
    use crate::format::{arena_off, ARENA_META_SPANS, SPAN_SIZE};
    file.set_len(len).map_err(|e| Error::io("extend pool file", e))?;
    let meta = ARENA_META_SPANS * SPAN_SIZE;
    allocate_range(file, 0, (arena_off(0) + meta).min(len))?;
    let mut a = 1;
    while arena_off(a) < len {
        allocate_range(file, arena_off(a), meta.min(len - arena_off(a)))?;
        a += 1;
    }
    Ok(())
}

/// Makes `file` at least `len` bytes long, with blocks allocated where the
/// file system supports it.
pub(crate) fn allocate_file(file: &File, len: u64) -> Result<()> {
    let cur = file.metadata().map_err(|e| Error::io("stat pool file", e))?.len();
    if cur >= len {
        return Ok(());
    }
    // SAFETY: plain syscall on an fd we own.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), cur as i64, (len - cur) as i64) };
    match rc {
        0 => Ok(()),
        libc::EOPNOTSUPP | libc::EINVAL => file.set_len(len).map_err(|e| Error::io("extend pool file", e)),
        e => Err(Error::io("allocate pool file", std::io::Error::from_raw_os_error(e))),
    }
}
