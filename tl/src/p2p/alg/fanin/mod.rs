//! Fanin: the root leaves after every rank has entered.

pub(crate) mod knomial;

use super::{INF, range};
use crate::base::{Alg, Run};
use crate::p2p::Comm;
use ferrocoll_core::CollType::Fanin;
use ferrocoll_core::score::{AlgId, MsgRange};

pub(crate) const ALGS: &[Alg<Comm>] = &[Alg::new(
    Fanin,
    0,
    "knomial",
    "knomial tree of empty messages towards the root",
    Run::Fanin(|c, o| Box::pin(knomial::run(c, o))),
)];

pub(crate) const DEFAULTS: &[(MsgRange, AlgId)] = &[(range(0, INF), 0)];
