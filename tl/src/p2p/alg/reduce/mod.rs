//! Reduce: the root gets the reduction of every rank's vector.

pub(crate) mod knomial;
pub(crate) mod srg_knomial;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::Reduce;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[
    Alg {
        info: AlgInfo {
            coll: Reduce,
            id: 0,
            name: "knomial",
            description: "knomial tree: each rank reduces its children's vectors and forwards; small messages",
        },
        run: |c, a| Box::pin(knomial::run(c, a)),
        check: knomial::check,
    },
    Alg {
        info: AlgInfo {
            coll: Reduce,
            id: 1,
            name: "srg_knomial",
            description: "reduce-scatter then gather to the root; moves about 2(P-1)/P of the vector; large messages",
        },
        run: |c, a| Box::pin(srg_knomial::run(c, a)),
        check: srg_knomial::check,
    },
];

pub(crate) const DEFAULTS: Defaults =
    Defaults { coll: Reduce, ranges: &[(range(0, 32 << 10), 0), (range(32 << 10, INF), 1)] };
