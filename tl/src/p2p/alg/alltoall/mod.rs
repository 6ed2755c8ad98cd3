//! Alltoall: block j of rank i goes to block i of rank j.

pub(crate) mod bruck;
pub(crate) mod hier;
#[cfg(test)]
mod hier_tests;
pub(crate) mod pairwise;

#[cfg(test)]
mod exchange_tests;

use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Alltoall;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[
    Alg::new(
        Alltoall,
        0,
        "pairwise",
        "P-1 steps, each exchanging one block with one peer (a window of them in flight)",
        Run::Alltoall(|c, o| Box::pin(pairwise::run(c, o))),
    ),
    Alg::new(
        Alltoall,
        1,
        "bruck",
        "ceil(log2 P) steps of packed blocks; best for small blocks and many ranks",
        Run::Alltoall(|c, o| Box::pin(bruck::run(c, o))),
    )
    .with_check(bruck::check),
    Alg::new(
        Alltoall,
        2,
        "hier",
        "leaders aggregate: one message per pair of nodes (and of groups), rank to rank in a node; by name only",
        Run::Alltoall(|c, o| Box::pin(hier::run(c, o))),
    ),
];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, 16 << 10), 1), (range(16 << 10, INF), 0)];
