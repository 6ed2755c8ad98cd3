//! # ferrocoll-kernels
//!
//! Will hold the CUDA C sources of ferrocoll's device kernels (reduce of N
//! sources for every dtype × op, copy, stream flag wait/write), compiled at
//! run time with NVRTC and cached per device architecture, so that building
//! ferrocoll never needs a CUDA toolkit.
//!
//! Nothing is here yet: the GPU work (memory component, stream execution
//! engine, kernels) is a later milestone. The crate exists now so that the
//! workspace has its final shape and dependents can be wired.

#![forbid(unsafe_code)]

/// The kernel sources this crate provides (none yet; see the crate docs).
pub const SOURCES: &[(&str, &str)] = &[];
