//! Fanout: ranks leave after the root has entered.

pub(crate) mod knomial;

use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Fanout;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[Alg::new(
    Fanout,
    0,
    "knomial",
    "knomial tree of empty messages from the root",
    Run::Fanout(|c, o| Box::pin(knomial::run(c, o))),
)];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, INF), 0)];
