//! Linear gatherv: every non-root rank sends its `counts[rank]` elements
//! straight to the root, which receives them all at once, each at its
//! sender's displacement in dst.
//!
//! This is linear gather's code: at the root,
//! [`Buf::block`](ferrocoll_core::args::Buf::block) resolves the per-rank
//! counts and displacements of a v-layout, so blocks of any size (zero
//! included) at any displacement (with gaps or out of rank order) need
//! nothing more. A zero count is sent as an empty message, so both sides
//! always agree on the number and size of messages. The root's own block is
//! copied from src to `displs[root]` (nothing to do in place).

use std::sync::Arc;

use ferrocoll_core::Result;
use ferrocoll_core::args::CollInit;

use crate::p2p::Comm;
use crate::p2p::alg::gather::linear;

/// Every valid argument set is supported.
pub(crate) fn check(_args: &CollInit) -> Result<()> {
    Ok(())
}

pub(crate) async fn run(comm: Comm, args: Arc<CollInit>) -> Result<()> {
    linear::run(comm, args).await
}
