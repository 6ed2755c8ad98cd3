//! Bcast: the root's buffer is copied to every rank.

pub(crate) mod hier;
pub(crate) mod knomial;
pub(crate) mod sag_knomial;

use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Bcast;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[
    Alg::new(
        Bcast,
        0,
        "knomial",
        "knomial tree: each rank forwards the whole buffer to its children; best for small messages",
        Run::Bcast(|c, o| Box::pin(knomial::run(c, o))),
    ),
    Alg::new(
        Bcast,
        1,
        "sag_knomial",
        "scatter over a knomial tree, then allgather: moves the buffer about twice; large messages",
        Run::Bcast(|c, o| Box::pin(sag_knomial::run(c, o))),
    ),
    Alg::new(
        Bcast,
        2,
        "hier",
        "hierarchical: knomial trees among group leaders, node leaders, then in each node (root leads); large messages on teams over several nodes",
        Run::Bcast(|c, o| Box::pin(hier::run(c, o))),
    ),
];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, 32 << 10), 0), (range(32 << 10, INF), 1)];

/// The defaults on a team of two ranks (see `alg::defaults_for`).
pub(crate) const PAIR_DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, INF), 0)];

/// The defaults on a team spread over several nodes (see `alg::defaults`).
pub(crate) const HIER_DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, 32 << 10), 0), (range(32 << 10, INF), 2)];
