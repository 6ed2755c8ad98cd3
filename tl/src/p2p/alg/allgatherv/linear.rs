//! Linear allgatherv: every rank sends its block to every other rank and
//! receives all of theirs, all at once (one step, P−1 messages each way).
//!
//! Good for few ranks or small blocks; any team size works. Each rank sends
//! straight from src (or from its block of dst in place). Empty blocks are
//! sent as zero-byte messages rather than skipped, so that ranks that
//! disagree about a count get a size-mismatch error instead of a hang.

use ferrocoll_core::args::Allgather;
use ferrocoll_core::{MemRef, Result};

use crate::p2p::Comm;

const TAG: u32 = 0;

pub(crate) async fn run(comm: Comm, o: Allgather) -> Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    comm.copy(o.dst.block(rank)?, o.src)?;
    let recvs =
        (0..size).filter(|&r| r != rank).map(|r| Ok((r, o.dst.block(r)?))).collect::<Result<Vec<(usize, MemRef)>>>()?;
    comm.exchange(TAG, o.src, &recvs).await
}
