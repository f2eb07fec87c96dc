//! Engram's benchmarks: the shared workload definitions ([`workloads`]), the
//! peers Engram is compared against ([`peers`]: PMDK's libpmemobj and
//! malloc, written in C in `peers/pmdk_peers.c`), Engram's own
//! implementations ([`engram_impl`]), and the runner behind the
//! `engram-bench` binary: [`plan`] (what to measure), [`job`] (one
//! measurement in a child process), [`results`] (medians, speedups, checks),
//! [`report`] (CSV and README) and [`plot`] (PNG charts). [`stm`] is the STM
//! benchmark stack; both stacks share [`child`] (the child-process runner,
//! its errors, the result-line format) and [`chart`] (font, colours, axis
//! labels, plot errors). [`hybrid`] measures the hybrid TM prototype
//! (`engram::htm`) in process.
//!
//! Keeps true: every implementation of a workload computes the same result
//! (node count, energy, checksum) for the same parameters, so a benchmark
//! run can check them against each other before it reports any ratio.

pub mod arp;
pub mod chart;
pub mod child;
pub mod clock;
pub mod disk;
pub mod disk_plot;
pub mod engram_impl;
pub mod hybrid;
pub mod hybrid_plot;
pub mod hybrid_stm;
pub mod hybrid_stm_plot;
pub mod job;
pub mod lazy;
pub mod peers;
pub mod plan;
pub mod plot;
pub mod report;
pub mod results;
pub mod stm;
pub mod sysinfo;
pub mod wakeup;
pub mod workloads;
