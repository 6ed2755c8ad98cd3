//! # ferrocoll-tests
//!
//! Helpers for ferrocoll's many-rank tests: worlds of thread ranks, seeded
//! inputs, references computed independently of the library, the
//! conformance matrix ([`cases`]) with its runner, and the GPU tests' gate
//! with the fake CUDA driver they run on where there is no GPU.

pub mod cases;
pub mod dtypes;
pub mod fake_cuda;
pub mod fake_nccl;
pub mod floats;
pub mod gpu;
pub mod kernels_emu;
pub mod native;
pub mod procs;
pub mod rng;
pub mod runner;
pub mod setup;
pub mod world;
