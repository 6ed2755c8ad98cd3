//! Allgather(v): every rank publishes its block piece by piece and copies
//! everyone else's into place ([`gather_rounds`]); every rank knows every
//! block's size, so no size round is needed.

use ferrocoll_core::CollType::{self, Allgather, Allgatherv};
use ferrocoll_core::Result;
use ferrocoll_core::args;

use super::exchange::gather_rounds;
use super::single_copy::{Offer, Outcome, single_copy};
use super::{Exec, SINGLE_COPY, STAGED, ShmPost};
use crate::base::{Alg, AlgFuture, Run};
use crate::shm::one_epoch::OneEpoch;

pub(crate) const ALGS: &[Alg<ShmPost>] = &[
    Alg::new(Allgather, 0, "staged", STAGED, Run::Allgather(start)),
    Alg::new(Allgatherv, 0, "staged", STAGED, Run::Allgather(start)),
    Alg::new(Allgather, 1, "cma", SINGLE_COPY, Run::Allgather(|p, o| p.run(move |t| cma(t, o, Allgather)))),
    Alg::new(Allgatherv, 1, "cma", SINGLE_COPY, Run::Allgather(|p, o| p.run(move |t| cma(t, o, Allgatherv)))),
];

/// Every rank reads every other rank's block ([`single_copy`]); staged where it cannot.
async fn cma(team: Exec, o: args::Allgather, coll: CollType) -> Result<()> {
    if team.reach.on() {
        let me = team.rank;
        let take = team.others(|r| o.dst.block(r))?;
        let own = Some((o.dst.block(me)?, o.src));
        if single_copy(&team, coll, Some(Offer::One(o.src)), &take, false, own).await? == Outcome::Done {
            return Ok(());
        }
    }
    staged(team, o).await
}

/// Blocks that all fit an inline region go in one epoch; others in rounds.
fn start(p: ShmPost, o: args::Allgather) -> AlgFuture {
    let len = longest(p.team.size, &o);
    p.one_epoch_or(len, o, |o| OneEpoch::Gather { mine: o.src, dst: Some(o.dst), read: true }, staged)
}

/// Bytes of the longest block of any rank.
fn longest(size: usize, o: &args::Allgather) -> usize {
    (0..size).map(|r| o.dst.blocks.bytes(r)).max().unwrap_or(0)
}

async fn staged(team: Exec, o: args::Allgather) -> Result<()> {
    gather_rounds(&team, o.src, Some(&o.dst), longest(team.size, &o), true).await
}
