//! Gather: the root gets every rank's block, in rank order.

pub(crate) mod knomial;
pub(crate) mod linear;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::Gather;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[
    Alg {
        info: AlgInfo {
            coll: Gather,
            id: 0,
            name: "knomial",
            description: "knomial tree: each rank forwards its subtree's blocks to its parent",
        },
        run: |c, a| Box::pin(knomial::run(c, a)),
        check: knomial::check,
    },
    Alg {
        info: AlgInfo {
            coll: Gather,
            id: 1,
            name: "linear",
            description: "every rank sends its block straight to the root",
        },
        run: |c, a| Box::pin(linear::run(c, a)),
        check: linear::check,
    },
];

pub(crate) const DEFAULTS: Defaults = Defaults { coll: Gather, ranges: &[(range(0, INF), 0)] };
