//! Size classes of the small-object allocator.
//!
//! A slot holds the 16-byte object header and the payload. Classes grow by
//! about 1/8 to 1/4 per step, so internal waste stays under 25 %; anything
//! larger than the largest class takes whole spans.

use crate::format::{SPAN_BITMAP_BYTES, SPAN_SIZE};

/// Slot sizes in bytes, header included.
pub const CLASSES: [u32; 39] = [
    32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024, 1280, 1536, 1792, 2048, 2560, 3072, 3584,
    4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336, 16384, 20480, 24576, 28672, 32768,
];

/// Number of classes.
pub const NUM_CLASSES: usize = CLASSES.len();
/// Largest slot served by a class.
pub const MAX_SMALL: u64 = 32768;

const LOOKUP_LEN: usize = (MAX_SMALL / 16) as usize + 1;

/// Class index for each slot size rounded up to 16 bytes.
static LOOKUP: [u8; LOOKUP_LEN] = build_lookup();

const fn build_lookup() -> [u8; LOOKUP_LEN] {
    let mut t = [0u8; LOOKUP_LEN];
    let mut i = 0;
    let mut c = 0;
    while i < LOOKUP_LEN {
        while (CLASSES[c] as usize) < i * 16 {
            c += 1;
        }
        t[i] = c as u8;
        i += 1;
    }
    t
}

/// The class whose slots hold `slot_bytes` (header included), if small.
#[inline]
pub fn class_for(slot_bytes: u64) -> Option<usize> {
    if slot_bytes > MAX_SMALL {
        return None;
    }
    Some(LOOKUP[slot_bytes.div_ceil(16) as usize] as usize)
}

/// Slot size of class `c`.
#[inline]
pub fn slot_size(c: usize) -> u64 {
    CLASSES[c] as u64
}

/// Slots per span for class `c`.
#[inline]
pub fn slots_per_span(c: usize) -> u32 {
    SLOTS_PER_SPAN[c]
}

/// `SPAN_SIZE / slot_size(c)` per class, computed once (no division on
/// the pointer-check path).
static SLOTS_PER_SPAN: [u32; NUM_CLASSES] = {
    let mut t = [0u32; NUM_CLASSES];
    let mut c = 0;
    while c < NUM_CLASSES {
        t[c] = (SPAN_SIZE / CLASSES[c] as u64) as u32;
        c += 1;
    }
    t
};

/// `ceil(2^32 / slot_size(c))` per class: `x * m >> 32 == x / slot` for
/// every `x < SPAN_SIZE` (the error `x * (m * slot - 2^32) / 2^32` stays
/// below `1 / slot` because `x * slot < 2^31`), so finding a slot in its
/// span takes a multiply, not a 64-bit division.
static RECIPROCALS: [u64; NUM_CLASSES] = {
    let mut t = [0u64; NUM_CLASSES];
    let mut c = 0;
    while c < NUM_CLASSES {
        t[c] = (1u64 << 32).div_ceil(CLASSES[c] as u64);
        c += 1;
    }
    t
};

/// `ceil(2^32 / slot_size(c))`, as [`slot_index`] uses it (below 2^28:
/// the smallest slot is 32 bytes), for callers that keep a class's
/// geometry at hand (the region's span cache).
#[inline]
pub fn reciprocal(c: usize) -> u32 {
    RECIPROCALS[c] as u32
}

/// `within / slot_size(c)` for a byte offset `within < SPAN_SIZE` inside a span.
#[inline]
pub fn slot_index(c: usize, within: u64) -> u64 {
    debug_assert!(within < SPAN_SIZE);
    (within * RECIPROCALS[c]) >> 32
}

const _: () = assert!((SPAN_SIZE / 32) <= SPAN_BITMAP_BYTES * 8);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_is_tight() {
        for size in 1..=MAX_SMALL {
            let c = class_for(size).unwrap();
            assert!(slot_size(c) >= size, "size {size}");
            if c > 0 {
                assert!(slot_size(c - 1) < size.div_ceil(16) * 16, "size {size} not tight");
            }
        }
        assert_eq!(class_for(MAX_SMALL + 1), None);
    }

    #[test]
    fn slot_index_is_exact_division() {
        const _: () = assert!((SPAN_SIZE - 1) * MAX_SMALL < 1 << 31);
        for c in 0..NUM_CLASSES {
            assert_eq!(slots_per_span(c) as u64, SPAN_SIZE / slot_size(c));
            assert_eq!(reciprocal(c) as u64, (1u64 << 32).div_ceil(slot_size(c)), "fits u32");
            for within in 0..SPAN_SIZE {
                assert_eq!(slot_index(c, within), within / slot_size(c), "class {c}, offset {within}");
            }
        }
    }
}
