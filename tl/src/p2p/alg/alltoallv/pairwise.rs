//! Pairwise alltoallv: pairwise alltoall over per-peer layouts.
//!
//! Rank r sends `src.counts[j]` elements at `src.displs[j]` to rank j and
//! receives `dst.counts[j]` elements at `dst.displs[j]` from it, at
//! exchange k = 1..P with peers `r + k` (to) and `r − k` (from), with
//! `alltoall_pairwise_num_posts` exchanges in flight (see
//! [`crate::p2p::alg::alltoall::pairwise`]). Any team size works. Empty
//! blocks travel as zero-byte messages: both sides know the size (rank i's
//! send count to j is j's receive count from i), and a rank that disagrees
//! gets the transport's size-mismatch error instead of a hang.
//!
//! In place (which UCC refuses and ferrocoll accepts), dst's counts and
//! displacements describe both sides: dst is copied to scratch and read from
//! there while the received blocks land in dst.

use std::sync::Arc;

use ferrocoll_core::Result;
use ferrocoll_core::args::CollInit;

use crate::p2p::Comm;
use crate::p2p::alg::alltoall::pairwise::run_with_window;

/// Every valid argument set is supported.
pub(crate) fn check(_args: &CollInit) -> Result<()> {
    Ok(())
}

pub(crate) async fn run(comm: Comm, args: Arc<CollInit>) -> Result<()> {
    let window = comm.config().alltoall_pairwise_num_posts;
    run_with_window(&comm, &args, window).await
}
