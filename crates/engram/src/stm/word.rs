//! The versioned lock word at the start of every transactional variable.
//!
//! Layout (u64): bits 16..64 the version (the commit timestamp of the last
//! write, 48 bits), bits 1..16 the epoch of the lock holder, bit 0 locked.
//! An unlocked word is `version << 16`.
//!
//! What it keeps true: a word is locked only by a committing transaction of
//! the current pool epoch. A crash can leave a locked word behind in the
//! pool; every open starts a new epoch, so such a stale lock reads as
//! unlocked and is simply overwritten by the next writer. (Epochs wrap after
//! 32768 opens: a stale lock whose variable is not written in all that time
//! reads as held again for that one open, until the next open moves the
//! epoch on; docs/stm.md, "Limits".)
//!
//! A version never wraps: a commit whose timestamp is above
//! [`MAX_VERSION`] is refused before it stores a word
//! (`engine/commit.rs`, `Stamps::within_limit`).

/// Bit 0: locked.
const LOCKED: u64 = 1;
/// Epoch field mask (after shifting right by 1).
const EPOCH_MASK: u64 = 0x7FFF;

/// The version in `w`.
#[inline]
pub fn version(w: u64) -> u64 {
    w >> 16
}

/// An unlocked word carrying `version`.
#[inline]
pub fn unlocked(version: u64) -> u64 {
    version << 16
}

/// `w` locked by a committer of `epoch`.
#[inline]
pub fn locked(w: u64, epoch: u16) -> u64 {
    (w & !0xFFFF) | ((epoch as u64 & EPOCH_MASK) << 1) | LOCKED
}

/// Whether `w` is locked by a live committer (one of `epoch`).
#[inline]
pub fn is_locked(w: u64, epoch: u16) -> bool {
    w & LOCKED != 0 && (w >> 1) & EPOCH_MASK == epoch as u64 & EPOCH_MASK
}

/// The largest version a word can carry (48 bits).
pub const MAX_VERSION: u64 = (1 << 48) - 1;

/// Whether `w` is an unlocked word (low 16 bits clear) of version at most
/// `rv` (at most [`MAX_VERSION`]: callers clamp their snapshot), in one
/// rotate and one compare: rotated right by 16, an unlocked word is its
/// version, and any word with a low bit set is above `MAX_VERSION`. `false` says nothing more: the word may still be readable
/// (a stale epoch's lock, [`is_locked`]), so callers check it again in full.
#[inline(always)]
pub fn clean_at_most(w: u64, rv: u64) -> bool {
    w.rotate_right(16) <= rv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_epoch_reads_unlocked() {
        let w = locked(unlocked(42), 7);
        assert!(is_locked(w, 7));
        assert!(!is_locked(w, 8));
        assert_eq!(version(w), 42);
    }

    #[test]
    fn clean_at_most_is_unlocked_and_not_newer() {
        for (w, rv, want) in [
            (unlocked(42), 42, true),
            (unlocked(42), 41, false),
            (unlocked(0), 0, true),
            (unlocked(MAX_VERSION), MAX_VERSION, true),
            (locked(unlocked(MAX_VERSION), 1), MAX_VERSION, false),
            (locked(unlocked(3), 7), 100, false),
            (locked(unlocked(3), 0), 100, false),
            (unlocked(3) | 2, 100, false),
        ] {
            assert_eq!(clean_at_most(w, rv), want, "{w:#x} at {rv}");
            // It never accepts a word the full test refuses.
            if clean_at_most(w, rv) {
                assert!(!is_locked(w, 7) && version(w) <= rv);
            }
        }
    }
}
