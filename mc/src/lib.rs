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
//! - [`fp8`] converts the OCP float8 formats E4M3 and E5M2; `long_double`
//!   (x86-64 and aarch64 Linux) converts UCC's float128, which the kernels
//!   reduce as C's `long double`.
//! - [`CudaMc`] handles CUDA device memory (and, as [`CudaMc::managed`],
//!   managed memory): pooled device scratch, pinned host memory
//!   ([`PinnedHost`]), the pointer query, copies in every direction and
//!   reductions through the `ferrocoll-kernels` kernels. It joins
//!   [`default_mcs`] only where a CUDA driver and device are found.

#![deny(unsafe_op_in_unsafe_fn)]

mod cuda;
pub mod fp8;
mod host;
#[cfg(any(all(target_arch = "x86_64", target_os = "linux"), all(target_arch = "aarch64", target_os = "linux")))]
pub mod long_double;
mod reduce;

use std::sync::Arc;

use ferrocoll_core::backend::Mc;

pub use cuda::{CudaMc, DEFAULT_DEVICE_CACHE_LIMIT, PINNED_CACHE, PinnedHost};

/// The variables the memory components read.
pub const CONFIG_FIELDS: &[ferrocoll_core::config::ConfigField] = &[PINNED_CACHE];
pub use host::{ALIGN, DEFAULT_CACHE_LIMIT, HostMc, Pool};
pub use reduce::{reduce_slices, reduce_slices_in_place};

/// The memory components usable on this machine: host, then CUDA device
/// and managed memory when [`CudaMc::probe`] finds a driver and a device
/// (why not is logged at debug level, `UCC_LOG_LEVEL=debug`).
pub fn default_mcs() -> Vec<Arc<dyn Mc>> {
    let mut mcs: Vec<Arc<dyn Mc>> = vec![Arc::new(HostMc::new())];
    match CudaMc::probe() {
        Ok(cuda) => {
            let managed = cuda.managed();
            mcs.push(Arc::new(cuda));
            mcs.push(Arc::new(managed));
        }
        Err(e) => ferrocoll_core::log_debug!("mc: the cuda component is off: {}", e.context()),
    }
    mcs
}
