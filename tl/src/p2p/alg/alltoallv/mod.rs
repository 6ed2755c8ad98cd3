//! Alltoallv: alltoall with counts and displacements per peer.
//!
//! Pairwise is alltoall's ([`pairwise`](super::alltoall::pairwise)) over
//! per-peer layouts: rank r sends `src.counts[j]` elements at
//! `src.displs[j]` to rank j and receives `dst.counts[j]` elements at
//! `dst.displs[j]` from it, at exchange k = 1..P with peers `r + k` (to)
//! and `r − k` (from), with `alltoall_pairwise_num_posts` exchanges in
//! flight. Any team size works. Empty blocks travel as zero-byte messages:
//! both sides know the size (rank i's send count to j is j's receive count
//! from i), and a rank that disagrees gets the transport's size-mismatch
//! error instead of a hang.
//!
//! In place (which UCC refuses and ferrocoll accepts), dst's counts and
//! displacements describe both sides: dst is copied to scratch and read from
//! there while the received blocks land in dst.

pub(crate) mod linear;

use super::alltoall::pairwise;
use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Alltoallv;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[
    Alg::new(
        Alltoallv,
        0,
        "pairwise",
        "P-1 steps, each exchanging one block with one peer (a window of them in flight)",
        Run::Alltoall(|c, o| Box::pin(pairwise::run(c, o))),
    ),
    Alg::new(Alltoallv, 1, "linear", "every block posted at once", Run::Alltoall(|c, o| Box::pin(linear::run(c, o)))),
    Alg::new(
        Alltoallv,
        2,
        "hier",
        "leaders aggregate (learning counts first): one message per pair of nodes (and of groups); by name only",
        Run::Alltoall(|c, o| Box::pin(super::alltoall::hier::run_v(c, o))),
    ),
];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, INF), 0)];
