//! Alltoallv: alltoall with counts and displacements per peer.

pub(crate) mod linear;
pub(crate) mod pairwise;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::Alltoallv;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[
    Alg {
        info: AlgInfo {
            coll: Alltoallv,
            id: 0,
            name: "pairwise",
            description: "P-1 steps, each exchanging one block with one peer (a window of them in flight)",
        },
        run: |c, a| Box::pin(pairwise::run(c, a)),
        check: pairwise::check,
    },
    Alg {
        info: AlgInfo { coll: Alltoallv, id: 1, name: "linear", description: "every block posted at once" },
        run: |c, a| Box::pin(linear::run(c, a)),
        check: linear::check,
    },
];

pub(crate) const DEFAULTS: Defaults = Defaults { coll: Alltoallv, ranges: &[(range(0, INF), 0)] };
