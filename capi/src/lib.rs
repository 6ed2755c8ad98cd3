//! # ferrocoll-capi: `libucc.so.1`
//!
//! UCC's C interface (`ucc.h`: library, context, team, collective, event
//! and execution-engine calls, plus the internals UCC's own tools link
//! against) over ferrocoll's Rust API, so that programs built for UCC —
//! Open MPI's coll/ucc, PyTorch's ProcessGroupUCC, UCC's perftest and MPI
//! test — run on ferrocoll with `LD_LIBRARY_PATH` pointing at this library.
//!
//! Every entry point is a thin translation: C structures are read field by
//! field as their masks allow, turned into ferrocoll's parameters, and
//! handed to the same objects Rust users call (`Lib`, `Context`, `Team`,
//! `Request`, `CpuEe`, `CudaStreamEe`); no collective is implemented here.
//! Errors are UCC status codes with a log line naming the argument;
//! panics stop at the boundary (`guard.rs`); handles carry magic words, so
//! a foreign, NULL or destroyed handle is an error, not undefined behaviour
//! (`handle.rs`).
//!
//! The headers are `include/ucc/api/`; `ferrocoll-ucc-install` installs
//! the library under UCC's names with them, a pkg-config file and a CMake
//! package. Where ferrocoll's behaviour differs from UCC's, the header and
//! the module docs say so (events in `ee.rs`, configuration in `config.rs`).

#![deny(unsafe_op_in_unsafe_fn)]
// The exported names are UCC's.
#![allow(non_upper_case_globals)]

pub mod abi;
mod call_key;
mod coll_args;
mod config;
mod config_api;
mod context;
mod ee;
mod executor;
mod guard;
mod handle;
mod lib_api;
mod local_team;
mod mc;
mod mem_map;
mod oob;
mod request;
mod spares;
mod staging;
mod team;
#[cfg(test)]
mod testing;
mod types;
