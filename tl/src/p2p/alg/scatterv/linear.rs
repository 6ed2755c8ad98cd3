//! Linear scatterv: the root sends every other rank its `counts[rank]`
//! elements from `displs[rank]` of src, all sends started at once; the other
//! ranks receive straight into dst.
//!
//! This is linear scatter's code: at the root,
//! [`Buf::block`](ferrocoll_core::args::Buf::block) resolves the per-rank
//! counts and displacements of a v-layout, so blocks of any size (zero
//! included) at any displacement (with gaps or out of rank order) need
//! nothing more. A zero count is sent as an empty message, so both sides
//! always agree on the number and size of messages. The root's own block is
//! copied from `displs[root]` of src to dst (in place it stays in src).

use std::sync::Arc;

use ferrocoll_core::Result;
use ferrocoll_core::args::CollInit;

use crate::p2p::Comm;
use crate::p2p::alg::scatter::linear;

/// Every valid argument set is supported.
pub(crate) fn check(_args: &CollInit) -> Result<()> {
    Ok(())
}

pub(crate) async fn run(comm: Comm, args: Arc<CollInit>) -> Result<()> {
    linear::run(comm, args).await
}
