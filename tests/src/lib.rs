//! # ferrocoll-tests
//!
//! Helpers for ferrocoll's many-rank tests: worlds of thread ranks, seeded
//! inputs, references computed independently of the library, the
//! conformance matrix ([`cases`]) with its runner, the GPU tests' gate, and
//! native test libraries built with the system's compilers ([`native`]).

pub mod cases;
pub mod dtypes;
pub mod floats;
pub mod gpu;
pub mod kernels_emu;
pub mod native;
pub mod procs;
pub mod rng;
pub mod runner;
pub mod setup;
pub mod world;
