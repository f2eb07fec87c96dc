//! # Language-level persistency: SCP, epoch persistency, RCBSP, ARP, ARP+VA
//!
//! After Kolli, Gogte, Saidi, Diestelhorst, Chen, Narayanasamy and Wenisch,
//! "Language-level persistency", ISCA 2017. A multi-threaded execution is
//! recorded as an [`ArpTrace`] (every thread's events in one global order,
//! with the event each load read from, hence the synchronizes-with edges).
//! Each model defines a *persist memory order* (PMO, written `≤p`) over the
//! trace's persists; a crash may leave exactly the sets of persists that are
//! down-closed under it ([`check()`] enumerates them and runs a recovery
//! invariant on each). [`sim`] is the paper's PM-controller hardware
//! (Algorithm 1 and its baselines, with a timing model), [`workloads`] the
//! six benchmarks as recorded traces, [`eval`] the paper's tables from them,
//! [`x86`] each model's x86 mapping checked against [`crate::px86`].
//!
//! ## Our reading of the definitions
//!
//! Notation: `≤sb` sequenced-before (program order in a thread), `→sw`
//! synchronizes-with (an acquire that reads from a release, or from a
//! read-modify-write in that release's release sequence), `≤hb` the
//! transitive closure of both. A *persist* is a store or read-modify-write to
//! persistent memory; it is split into 8-byte-aligned atoms that persist
//! whole (8-byte failure atomicity). Sequence points (`engram::sequence_point()`)
//! and full fences (`atomic_thread_fence(seq_cst)`) are *barriers*. In every
//! model PMO is the transitive closure of the model's base edges plus
//! **same-address coherence**: atoms to one 8-byte word persist in the order
//! they were written (strong persist atomicity).
//!
//! - **ARP** (acquire-release persistency, the paper's §5):
//!   1. *sequence-point guarantee*: `X ≤sb S ⇒ X ≤p S` and `S ≤sb Y ⇒ S ≤p Y`
//!      for a barrier `S`, so persists separated by a sequence point in one
//!      thread are ordered;
//!   2. *release* (one-sided): `X ≤sb R ⇒ X ≤p R` for a release `R`: what the
//!      thread did before a release persists before anything ordered after it;
//!   3. *acquire* (one-sided): `A ≤sb Y ⇒ A ≤p Y` for an acquire `A`;
//!   4. *synchronization guarantee*: `R →sw A ⇒ R ≤p A`;
//!   5. transitivity. Synchronization on volatile and on persistent
//!      locations counts alike, so `P ≤sb R →sw A ≤sb Q` orders `P ≤p Q`
//!      through a volatile lock, and chains of such hand-offs compose
//!      (`P ≤sb R1 →sw A1 ≤sb R2 →sw A2 ≤sb Q`). A release followed by an
//!      acquire in one thread (`R ≤sb A`) is *not* ordered: persists between
//!      them float, which is what the hardware's lazy epochs exploit.
//! - **ARP+VA**: ARP where acquires and releases carrying the *volatile
//!   annotation* give no edges at all (rules 2–4 skip them; a
//!   synchronization counts only if neither end is annotated). Annotating a
//!   release that orders persists is a program bug the checker exposes.
//! - **RCBSP** (release consistency with buffered strict persistency, the
//!   baseline ISA model with full fences): every acquire, release, full fence
//!   and sequence point is a two-sided barrier (rules 1 and 4; annotations
//!   ignored). Equivalently `X ≤p Y` iff `X ≤hb F ≤hb Y` for such an `F`.
//! - **Epoch persistency** (language level, sequence points only):
//!   `X ≤p Y` iff `X ≤hb S ≤hb Y` for a barrier `S`. Acquires and releases
//!   alone order nothing, but happens-before carries a sequence point's
//!   ordering to other threads.
//! - **SCP** (sequential/strict persistency): persists in happens-before
//!   order (`X ≤sb Y` or `X ≤hb Y` ⇒ `X ≤p Y`). For a data-race-free
//!   execution this is the order every thread can observe; unsynchronized
//!   persists of different threads stay unordered (their relative order is
//!   not observable by a data-race-free program).
//!
//! Each model is at least as strong as the next: the images SCP allows are a
//! subset of RCBSP's, of ARP's, of ARP+VA's; Epoch's include ARP's. The
//! tests check these inclusions on random traces, and check [`order`] (one
//! forward pass with running sets) against [`brute`] (the rules above written
//! out as explicit edges, closed by Warshall, subsets enumerated).
//!
//! What the paper leaves to us: it does not say how a sequentially
//! consistent atomic differs from acq_rel for persistency; we treat `seq_cst`
//! loads/stores/RMWs as acquire/release (their total order is not modelled)
//! and `atomic_thread_fence(seq_cst)` as a barrier. Relaxed atomics order
//! nothing. The x86-mapping events (CLWB, SFENCE) are ignored by these
//! models; the existing [`crate::px86`] model is the ground truth for them.

pub mod bits;
pub mod brute;
pub mod check;
pub mod eval;
pub mod order;
pub mod sim;
pub mod trace;
pub mod workloads;
pub mod x86;

pub use check::{check, CheckConfig, CheckReport, IdealCount};
pub use order::{pmo, Model, Pmo};
pub use trace::{ArpEvent, ArpTrace, MemOrder, Op, Space, TraceError};
