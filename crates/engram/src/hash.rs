//! The engine's hashes: a fast one for its volatile maps keyed by offsets
//! and addresses (per-region log sets, fresh-object sets), and two stable
//! ones for persistent structures, which place keys by hash in the pool.
//!
//! What it keeps true: a stable hash gives the same output for the same
//! bytes a key's `Hash` impl feeds in every process, run and build (both
//! are pinned by tests: changing one moves keys in every pool that used it,
//! which needs the structure's layout name bumped). [`stable_hash`] feeds
//! bytes one at a time (FNV-1a); [`stable_word_hash`] a word at a time, for
//! `HashTable.v4`, whose lookups wait on the hash before their first load.
//!
//! The volatile maps' keys are pool offsets chosen by the engine, not an
//! adversary's, so SipHash's flood resistance buys nothing there. The
//! stable hashes are unseeded by design (a structure found after a restart
//! must hash as it did), so a program that puts untrusted keys in a
//! persistent hash structure can be made to build long chains.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hasher for integer keys (the FxHash recipe).
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// HashMap with [`FastHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
/// HashSet with [`FastHasher`].
pub(crate) type FastSet<K> = HashSet<K, BuildHasherDefault<FastHasher>>;

/// FNV-1a finished with the murmur3 avalanche: a hash that is the same in
/// every process and every run (never `RandomState`), so persistent hash
/// structures find their keys after a restart, and every output bit depends
/// on every input byte.
struct StableHasher(u64);

impl Hasher for StableHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        avalanche(self.0)
    }
}

/// The murmur3 64-bit finaliser: every output bit depends on every input
/// bit (a bijection).
#[inline]
fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The stable hash of `key` (see [`StableHasher`]).
pub(crate) fn stable_hash<K: std::hash::Hash + ?Sized>(key: &K) -> u64 {
    let mut h = StableHasher(0xcbf2_9ce4_8422_2325);
    key.hash(&mut h);
    h.finish()
}

/// A stable hash that takes a word per step: each 8 bytes (little-endian;
/// a shorter last piece zero-padded) are mixed in by one multiply and a
/// rotation, and the murmur3 avalanche finishes. An integer key costs one
/// step, not one per byte as in FNV-1a: about 16 cycles from key to hash
/// where [`StableHasher`]'s eight dependent multiplies and finaliser took
/// about 40, ahead of a lookup's first load.
struct StableWordHasher(u64);

impl Hasher for StableWordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for piece in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..piece.len()].copy_from_slice(piece);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(26);
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        avalanche(self.0)
    }
}

/// The stable word-at-a-time hash of `key` (see [`StableWordHasher`]).
#[inline]
pub(crate) fn stable_word_hash<K: std::hash::Hash + ?Sized>(key: &K) -> u64 {
    let mut h = StableWordHasher(0x243f_6a88_85a3_08d3);
    key.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::{stable_hash, stable_word_hash};
    use std::collections::HashSet;

    /// Pinned: a structure written by one build must be readable by the
    /// next (a change here moves keys in every pool that used the hash).
    #[test]
    fn both_stable_hashes_are_fixed_across_builds() {
        assert_eq!(stable_hash(&0u64), 8_922_497_616_986_557_598);
        assert_eq!(stable_word_hash(&0u64), PINNED_WORD_0);
        assert_eq!(stable_word_hash(&"engram"), PINNED_WORD_STR);
    }

    const PINNED_WORD_0: u64 = 4_667_083_031_191_940_960;
    const PINNED_WORD_STR: u64 = 2_405_157_610_605_537_168;

    /// Every key bit reaches the low bits a table's index takes (both
    /// hashes), and keys that differ in one byte or in their tail get
    /// distinct word hashes.
    #[test]
    fn key_bits_reach_the_index() {
        for shift in [0, 8, 16, 32, 48, 56] {
            for (name, hash) in [("stable_hash", stable_hash::<u64> as fn(&u64) -> u64), ("stable_word_hash", stable_word_hash::<u64>)] {
                let low: HashSet<u64> = (0..64u64).map(|k| hash(&(k << shift)) & 63).collect();
                assert!(low.len() > 32, "{name}, keys k << {shift}: {} of 64 buckets", low.len());
            }
        }
        assert_ne!(stable_word_hash(&[1u8; 9][..]), stable_word_hash(&[1u8; 8][..]));
        assert_ne!(stable_word_hash(&(1u64, 2u64)), stable_word_hash(&(2u64, 1u64)));
    }

    /// The benchmark's keys (50,000 of 0..100,000) in 65,536 buckets: as
    /// even as random placement (expected longest chain about 8; the mean
    /// chain of a used bucket about 1.45).
    #[test]
    fn word_hash_fills_buckets_like_random_placement() {
        let mut count = vec![0u32; 65_536];
        for k in (0..100_000u64).step_by(2) {
            count[(stable_word_hash(&k) & 65_535) as usize] += 1;
        }
        let used = count.iter().filter(|&&c| c > 0).count();
        let longest = count.iter().copied().max().unwrap_or(0);
        // Random placement: 65,536 × (1 - e^(-50,000/65,536)) ≈ 34,500 used.
        assert!((33_000..=36_000).contains(&used), "{used} buckets used");
        assert!(longest <= 10, "a chain of {longest}");
    }
}
