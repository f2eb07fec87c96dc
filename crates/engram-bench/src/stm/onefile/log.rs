//! The persistent write-set buffers: two per thread slot, used in turn.
//! A buffer is a header line (tag, entry count, checksum) and then the
//! entries, (offset, value) pairs of 16 bytes.
//!
//! Keeps true: a buffer's header names a tag (`curTx` value) only while
//! its entries are that transaction's write-set, to any reader that
//! checks the tag before and after copying ([`Buffer::copy_if`], a
//! seqlock: the writer clears the tag first); after a crash, a buffer is
//! trusted only if its checksum matches too ([`Buffer::recoverable`]),
//! as a torn rewrite may reach the file in any order. A thread rewrites a
//! buffer only two commits later, after its own step-1 fence ordered the
//! pwbs of the transaction the buffer held (`OneFile::commit`).

use std::sync::atomic::{fence, AtomicU64, Ordering};

use super::SLOTS;

/// Entries a buffer holds (the hash set's 65,536 bucket heads fit).
pub const ENTRIES: usize = 1 << 17;
/// The header line.
const HEAD: usize = 64;
/// Bytes of one buffer.
const BYTES: u64 = ((HEAD + 16 * ENTRIES) as u64).next_multiple_of(4096);

/// Bytes of the log region.
pub const fn region() -> u64 {
    2 * SLOTS as u64 * BYTES
}

/// Offset of buffer `b` in the log region.
pub fn region_offset(b: usize) -> u64 {
    b as u64 * BYTES
}

/// A checksum of a tag and its entries.
fn checksum(tag: u64, entries: impl Iterator<Item = (u64, u64)>) -> u64 {
    entries.fold(tag, |h, (o, v)| (h ^ o).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) ^ v)
}

/// One buffer of the mapping.
pub struct Buffer<'a>(&'a [AtomicU64; 3], *const AtomicU64);

impl Buffer<'_> {
    /// The buffer at `p`.
    ///
    /// # Safety
    /// `p` is a 64-aligned buffer of the mapping ([`region_offset`]), only
    /// accessed atomically, alive for the returned lifetime.
    pub unsafe fn at<'a>(p: *mut u8) -> Buffer<'a> {
        // SAFETY: as the caller promises.
        unsafe { Buffer(&*p.cast::<[AtomicU64; 3]>(), p.add(HEAD).cast()) }
    }

    fn entry(&self, i: usize) -> (&AtomicU64, &AtomicU64) {
        debug_assert!(i < ENTRIES);
        // SAFETY: entry `i < ENTRIES` lies inside the buffer (`at`).
        unsafe { (&*self.1.add(2 * i), &*self.1.add(2 * i + 1)) }
    }

    /// Its address (for pwb).
    pub fn addr(&self) -> *const u8 {
        self.0.as_ptr().cast()
    }

    /// Bytes a write of `n` entries covers.
    pub fn bytes(&self, n: usize) -> usize {
        HEAD + 16 * n
    }

    /// Writes `entries` (at most [`ENTRIES`]) under `tag`.
    pub fn write(&self, tag: u64, entries: &[(u64, u64)]) {
        let [t, n, sum] = self.0;
        t.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        n.store(entries.len() as u64, Ordering::Relaxed);
        for (i, &(o, v)) in entries.iter().enumerate() {
            let (eo, ev) = self.entry(i);
            eo.store(o, Ordering::Relaxed);
            ev.store(v, Ordering::Relaxed);
        }
        sum.store(checksum(tag, entries.iter().copied()), Ordering::Relaxed);
        t.store(tag, Ordering::Release);
    }

    /// Copies the entries into `out` if the buffer holds `tag`'s
    /// write-set throughout the copy.
    pub fn copy_if(&self, tag: u64, out: &mut Vec<(u64, u64)>) -> bool {
        let [t, n, _] = self.0;
        if t.load(Ordering::Acquire) != tag {
            return false;
        }
        let n = (n.load(Ordering::Relaxed) as usize).min(ENTRIES);
        out.clear();
        out.extend((0..n).map(|i| {
            let (o, v) = self.entry(i);
            (o.load(Ordering::Relaxed), v.load(Ordering::Relaxed))
        }));
        fence(Ordering::Acquire);
        t.load(Ordering::Relaxed) == tag
    }

    /// As [`Buffer::copy_if`], and the checksum matches (recovery).
    pub fn recoverable(&self, tag: u64, out: &mut Vec<(u64, u64)>) -> bool {
        self.copy_if(tag, out) && self.0[2].load(Ordering::Relaxed) == checksum(tag, out.iter().copied())
    }
}
