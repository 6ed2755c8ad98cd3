//! Allreduce: every rank gets the reduction of every rank's vector.

pub(crate) mod knomial;
pub(crate) mod ring;
pub(crate) mod sra_knomial;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::Allreduce;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[
    Alg {
        info: AlgInfo {
            coll: Allreduce,
            id: 0,
            name: "knomial",
            description: "recursive k-ing: log_k(P) steps exchanging whole vectors; best for small messages",
        },
        run: |c, a| Box::pin(knomial::run(c, a)),
        check: knomial::check,
    },
    Alg {
        info: AlgInfo {
            coll: Allreduce,
            id: 1,
            name: "sra_knomial",
            description: "Rabenseifner: knomial reduce-scatter then knomial allgather; moves 2(P-1)/P of the vector",
        },
        run: |c, a| Box::pin(sra_knomial::run(c, a)),
        check: sra_knomial::check,
    },
    Alg {
        info: AlgInfo {
            coll: Allreduce,
            id: 2,
            name: "ring",
            description: "ring reduce-scatter then ring allgather: 2(P-1) steps of 1/P of the vector",
        },
        run: |c, a| Box::pin(ring::run(c, a)),
        check: ring::check,
    },
];

pub(crate) const DEFAULTS: Defaults =
    Defaults { coll: Allreduce, ranges: &[(range(0, 4 << 10), 0), (range(4 << 10, INF), 1)] };
