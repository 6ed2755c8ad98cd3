//! Alltoall: block j of rank i goes to block i of rank j.

pub(crate) mod bruck;
pub(crate) mod pairwise;

#[cfg(test)]
mod exchange_tests;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::Alltoall;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[
    Alg {
        info: AlgInfo {
            coll: Alltoall,
            id: 0,
            name: "pairwise",
            description: "P-1 steps, each exchanging one block with one peer (a window of them in flight)",
        },
        run: |c, a| Box::pin(pairwise::run(c, a)),
        check: pairwise::check,
    },
    Alg {
        info: AlgInfo {
            coll: Alltoall,
            id: 1,
            name: "bruck",
            description: "ceil(log2 P) steps of packed blocks; best for small blocks and many ranks",
        },
        run: |c, a| Box::pin(bruck::run(c, a)),
        check: bruck::check,
    },
];

pub(crate) const DEFAULTS: Defaults =
    Defaults { coll: Alltoall, ranges: &[(range(0, 16 << 10), 1), (range(16 << 10, INF), 0)] };
