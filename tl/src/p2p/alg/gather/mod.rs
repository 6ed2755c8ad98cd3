//! Gather: the root gets every rank's block, in rank order.

pub(crate) mod hier;
pub(crate) mod knomial;
pub(crate) mod linear;

use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Gather;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[
    Alg::new(
        Gather,
        0,
        "knomial",
        "knomial tree: each rank forwards its subtree's blocks to its parent",
        Run::Gather(|c, o| Box::pin(knomial::run(c, o))),
    ),
    Alg::new(
        Gather,
        1,
        "linear",
        "every rank sends its block straight to the root",
        Run::Gather(|c, o| Box::pin(linear::run(c, o))),
    ),
    Alg::new(
        Gather,
        2,
        "hier",
        "topology-aware: leaders gather their node's, then their switch group's blocks (root leads); by name only",
        Run::Gather(|c, o| Box::pin(hier::run(c, o))),
    ),
];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, INF), 0)];
