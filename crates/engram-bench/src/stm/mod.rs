//! `engram-bench stm`: the persistent-STM benchmarks of Krauter, Raad and
//! Pietzuch (*Persistent Software Transactional Memory in Haskell*, ICFP'21),
//! after Yates & Scott: maps over a key range of 100,000 with 50,000 keys
//! pre-inserted, where every operation is one transaction — a lookup with
//! probability L (50 % or 90 %), otherwise an insert or a delete (equally
//! likely) of a random key — run for a fixed time on 1, 2, 4 and 8 threads,
//! measuring committed transactions per second.
//!
//! Structures: Engram's [`engram::stm::collections`] red-black tree, treap,
//! hash table (transactional fields embedded in the nodes) and the HAMT
//! `PMap`. Implementations, side by side in one run and one file system:
//!
//! - **PSTM** (`pstm`): the collections on a pool in `Durability::Pmem`
//!   (CLWB/CLFLUSHOPT + SFENCE) — the real thing;
//! - **PSTM, no flush** (`pstm-process`): the same code on a pool in
//!   `Durability::Process`, where the persistence seam issues no flush and
//!   no fence — the volatile-STM peer of the paper's comparison ("the same
//!   code without persistence"; `report.rs` says exactly what it keeps);
//! - **TVar tree** (`tvar`): the red-black tree over volatile
//!   transactional words, each node one [`engram::stm::TBox`] of
//!   [`engram::stm::TWord`]s ([`tvar_rbtree`]) — a fully
//!   volatile peer, no pool at all; for the treap and the HAMT, the
//!   `vcollections` ones with one `TVar` per node field ([`tvar_vmap`]);
//! - **PMDK** (`pmdk`): libpmemobj red-black tree and hash table in C
//!   (`peers/pmdk_stm_peers.c`), one transaction per update under one
//!   global mutex, as in the OneFile/Romulus suite ([`pmdk`]);
//! - **RomulusLog** (`romulus`): RomulusLog's algorithm (Correia, Felber,
//!   Ramalhete, SPAA'18), reimplemented here in Rust from the paper — two
//!   halves of one mmapped file, a C-RW-WP lock, flat-combined writers, a
//!   volatile log of the stored ranges, four fences per transaction — with
//!   the suite's red-black tree and hash set written against it
//!   ([`romulus`]): the published persistent TM of issue 14, measured in
//!   the same run;
//! - **OneFile-LF** (`onefile`): the lock-free PTM of OneFile (Ramalhete,
//!   Correia, Felber, Cohen, DSN'19), reimplemented here in Rust from the
//!   paper — {value, seq} words under a double-width CAS, a `curTx` word,
//!   per-thread write-set logs in the file, helping, two fences per update
//!   — on the same tree and hash set as RomulusLog's peer ([`wordheap`]).
//!
//! Pieces: [`workload`] (keys, operation mix, the multi-threaded driver and
//! its counters), [`maps`] (PSTM adapters), [`tvar_rbtree`], [`pmdk`], [`romulus`], [`onefile`], [`wordheap`],
//! [`job`] (one measurement in a child process), [`report`] (aggregation,
//! `stm.csv`, `stm.md`), [`peers`] (the published TMs' figures, quoted), [`plot`] (PNGs) and [`cli`] (the subcommand).
//!
//! Keeps true: before any throughput is measured, every implementation of
//! every structure runs the same single-threaded sequence of operations and
//! must end with the same contents as a `BTreeMap` model (entries and a
//! content sum), so the numbers compare implementations of the same thing.

pub mod cli;
pub mod floor;
pub mod job;
pub mod maps;
pub mod onefile;
pub mod peers;
pub mod plot;
pub mod pmdk;
pub mod report;
pub mod romulus;
pub mod tvar_rbtree;
pub mod tvar_vmap;
pub mod wordheap;
pub mod workload;
