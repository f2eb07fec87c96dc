//! Trace recording without the `trace` feature: there is no tracer.
//!
//! [`Tracer`] is uninhabited, so no pool can be given one and every
//! "if tracing" branch of the engine compiles away; `Durability::Trace`
//! then behaves as `Process`. Build with `--features trace` (or `testing`, as
//! `engram crashtest` and the engine's tests do) for the real recorder.

/// The flush instruction a trace records (the persistency model's own type
/// with the `trace` feature).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushKind {
    /// CLWB: write back, keep the line.
    Clwb,
    /// CLFLUSHOPT: write back and invalidate, weakly ordered.
    Clflushopt,
    /// CLFLUSH: write back and invalidate, ordered with stores.
    Clflush,
}

/// No tracer exists without the `trace` feature.
#[derive(Debug)]
pub enum Tracer {}

impl Tracer {
    pub(crate) fn attach(&self, _base: u64, _len: u64) {
        match *self {}
    }
    pub(crate) fn detach(&self) {
        match *self {}
    }
    pub(crate) fn before_store(&self, _addr: u64, _len: u64) {
        match *self {}
    }
    pub(crate) fn store(&self, _addr: u64, _len: u64) {
        match *self {}
    }
    pub(crate) fn flush(&self, _addr: u64, _len: u64, _kind: FlushKind) {
        match *self {}
    }
    pub(crate) fn fence(&self, _what: &'static str) {
        match *self {}
    }
    pub(crate) fn extend(&self, _len: u64) {
        match *self {}
    }
}
