//! Allgatherv: allgather with a count and displacement per rank.
//!
//! The ring is allgather's ([`ring`](super::allgather::ring)) over the v
//! layout: it passes one rank's block per step, P−1 steps for any team
//! size. Uneven and empty blocks travel as they are (empty ones as
//! zero-byte messages); displacements may leave gaps or differ between
//! ranks, since messages are sized by counts only.

pub(crate) mod linear;

use super::allgather::ring;
use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Allgatherv;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[
    Alg::new(
        Allgatherv,
        0,
        "ring",
        "P-1 steps passing one rank's block to the right",
        Run::Allgather(|c, o| Box::pin(ring::run(c, o))),
    ),
    Alg::new(
        Allgatherv,
        1,
        "linear",
        "every rank sends its block to every other rank at once",
        Run::Allgather(|c, o| Box::pin(linear::run(c, o))),
    ),
    Alg::new(
        Allgatherv,
        2,
        "hier",
        "hierarchical: gather to leaders, leaders exchange, leaders send the result down; by name only",
        Run::Allgather(|c, o| Box::pin(super::allgather::hier::run(c, o))),
    ),
];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, INF), 0)];
