//! # ferrocoll-mc
//!
//! Memory components (UCC's MCs) for ferrocoll: everything the library does
//! to memory of one type, behind core's [`Mc`] trait: scratch allocation,
//! copies and reductions.
//!
//! - [`HostMc`] handles CPU memory: scratch comes from a pool of 64-byte
//!   aligned blocks in power-of-two size classes, copies are `memmove`, and
//!   reductions run the host kernels.
//! - [`reduce_slices`] and [`reduce_slices_in_place`] are those kernels as
//!   safe functions over byte slices: every datatype and operation that
//!   [`ReduceOp::check_dtype`](ferrocoll_core::ReduceOp::check_dtype) accepts,
//!   chunked so dst stays in L1, monomorphised per (dtype, op), vectorised
//!   (AVX2 when the CPU has it, chosen at run time), and tolerant of
//!   unaligned buffers. f16, bf16 and float8 accumulate in `f32` and round once.
//! - [`fp8`] converts the OCP float8 formats E4M3 and E5M2.
//!
//! A CUDA component will join [`default_mcs`] later.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod fp8;
mod host;
mod reduce;

use std::sync::Arc;

use ferrocoll_core::backend::Mc;

pub use host::{ALIGN, DEFAULT_CACHE_LIMIT, HostMc, Pool};
pub use reduce::{reduce_slices, reduce_slices_in_place};

/// The memory components available in this build, host first.
pub fn default_mcs() -> Vec<Arc<dyn Mc>> {
    vec![Arc::new(HostMc::new())]
}
