//! Gatherv: gather with a count and displacement per rank.

pub(crate) mod linear;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::Gatherv;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[Alg {
    info: AlgInfo {
        coll: Gatherv,
        id: 0,
        name: "linear",
        description: "every rank sends its block straight to the root",
    },
    run: |c, a| Box::pin(linear::run(c, a)),
    check: linear::check,
}];

pub(crate) const DEFAULTS: Defaults = Defaults { coll: Gatherv, ranges: &[(range(0, INF), 0)] };
