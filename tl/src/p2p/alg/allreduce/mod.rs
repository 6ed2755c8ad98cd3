//! Allreduce: every rank gets the reduction of every rank's vector.

pub(crate) mod hier;
pub(crate) mod hier3;
pub(crate) mod hier_split_rail;
pub(crate) mod knomial;
pub(crate) mod ring;
pub(crate) mod sra_knomial;

use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Allreduce;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[
    Alg::new(
        Allreduce,
        0,
        "knomial",
        "recursive k-ing: log_k(P) steps exchanging whole vectors; best for small messages",
        Run::Allreduce(|c, o| Box::pin(knomial::run(c, o))),
    ),
    Alg::new(
        Allreduce,
        1,
        "sra_knomial",
        "Rabenseifner: knomial reduce-scatter then knomial allgather; moves 2(P-1)/P of the vector",
        Run::Allreduce(|c, o| Box::pin(sra_knomial::run(c, o))),
    ),
    Alg::new(
        Allreduce,
        2,
        "ring",
        "ring reduce-scatter then ring allgather: 2(P-1) steps of 1/P of the vector",
        Run::Allreduce(|c, o| Box::pin(ring::run(c, o))),
    ),
    Alg::new(
        Allreduce,
        3,
        "hier",
        "hierarchical: reduce in nodes (and switch groups), allreduce among the top leaders, bcast back; by name only",
        Run::Allreduce(|c, o| Box::pin(hier::run(c, o))),
    ),
    Alg::new(
        Allreduce,
        4,
        "split_rail",
        "reduce-scatter in nodes, allreduce along rails (same place in each node), allgather; equal nodes; by name only",
        Run::Allreduce(|c, o| Box::pin(hier_split_rail::run(c, o))),
    ),
];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, 4 << 10), 0), (range(4 << 10, INF), 1)];
