//! Fanin: the root leaves after every rank has entered.

pub(crate) mod knomial;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::Fanin;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[Alg {
    info: AlgInfo {
        coll: Fanin,
        id: 0,
        name: "knomial",
        description: "knomial tree of empty messages towards the root",
    },
    run: |c, a| Box::pin(knomial::run(c, a)),
    check: knomial::check,
}];

pub(crate) const DEFAULTS: Defaults = Defaults { coll: Fanin, ranges: &[(range(0, INF), 0)] };
