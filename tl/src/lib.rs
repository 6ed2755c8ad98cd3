//! # ferrocoll-tl
//!
//! Transport layers: each is a [`TlComponent`]
//! that the core engine asks for teams and tasks.
//!
//! - [`self_`]: teams of one rank.
//! - [`shm`]: collectives through a shared segment, for teams on one host.
//! - [`p2p`]: the generic point-to-point algorithms over pluggable transports.
//! - [`nccl`]: collectives on CUDA memory by NVIDIA's NCCL (loaded at run time).
//! - [`sharp`]: in-network reductions through libsharp_coll, loaded at run time.
//!
//! All of them stand on one skeleton (`base`): a registry of algorithms
//! typed by collective, one team shape, configuration knobs as typed
//! tables, and the local part of a collective among one rank.

#![deny(unsafe_op_in_unsafe_fn)]

pub(crate) mod base;
#[cfg(test)]
pub(crate) mod heap_mc;
pub mod nccl;
pub mod p2p;
pub mod self_;
pub mod sharp;
pub mod shm;

use std::sync::Arc;

use ferrocoll_core::backend::TlComponent;

/// Every transport layer, in priority order for equal scores.
pub fn default_tls() -> Vec<Arc<dyn TlComponent>> {
    vec![
        Arc::new(self_::SelfTl),
        Arc::new(shm::ShmTl),
        Arc::new(p2p::P2pTl),
        Arc::new(nccl::NcclTl),
        Arc::new(sharp::SharpTl),
    ]
}
