//! Scatter: rank r gets block r of the root's buffer.

pub(crate) mod knomial;
pub(crate) mod linear;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::Scatter;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[
    Alg {
        info: AlgInfo {
            coll: Scatter,
            id: 0,
            name: "knomial",
            description: "knomial tree: each rank forwards its subtree's blocks to its children",
        },
        run: |c, a| Box::pin(knomial::run(c, a)),
        check: knomial::check,
    },
    Alg {
        info: AlgInfo {
            coll: Scatter,
            id: 1,
            name: "linear",
            description: "the root sends every block straight to its rank",
        },
        run: |c, a| Box::pin(linear::run(c, a)),
        check: linear::check,
    },
];

pub(crate) const DEFAULTS: Defaults = Defaults { coll: Scatter, ranges: &[(range(0, INF), 0)] };
