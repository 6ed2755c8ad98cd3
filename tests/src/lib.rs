//! # ferrocoll-tests
//!
//! Helpers for ferrocoll's many-rank tests: worlds of thread ranks, seeded
//! inputs, and references computed independently of the library.

pub mod rng;
pub mod world;
