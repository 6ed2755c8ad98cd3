//! Gather(v): every rank publishes its block piece by piece; the root
//! copies everyone else's into place ([`gather_rounds`]). Gather's blocks
//! are all as long as this rank's; gatherv's sizes are known to the root
//! only, so a size round agrees on the longest block first (and carries the
//! blocks too when they are short, `meta.rs`).

use ferrocoll_core::CollType::{Gather, Gatherv};
use ferrocoll_core::Result;
use ferrocoll_core::args;

use super::exchange::gather_rounds;
use super::meta::{Carry, exchange_sizes};
use super::{Exec, STAGED, ShmPost};
use crate::base::{Alg, Run};
use crate::shm::one_epoch::OneEpoch;

pub(crate) const ALGS: &[Alg<ShmPost>] = &[
    Alg::new(
        Gather,
        0,
        "staged",
        STAGED,
        Run::Gather(|p, o| p.one_epoch_or(o.src.len(), o, |o| OneEpoch::Gather { mine: o.src, dst: o.dst }, staged)),
    ),
    Alg::new(Gatherv, 0, "staged", STAGED, Run::Gather(|p, o| p.run(move |t| staged_v(t, o)))),
];

async fn staged(team: Exec, o: args::Gather) -> Result<()> {
    gather_rounds(&team, o.src, o.dst.as_ref(), o.src.len()).await
}

async fn staged_v(team: Exec, o: args::Gather) -> Result<()> {
    let me = team.rank;
    let give = |j| if j == o.root { o.src.len() } else { 0 };
    let take = |r| match &o.dst {
        Some(_) if r == me => o.src.len(),
        Some(d) => d.blocks.bytes(r),
        None => 0,
    };
    let carry = Carry::Gather { mine: o.src, dst: o.dst.as_ref() };
    match exchange_sizes(&team, Gatherv, Some(o.root), give, take, carry).await? {
        None => Ok(()),
        Some(longest) => gather_rounds(&team, o.src, o.dst.as_ref(), longest).await,
    }
}
