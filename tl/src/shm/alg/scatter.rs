//! Scatter(v): the root publishes, in slot j of its half, the next piece
//! of rank j's block; rank j copies it out ([`scatter_rounds`]). At the
//! root in place, its own block stays in src. Scatter's blocks are all as
//! long as this rank's; scatterv's sizes are known to the root only, so a
//! size round agrees on the longest block first (and carries the blocks
//! too when they are short, `meta.rs`). A scatter whose root's
//! whole buffer fits an inline region takes one epoch through those
//! (`one_epoch.rs`).

use ferrocoll_core::CollType::{Scatter, Scatterv};
use ferrocoll_core::args;
use ferrocoll_core::{MemRef, Result};

use super::exchange::scatter_rounds;
use super::meta::{SizeRound, VCall};
use super::single_copy::{Offer, Outcome, single_copy};
use super::{Exec, SINGLE_COPY, STAGED, ShmPost};
use crate::base::{Alg, AlgFuture, Run};
use crate::shm::one_epoch::OneEpoch;
use crate::shm::team::ShmTeam;

pub(crate) const ALGS: &[Alg<ShmPost>] = &[
    Alg::new(Scatter, 0, "staged", STAGED, Run::Scatter(staged_or_inline)),
    Alg::new(
        Scatterv,
        0,
        "staged",
        STAGED,
        Run::Scatter(|p, o| p.one_epoch_with(|t| SizeRound::new(t, VCall::Scatter { take: takes(t, &o)?, o }))),
    ),
    Alg::new(Scatter, 1, "cma", SINGLE_COPY, Run::Scatter(|p, o| p.run(move |t| cma(t, o)))),
];

/// Every other rank reads its block of the root's buffer ([`single_copy`]);
/// staged where they cannot.
async fn cma(team: Exec, o: args::Scatter) -> Result<()> {
    if team.reach.on() {
        let give = o.src.as_ref().map(|s| Offer::PerRank(s.mem, &s.blocks));
        let take = if team.rank == o.root { None } else { Some((o.root, o.dst)) };
        // The root's own block (nothing to do in place).
        let own = o.src.as_ref().map(|s| s.block(team.rank).map(|mine| (o.dst, mine))).transpose()?;
        if single_copy(&team, Scatter, give, take.as_slice(), true, own).await? == Outcome::Done {
            return Ok(());
        }
    }
    staged(team, o).await
}

/// Where this rank's block comes from: the root's slot for it, unless this
/// is the root in place (its block is already in src, where it stays).
fn takes(team: &ShmTeam, o: &args::Scatter) -> Result<Vec<(usize, MemRef)>> {
    let in_place = match &o.src {
        Some(s) => s.block(team.rank)? == o.dst,
        None => false,
    };
    Ok(if in_place { Vec::new() } else { vec![(o.root, o.dst)] })
}

/// A scatter whose root's whole buffer fits an inline region goes in one
/// epoch; the blocks of a larger one in the root's slots.
fn staged_or_inline(p: ShmPost, o: args::Scatter) -> AlgFuture {
    if p.fits_inline_blocks(o.dst.len()) {
        let src = o.src.map(|s| s.mem);
        p.one_epoch(OneEpoch::Scatter { src, dst: o.dst, root: o.root })
    } else {
        p.run(move |t| staged(t, o))
    }
}

async fn staged(team: Exec, o: args::Scatter) -> Result<()> {
    let give = o.src.as_ref().map(|s| (s.mem, &s.blocks));
    scatter_rounds(&team, give, &takes(&team, &o)?, o.dst.len()).await
}
