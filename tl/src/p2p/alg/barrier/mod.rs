//! Barrier: no rank leaves before every rank has entered.

pub(crate) mod knomial;

use super::{Alg, Defaults, INF, range, supports_all};
use ferrocoll_core::CollType::Barrier;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[Alg {
    info: AlgInfo {
        coll: Barrier,
        id: 0,
        name: "knomial",
        description: "recursive k-ing of empty messages (log_k(P) steps)",
    },
    run: |c, a| Box::pin(knomial::run(c, a)),
    check: supports_all,
}];

pub(crate) const DEFAULTS: Defaults = Defaults { coll: Barrier, ranges: &[(range(0, INF), 0)] };
