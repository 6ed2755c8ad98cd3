//! Allgather: every rank gets every rank's block, in rank order.

pub(crate) mod bruck;
pub(crate) mod knomial;
pub(crate) mod ring;
pub(crate) mod runs;

#[cfg(test)]
mod blocks_tests;
#[cfg(test)]
pub(crate) mod harness;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::Allgather;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[
    Alg {
        info: AlgInfo {
            coll: Allgather,
            id: 0,
            name: "knomial",
            description: "recursive k-ing: log_k(P) steps, data doubles each step; small messages",
        },
        run: |c, a| Box::pin(knomial::run(c, a)),
        check: knomial::check,
    },
    Alg {
        info: AlgInfo {
            coll: Allgather,
            id: 1,
            name: "ring",
            description: "P-1 steps passing one block to the right; bandwidth-optimal for large messages",
        },
        run: |c, a| Box::pin(ring::run(c, a)),
        check: ring::check,
    },
    Alg {
        info: AlgInfo {
            coll: Allgather,
            id: 2,
            name: "bruck",
            description: "ceil(log2 P) steps of growing blocks for any P, then a local rotation; small messages",
        },
        run: |c, a| Box::pin(bruck::run(c, a)),
        check: bruck::check,
    },
];

pub(crate) const DEFAULTS: Defaults =
    Defaults { coll: Allgather, ranges: &[(range(0, 8 << 10), 0), (range(8 << 10, INF), 1)] };
