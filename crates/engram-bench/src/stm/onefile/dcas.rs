//! The `tmtype`: a heap word of OneFile, its value and the sequence
//! number of the transaction that wrote it, 16 bytes, 16-aligned.
//!
//! Keeps true: the pair changes only by `lock cmpxchg16b` (both halves at
//! once), and only to a newer seq ([`Word::install`]); a reader loads the
//! value, then the seq (x86 keeps loads in order, and the double-width
//! CAS is atomic), so a seq it accepts is at least as new as the value it
//! returns ([`Word::read_if_at_most`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// One tmtype word.
#[repr(C, align(16))]
pub struct Word {
    val: AtomicU64,
    seq: AtomicU64,
}

impl Word {
    /// Its address (for pwb).
    pub fn addr(&self) -> *const u8 {
        (self as *const Word).cast()
    }

    /// Sets a word of a fresh file (seq 0), before anyone reads it.
    pub fn init(&self, v: u64) {
        self.val.store(v, Ordering::Relaxed);
        self.seq.store(0, Ordering::Relaxed);
    }

    /// The value, if the word's seq is at most `seq`.
    #[inline(always)]
    pub fn read_if_at_most(&self, seq: u64) -> Option<u64> {
        let v = self.val.load(Ordering::Acquire);
        (self.seq.load(Ordering::Acquire) <= seq).then_some(v)
    }

    /// Installs `(v, seq)` unless the word's seq is already `seq` or newer
    /// (the DCAS rule: applying a write-set twice changes nothing).
    #[inline]
    pub fn install(&self, v: u64, seq: u64) {
        let mut old = (self.val.load(Ordering::Acquire), self.seq.load(Ordering::Acquire));
        while old.1 < seq {
            match self.cas(old, (v, seq)) {
                Ok(()) => return,
                Err(now) => old = now,
            }
        }
    }

    /// `lock cmpxchg16b`: `new` if the word is `old`, else what it is.
    #[inline(always)]
    fn cas(&self, old: (u64, u64), new: (u64, u64)) -> Result<(), (u64, u64)> {
        let p = (self as *const Word).cast_mut();
        let (lo, hi): (u64, u64);
        // SAFETY: `p` is 16-aligned, valid for reads and writes (a word of
        // the mapping, accessed only atomically); the CPU has cmpxchg16b
        // (checked when the file was mapped, `OneFile::mapped`). rbx is
        // reserved by LLVM, so the new low half passes through another
        // register and is swapped in and out around the instruction.
        unsafe {
            std::arch::asm!(
                "xchg {nlo}, rbx",
                "lock cmpxchg16b xmmword ptr [{p}]",
                "mov rbx, {nlo}",
                p = in(reg) p,
                nlo = inout(reg) new.0 => _,
                in("rcx") new.1,
                inout("rax") old.0 => lo,
                inout("rdx") old.1 => hi,
                options(nostack),
            );
        }
        if (lo, hi) == old {
            Ok(())
        } else {
            Err((lo, hi))
        }
    }
}
