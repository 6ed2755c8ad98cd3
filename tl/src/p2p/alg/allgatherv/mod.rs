//! Allgatherv: allgather with a count and displacement per rank.

pub(crate) mod linear;
pub(crate) mod ring;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::Allgatherv;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[
    Alg {
        info: AlgInfo {
            coll: Allgatherv,
            id: 0,
            name: "ring",
            description: "P-1 steps passing one rank's block to the right",
        },
        run: |c, a| Box::pin(ring::run(c, a)),
        check: ring::check,
    },
    Alg {
        info: AlgInfo {
            coll: Allgatherv,
            id: 1,
            name: "linear",
            description: "every rank sends its block to every other rank at once",
        },
        run: |c, a| Box::pin(linear::run(c, a)),
        check: linear::check,
    },
];

pub(crate) const DEFAULTS: Defaults = Defaults { coll: Allgatherv, ranges: &[(range(0, INF), 0)] };
