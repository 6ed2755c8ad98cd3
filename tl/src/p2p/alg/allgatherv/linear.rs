//! Linear allgatherv: every rank sends its block to every other rank and
//! receives all of theirs, all at once (one step, P−1 messages each way).
//!
//! Good for few ranks or small blocks; any team size works. Each rank sends
//! straight from src (or from its block of dst in place). Empty blocks are
//! sent as zero-byte messages rather than skipped, so that ranks that
//! disagree about a count get a size-mismatch error instead of a hang.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::alg::blocks::Blocks;

const TAG: u32 = 0;

/// Every valid argument set is supported.
pub(crate) fn check(_args: &CollInit) -> Result<()> {
    Ok(())
}

pub(crate) async fn run(comm: Comm, args: Arc<CollInit>) -> Result<()> {
    let dst = args.dst.as_ref().ok_or_else(|| Error::internal("allgatherv without dst"))?;
    let (rank, size) = (comm.rank(), comm.size());
    crate::p2p::alg::local::copy_own_block(&args, &|d, s| comm.copy(d, s))?;
    let blocks = Blocks::of_buf(dst, size);
    let own = match &args.src {
        Some(src) => src.mem,
        None => blocks.of(dst.mem, rank)?,
    };
    let recvs = (0..size)
        .filter(|&r| r != rank)
        .map(|r| Ok((r, blocks.of(dst.mem, r)?)))
        .collect::<Result<Vec<(usize, MemRef)>>>()?;
    comm.exchange(TAG, own, &recvs).await
}
