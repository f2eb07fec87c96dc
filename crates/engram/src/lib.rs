//! # Engram: a persistent heap in a memory-mapped pool
//!
//! Programs keep ordinary data structures in a pool file, change them with
//! crash-consistent failure-atomic regions, and find them again after a
//! restart or a power failure, with no serialization.
//!
//! - [`Pool`]: create/open/close a pool file; the header is kept in two
//!   checksummed copies; the pool is mapped at a fixed address so pointers
//!   ([`PPtr`], [`PArray`]) are plain addresses, grows on demand, and is
//!   relocated (pointers rewritten) if its address is taken.
//! - [`Pool::txn`] runs a closure as a failure-atomic region ([`Tx`]):
//!   undo-logged, all-or-nothing across crashes, with two-phase locking.
//! - Named durable roots ([`Tx::set_root`], [`Tx::root`]); everything not
//!   reachable from a root is garbage, reclaimed by recovery after a crash or
//!   by [`Pool::collect`].
//! - Types stored in a pool implement [`Persistent`] (`#[derive(Persistent)]`);
//!   their layout is recorded in the pool, and a program whose type changed
//!   gets [`Error::LayoutMismatch`] naming it.
//! - Collections: [`collections::PVec`], [`collections::PString`],
//!   [`collections::PHashMap`], [`collections::PBox`].
//!
//! ```
//! use engram::{Persistent, PPtr, Pool, CreateOptions, Durability};
//!
//! #[derive(Clone, Copy, Persistent)]
//! struct Node { value: u64, next: PPtr<Node> }
//!
//! # let path = std::env::temp_dir().join(format!("engram-lib-doc-{}.pool", std::process::id()));
//! # let _ = std::fs::remove_file(&path);
//! let pool = Pool::create(&path, CreateOptions::new("list").durability(Durability::Process))?;
//! pool.txn(|tx| {
//!     let mut head = PPtr::null();
//!     for value in 0..3 {
//!         head = tx.alloc(Node { value, next: head })?;
//!     }
//!     tx.set_root("list", head)
//! })?;
//! let sum = pool.txn(|tx| {
//!     let mut p = tx.root::<Node>("list")?.unwrap_or_default();
//!     let mut sum = 0;
//!     while !p.is_null() {
//!         let n = tx.read(p)?;
//!         sum += n.value;
//!         p = n.next;
//!     }
//!     Ok::<_, engram::Error>(sum)
//! })?;
//! assert_eq!(sum, 3);
//! # pool.close()?; std::fs::remove_file(&path).unwrap();
//! # Ok::<(), engram::Error>(())
//! ```

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

// Lets `#[derive(Persistent)]` name `::engram` from inside this crate too.
extern crate self as engram;

mod alloc;
mod bumps;
pub mod collections;
#[cfg(feature = "testing")]
pub mod crashtest;
mod crc;
mod error;
pub mod failpoint;
pub mod fences;
pub mod format;
mod fresh;
mod futex;
mod gc;
mod hash;
mod hint;
pub mod htm;
pub mod lazy;
mod log;
pub mod pmem;
mod pointers;
mod pool;
mod ptr;
mod retires;
pub mod stm;
#[cfg(feature = "trace")]
pub mod trace;
#[cfg(not(feature = "trace"))]
#[path = "trace_off.rs"]
pub mod trace;
mod tx;
mod types;
pub mod wal;

/// The subsystems layered on the pool with durable state of their own: the
/// pool calls their recovery on open and quiesces them before GC and close
/// (`pool/layer.rs`).
pub(crate) const LAYERS: &[pool::layer::Layer] = &[stm::LAYER];

pub use alloc::HeapStats;
pub use engram_derive::Persistent;
pub use error::{Error, Result};
pub use gc::MarkStats;
pub use pmem::Durability;
pub use pointers::BadField;
pub use pool::{
    default_durability, CheckReport, CreateOptions, OpenOptions, OpenReport, Pool, PoolInfo, RecoveryGc, RecoveryGcHook, RecoveryGcState,
    RecoveryGcStatus, Region,
};
pub use ptr::{PArray, PPtr};
pub use tx::{ArrayView, RootEntryInfo, RootInfo, Tx};
pub use types::{has_pointers, Persistent, TypeDesc};
