//! # ferrocoll-bench
//!
//! ferrocoll's tools: `ferrocoll-info` (components, algorithms,
//! configuration and score maps, like `ucc_info`), with the perftest and the
//! launcher to come.

pub mod threads;
