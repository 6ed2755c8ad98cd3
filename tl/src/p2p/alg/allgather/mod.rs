//! Allgather: every rank gets every rank's block, in rank order.

pub(crate) mod bruck;
pub(crate) mod hier;
pub(crate) mod knomial;
pub(crate) mod ring;
pub(crate) mod runs;

#[cfg(test)]
mod blocks_tests;
#[cfg(test)]
pub(crate) mod harness;

use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Allgather;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[
    Alg::new(
        Allgather,
        0,
        "knomial",
        "recursive k-ing: log_k(P) steps, data doubles each step; small messages",
        Run::Allgather(|c, o| Box::pin(knomial::run(c, o))),
    ),
    Alg::new(
        Allgather,
        1,
        "ring",
        "P-1 steps passing one block to the right; bandwidth-optimal for large messages",
        Run::Allgather(|c, o| Box::pin(ring::run(c, o))),
    ),
    Alg::new(
        Allgather,
        2,
        "bruck",
        "ceil(log2 P) steps of growing blocks for any P, then a local rotation; small messages",
        Run::Allgather(|c, o| Box::pin(bruck::run(c, o))),
    )
    .with_check(bruck::check),
    Alg::new(
        Allgather,
        3,
        "hier",
        "hierarchical: gather to leaders, leaders exchange, leaders send the result down; by name only",
        Run::Allgather(|c, o| Box::pin(hier::run(c, o))),
    ),
];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, 8 << 10), 0), (range(8 << 10, INF), 1)];
