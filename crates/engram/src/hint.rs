//! Hints to the CPU. What it keeps true: a hint changes no state a
//! program can see, so any argument is allowed; a wrong hint costs time,
//! never correctness.

/// Asks the CPU to start loading the cache line at `addr` into every
/// cache level (PREFETCHT0). Any address is allowed: a bad or unmapped
/// one is ignored, never a fault. Used where a walk knows its next
/// addresses before it knows which one it takes (the GC's mark stack,
/// a search tree's two children).
#[inline(always)]
pub(crate) fn prefetch(addr: u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 never faults and changes no architectural state,
    // whatever the address; SSE is in the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}
