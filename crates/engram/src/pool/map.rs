//! The address reservation and the file mapping inside it.
//!
//! What it keeps true: the whole `[base, base + reserved)` range belongs to
//! this pool for as long as the [`Mapping`] lives (PROT_NONE where the file is
//! not mapped yet), so growth maps more of the file at the next address and
//! nothing ever moves. `mapped()` only grows, and every byte below it is a
//! live shared (or, read-only and in `wal` mode, private copy-on-write)
//! mapping of the file.

use crate::error::{Error, Result};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// A reserved virtual range with a prefix of the pool file mapped into it.
#[derive(Debug)]
pub struct Mapping {
    base: u64,
    reserved: u64,
    mapped: AtomicU64,
    private: bool,
    dax: std::sync::atomic::AtomicBool,
}

/// Alignment of reservations made when the preferred base is taken.
const RESERVE_ALIGN: u64 = 1 << 30;

impl Mapping {
    /// Reserves `len` bytes at `preferred`, or elsewhere if that range is
    /// taken. Returns the mapping and whether it landed at `preferred`.
    /// A range found elsewhere never overlaps any of `avoid` (old bases whose
    /// pointers may still be in the heap).
    pub fn reserve(preferred: u64, len: u64, avoid: &[u64], private: bool) -> Result<(Self, bool)> {
        if let Some(base) = reserve_at(preferred, len) {
            return Ok((Mapping::new(base, len, private), true));
        }
        let mut held = Vec::new();
        let result = loop {
            if held.len() >= 16 {
                break Err(Error::io("reserve address range", std::io::Error::other("no free range")));
            }
            let base = match reserve_anywhere(len) {
                Some(b) => b,
                None => break Err(Error::last_os("reserve address range")),
            };
            let overlaps = avoid.iter().any(|&old| base < old + len && old < base + len);
            if !overlaps {
                break Ok(base);
            }
            held.push(base);
        };
        for b in held {
            unmap(b, len);
        }
        Ok((Mapping::new(result?, len, private), false))
    }

    fn new(base: u64, reserved: u64, private: bool) -> Self {
        Mapping { base, reserved, mapped: AtomicU64::new(0), private, dax: std::sync::atomic::AtomicBool::new(false) }
    }

    /// First address of the pool.
    #[inline]
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Bytes of address space reserved for the pool (it never moves).
    #[inline]
    pub fn reserved(&self) -> u64 {
        self.reserved
    }

    /// Bytes of the file mapped so far.
    #[inline]
    pub fn mapped(&self) -> u64 {
        self.mapped.load(Ordering::Acquire)
    }

    /// Whether the file is mapped with MAP_SYNC (a DAX file system).
    pub fn is_dax(&self) -> bool {
        self.dax.load(Ordering::Relaxed)
    }

    /// Maps the file's bytes `[mapped(), to)` at the same offsets in the
    /// reservation. The caller has made the file at least `to` bytes long and
    /// serialises calls.
    pub fn map_to(&self, file: &std::fs::File, to: u64) -> Result<()> {
        let from = self.mapped();
        if to <= from {
            return Ok(());
        }
        if to > self.reserved {
            return Err(Error::invalid("mapping beyond the reservation"));
        }
        let fd = file.as_raw_fd();
        let addr = (self.base + from) as *mut libc::c_void;
        let len = (to - from) as usize;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let mut got = libc::MAP_FAILED;
        if !self.private && (from == 0 || self.is_dax()) {
            // SAFETY: addr..addr+len lies inside our own reservation, so
            // MAP_FIXED replaces only pages this Mapping owns.
            got = unsafe { libc::mmap(addr, len, prot, libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC | libc::MAP_FIXED, fd, from as i64) };
            if got != libc::MAP_FAILED {
                self.dax.store(true, Ordering::Relaxed);
            }
        }
        if self.private && from == 0 && probe_dax(fd) {
            self.dax.store(true, Ordering::Relaxed);
        }
        if got == libc::MAP_FAILED {
            let share = if self.private { libc::MAP_PRIVATE } else { libc::MAP_SHARED };
            // SAFETY: as above, the range is inside our reservation.
            got = unsafe { libc::mmap(addr, len, prot, share | libc::MAP_FIXED, fd, from as i64) };
        }
        if got == libc::MAP_FAILED {
            return Err(Error::last_os("mmap pool file"));
        }
        self.mapped.store(to, Ordering::Release);
        Ok(())
    }

    /// msyncs every mapped byte (clean close in msync mode).
    pub fn sync_all(&self) -> Result<()> {
        if self.private {
            return Ok(());
        }
        // SAFETY: [base, base+mapped) is a live shared mapping of ours.
        let rc = unsafe { libc::msync(self.base as *mut libc::c_void, self.mapped() as usize, libc::MS_SYNC) };
        if rc != 0 {
            return Err(Error::last_os("msync pool"));
        }
        Ok(())
    }
}

impl Mapping {
    /// The runs `(offset, length)` of a private mapping whose pages hold
    /// copies of their own (written since mapped, so they may differ from
    /// the file), from `/proc/self/pagemap`: present and not a file page,
    /// or swapped out. If pagemap cannot be read, the whole mapping.
    pub fn private_dirty_runs(&self) -> Vec<(u64, u64)> {
        let mapped = self.mapped();
        let pages = mapped / PAGE;
        let mut words = vec![0u8; pages as usize * 8];
        let read = std::fs::File::open("/proc/self/pagemap")
            .and_then(|f| std::os::unix::fs::FileExt::read_exact_at(&f, &mut words, self.base / PAGE * 8));
        if read.is_err() {
            return vec![(0, mapped)];
        }
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for (i, w) in words.chunks_exact(8).enumerate() {
            let e = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
            let (present, swapped, file) = (e >> 63 & 1 == 1, e >> 62 & 1 == 1, e >> 61 & 1 == 1);
            if !((present && !file) || swapped) {
                continue;
            }
            let off = i as u64 * PAGE;
            match runs.last_mut() {
                Some(last) if last.0 + last.1 == off => last.1 += PAGE,
                _ => runs.push((off, PAGE)),
            }
        }
        runs
    }
}

const PAGE: u64 = 4096;

impl Drop for Mapping {
    fn drop(&mut self) {
        unmap(self.base, self.reserved);
    }
}

/// Whether the file can be mapped with MAP_SYNC (it is on a DAX file
/// system), tried on one page that is unmapped at once.
pub(crate) fn probe_dax(fd: i32) -> bool {
    // SAFETY: a fresh read-only mapping anywhere; unmapped before returning.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC, fd, 0) };
    if p == libc::MAP_FAILED {
        return false;
    }
    unmap(p as u64, 4096);
    true
}

fn reserve_at(addr: u64, len: u64) -> Option<u64> {
    if addr == 0 || addr % 4096 != 0 {
        return None;
    }
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; it fails instead.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len as usize,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    if p as u64 != addr {
        // Kernels before 4.17 treat the flag as a hint.
        unmap(p as u64, len);
        return None;
    }
    Some(addr)
}

fn reserve_anywhere(len: u64) -> Option<u64> {
    let total = len + RESERVE_ALIGN;
    // SAFETY: a fresh anonymous PROT_NONE mapping anywhere the kernel likes.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            total as usize,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let start = p as u64;
    let aligned = (start + RESERVE_ALIGN - 1) & !(RESERVE_ALIGN - 1);
    if aligned > start {
        unmap(start, aligned - start);
    }
    let tail = start + total - (aligned + len);
    if tail > 0 {
        unmap(aligned + len, tail);
    }
    Some(aligned)
}

fn unmap(addr: u64, len: u64) {
    // SAFETY: callers pass ranges they reserved themselves and no longer use.
    unsafe { libc::munmap(addr as *mut libc::c_void, len as usize) };
}

/// A random, 1 GiB-aligned base address in the middle of the user address space.
pub fn random_base(seed: &[u8; 16]) -> u64 {
    let x = u64::from_le_bytes(seed[..8].try_into().unwrap_or([0; 8]));
    let slots = (0x5000_0000_0000u64 - 0x1000_0000_0000) / RESERVE_ALIGN;
    0x1000_0000_0000 + (x % slots) * RESERVE_ALIGN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_reservation_moves() {
        let base = random_base(&[7; 16]);
        let (a, at_pref) = Mapping::reserve(base, 1 << 24, &[], false).unwrap();
        assert!(at_pref);
        let (b, at_pref2) = Mapping::reserve(base, 1 << 24, &[base], false).unwrap();
        assert!(!at_pref2);
        assert!(b.base() + (1 << 24) <= a.base() || b.base() >= a.base() + (1 << 24));
    }
}
