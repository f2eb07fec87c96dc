//! Traces: the persistent-memory events of one execution.
//!
//! Addresses are offsets into the traced region (a pool file), so a trace
//! does not depend on where the region was mapped. `base` is the region's
//! content when recording started; `Extend` records the region growing (a
//! file's length is metadata, not subject to the persistency model: after
//! an `Extend` the new bytes exist, zero, whatever happens next).

/// Which write-back instruction a flush used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushKind {
    /// CLWB: weakly ordered; persisted once a later fence completes.
    Clwb,
    /// CLFLUSHOPT: as CLWB for the model.
    Clflushopt,
    /// CLFLUSH: ordered with all stores; the line persists at this point.
    Clflush,
}

/// One event of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Bytes written at `addr` (split into 8-byte-atomic pieces by the model).
    Store {
        /// Byte address in the traced region.
        addr: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// Write-back of the 64-byte line containing `addr`.
    Flush {
        /// Byte address in the traced region.
        addr: u64,
        /// Which flush instruction.
        kind: FlushKind,
    },
    /// SFENCE or MFENCE; `what` names the protocol step it orders.
    Fence {
        /// The protocol step this fence orders.
        what: &'static str,
    },
    /// A locked read-modify-write: a store that also acts as a fence.
    Rmw {
        /// Byte address in the traced region.
        addr: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// The region grew to `len` bytes (new bytes are zero).
    Extend {
        /// New length of the region, bytes.
        len: u64,
    },
    /// ARP: an acquire load of the synchronisation variable at `addr`.
    Acquire {
        /// Byte address in the traced region.
        addr: u64,
        /// The thread (as numbered by the tracer).
        thread: u32,
    },
    /// ARP: a release store to the synchronisation variable at `addr`.
    Release {
        /// Byte address in the traced region.
        addr: u64,
        /// The thread (as numbered by the tracer).
        thread: u32,
    },
    /// ARP: a sequence point (end of a persist epoch) on `thread`.
    SeqPoint {
        /// The thread (as numbered by the tracer).
        thread: u32,
    },
    /// The events that follow, up to the next `Thread`, were issued by
    /// thread `id` (a merged multi-threaded trace; a trace without any is
    /// one thread, id 0). Only fences care: a fence completes the flushes
    /// of its own thread.
    Thread {
        /// The thread (as numbered by the tracer).
        id: u32,
    },
}

impl Event {
    /// Whether this event orders earlier flushes (a fence or locked RMW):
    /// flushed lines become durable when it executes.
    pub fn is_ordering_point(&self) -> bool {
        matches!(self, Event::Fence { .. } | Event::Rmw { .. })
    }

    /// Whether this is a CLFLUSH (its line becomes durable before the next
    /// event executes, fence or not).
    pub fn is_clflush(&self) -> bool {
        matches!(self, Event::Flush { kind: FlushKind::Clflush, .. })
    }
}

/// A recorded execution.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The region's content when recording started.
    pub base: Vec<u8>,
    /// What happened, in program order (one thread), or in the order the
    /// threads' events became visible (a merged trace with `Thread` events).
    pub events: Vec<Event>,
}

impl Trace {
    /// A trace over `base`.
    pub fn new(base: Vec<u8>) -> Self {
        Trace { base, events: Vec::new() }
    }

    /// Appends an event.
    pub fn push(&mut self, e: Event) {
        self.events.push(e);
    }

    /// Whether a crash is explored just before event `i` (`i ==
    /// events.len()`: at the end). These are exactly the places where the
    /// set of possible crash images can *shrink* (atoms become certainly
    /// durable): before a fence or locked RMW, and right after a CLFLUSH
    /// (before the next event, which cannot execute until the line is
    /// written back). Between two such points images only accumulate, so a
    /// crash anywhere leaves an image possible at the next point.
    pub fn is_point(&self, i: usize) -> bool {
        i >= self.events.len() || self.events[i].is_ordering_point() || (i > 0 && self.events[i - 1].is_clflush())
    }

    /// Indices of the ordering points (see [`Trace::is_point`]), the end last.
    pub fn ordering_points(&self) -> Vec<usize> {
        (0..=self.events.len()).filter(|&i| self.is_point(i)).collect()
    }

    /// Counts of (stores, flushes, fences).
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for e in &self.events {
            match e {
                Event::Store { .. } => c.0 += 1,
                Event::Flush { .. } => c.1 += 1,
                Event::Fence { .. } | Event::Rmw { .. } => c.2 += 1,
                _ => {}
            }
        }
        c
    }
}
