//! The kernel's soft-dirty page bits, for the deferred recovery GC.
//!
//! Writing "4" to `/proc/self/clear_refs` clears the soft-dirty bit of every
//! page of the process; from then on a write to a page sets it again, and
//! `/proc/self/pagemap` shows it (bit 55 of a page's 64-bit entry; bit 63
//! says the page is present). The deferred GC clears the bits when the pool
//! opens, marks concurrently with the program, then stops the world and
//! rescans what lies on the pages written meanwhile (`pool/deferred.rs`).
//!
//! What it keeps true:
//! - A page reported clean was not written since the last clear. A page not
//!   present (never touched, evicted or swapped: its bit may be lost) and a
//!   page whose entry cannot be read are reported dirty.
//! - The bits are per process: one clear serves one user at a time, so
//!   [`Claim`] admits one deferred GC per process on them (a second pool
//!   recovered meanwhile collects eagerly); GCs on the regions' card table
//!   (per pool) do not take them.
//! - [`available`] probes once per process that the kernel really tracks
//!   writes (CONFIG_MEM_SOFT_DIRTY, a readable pagemap): a probe write must
//!   show up after a clear, and must not before it.
//!
//! Nothing here touches the pool file, so a crash at any point is harmless.

use crate::error::{Error, Result};
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

const PAGE: u64 = 4096;
const SOFT_DIRTY: u64 = 1 << 55;
const PRESENT: u64 = 1 << 63;

/// Clears the soft-dirty bit of every page of this process.
pub(crate) fn clear() -> Result<()> {
    let mut f = std::fs::OpenOptions::new().write(true).open("/proc/self/clear_refs").map_err(|e| Error::io("open clear_refs", e))?;
    f.write_all(b"4").map_err(|e| Error::io("write clear_refs", e))
}

/// Which pages of `[addr, addr + len)` (page-aligned) may have been written
/// since the last [`clear`]: one bool per page (not present counts as written).
pub(crate) fn written(addr: u64, len: u64) -> Result<Vec<bool>> {
    let pages = len.div_ceil(PAGE) as usize;
    let mut buf = vec![0u8; pages * 8];
    let mut f = std::fs::File::open("/proc/self/pagemap").map_err(|e| Error::io("open pagemap", e))?;
    f.seek(SeekFrom::Start(addr / PAGE * 8)).map_err(|e| Error::io("seek pagemap", e))?;
    f.read_exact(&mut buf).map_err(|e| Error::io("read pagemap", e))?;
    Ok(buf
        .chunks_exact(8)
        .map(|c| {
            let e = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
            e & PRESENT == 0 || e & SOFT_DIRTY != 0
        })
        .collect())
}

/// Whether this kernel tracks writes in soft-dirty bits (probed once).
pub(crate) fn available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| probe().unwrap_or(false))
}

/// Writes a fresh page, clears, checks it reads clean and present, writes
/// it again and checks it reads dirty.
fn probe() -> Result<bool> {
    let mut page = vec![0u64; 2 * PAGE as usize / 8];
    let at = (page.as_ptr() as u64).next_multiple_of(PAGE);
    let i = ((at - page.as_ptr() as u64) / 8) as usize;
    page[i] = 1;
    clear()?;
    let raw = |at: u64| -> Result<u64> {
        let mut f = std::fs::File::open("/proc/self/pagemap").map_err(|e| Error::io("open pagemap", e))?;
        let mut b = [0u8; 8];
        f.seek(SeekFrom::Start(at / PAGE * 8)).map_err(|e| Error::io("seek pagemap", e))?;
        f.read_exact(&mut b).map_err(|e| Error::io("read pagemap", e))?;
        Ok(u64::from_le_bytes(b))
    };
    let before = raw(at)?;
    // SAFETY: `i` indexes `page`; the volatile store keeps the write the probe needs.
    unsafe { std::ptr::write_volatile(page.as_mut_ptr().add(i), 2) };
    let after = raw(at)?;
    Ok(before & PRESENT != 0 && before & SOFT_DIRTY == 0 && after & SOFT_DIRTY != 0)
}

static CLAIMED: AtomicBool = AtomicBool::new(false);

/// The process's soft-dirty bits, held by one deferred GC until dropped;
/// or, for a GC whose barrier is the regions' card table (per pool), a
/// claim on nothing.
pub(crate) struct Claim(bool);

impl Claim {
    /// The bits, if no other deferred GC of this process holds them.
    pub fn take() -> Option<Claim> {
        CLAIMED.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).ok().map(|_| Claim(true))
    }

    /// For a card-tracked GC: the bits stay free for others.
    pub fn none() -> Claim {
        Claim(false)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.0 {
            CLAIMED.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_after_a_clear_shows_up() {
        if !available() {
            eprintln!("soft-dirty bits not tracked by this kernel: skipped");
            return;
        }
        let Some(_c) = Claim::take() else { return };
        let mut v = vec![0u64; 4 * PAGE as usize / 8];
        let at = (v.as_ptr() as u64).next_multiple_of(PAGE);
        let i = ((at - v.as_ptr() as u64) / 8) as usize;
        for k in 0..3 {
            v[i + k * PAGE as usize / 8] = 1;
        }
        clear().unwrap();
        v[i + PAGE as usize / 8] = 5;
        let w = written(at, 3 * PAGE).unwrap();
        assert_eq!(w, vec![false, true, false]);
    }
}
