//! Persistent laziness and persistent memoization (PSTM paper, §3.4, §4.3,
//! §5.5), on the engine's heap.
//!
//! A *thunk* ([`PLazy`]) is a pool object naming a registered function (by
//! a stable name, see [`register`]) and its persistent arguments. Forcing it
//! runs the function once, copies the result into the pool and turns the
//! thunk into an *indirection* to that copy, so evaluation state survives
//! restarts and crashes. On the same protocol sit a persistent lazy stream
//! ([`PStream`], a restartable iteration) and persistent memo tables
//! ([`TrieMemo`], after MemoTrie; [`HashMemo`], after MemoCombinators, an
//! STM HAMT keyed by the argument) with big integers stored in the pool
//! ([`PBigUint`], arithmetic by `num-bigint`).
//!
//! # The update protocol (`publish.rs`)
//!
//! 1. evaluate (volatile; nothing written to the pool);
//! 2. copy the result, and everything it reaches, into fresh pool objects
//!    (the STM's copy-on-commit machinery, [`crate::stm::Persist`]) and
//!    flush them;
//! 3. ONE fence (`FENCE_RESULT`): the copy and its allocator metadata are
//!    durable;
//! 4. one 8-byte store (a compare-and-swap from 0) of the copy's address
//!    into the indirection word, flushed; it becomes durable at the thread's
//!    next fence (the next update's step 3, [`sync`], or the clean close).
//!
//! A crash before 4 reaches the media leaves the indirection word 0: the
//! thunk is unevaluated, its half-made copy garbage for recovery's GC. The
//! word is 8 aligned bytes, so it is never torn, and it is stored only after
//! the fence, so it never points at a copy that did not persist. A lost
//! step 4 only re-evaluates. Indirection words change once (0 to a
//! pointer) and copies are immutable, so readers need no transaction: they
//! load the word (acquire) and read the copy under the pool's GC gate.
//!
//! # Concurrency (blackholing)
//!
//! A thread that starts evaluating a thunk (or a memo entry) marks it in a
//! volatile *blackhole* table; other threads that force it wait for that
//! evaluation and share its result instead of evaluating again. A thread
//! that forces a thunk it is already evaluating gets an error (the paper's
//! `<<loop>>`). The table is volatile: a crash mid-evaluation leaves the
//! thunk unevaluated, never half-written, and nothing to clean up.
//!
//! # Rules for registered functions
//!
//! They must be pure: the result may depend only on the arguments and on
//! immutable pool data (other thunks' results). They run outside any
//! transaction unless the caller forces inside one ([`PLazy::force_in`]),
//! and must then not call `atomically` themselves.

mod bigint;
mod blackhole;
mod memo;
mod publish;
mod reader;
mod registry;
mod stream;
mod thunk;

pub use bigint::PBigUint;
pub use memo::{HashMemo, Memo, PMemo, TrieMemo, TrieNode, TrieRoot, VolatileMemo};
pub use publish::{stats, sync, LazyStats, FENCE_RESULT};
pub use reader::{Cx, Load};
pub use registry::{register, registered};
pub use stream::{PCell, PStream, StreamCell, StreamIter};
pub use thunk::{PLazy, ThunkObj, NAME_MAX};
