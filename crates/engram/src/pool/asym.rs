//! An asymmetric fence for the GC gate (`gate.rs`): the frequent side (an
//! STM attempt entering through its slot) orders its store before its load
//! with a compiler fence alone, and the rare side (an exclusive holder)
//! pays for both with `membarrier(2)`'s `MEMBARRIER_CMD_PRIVATE_EXPEDITED`,
//! which makes every running thread of the process execute a full memory
//! barrier before it returns (a thread not running passes one when it is
//! scheduled). That is how userspace RCU and folly's `asymmetricHeavyBarrier`
//! do it.
//!
//! What it keeps true: [`light`] answers the same for the whole process
//! from the first [`init`] on, and it answers `true` only if the process is
//! registered for the expedited command, so [`heavy`] then really fences
//! every thread. Otherwise (no such command, a seccomp filter, valgrind,
//! `ENGRAM_GATE_FENCE=exchange`) both sides keep their sequentially
//! consistent read-modify-writes, and [`heavy`] does nothing.
//!
//! Why a store, a compiler fence and a load suffice on the light side (with
//! [`heavy`] between the heavy side's store and its load): the heavy
//! side's barrier runs on the light thread at some point P of its program.
//! If P comes before the light side's store, the light side's load, after
//! P, sees the heavy side's store (made before the barrier); if P comes
//! after it, the store is visible before the heavy side's load (made after
//! the barrier returns). Either way the two do not both miss each other.
//!
//! Crash behaviour: none (volatile).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// `membarrier(2)` commands (`linux/membarrier.h`).
const CMD_QUERY: libc::c_long = 0;
const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// 0: not yet decided; 1: the light side may skip its fence; 2: it may not.
static MODE: AtomicU8 = AtomicU8::new(0);

/// Decides, once per process, whether the light side may skip its fence
/// (registers the process for the expedited command if so). Called before
/// any light side runs (`Gate::register`) and by every heavy side.
pub(crate) fn init() -> bool {
    static DECIDED: OnceLock<bool> = OnceLock::new();
    *DECIDED.get_or_init(|| {
        let ok = std::env::var("ENGRAM_GATE_FENCE").as_deref() != Ok("exchange") && register();
        MODE.store(if ok { 1 } else { 2 }, Ordering::Release);
        ok
    })
}

/// Whether the light side may skip its fence (after [`init`]).
#[inline(always)]
pub(crate) fn light() -> bool {
    MODE.load(Ordering::Relaxed) == 1
}

/// The heavy side: a full barrier on every running thread of the process
/// (nothing if [`light`] is off: the light side then fences itself).
pub(crate) fn heavy() {
    if !init() {
        return;
    }
    if barrier() {
        return;
    }
    // The process registered in `init`; should the kernel refuse (a child
    // made by `fork` may not carry the registration over), register and ask
    // again.
    let ok = membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0 && barrier();
    assert!(ok, "membarrier(PRIVATE_EXPEDITED) failed after registration: {}", std::io::Error::last_os_error());
}

/// The expedited barrier itself; whether the kernel ran it.
fn barrier() -> bool {
    membarrier(CMD_PRIVATE_EXPEDITED) == 0
}

fn membarrier(cmd: libc::c_long) -> libc::c_long {
    // SAFETY: membarrier takes two integers and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long) }
}

/// Asks the kernel for the expedited private command and registers the
/// process for it; `false` if either is refused.
fn register() -> bool {
    let cmds = membarrier(CMD_QUERY);
    let want = CMD_PRIVATE_EXPEDITED | CMD_REGISTER_PRIVATE_EXPEDITED;
    cmds >= 0 && cmds & want == want && membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child made by `fork` (which may not carry the registration over)
    /// still runs the heavy fence.
    #[test]
    fn a_forked_child_still_fences() {
        if !init() {
            return; // no membarrier here: nothing to carry over
        }
        // SAFETY: the child calls only `heavy` (system calls; on its success
        // path no allocation and no lock) and `_exit`.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = std::panic::catch_unwind(heavy).is_ok();
            // SAFETY: ends the child without running the parent's destructors.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        assert!(pid > 0, "fork failed");
        let mut status = 0;
        // SAFETY: waits for the child made above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child's heavy fence failed: {status:#x}");
    }
}
