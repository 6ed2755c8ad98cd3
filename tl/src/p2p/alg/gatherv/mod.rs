//! Gatherv: gather with a count and displacement per rank.
//!
//! Linear is gather's ([`linear`](super::gather::linear)): every non-root
//! rank sends its `counts[rank]` elements straight to the root, which
//! receives them all at once, each at its sender's displacement in dst.
//! Blocks of any size (zero included) at any displacement (with gaps or out
//! of rank order) need nothing more; a zero count is sent as an empty
//! message, so both sides always agree on the number and size of messages.
//! The root's own block is copied from src to `displs[root]` (nothing to do
//! in place).

use super::gather::linear;
use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Gatherv;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[
    Alg::new(
        Gatherv,
        0,
        "linear",
        "every rank sends its block straight to the root",
        Run::Gather(|c, o| Box::pin(linear::run(c, o))),
    ),
    Alg::new(
        Gatherv,
        1,
        "hier",
        "topology-aware: leaders gather their node's, then their switch group's blocks (sizes first); by name only",
        Run::Gather(|c, o| Box::pin(super::gather::hier::run_v(c, o))),
    ),
];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, INF), 0)];
