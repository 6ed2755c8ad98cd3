//! # ferrocoll-bench
//!
//! ferrocoll's tools:
//! - `ferrocoll-run` ([`run`]): a single-host launcher (torchrun-style
//!   variables, `[r] ` output prefixes, failure and signal handling);
//! - `ferrocoll-perftest` ([`perftest`]): ucc_perftest's options and table,
//!   over thread ranks, launched processes or an existing launcher;
//! - `ferrocoll-info`: components, algorithms, configuration and score
//!   maps, like `ucc_info`, and the topology of a launched job ([`topology`]);
//! - `ferrocoll-tune` ([`tune`]): measures this machine's crossovers between
//!   algorithms and writes them as tune strings in a configuration file.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod perftest;
pub mod reduce_bench;
pub mod run;
mod say;
pub mod threads;
pub mod topology;
pub mod tune;
