//! The pool's GC gate: regions, lazy readers and STM transactions hold it
//! shared; collection, `check` and close hold it exclusively, so the GC
//! never runs while anything reads or writes the heap through them.
//!
//! Two ways in, shared:
//!
//! - [`Gate::read`] / [`Gate::read_recursive`]: a reader count in a shared
//!   `RwLock` (regions, lazy readers): two atomic read-modify-writes of one
//!   shared line per use.
//! - [`Gate::enter`] with a [`GateSlot`] of the calling thread (the STM, once
//!   per attempt): the thread marks its own slot active (one store on a
//!   line only it writes), then checks that no exclusive holder is in; no
//!   write to any line another thread writes. If one is, it unmarks the
//!   slot and takes the `RwLock` shared instead (waiting for the holder).
//!
//! Exclusive ([`Gate::write`]): take the `RwLock` exclusively (no new
//! shared holder of the first kind), raise `excl`, then wait until every
//! registered slot is inactive. The slot's mark and the holder's `excl`
//! store are each followed by a read of the other's flag (Dekker's
//! pattern), so either the reader sees `excl` and backs off, or the holder
//! sees the slot active and waits for it. What orders each store before
//! its load: where the kernel offers it, an asymmetric fence (`asym.rs`):
//! the slot's mark is a plain store and a compiler fence, and the holder
//! runs `membarrier(2)` between its store and its loads; elsewhere both
//! are sequentially consistent (the slot's mark a locked exchange).
//!
//! Nesting: while a thread holds the gate through its slot, its
//! `read`/`read_recursive` of the same gate (a lazy value forced inside a
//! transaction) succeed without touching the lock — an exclusive holder
//! may be waiting for that very slot, and blocking on it would deadlock.
//!
//! Lock order: unlike a reader of the old `RwLock`, which got in past a
//! *waiting* exclusive holder, a slot user meets an exclusive holder that
//! already holds the lock and waits for the slots. So the slot is taken
//! before any other lock, and a thread must never hold a lock another
//! slot holder may wait for while it waits to enter (the STM takes its
//! serial lock after the gate: `stm/engine/run.rs`).
//!
//! Crash behaviour: volatile only; nothing here reaches the pool.

use super::asym;
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::sync::atomic::{compiler_fence, AtomicBool, Ordering};
use std::sync::Arc;

/// One thread's shared hold on one gate (on its own cache lines).
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct GateSlot {
    active: AtomicBool,
}

/// See the module comment.
#[derive(Default)]
pub(crate) struct Gate {
    lock: RwLock<()>,
    /// An exclusive holder is in (or waiting for the slots).
    excl: AtomicBool,
    /// The registered slots; pruned of those only the gate still holds.
    slots: Mutex<Vec<Arc<GateSlot>>>,
}

thread_local! {
    /// The gate this thread holds through its slot (its address), if any.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

/// A shared hold: through the lock, through a slot, or nested in a slot's.
pub(crate) enum GateRead<'a> {
    /// (Released in `drop`, out of line: the slot's release is the hot one.)
    Lock(ManuallyDrop<RwLockReadGuard<'a, ()>>),
    Slot(&'a GateSlot),
    Nested,
}

impl Drop for GateRead<'_> {
    #[inline]
    fn drop(&mut self) {
        match self {
            GateRead::Slot(s) => {
                HELD.with(|h| h.set(0));
                s.active.store(false, Ordering::Release);
            }
            GateRead::Lock(g) => unlock(g),
            GateRead::Nested => {}
        }
    }
}

/// Releases a shared hold of the lock (out of line).
#[cold]
#[inline(never)]
fn unlock(g: &mut ManuallyDrop<RwLockReadGuard<'_, ()>>) {
    // SAFETY: called once, from the owning `GateRead`'s drop.
    unsafe { ManuallyDrop::drop(g) }
}

/// An exclusive hold: no shared holder of either kind is in.
pub(crate) struct GateWrite<'a> {
    gate: &'a Gate,
    _lock: RwLockWriteGuard<'a, ()>,
}

impl Drop for GateWrite<'_> {
    fn drop(&mut self) {
        // Before the lock is released (fields drop after this).
        self.gate.excl.store(false, Ordering::Release);
    }
}

impl Gate {
    #[inline]
    fn held_here(&self) -> bool {
        HELD.with(Cell::get) == self as *const Gate as usize
    }

    /// Shared, through the lock (queues behind a waiting exclusive holder).
    pub(crate) fn read(&self) -> GateRead<'_> {
        if self.held_here() {
            return GateRead::Nested;
        }
        GateRead::Lock(ManuallyDrop::new(self.lock.read()))
    }

    /// Shared, through the lock, even if an exclusive holder is waiting
    /// (this thread may already hold the gate shared).
    pub(crate) fn read_recursive(&self) -> GateRead<'_> {
        if self.held_here() {
            return GateRead::Nested;
        }
        GateRead::Lock(ManuallyDrop::new(self.lock.read_recursive()))
    }

    /// A new slot for the calling thread (kept registered until only the
    /// gate holds it).
    pub(crate) fn register(&self) -> Arc<GateSlot> {
        asym::init();
        let s = Arc::new(GateSlot::default());
        let mut slots = self.slots.lock();
        slots.retain(|s| Arc::strong_count(s) > 1);
        slots.push(s.clone());
        s
    }

    /// Shared, through `slot` (a slot of this gate, of the calling thread,
    /// not already active): no shared write unless an exclusive holder is in.
    #[inline]
    pub(crate) fn enter<'a>(&'a self, slot: &'a GateSlot) -> GateRead<'a> {
        if self.held_here() {
            return GateRead::Nested;
        }
        self.enter_outermost(slot)
    }

    /// [`Gate::enter`] by a thread known not to hold this gate through its
    /// slot already (the STM's read-only attempt: it enters only when no
    /// transaction runs on the thread, and only an attempt holds a slot),
    /// so without the nesting test.
    #[inline]
    pub(crate) fn enter_outermost<'a>(&'a self, slot: &'a GateSlot) -> GateRead<'a> {
        debug_assert!(!self.held_here());
        if !asym::light() {
            return self.enter_exchange(slot);
        }
        // The store is ordered before the load by the exclusive holder's
        // heavy fence (`asym.rs`), not by a locked exchange.
        slot.active.store(true, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        if !self.excl.load(Ordering::SeqCst) {
            return self.entered(slot);
        }
        self.wait_shared(slot)
    }

    /// [`Gate::enter`] without the asymmetric fence: the slot's mark is a
    /// sequentially consistent exchange (out of line).
    #[inline(never)]
    fn enter_exchange<'a>(&'a self, slot: &'a GateSlot) -> GateRead<'a> {
        slot.active.swap(true, Ordering::SeqCst);
        if !self.excl.load(Ordering::SeqCst) {
            return self.entered(slot);
        }
        self.wait_shared(slot)
    }

    #[inline(always)]
    fn entered<'a>(&'a self, slot: &'a GateSlot) -> GateRead<'a> {
        HELD.with(|h| h.set(self as *const Gate as usize));
        GateRead::Slot(slot)
    }

    /// An exclusive holder is in: unmark the slot and wait on the lock.
    #[cold]
    #[inline(never)]
    fn wait_shared<'a>(&'a self, slot: &'a GateSlot) -> GateRead<'a> {
        slot.active.store(false, Ordering::Release);
        GateRead::Lock(ManuallyDrop::new(self.lock.read_recursive()))
    }

    /// Exclusive: waits for every shared holder of either kind to leave.
    pub(crate) fn write(&self) -> GateWrite<'_> {
        let lock = self.lock.write();
        let slots = self.slots.lock();
        if crate::failpoint::planted("gate.exclusive_unfenced") {
            // What a missing fence lets the processor do: the slots are
            // read before `excl` is seen raised.
            Self::wait_for(&slots);
            self.excl.store(true, Ordering::Relaxed);
            return GateWrite { gate: self, _lock: lock };
        }
        self.excl.store(true, Ordering::SeqCst);
        let g = GateWrite { gate: self, _lock: lock };
        asym::heavy();
        Self::wait_for(&slots);
        g
    }

    /// Waits until every slot of `slots` is inactive.
    fn wait_for(slots: &[Arc<GateSlot>]) {
        for s in slots {
            let mut spins = 0u32;
            while s.active.load(Ordering::SeqCst) {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn a_slot_holder_keeps_the_exclusive_holder_out() {
        let gate = Arc::new(Gate::default());
        let slot = gate.register();
        let inside = Arc::new(AtomicU64::new(0));
        let g = gate.enter(&slot);
        let (g2, in2) = (gate.clone(), inside.clone());
        let t = std::thread::spawn(move || {
            let _w = g2.write();
            in2.load(Ordering::SeqCst)
        });
        inside.store(1, Ordering::SeqCst);
        drop(g);
        assert_eq!(t.join().unwrap(), 1, "the exclusive holder got in before the slot left");
    }

    #[test]
    fn a_nested_read_inside_a_slot_hold_does_not_block() {
        let gate = Gate::default();
        let slot = gate.register();
        let g = gate.enter(&slot);
        assert!(matches!(gate.read_recursive(), GateRead::Nested));
        assert!(matches!(gate.read(), GateRead::Nested));
        drop(g);
        assert!(matches!(gate.read(), GateRead::Lock(_)));
        drop(gate.write());
    }

    /// A reader enters and leaves through its slot, `rounds` times, while
    /// another thread takes the gate exclusively in a loop (with `plant`
    /// on that thread); how often the reader, inside through its slot, saw
    /// the exclusive holder inside too.
    fn overlaps(rounds: u64, plant: Option<&'static str>) -> u64 {
        let gate = Gate::default();
        let slot = gate.register();
        let (inside, stop) = (AtomicBool::new(false), AtomicBool::new(false));
        std::thread::scope(|s| {
            s.spawn(|| {
                #[cfg(feature = "failpoints")]
                if let Some(bug) = plant {
                    crate::failpoint::plant(bug);
                }
                #[cfg(not(feature = "failpoints"))]
                assert!(plant.is_none(), "planting needs the `failpoints` feature");
                while !stop.load(Ordering::Relaxed) {
                    let w = gate.write();
                    inside.store(true, Ordering::SeqCst);
                    for _ in 0..50 {
                        std::hint::spin_loop();
                    }
                    inside.store(false, Ordering::SeqCst);
                    drop(w);
                }
                #[cfg(feature = "failpoints")]
                crate::failpoint::disarm_all();
            });
            let mut seen = 0;
            for _ in 0..rounds {
                let g = gate.enter(&slot);
                if matches!(g, GateRead::Slot(_)) {
                    for _ in 0..20 {
                        seen += u64::from(inside.load(Ordering::SeqCst));
                    }
                }
                drop(g);
            }
            stop.store(true, Ordering::Relaxed);
            seen
        })
    }

    #[test]
    fn a_slot_holder_never_meets_the_exclusive_holder() {
        assert_eq!(overlaps(200_000, None), 0);
    }

    /// The gate is safe only with the exclusive holder's fences: planted
    /// without them (the slots read before `excl` is raised, as the
    /// processor may do without a fence), the reader meets the holder (tried up to 50 times: the two threads must
    /// run at the same moment).
    #[test]
    #[cfg(feature = "failpoints")]
    fn the_gate_test_catches_an_unfenced_exclusive_holder() {
        let caught = (0..50).any(|_| overlaps(200_000, Some("gate.exclusive_unfenced")) > 0);
        assert!(caught, "an unfenced exclusive holder went unseen");
    }

    #[test]
    fn slots_only_the_gate_holds_are_pruned() {
        let gate = Gate::default();
        for _ in 0..10 {
            drop(gate.register());
        }
        let _keep = gate.register();
        assert_eq!(gate.slots.lock().len(), 1);
    }
}
