//! # engram-model: what a power failure may leave behind
//!
//! A program's persistent stores, cache-line flushes and fences are recorded
//! as a [`Trace`]. The [`px86`] model decides, for a crash at any point of the
//! trace, which memory images are possible under the x86 persistency model
//! (Px86, Raad et al., POPL 2020), and the [`explore`](mod@explore) module builds those
//! images at every ordering point, with pruning where their number explodes,
//! and hands each to a check supplied by the caller (typically: run the real
//! recovery code on it, then an invariant).
//!
//! The crate knows nothing about Engram's heap: any front end that can
//! produce a trace can use it. [`brute`] is an independent, exhaustive
//! reference semantics for tiny traces, used to cross-check the explorer.

pub mod arp;
pub mod brute;
pub mod explore;
pub mod px86;
pub mod trace;

pub use explore::{explore, explore_indexed, Config, Report, Violation};
pub use px86::{CrashState, Px86};
pub use trace::{Event, FlushKind, Trace};
