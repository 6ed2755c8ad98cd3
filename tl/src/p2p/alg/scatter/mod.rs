//! Scatter: rank r gets block r of the root's buffer.

pub(crate) mod hier;
#[cfg(test)]
mod hier_tests;
pub(crate) mod knomial;
pub(crate) mod linear;

use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Scatter;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[
    Alg::new(
        Scatter,
        0,
        "knomial",
        "knomial tree: each rank forwards its subtree's blocks to its children",
        Run::Scatter(|c, o| Box::pin(knomial::run(c, o))),
    ),
    Alg::new(
        Scatter,
        1,
        "linear",
        "the root sends every block straight to its rank",
        Run::Scatter(|c, o| Box::pin(linear::run(c, o))),
    ),
    Alg::new(
        Scatter,
        2,
        "hier",
        "topology-aware: the root sends each switch group's, then each node's blocks to its leader; by name only",
        Run::Scatter(|c, o| Box::pin(hier::run(c, o))),
    ),
];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, INF), 0)];
