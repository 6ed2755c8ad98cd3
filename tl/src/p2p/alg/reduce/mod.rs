//! Reduce: the root gets the reduction of every rank's vector.

pub(crate) mod hier;
pub(crate) mod knomial;
pub(crate) mod srg_knomial;

use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Reduce;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[
    Alg::new(
        Reduce,
        0,
        "knomial",
        "knomial tree: each rank reduces its children's vectors and forwards; small messages",
        Run::Reduce(|c, o| Box::pin(knomial::run(c, o))),
    ),
    Alg::new(
        Reduce,
        1,
        "srg_knomial",
        "reduce-scatter then gather to the root; moves about 2(P-1)/P of the vector; large messages",
        Run::Reduce(|c, o| Box::pin(srg_knomial::run(c, o))),
    ),
    Alg::new(
        Reduce,
        2,
        "hier",
        "hierarchical: knomial reduce in each node, switch group, then among group leaders (root leads); large messages on teams over several nodes",
        Run::Reduce(|c, o| Box::pin(hier::run(c, o))),
    ),
];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, 32 << 10), 0), (range(32 << 10, INF), 1)];

/// The defaults on a team spread over several nodes (see `alg::defaults`).
pub(crate) const HIER_DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, 32 << 10), 0), (range(32 << 10, INF), 2)];
