//! A fast, deterministic hasher for the engine's volatile maps keyed by
//! offsets and addresses (per-region log sets, fresh-object sets).
//!
//! Keys are pool offsets chosen by the engine, not by an adversary, so
//! SipHash's flood resistance buys nothing on these hot paths.

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
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// The stable hash of `key` (see [`StableHasher`]).
pub(crate) fn stable_hash<K: std::hash::Hash + ?Sized>(key: &K) -> u64 {
    let mut h = StableHasher(0xcbf2_9ce4_8422_2325);
    key.hash(&mut h);
    h.finish()
}
