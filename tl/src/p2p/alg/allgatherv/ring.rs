//! Ring allgatherv: ring allgather over the v layout.
//!
//! The blocks are `dst.counts[r]` elements at `dst.displs[r]`; the ring
//! passes one rank's block per step, P−1 steps for any team size (see
//! [`allgather_blocks`]). Uneven and empty blocks travel as they are (empty
//! ones as zero-byte messages); displacements may leave gaps or differ
//! between ranks, since messages are sized by counts only.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;
use crate::p2p::alg::allgather::ring::allgather_blocks;
use crate::p2p::alg::blocks::Blocks;

/// Every valid argument set is supported.
pub(crate) fn check(_args: &CollInit) -> Result<()> {
    Ok(())
}

pub(crate) async fn run(comm: Comm, args: Arc<CollInit>) -> Result<()> {
    let dst = args.dst.as_ref().ok_or_else(|| Error::internal("allgatherv without dst"))?;
    crate::p2p::alg::local::copy_own_block(&args, &|d, s| comm.copy(d, s))?;
    allgather_blocks(&comm, dst.mem, &Blocks::of_buf(dst, comm.size())).await
}
