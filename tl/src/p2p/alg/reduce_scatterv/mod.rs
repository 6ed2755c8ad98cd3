//! Reduce-scatterv: rank r gets counts[r] elements of the reduction.

pub(crate) mod ring;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::ReduceScatterv;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[Alg {
    info: AlgInfo {
        coll: ReduceScatterv,
        id: 0,
        name: "ring",
        description: "P-1 steps passing partial blocks to the right",
    },
    run: |c, a| Box::pin(ring::run(c, a)),
    check: ring::check,
}];

pub(crate) const DEFAULTS: Defaults = Defaults { coll: ReduceScatterv, ranges: &[(range(0, INF), 0)] };
