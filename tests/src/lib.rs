//! # ferrocoll-tests
//!
//! Helpers for ferrocoll's many-rank tests: worlds of thread ranks, seeded
//! inputs, references computed independently of the library, and the
//! conformance matrix ([`cases`]) with its runner.

pub mod cases;
pub mod dtypes;
pub mod floats;
pub mod gpu;
pub mod procs;
pub mod rng;
pub mod runner;
pub mod setup;
pub mod world;
