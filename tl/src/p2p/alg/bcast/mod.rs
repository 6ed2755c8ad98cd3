//! Bcast: the root's buffer is copied to every rank.

pub(crate) mod knomial;
pub(crate) mod sag_knomial;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::Bcast;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[
    Alg {
        info: AlgInfo {
            coll: Bcast,
            id: 0,
            name: "knomial",
            description: "knomial tree: each rank forwards the whole buffer to its children; best for small messages",
        },
        run: |c, a| Box::pin(knomial::run(c, a)),
        check: knomial::check,
    },
    Alg {
        info: AlgInfo {
            coll: Bcast,
            id: 1,
            name: "sag_knomial",
            description: "scatter over a knomial tree, then allgather: moves the buffer about twice; large messages",
        },
        run: |c, a| Box::pin(sag_knomial::run(c, a)),
        check: sag_knomial::check,
    },
];

pub(crate) const DEFAULTS: Defaults =
    Defaults { coll: Bcast, ranges: &[(range(0, 32 << 10), 0), (range(32 << 10, INF), 1)] };
