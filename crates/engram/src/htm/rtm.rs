//! Intel RTM (Restricted Transactional Memory) by inline assembly:
//! `xbegin`/`xend`/`xabort`/`xtest`, and its detection.
//!
//! The `_xbegin` intrinsics sit behind the unstable `rtm` target feature, so
//! the instructions are written with `asm!` (stable); the assembler accepts
//! them whatever the target features, and they are only *executed* after
//! [`available`] said yes.
//!
//! Detection is CPUID leaf 7 (EBX bit 11, RTM) **and** a probe: microcode
//! updates (TAA/TSX_CTRL) can leave the CPUID bit set while every `xbegin`
//! aborts, so [`available`] runs [`PROBE_TXS`] trivial transactions and
//! requires most of them to commit. The answer is computed once.
//!
//! How `xbegin` returns twice: `eax` is preset to [`STARTED`]; `xbegin 2f`
//! starts the transaction and falls through with `eax` untouched. On an
//! abort the processor rolls back registers and memory to the `xbegin` and
//! jumps to its fallback label — the same `2:` — with the status in `eax`.
//! Everything the body did after `xbegin` (stack writes included) is rolled
//! back, so returning from [`xbegin`] and continuing the body in the caller
//! is sound, as with the C intrinsic.
//!
//! Crash behaviour: none (no pool is touched). Note for PSTM: `clwb`,
//! `clflushopt` and `clflush` abort an RTM transaction on the Intel parts we
//! use; `sfence` does not (docs/hybrid.md).

use std::arch::asm;
use std::sync::OnceLock;

/// `xbegin`'s result when the transaction started.
pub const STARTED: u32 = u32::MAX;
/// Transactions run by the probe.
pub const PROBE_TXS: u32 = 100_000;

/// Whether CPUID advertises RTM (leaf 7, sub-leaf 0, EBX bit 11).
pub fn cpuid_rtm() -> bool {
    #[allow(unused_unsafe)]
    // SAFETY: CPUID is available on every x86-64 processor; leaf 7 is only
    // read when leaf 0 says it exists.
    unsafe {
        let max = std::arch::x86_64::__cpuid(0).eax;
        max >= 7 && std::arch::x86_64::__cpuid_count(7, 0).ebx & (1 << 11) != 0
    }
}

/// Result of the probe: how many of [`PROBE_TXS`] transactions committed.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    /// CPUID said RTM.
    pub cpuid: bool,
    /// Probe transactions that committed (0 when CPUID said no).
    pub committed: u32,
}

impl Probe {
    /// RTM is usable: CPUID says so and more than half the probes committed
    /// (interrupts abort a few on a busy machine; disabled TSX aborts all).
    pub fn usable(&self) -> bool {
        self.cpuid && self.committed > PROBE_TXS / 2
    }
}

/// CPUID plus the probe, computed once per process.
pub fn probe() -> Probe {
    static P: OnceLock<Probe> = OnceLock::new();
    *P.get_or_init(|| {
        let cpuid = cpuid_rtm();
        let committed = if cpuid { run_probe() } else { 0 };
        Probe { cpuid, committed }
    })
}

/// Whether real RTM may be used in this process.
pub fn available() -> bool {
    probe().usable()
}

fn run_probe() -> u32 {
    let mut cell = 0u64;
    let mut ok = 0;
    for _ in 0..PROBE_TXS {
        // SAFETY: CPUID advertised RTM, so the instructions exist; xend runs
        // only in the started branch, inside the transaction.
        unsafe {
            if xbegin() == STARTED {
                cell = std::hint::black_box(cell + 1);
                xend();
                ok += 1;
            }
        }
    }
    std::hint::black_box(cell);
    ok
}

/// Starts a transaction: [`STARTED`], or (a second return, after an
/// abort) the abort status.
///
/// # Safety
/// RTM must be [`available`] (else `#UD`). Every path from a `STARTED`
/// return must end in [`xend`] or an abort.
#[inline(always)]
pub unsafe fn xbegin() -> u32 {
    let mut status = STARTED;
    // SAFETY: the caller guarantees RTM exists; on abort control resumes at
    // `2:` with registers and memory rolled back and the status in eax.
    unsafe { asm!("xbegin 2f", "2:", inout("eax") status, options(nostack)) };
    status
}

/// Commits the transaction.
///
/// # Safety
/// RTM must be available and a transaction active ([`xtest`]), else `#GP`.
#[inline(always)]
pub unsafe fn xend() {
    // SAFETY: the caller's contract.
    unsafe { asm!("xend", options(nostack)) };
}

/// Whether a transaction is active on this thread.
///
/// # Safety
/// RTM must be available.
#[inline(always)]
pub unsafe fn xtest() -> bool {
    let r: u8;
    // SAFETY: the caller guarantees RTM exists; xtest only sets ZF.
    unsafe { asm!("xtest", "setnz {r}", r = out(reg_byte) r, options(nostack, nomem)) };
    r != 0
}

/// Aborts the active transaction with code `C` (a no-op outside one).
///
/// # Safety
/// RTM must be available.
#[inline(always)]
pub unsafe fn xabort_const<const C: u8>() {
    // SAFETY: the caller guarantees RTM exists; outside a transaction xabort
    // is a no-op.
    unsafe { asm!("xabort {c}", c = const C, options(nostack)) };
}

/// Aborts with a run-time `code` (`xabort` takes an immediate: codes above
/// [`super::abort::code::MAX`] become `0xff`).
///
/// # Safety
/// RTM must be available.
pub unsafe fn xabort(code: u8) {
    macro_rules! table {
        ($($c:literal)*) => {
            match code {
                // SAFETY: the caller's contract.
                $($c => unsafe { xabort_const::<$c>() },)*
                // SAFETY: the caller's contract.
                _ => unsafe { xabort_const::<0xff>() },
            }
        };
    }
    table!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::htm::abort::{code, Abort};

    #[test]
    fn detection_is_consistent() {
        let p = probe();
        let flag = std::fs::read_to_string("/proc/cpuinfo").map(|s| s.contains(" rtm")).unwrap_or(false);
        println!("rtm: cpuid {} /proc/cpuinfo {} probe {}/{}", p.cpuid, flag, p.committed, PROBE_TXS);
        if !p.cpuid {
            assert_eq!(p.committed, 0);
            assert!(!available());
        }
    }

    #[test]
    fn real_rtm_commits_aborts_and_decodes() {
        if !available() {
            println!("skipped: no usable RTM on this CPU (cpuid {}, probe {})", probe().cpuid, probe().committed);
            return;
        }
        let mut x = 0u64;
        let mut committed = false;
        for _ in 0..100 {
            // SAFETY: RTM is available; xend runs inside the transaction.
            unsafe {
                if xbegin() == STARTED {
                    x += 1;
                    assert!(xtest());
                    xend();
                    committed = true;
                    break;
                }
            }
        }
        assert!(committed && x == 1);
        // SAFETY: RTM is available.
        assert!(!unsafe { xtest() });
        // An explicit abort rolls back the write and reports the code.
        let mut y = 0u64;
        let mut status = None;
        for _ in 0..100 {
            // SAFETY: RTM is available; the transaction always aborts.
            let s = unsafe { xbegin() };
            if s == STARTED {
                std::hint::black_box(&mut y);
                y = 1;
                std::hint::black_box(y);
                // SAFETY: RTM is available, inside a transaction.
                unsafe { xabort(code::VALIDATE) };
                unreachable!("xabort returned inside a transaction");
            }
            status = Some(Abort(s));
            if Abort(s).code().is_some() {
                break;
            }
        }
        assert_eq!(y, 0);
        assert_eq!(status.and_then(|s| s.code()), Some(code::VALIDATE));
    }
}
