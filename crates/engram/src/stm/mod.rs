//! Persistent software transactional memory (PSTM, Krauter et al., ICFP'21),
//! on the engine's heap.
//!
//! - [`TVar`] (volatile) and [`PTVar`] (in a pool) compose in one
//!   [`Pool::atomically`](crate::Pool::atomically) transaction; [`PTField`] is
//!   a transactional field embedded in a persistent struct (no indirection).
//! - Optimistic concurrency (TL2 with LSA-style snapshot extension): every
//!   variable starts with a versioned lock word; reads are validated as they
//!   happen, so user code never sees an inconsistent state; read-only
//!   transactions write nothing shared and issue no flush.
//! - Writes are buffered. Commit locks the write set, takes a timestamp,
//!   validates the reads, writes a checksummed redo record and the copies of
//!   new values, and issues ONE fence before the new values become visible in
//!   place (`redo.rs` has the crash cases).
//! - [`crate::Pool::atomically_read`] runs a read-only transaction ([`RTx`]):
//!   TL2's read-only protocol alone (seqlock reads checked against one
//!   snapshot), no read set, allocation, shared write, flush or fence.
//! - [`STx::retry`] blocks until a variable the transaction read changes (no
//!   busy waiting); [`STx::or_else`] runs its second branch when the first
//!   retries, keeping the first branch's reads and dropping its writes.
//! - Writing an ordinary Rust value copies it into the pool at commit
//!   ([`Persist`]); old values become garbage for the engine's GC.
//! - Contention: exponential back-off, then a transaction that keeps losing
//!   runs serially (other commits wait), so long transactions are not starved.
//! - [`wait`]: the `retry` wait list (the hybrid TM's chunked wake-up
//!   list), with Bloom-filter or precise read sets, selectable per process.
//! - [`TField`] is the volatile peer of `PTField`: a transactional field
//!   inline in an ordinary struct shared as an `Arc`; `#[derive(TStruct)]`
//!   writes its accessors. [`vcollections`]: red-black tree, HAMT and treap
//!   on the volatile STM, each over one `TVar` per field or embedded fields.
//! - [`TWord`]: a transactional word (integers, `bool`, `char`) inline in a
//!   volatile struct boxed as a [`TBox`], one allocation per node and a
//!   field read on the node's own line (lock word, value word, re-check).
//! - [`runtime`]: selectable TM runtimes (fine-grain STM, or Fine HTM: the
//!   commit locks its write set and validates its reads in one hardware
//!   transaction), per thread or process-wide, interface unchanged.
//! - [`collections`]: transactional maps and sets ([`collections::PMap`],
//!   [`collections::PSet`]) and the benchmark structures: one cell per
//!   node ([`collections::RbTree`]), a chain's first entry in its
//!   bucket's cell and one cell per overflow node
//!   ([`collections::HashTable`]), or fields embedded in their nodes
//!   ([`collections::Treap`]).

pub mod collections;
mod engine;
pub mod persist;
pub(crate) mod redo;
pub mod runtime;
pub mod tfield;
mod tvar;
pub mod tword;
mod vars;
pub mod vcollections;
pub mod wait;
pub(crate) mod word;

pub(crate) use engine::in_atomically;
pub use engine::{
    atomically, atomically_read, clock_for_tests, clock_start, set_clock_start, stats, young_helps, ClockStart, RTx, ReadOnlyVar, ReadTx,
    STx, StmError, StmResult, StmStats, LEAN_ATTEMPTS,
};
/// The STM as a layer of the pool: redo-record replay on open, quiesce
/// before GC and close.
pub(crate) const LAYER: crate::pool::layer::Layer = crate::pool::layer::Layer {
    recover: |space, translate, report| {
        report.stm = redo::recover(space, translate)?;
        Ok(())
    },
    quiesce: engine::quiesce,
};
pub use engram_derive::{Persist, TStruct};
pub use persist::{CopyCx, POption, PPair, PSlice, PStr, Persist};
pub use redo::StmRecovery;
pub use tfield::{TCell, TField};
pub use tvar::TVar;
pub use tword::{TBox, TRef, TWord, TWordRef, WordValue};
pub use vars::{
    field_at, field_of, BoxCell, FieldKind, FieldRef, Immutable, ImmutableRef, Mutable, PTField, PTVar, ReadVar, TFields, Var, VarCell,
    PTVAR_MAX_VALUE,
};
pub use word::MAX_VERSION;
