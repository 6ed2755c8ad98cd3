//! Linear alltoallv: every block posted at once.
//!
//! Each rank starts all P−1 sends (`src.counts[j]` elements at
//! `src.displs[j]` to rank j) and all P−1 receives (`dst.counts[j]` at
//! `dst.displs[j]` from rank j) together, and completes when all have: one
//! step, the least latency, the most messages in flight. It is the pairwise
//! schedule with an unbounded window, so it shares its handling of empty
//! blocks (zero-byte messages), any team size, the own block (a local copy)
//! and in place (dst's layout for both sides, read from a scratch copy).

use ferrocoll_core::Result;
use ferrocoll_core::args::Alltoall;

use crate::p2p::Comm;
use crate::p2p::alg::alltoall::pairwise::run_with_window;

pub(crate) async fn run(comm: Comm, o: Alltoall) -> Result<()> {
    run_with_window(&comm, &o, usize::MAX).await
}
