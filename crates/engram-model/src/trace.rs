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
}

impl Event {
    /// Whether a crash is explored just before this event.
    pub fn is_ordering_point(&self) -> bool {
        matches!(self, Event::Fence { .. } | Event::Rmw { .. })
    }
}

/// A recorded execution.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The region's content when recording started.
    pub base: Vec<u8>,
    /// What happened, in program order (one thread, or a serialised order).
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

    /// Indices of the ordering points: before every fence, and the end.
    pub fn ordering_points(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.events.iter().enumerate().filter(|(_, e)| e.is_ordering_point()).map(|(i, _)| i).collect();
        v.push(self.events.len());
        v
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
