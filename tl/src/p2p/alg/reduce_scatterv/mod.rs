//! Reduce-scatterv: rank r gets counts[r] elements of the reduction.
//!
//! The whole vector is the blocks `counts[0], counts[1], …` one after the
//! other (validation lays them out back to back). Not in place, `src` holds
//! the Σcounts elements and rank r's `counts[r]` results go to the start of
//! `dst`; in place, `dst` holds the whole vector and the result lands on
//! rank r's own block, at offset Σ_{i<r} counts\[i\]. The ring
//! reduce-scatter ([`ring`](super::reduce_scatter::ring)) works on any such
//! layout: blocks may be empty (zero counts travel as empty messages) and
//! of any size; the input is only read, apart from the own block in place.

use super::reduce_scatter::ring;
use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::ReduceScatterv;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[Alg::new(
    ReduceScatterv,
    0,
    "ring",
    "P-1 steps passing partial blocks to the right",
    Run::ReduceScatter(|c, o| Box::pin(ring::run(c, o))),
)];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, INF), 0)];
