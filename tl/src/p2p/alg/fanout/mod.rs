//! Fanout: ranks leave after the root has entered.

pub(crate) mod knomial;

use super::{Alg, Defaults, INF, range};
use ferrocoll_core::CollType::Fanout;
use ferrocoll_core::backend::AlgInfo;

pub(crate) const ALGS: &[Alg] = &[Alg {
    info: AlgInfo { coll: Fanout, id: 0, name: "knomial", description: "knomial tree of empty messages from the root" },
    run: |c, a| Box::pin(knomial::run(c, a)),
    check: knomial::check,
}];

pub(crate) const DEFAULTS: Defaults = Defaults { coll: Fanout, ranges: &[(range(0, INF), 0)] };
