//! Barrier: no rank leaves before every rank has entered.

pub(crate) mod hier;
pub(crate) mod knomial;

use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Barrier;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[
    Alg::new(
        Barrier,
        0,
        "knomial",
        "recursive k-ing of empty messages (log_k(P) steps)",
        Run::Barrier(|c| Box::pin(knomial::run(c))),
    ),
    Alg::new(
        Barrier,
        1,
        "hier",
        "hierarchical: empty messages up to the leaders of node, switch group and top, then down; by name only",
        Run::Barrier(|c| Box::pin(hier::run(c))),
    ),
];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, INF), 0)];
