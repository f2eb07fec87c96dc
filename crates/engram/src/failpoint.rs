//! Named failpoints on protocol steps, for crash tests.
//!
//! A test arms a failpoint on its own thread (`arm("tx.after_log_append", 3)`
//! fires on the fourth hit). When it fires, the engine unwinds with a
//! [`SimulatedCrash`] payload; `Pool::txn` recognises it and, instead of
//! rolling back, abandons the pool as a crashed process would: nothing more
//! is written, the next open must recover. Failpoints are per thread, cost
//! one thread-local read when nothing is armed, and never fire in programs
//! that do not arm them.

use std::cell::RefCell;

/// The panic payload of a fired failpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimulatedCrash(pub &'static str);

thread_local! {
    static ARMED: RefCell<Vec<(String, u64)>> = const { RefCell::new(Vec::new()) };
    static DROPPED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static DROPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many fences and flushes the fault switches of this thread dropped
/// since [`disarm_all`] (a test checks its workload reached the step).
pub fn drops() -> u64 {
    DROPS.with(|c| c.get())
}

/// Fault switch: fences named `what` (see `Persister::fence`) do nothing on
/// this thread until [`disarm_all`]. The crash explorer must then find a
/// violation; a test that it does proves the explorer can fail.
pub fn drop_fence(what: &str) {
    DROPPED.with(|d| d.borrow_mut().push(format!("fence:{what}")));
}

/// Fault switch: flushes named `what` (see `Persister::flush_named`) do nothing.
pub fn drop_flush(what: &str) {
    DROPPED.with(|d| d.borrow_mut().push(format!("flush:{what}")));
}

/// A planted bug: a named deviation from a protocol that a test switches on
/// (on this thread, until [`disarm_all`]) to prove a check catches that
/// class of bug. The names are listed in [`BUGS`].
pub fn plant(bug: &str) {
    DROPPED.with(|d| d.borrow_mut().push(format!("bug:{bug}")));
}

/// The bugs [`plant`] knows: (name, what the engine then does wrong).
pub const BUGS: &[(&str, &str)] = &[(
    "stm.reservation_not_persisted",
    "the STM clock reservation is raised in memory but never written to the pool",
)];

pub(crate) fn planted(bug: &str) -> bool {
    dropped("bug", bug)
}

fn dropped(kind: &str, what: &str) -> bool {
    let hit = DROPPED.with(|d| {
        let d = d.borrow();
        !d.is_empty() && d.iter().any(|x| x.strip_prefix(kind).and_then(|r| r.strip_prefix(':')) == Some(what))
    });
    if hit {
        DROPS.with(|c| c.set(c.get() + 1));
    }
    hit
}

pub(crate) fn fence_dropped(what: &str) -> bool {
    dropped("fence", what)
}

pub(crate) fn flush_dropped(what: &str) -> bool {
    dropped("flush", what)
}

/// This thread's fault switches and planted bugs, to hand to a helper
/// thread with [`adopt_switches`] (a workload that runs several threads).
pub fn switches() -> Vec<String> {
    DROPPED.with(|d| d.borrow().clone())
}

/// Turns on, on this thread, the switches [`switches`] returned.
pub fn adopt_switches(s: &[String]) {
    DROPPED.with(|d| d.borrow_mut().extend(s.iter().cloned()));
}

/// Arms failpoint `name` on this thread: it fires after `skip` more hits.
pub fn arm(name: &str, skip: u64) {
    ARMED.with(|a| a.borrow_mut().push((name.to_string(), skip)));
}

/// Disarms every failpoint of this thread, leaving its fault switches on
/// (a workload that crashes itself on purpose keeps a test's dropped fence).
pub fn disarm_failpoints() {
    ARMED.with(|a| a.borrow_mut().clear());
}

/// Disarms every failpoint and fault switch of this thread.
pub fn disarm_all() {
    ARMED.with(|a| a.borrow_mut().clear());
    DROPPED.with(|d| d.borrow_mut().clear());
    DROPS.with(|c| c.set(0));
}

/// Whether a panic payload is a simulated crash.
pub fn is_crash(payload: &(dyn std::any::Any + Send)) -> bool {
    payload.downcast_ref::<SimulatedCrash>().is_some()
}

/// Marks a protocol step; unwinds with [`SimulatedCrash`] if armed here.
#[inline]
pub(crate) fn hit(name: &'static str) {
    let fire = ARMED.with(|a| {
        let mut a = a.borrow_mut();
        if a.is_empty() {
            return false;
        }
        let Some(i) = a.iter().position(|(n, _)| n == name) else { return false };
        if a[i].1 == 0 {
            a.remove(i);
            true
        } else {
            a[i].1 -= 1;
            false
        }
    });
    if fire {
        std::panic::panic_any(SimulatedCrash(name));
    }
}
