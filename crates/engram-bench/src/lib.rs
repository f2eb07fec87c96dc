//! Engram's benchmarks: the shared workload definitions ([`workloads`]), the
//! peers Engram is compared against ([`peers`]: PMDK's libpmemobj and
//! malloc, written in C in `peers/pmdk_peers.c`), Engram's own
//! implementations ([`engram_impl`]), and the runner behind the
//! `engram-bench` binary: [`plan`] (what to measure), [`job`] (one
//! measurement in a child process), [`results`] (medians, speedups, checks),
//! [`report`] (CSV and README) and [`plot`] (PNG charts).
//!
//! Keeps true: every implementation of a workload computes the same result
//! (node count, energy, checksum) for the same parameters, so a benchmark
//! run can check them against each other before it reports any ratio.

pub mod arp;
pub mod engram_impl;
pub mod job;
pub mod peers;
pub mod plan;
pub mod plot;
pub mod report;
pub mod results;
pub mod stm;
pub mod sysinfo;
pub mod workloads;
