//! The lock table of two-phase locking: one lock per exact key.
//!
//! What it keeps true: a key is held by at most one region; a region never
//! waits on itself; waits are bounded by a timeout, so a lock-order cycle
//! becomes `LockTimeout` (and a rollback) instead of a hang. Keys are hashed
//! only to pick a shard: two different keys never share a lock, so taking
//! locks in a consistent key order is deadlock-free.

use crate::error::{Error, Result};
use crate::hash::FastMap;
use parking_lot::{Condvar, Mutex};
use std::time::{Duration, Instant};

const SHARDS: usize = 64;

#[derive(Default)]
struct Shard {
    /// key -> id of the region holding it.
    held: Mutex<FastMap<u64, u64>>,
    freed: Condvar,
}

/// Locks by key, for the regions of one pool.
pub(crate) struct LockTable {
    shards: Box<[Shard]>,
}

impl LockTable {
    pub fn new() -> Self {
        LockTable { shards: (0..SHARDS).map(|_| Shard::default()).collect() }
    }

    fn shard(&self, key: u64) -> &Shard {
        &self.shards[(key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS]
    }

    /// Takes `key` for region `owner`, waiting at most `timeout`.
    /// Returns false if `owner` already held it.
    pub fn acquire(&self, key: u64, owner: u64, timeout: Duration) -> Result<bool> {
        let shard = self.shard(key);
        let deadline = Instant::now() + timeout;
        let mut held = shard.held.lock();
        loop {
            match held.get(&key) {
                None => {
                    held.insert(key, owner);
                    return Ok(true);
                }
                Some(&o) if o == owner => return Ok(false),
                Some(_) => {
                    if shard.freed.wait_until(&mut held, deadline).timed_out() && held.contains_key(&key) {
                        return Err(Error::LockTimeout);
                    }
                }
            }
        }
    }

    /// Releases `key`.
    pub fn release(&self, key: u64) {
        let shard = self.shard(key);
        shard.held.lock().remove(&key);
        shard.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reentrant_and_exclusive() {
        let t = LockTable::new();
        assert!(t.acquire(5, 1, Duration::from_millis(10)).unwrap());
        assert!(!t.acquire(5, 1, Duration::from_millis(10)).unwrap());
        assert!(matches!(t.acquire(5, 2, Duration::from_millis(10)), Err(Error::LockTimeout)));
        t.release(5);
        assert!(t.acquire(5, 2, Duration::from_millis(10)).unwrap());
    }
}
