//! Reduce-scatter: rank r gets block r of the reduction.

pub(crate) mod knomial;
pub(crate) mod ring;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::ReduceScatter;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[
    Alg {
        info: AlgInfo {
            coll: ReduceScatter,
            id: 0,
            name: "ring",
            description: "P-1 steps passing partial blocks to the right; bandwidth-optimal",
        },
        run: |c, a| Box::pin(ring::run(c, a)),
        check: ring::check,
    },
    Alg {
        info: AlgInfo {
            coll: ReduceScatter,
            id: 1,
            name: "knomial",
            description: "recursive k-halving: log_k(P) steps on shrinking segments",
        },
        run: |c, a| Box::pin(knomial::run(c, a)),
        check: knomial::check,
    },
];

pub(crate) const DEFAULTS: Defaults =
    Defaults { coll: ReduceScatter, ranges: &[(range(0, 16 << 10), 1), (range(16 << 10, INF), 0)] };
