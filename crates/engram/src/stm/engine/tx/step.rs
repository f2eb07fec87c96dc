//! One level of a walk down linked pool objects ([`STx::step_at`], and the
//! read-only transaction's `RTx::step_at`): an object's `#[immutable]` key
//! and the link field the key selects, read with one bounds check for
//! both (a red-black tree node's key and the child the compare picks).
//!
//! What it keeps true: the key is read as [`STx::read_immutable`] reads it
//! (the seqlock read, no read-set entry) and the link as [`STx::read`]
//! reads a field (the seqlock read against the snapshot, recorded); only
//! the bounds check is shared: the key's cell is checked for
//! [`NODE_SPAN`] bytes, and the link is taken on that check only when its
//! cell lies inside them ([`in_node`]). Anything else (a value over 8
//! bytes, an own write, a far field, a word locked or newer than the
//! snapshot) takes the separate reads, each with its own check.

use super::{cell_fits, wbit, STx};
use crate::stm::engine::StmResult;
use crate::Persistent;
use std::mem::size_of;

/// The bytes from a key's cell that one check covers: the key's and two
/// more 16-byte cells (a tree node's key, left, right), the read-only
/// transaction's `MAX_CELL`.
pub(in crate::stm::engine) const NODE_SPAN: u64 = 48;

/// Whether the cell (lock word and an 8-byte value) at `at` lies after the
/// key's cell at `key` and inside the [`NODE_SPAN`] bytes checked from
/// `key` (8-aligned, as `key` is). A constant once inlined: both
/// addresses are one node's plus a field offset.
#[inline(always)]
pub(in crate::stm::engine) fn in_node(key: u64, at: u64) -> bool {
    at.wrapping_sub(key).wrapping_sub(16) <= NODE_SPAN - 32 && at % 8 == 0
}

/// Planted bug `stm.step_unrecorded_link`: the link a step reads on its
/// inline path gets no read-set entry, so commit does not validate it.
#[inline(always)]
fn planted_unrecorded() -> bool {
    crate::failpoint::planted("stm.step_unrecorded_link")
}

impl<'p> STx<'p> {
    /// Reads the `#[immutable]` key `K` whose cell is at `key` and then,
    /// if `pick` on its value gives one, the `L` field at that address
    /// (see the module doc). Returns the key and the link.
    #[inline]
    pub(crate) fn step_at<K: Persistent, L: Persistent>(
        &self,
        key: u64,
        pick: impl FnOnce(&K) -> Option<u64>,
    ) -> StmResult<(K, Option<L>)> {
        let small = size_of::<K>() <= 8 && size_of::<L>() <= 8;
        if small && !self.by_value && self.wbits.get() & wbit(key as usize) == 0 && cell_fits::<[u64; 5]>(key, 40, self.bounds) {
            if let Some((kb, _)) = self.stable_word(key) {
                // SAFETY: K is at most 8 bytes (above); `kb` holds its bytes
                // as read, and every bit pattern is a valid K.
                let k: K = unsafe { std::ptr::read_unaligned(&kb as *const u64 as *const K) };
                let at = match pick(&k) {
                    None => return Ok((k, None)),
                    Some(at) => at,
                };
                if in_node(key, at) && self.wbits.get() & wbit(at as usize) == 0 {
                    if let Some((v, version)) = self.stable_word(at) {
                        if !planted_unrecorded() {
                            self.record_read(at as usize, version, self.epoch);
                        }
                        // SAFETY: L is at most 8 bytes (above); as for K.
                        return Ok((k, Some(unsafe { std::ptr::read_unaligned(&v as *const u64 as *const L) })));
                    }
                }
                return Ok((k, Some(self.read_cell::<L>(at, 8)?)));
            }
        }
        self.step_apart(key, pick)
    }

    /// [`STx::step_at`] as two separate reads, each with its own check.
    #[inline(never)]
    fn step_apart<K: Persistent, L: Persistent>(&self, key: u64, pick: impl FnOnce(&K) -> Option<u64>) -> StmResult<(K, Option<L>)> {
        let k = self.read_immutable_at::<K>(key)?;
        let l = match pick(&k) {
            Some(at) => Some(self.read_cell::<L>(at, 8)?),
            None => None,
        };
        Ok((k, l))
    }
}
