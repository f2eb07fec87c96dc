//! The chained hash set of the RomulusLog suite (a map here: each node
//! carries a value) on a peer's word heap ([`super`]): an array of chain
//! heads (made once, from the bump pointer) and nodes of three
//! 8-byte fields (key, value, next). The suite used 131,072 buckets; the
//! benchmark uses [`HASH_BUCKETS`](crate::stm::workload::HASH_BUCKETS)
//! (65,536), as its other hash tables do.
//!
//! Keeps true: every node is on the chain of its key's bucket, and no
//! chain is longer than the heap has nodes ([`HashSet::check`]); an insert
//! adds a node only for a key absent from its chain; a node a delete
//! unlinks goes back to the allocator in the same transaction.

use super::alloc;
use super::{HeapError, Mem, Tx};
use crate::stm::workload::Contents;

const KEY: u64 = 0;
const VALUE: u64 = 8;
const NEXT: u64 = 16;
const NODE_WORDS: u64 = 3;

/// A chained hash map whose bucket array is named by root word `root`.
#[derive(Clone, Copy, Debug)]
pub struct HashSet {
    /// Offset of the bucket array.
    buckets: u64,
    /// log2 of the number of buckets.
    bits: u32,
}

impl HashSet {
    /// The set in root word `i`, made with `buckets` (a power of two)
    /// empty chains if the root word is 0.
    pub fn at_root<T: Tx>(tx: &mut T, i: u64, buckets: u64) -> Result<Self, T::Error> {
        let buckets = buckets.max(1).next_power_of_two();
        let mut at = tx.load(alloc::root(i));
        if at == 0 {
            at = alloc::alloc(tx, buckets)?;
            for b in 0..buckets {
                tx.store(at + 8 * b, 0)?;
            }
            tx.store(alloc::root(i), at)?;
        }
        Ok(HashSet { buckets: at, bits: buckets.trailing_zeros() })
    }

    /// The offset of `key`'s chain head (Fibonacci hashing).
    fn head(&self, key: u64) -> u64 {
        let b = if self.bits == 0 { 0 } else { key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits) };
        self.buckets + 8 * b
    }

    /// The key's value.
    pub fn get<M: Mem>(&self, m: &M, key: u64) -> Option<u64> {
        let mut n = m.load(self.head(key));
        while n != 0 {
            if m.load(n + KEY) == key {
                return Some(m.load(n + VALUE));
            }
            n = m.load(n + NEXT);
        }
        None
    }

    /// Sets the key's value; the value it replaced.
    pub fn insert<T: Tx>(&self, tx: &mut T, key: u64, value: u64) -> Result<Option<u64>, T::Error> {
        let head = self.head(key);
        let mut n = tx.load(head);
        while n != 0 {
            if tx.load(n + KEY) == key {
                let old = tx.load(n + VALUE);
                tx.store(n + VALUE, value)?;
                return Ok(Some(old));
            }
            n = tx.load(n + NEXT);
        }
        let z = alloc::alloc(tx, NODE_WORDS)?;
        let first = tx.load(head);
        for (f, v) in [(KEY, key), (VALUE, value), (NEXT, first)] {
            tx.store(z + f, v)?;
        }
        tx.store(head, z)?;
        Ok(None)
    }

    /// Removes the key; its value.
    pub fn remove<T: Tx>(&self, tx: &mut T, key: u64) -> Result<Option<u64>, T::Error> {
        let mut link = self.head(key);
        let mut n = tx.load(link);
        while n != 0 {
            if tx.load(n + KEY) == key {
                let old = tx.load(n + VALUE);
                tx.store(link, tx.load(n + NEXT))?;
                alloc::free(tx, n, NODE_WORDS)?;
                return Ok(Some(old));
            }
            link = n + NEXT;
            n = tx.load(link);
        }
        Ok(None)
    }

    /// Checks the invariants; what the set holds.
    pub fn check<M: Mem>(&self, m: &M) -> Result<Contents, HeapError> {
        let mut c = Contents::default();
        let limit = m.heap_bytes() / (8 * NODE_WORDS);
        for b in 0..1u64 << self.bits {
            let head = self.buckets + 8 * b;
            let mut n = m.load(head);
            while n != 0 {
                let k = m.load(n + KEY);
                if self.head(k) != head || c.len > limit {
                    return Err(HeapError::Broken(format!("word-heap hash set: key {k} on chain {b}, or a cycle")));
                }
                c.add(k, m.load(n + VALUE));
                n = m.load(n + NEXT);
            }
        }
        Ok(c)
    }
}
