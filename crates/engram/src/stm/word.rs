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
//! 32768 opens; a stale lock survives that long only if its variable is
//! never written in all that time, and the next writer clears it anyway.)

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
}
