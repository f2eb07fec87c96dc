//! CRC32C of undo-log entries (and of the STM's redo records), three
//! lanes at a time.
//!
//! The `crc32c` crate runs its three-lane (hardware-parallel) loop only on
//! inputs of 768 bytes or more; below that it feeds one `crc32` instruction
//! after another, each waiting for the last (3 cycles of latency per 8
//! bytes). An undo entry of a short region is a few hundred bytes (n-body:
//! 280), where that chain was 10-15 % of a region's software cost. Here
//! inputs of at least [`CHUNK`] bytes go through the same three-lane scheme
//! with 64-byte lanes: each chunk's three lanes run independently and are
//! joined by "shift the CRC register over 64 zero bytes", a linear map done
//! by four table lookups ([`SHIFT`], built at compile time). Shorter inputs
//! and the tail go one word at a time without the crate's per-call setup,
//! and an entry's 20 header bytes are three instructions ([`entry`]). An
//! undo entry's append copies its old bytes in the same pass
//! ([`entry_copy`]).
//!
//! Invariant: [`crc32c_append`] returns exactly what
//! `crc32c::crc32c_append` returns for every input (same polynomial,
//! same conventions); the on-media format does not change. The test
//! `matches_the_crate` checks both functions for every length up to 1100
//! bytes and every start offset within a word. No unsafe code runs without
//! the SSE 4.2 check; other CPUs take the crate's path.
//!
//! Crash behaviour: none (a pure function).

/// Bytes per lane.
const LANE: usize = 64;
/// Bytes per chunk (three lanes).
pub(crate) const CHUNK: usize = 3 * LANE;
/// CRC-32C (Castagnoli), bit-reflected.
const POLY: u32 = 0x82F6_3B78;

/// The register after `bits` zero bits are fed in, starting from `reg`.
const fn zeros(mut reg: u32, bits: usize) -> u32 {
    let mut i = 0;
    while i < bits {
        reg = if reg & 1 != 0 { (reg >> 1) ^ POLY } else { reg >> 1 };
        i += 1;
    }
    reg
}

/// `SHIFT[k][v]`: the register `v << 8k` after [`LANE`] zero bytes. The map
/// is linear, so it is built from the 32 single-bit images.
static SHIFT: [[u32; 256]; 4] = {
    let mut bit = [0u32; 32];
    let mut b = 0;
    while b < 32 {
        bit[b] = zeros(1 << b, LANE * 8);
        b += 1;
    }
    let mut t = [[0u32; 256]; 4];
    let mut k = 0;
    while k < 4 {
        let mut v = 0;
        while v < 256 {
            let mut acc = 0;
            let mut j = 0;
            while j < 8 {
                if v & (1 << j) != 0 {
                    acc ^= bit[8 * k + j];
                }
                j += 1;
            }
            t[k][v] = acc;
            v += 1;
        }
        k += 1;
    }
    t
};

/// The register `reg` after [`LANE`] zero bytes.
#[inline]
fn shift(reg: u32) -> u32 {
    let b = reg.to_le_bytes();
    SHIFT[0][b[0] as usize] ^ SHIFT[1][b[1] as usize] ^ SHIFT[2][b[2] as usize] ^ SHIFT[3][b[3] as usize]
}

/// CRC32C of `data` continuing from `crc`, as `crc32c::crc32c_append`
/// (test-only: the log uses [`entry`]; this checks the lanes on their own).
#[cfg(test)]
fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { !lanes(u64::from(!crc), data) };
        }
    }
    crc32c::crc32c_append(crc, data)
}

/// CRC32C of `data`, as `crc32c::crc32c` (the STM's redo records and the
/// checksums of the objects they list: a hash-table update's record is
/// about 100 bytes and its one check covers 4 bytes, where the crate's
/// per-call setup costs more than the work).
#[inline]
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { !lanes(u64::from(!0u32), data) };
        }
    }
    crc32c::crc32c(data)
}

/// A CRC32C taken one 8-byte word at a time while a record is written
/// (the STM's redo record, `stm/redo.rs`: each word folded in as it is
/// stored, so the record is not read a second time). The words are the
/// record's bytes in order, each read little-endian.
pub(crate) trait Fold {
    /// Folds in the next 8 bytes, `w.to_le_bytes()`.
    fn word(&mut self, w: u64);
    /// The CRC32C of the bytes folded in; `whole` is those bytes (for a
    /// fold that reads them only now).
    fn finish(&self, whole: &[u8]) -> u32;
}

/// [`Fold`] by the `crc32` instruction, word by word (SSE 4.2).
#[cfg(target_arch = "x86_64")]
pub(crate) struct HwFold(u64);

#[cfg(target_arch = "x86_64")]
impl HwFold {
    /// An empty fold.
    ///
    /// # Safety
    /// The CPU must support SSE 4.2 (every [`Fold::word`] runs `crc32`).
    #[inline(always)]
    pub(crate) unsafe fn new() -> Self {
        HwFold(u64::from(!0u32))
    }
}

#[cfg(target_arch = "x86_64")]
impl Fold for HwFold {
    #[inline(always)]
    fn word(&mut self, w: u64) {
        // SAFETY: a `HwFold` exists only where the CPU has SSE 4.2 (`new`).
        self.0 = unsafe { std::arch::x86_64::_mm_crc32_u64(self.0, w) };
    }

    #[inline(always)]
    fn finish(&self, _: &[u8]) -> u32 {
        !(self.0 as u32)
    }
}

/// [`Fold`] of a CPU without SSE 4.2: nothing per word, the crate's
/// CRC32C over the whole at the end.
pub(crate) struct LateFold;

impl Fold for LateFold {
    #[inline(always)]
    fn word(&mut self, _: u64) {}

    fn finish(&self, whole: &[u8]) -> u32 {
        crc32c(whole)
    }
}

/// CRC32C of a log entry: `gen`, `off`, `len` (little-endian), then
/// `data`; the same value as the crate over those 20 + `data.len()` bytes.
/// The 20 header bytes take three instructions here (the crate's call
/// costs more than its work at that size).
#[inline]
pub(crate) fn entry(gen: u64, off: u64, len: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { entry_hw(gen, off, len, data) };
        }
    }
    let mut h = [0u8; 20];
    h[..8].copy_from_slice(&gen.to_le_bytes());
    h[8..16].copy_from_slice(&off.to_le_bytes());
    h[16..].copy_from_slice(&len.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&h), data)
}

/// [`entry`] of `data`, copying `data` to `dst` while reading it: the
/// undo entry's append, one pass over the old bytes. Inputs shorter than
/// [`CHUNK`] (almost every entry: a field, an element, a small object) go
/// one word at a time, each word CRC'd and stored as it is loaded, instead
/// of a CRC pass and then a `memcpy` call (which costs more than its work
/// at that size); longer ones take the lanes, then `memcpy`.
///
/// # Safety
/// `dst` must be valid for writes of `data.len()` bytes and not overlap `data`.
#[inline]
pub(crate) unsafe fn entry_copy(gen: u64, off: u64, len: u32, data: &[u8], dst: *mut u8) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if data.len() < CHUNK && std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above); `dst` is
            // the caller's contract.
            return unsafe { entry_copy_hw(gen, off, len, data, dst) };
        }
    }
    let c = entry(gen, off, len, data);
    // SAFETY: the caller's contract: `dst` holds `data.len()` bytes and
    // does not overlap `data`.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
    c
}

/// [`entry_copy`] word by word.
///
/// # Safety
/// The CPU must support SSE 4.2; `dst` as for [`entry_copy`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn entry_copy_hw(gen: u64, off: u64, len: u32, data: &[u8], dst: *mut u8) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};
    let c = _mm_crc32_u64(_mm_crc32_u64(u64::from(!0u32), gen), off);
    let mut c = u64::from(_mm_crc32_u32(c as u32, len));
    let mut words = data.chunks_exact(8);
    let mut at = 0;
    for w in &mut words {
        let v = word(w, 0);
        c = _mm_crc32_u64(c, v);
        // SAFETY: `at + 8 <= data.len()`, which `dst` holds (the caller's
        // contract). Volatile: a plain store, which the compiler may not
        // turn back into the `memcpy` call this loop replaces (it did); as
        // an unaligned `u64` store it is 8 single-byte ones.
        unsafe { store_word(dst.add(at), v) };
        at += 8;
    }
    let mut c = c as u32;
    for &b in words.remainder() {
        c = _mm_crc32_u8(c, b);
        // SAFETY: `at < data.len()`, as above; volatile, as above.
        unsafe { std::ptr::write_volatile(dst.add(at), b) };
        at += 1;
    }
    !c
}

/// Stores `v` little-endian at `dst` (any alignment) with one volatile
/// store: a plain `mov` on x86-64, kept as it is written.
///
/// # Safety
/// `dst` must be valid for writes of 8 bytes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn store_word(dst: *mut u8, v: u64) {
    // SAFETY: the caller's contract; x86-64 allows unaligned 8-byte stores,
    // and `[u8; 8]` has alignment 1, so the volatile store is of a
    // byte array at any address.
    unsafe { std::ptr::write_volatile(dst as *mut [u8; 8], v.to_le_bytes()) };
}

/// # Safety
/// The CPU must support SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn entry_hw(gen: u64, off: u64, len: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u32, _mm_crc32_u64};
    let c = _mm_crc32_u64(_mm_crc32_u64(u64::from(!0u32), gen), off);
    let c = _mm_crc32_u32(c as u32, len);
    // SAFETY: same target feature as this function.
    !unsafe { lanes(u64::from(c), data) }
}

/// The little-endian `u64` at `s[at..at + 8]`.
#[inline(always)]
fn word(s: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The raw (uninverted) register `reg` after `data`: three lanes per
/// [`CHUNK`], then one word, then one byte at a time.
///
/// # Safety
/// The CPU must support SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn lanes(reg: u64, data: &[u8]) -> u32 {
    use std::arch::x86_64::_mm_crc32_u64 as step;
    let mut c0 = reg;
    let mut chunks = data.chunks_exact(CHUNK);
    for ch in &mut chunks {
        let (mut c1, mut c2) = (0u64, 0u64);
        let mut i = 0;
        while i < LANE {
            c0 = step(c0, word(ch, i));
            c1 = step(c1, word(ch, LANE + i));
            c2 = step(c2, word(ch, 2 * LANE + i));
            i += 8;
        }
        c0 = u64::from(shift(c0 as u32)) ^ c1;
        c0 = u64::from(shift(c0 as u32)) ^ c2;
    }
    let rest = chunks.remainder();
    let mut words = rest.chunks_exact(8);
    for w in &mut words {
        c0 = step(c0, word(w, 0));
    }
    let mut c = c0 as u32;
    let mut tail = words.remainder();
    if let Some((w, rest)) = tail.split_first_chunk::<4>() {
        c = std::arch::x86_64::_mm_crc32_u32(c, u32::from_le_bytes(*w));
        tail = rest;
    }
    for &b in tail {
        c = std::arch::x86_64::_mm_crc32_u8(c, b);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fold word by word is the CRC32C of the bytes, on either path.
    #[test]
    fn folds_match_the_crate() {
        let bytes: Vec<u8> = (0..256u32).map(|i| (i * 131 + 7) as u8).collect();
        for words in 0..=32 {
            let b = &bytes[..words * 8];
            let fold = |f: &mut dyn Fold| {
                for w in b.chunks_exact(8) {
                    f.word(u64::from_le_bytes(w.try_into().unwrap()));
                }
                f.finish(b)
            };
            assert_eq!(fold(&mut LateFold), crc32c::crc32c(b), "{words}");
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("sse4.2") {
                // SAFETY: the CPU has SSE 4.2 (checked just above).
                assert_eq!(fold(&mut unsafe { HwFold::new() }), crc32c::crc32c(b), "{words}");
            }
        }
    }

    #[test]
    fn matches_the_crate() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let buf: Vec<u8> = (0..1200)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for start in 0..8 {
            for len in 0..1100 {
                let d = &buf[start..start + len];
                for seed in [0u32, 0xDEAD_BEEF] {
                    assert_eq!(crc32c_append(seed, d), crc32c::crc32c_append(seed, d), "start {start} len {len}");
                }
                assert_eq!(crc32c(d), crc32c::crc32c(d), "whole: start {start} len {len}");
                let (gen, off, n) = (x.rotate_left(start as u32), x ^ len as u64, len as u32 ^ 0x8000_0001);
                let mut h = gen.to_le_bytes().to_vec();
                h.extend_from_slice(&off.to_le_bytes());
                h.extend_from_slice(&n.to_le_bytes());
                h.extend_from_slice(d);
                assert_eq!(entry(gen, off, n, d), crc32c::crc32c(&h), "entry: start {start} len {len}");
                let mut copy = vec![0xA5u8; len + 9];
                // SAFETY: `copy` holds `len + 9` bytes, a distinct buffer.
                let c = unsafe { entry_copy(gen, off, n, d, copy[1..].as_mut_ptr()) };
                assert_eq!(c, crc32c::crc32c(&h), "entry_copy: start {start} len {len}");
                assert_eq!(&copy[1..=len], d, "entry_copy's copy: start {start} len {len}");
                assert!(copy[0] == 0xA5 && copy[len + 1..].iter().all(|&b| b == 0xA5), "entry_copy wrote outside: len {len}");
            }
        }
    }
}
