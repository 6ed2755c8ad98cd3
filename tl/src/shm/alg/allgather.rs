//! Allgather(v): every rank publishes its block piece by piece and copies
//! everyone else's into place ([`gather_rounds`]); every rank knows every
//! block's size, so no size round is needed.

use ferrocoll_core::CollType::{Allgather, Allgatherv};
use ferrocoll_core::Result;
use ferrocoll_core::args;

use super::exchange::gather_rounds;
use super::{Exec, STAGED, ShmPost};
use crate::base::{Alg, AlgFuture, Run};
use crate::shm::one_epoch::OneEpoch;

pub(crate) const ALGS: &[Alg<ShmPost>] = &[
    Alg::new(Allgather, 0, "staged", STAGED, Run::Allgather(start)),
    Alg::new(Allgatherv, 0, "staged", STAGED, Run::Allgather(start)),
];

/// Blocks that all fit an inline region go in one epoch; others in rounds.
fn start(p: ShmPost, o: args::Allgather) -> AlgFuture {
    let len = longest(p.team.size, &o);
    p.one_epoch_or(len, o, |o| OneEpoch::Gather { mine: o.src, dst: Some(o.dst) }, staged)
}

/// Bytes of the longest block of any rank.
fn longest(size: usize, o: &args::Allgather) -> usize {
    (0..size).map(|r| o.dst.blocks.bytes(r)).max().unwrap_or(0)
}

async fn staged(team: Exec, o: args::Allgather) -> Result<()> {
    gather_rounds(&team, o.src, Some(&o.dst), longest(team.size, &o)).await
}
