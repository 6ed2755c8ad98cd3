//! Scatterv: scatter with a count and displacement per rank.

pub(crate) mod linear;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::Scatterv;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[Alg {
    info: AlgInfo {
        coll: Scatterv,
        id: 0,
        name: "linear",
        description: "the root sends every block straight to its rank",
    },
    run: |c, a| Box::pin(linear::run(c, a)),
    check: linear::check,
}];

pub(crate) const DEFAULTS: Defaults = Defaults { coll: Scatterv, ranges: &[(range(0, INF), 0)] };
