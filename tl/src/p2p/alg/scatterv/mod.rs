//! Scatterv: scatter with a count and displacement per rank.
//!
//! Linear is scatter's ([`linear`](super::scatter::linear)): the root sends
//! every other rank its `counts[rank]` elements from `displs[rank]` of src,
//! all sends started at once; the other ranks receive straight into dst.
//! Blocks of any size (zero included) at any displacement (with gaps or out
//! of rank order) need nothing more; a zero count is sent as an empty
//! message, so both sides always agree on the number and size of messages.
//! The root's own block is copied from `displs[root]` of src to dst (in
//! place it stays in src).

use super::scatter::linear;
use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Scatterv;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[
    Alg::new(
        Scatterv,
        0,
        "linear",
        "the root sends every block straight to its rank",
        Run::Scatter(|c, o| Box::pin(linear::run(c, o))),
    ),
    Alg::new(
        Scatterv,
        1,
        "hier",
        "topology-aware: the root sends each group's, then each node's blocks to its leader (sizes first); by name",
        Run::Scatter(|c, o| Box::pin(super::scatter::hier::run_v(c, o))),
    ),
];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, INF), 0)];
