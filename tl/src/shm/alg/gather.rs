//! Gather(v): every rank publishes its block piece by piece; the root
//! copies everyone else's into place ([`gather_rounds`]). Gather's blocks
//! are all as long as this rank's; gatherv's sizes are known to the root
//! only, so a size round agrees on the longest block first (and carries the
//! blocks too when they are short, `meta.rs`).

use ferrocoll_core::CollType::{Gather, Gatherv};
use ferrocoll_core::Result;
use ferrocoll_core::args;

use super::exchange::gather_rounds;
use super::meta::{SizeRound, VCall};
use super::single_copy::{Offer, Outcome, single_copy};
use super::{Exec, SINGLE_COPY, STAGED, ShmPost};
use crate::base::{Alg, Run};
use crate::shm::one_epoch::OneEpoch;

pub(crate) const ALGS: &[Alg<ShmPost>] = &[
    Alg::new(
        Gather,
        0,
        "staged",
        STAGED,
        Run::Gather(|p, o| {
            p.one_epoch_or(
                o.src.len(),
                o,
                |o| OneEpoch::Gather { mine: o.src, read: o.dst.is_none(), dst: o.dst },
                staged,
            )
        }),
    ),
    Alg::new(
        Gatherv,
        0,
        "staged",
        STAGED,
        Run::Gather(|p, o| p.one_epoch_with(|t| SizeRound::new(t, VCall::Gather(o)))),
    ),
    Alg::new(Gather, 1, "cma", SINGLE_COPY, Run::Gather(|p, o| p.run(move |t| cma(t, o)))),
];

/// The root reads every other rank's block ([`single_copy`]); staged where it cannot.
async fn cma(team: Exec, o: args::Gather) -> Result<()> {
    if team.reach.on() {
        let (give, take, own) = match &o.dst {
            Some(d) => (None, team.others(|r| d.block(r))?, Some((d.block(team.rank)?, o.src))),
            None => (Some(Offer::One(o.src)), Vec::new(), None),
        };
        if single_copy(&team, Gather, give, &take, false, own).await? == Outcome::Done {
            return Ok(());
        }
    }
    staged(team, o).await
}

async fn staged(team: Exec, o: args::Gather) -> Result<()> {
    gather_rounds(&team, o.src, o.dst.as_ref(), o.src.len(), o.dst.is_none()).await
}
