//! Reduce-scatter: rank r gets block r of the reduction.

pub(crate) mod knomial;
pub(crate) mod ring;

use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::ReduceScatter;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[
    Alg::new(
        ReduceScatter,
        0,
        "ring",
        "P-1 steps passing partial blocks to the right; bandwidth-optimal",
        Run::ReduceScatter(|c, o| Box::pin(ring::run(c, o))),
    ),
    Alg::new(
        ReduceScatter,
        1,
        "knomial",
        "recursive k-halving: log_k(P) steps on shrinking segments",
        Run::ReduceScatter(|c, o| Box::pin(knomial::run(c, o))),
    ),
];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, 16 << 10), 1), (range(16 << 10, INF), 0)];
