//! Alltoall(v): every rank publishes, in slot j of its half, the next
//! piece of its block for rank j, and copies its slot from every rank
//! ([`scatter_rounds`]). Alltoall's blocks are all equal; alltoallv's sizes
//! are agreed on first in a size round, which carries the blocks too when
//! they are short (`meta.rs`). In place, a rank gives from a copy
//! of dst, since the blocks it receives land in dst. An alltoall whose
//! whole buffer fits an inline region takes one epoch through those
//! (`one_epoch.rs`), and in place needs no copy: what it publishes is it.

use ferrocoll_core::CollType::{Alltoall, Alltoallv};
use ferrocoll_core::args;
use ferrocoll_core::{MemRef, Result};

use super::exchange::scatter_rounds;
use super::meta::{Carry, exchange_sizes};
use super::single_copy::{Offer, Outcome, single_copy};
use super::{Exec, SINGLE_COPY, STAGED, ShmPost};
use crate::base::{Alg, AlgFuture, Run};
use crate::shm::one_epoch::OneEpoch;

pub(crate) const ALGS: &[Alg<ShmPost>] = &[
    Alg::new(Alltoall, 0, "staged", STAGED, Run::Alltoall(staged_or_inline)),
    Alg::new(Alltoallv, 0, "staged", STAGED, Run::Alltoall(|p, o| p.run(move |t| staged_v(t, o)))),
    Alg::new(Alltoall, 1, "cma", SINGLE_COPY, Run::Alltoall(|p, o| p.run(move |t| cma(t, o)))),
];

/// Every rank reads its block of every other rank's buffer
/// ([`single_copy`]); staged where it cannot, and in place (the blocks a
/// rank reads would land where the others still read).
async fn cma(team: Exec, o: args::Alltoall) -> Result<()> {
    if team.reach.on() && !o.in_place {
        let take = team.others(|g| o.dst.block(g))?;
        let give = Some(Offer::PerRank(o.src.mem, &o.src.blocks));
        if single_copy(&team, Alltoall, give, &take, true).await? == Outcome::Done {
            return team.copy(o.dst.block(team.rank)?, o.src.block(team.rank)?);
        }
    }
    staged(team, o).await
}

/// Alltoall whose whole buffer fits an inline region goes in one epoch;
/// the blocks of a larger one in the halves' slots.
fn staged_or_inline(p: ShmPost, o: args::Alltoall) -> AlgFuture {
    match o.dst.blocks.uniform() {
        Some(block) if p.fits_inline_blocks(block) => {
            p.one_epoch(OneEpoch::Alltoall { src: o.src.mem, dst: o.dst.mem, block })
        }
        _ => p.run(move |t| staged(t, o)),
    }
}

async fn staged(team: Exec, o: args::Alltoall) -> Result<()> {
    let longest = (0..team.size).map(|r| o.dst.blocks.bytes(r)).max().unwrap_or(0);
    exchange(team, o, longest).await
}

async fn staged_v(team: Exec, o: args::Alltoall) -> Result<()> {
    let p = team.size;
    // Carried in the size round, a rank's blocks are in its half before
    // any lands in dst: in place needs no copy then.
    let take = (0..p).map(|g| Ok((g, o.dst.block(g)?))).collect::<Result<Vec<(usize, MemRef)>>>()?;
    let carry = Carry::Scatter { give: Some((o.src.mem, &o.src.blocks)), take: &take, in_place: o.in_place };
    let (gives, takes) = (|j| o.src.blocks.bytes(j), |g| o.dst.blocks.bytes(g));
    match exchange_sizes(&team, Alltoallv, None, gives, takes, carry).await? {
        None => Ok(()),
        Some(longest) => exchange(team, o, longest).await,
    }
}

async fn exchange(team: Exec, o: args::Alltoall, longest: usize) -> Result<()> {
    let copy = if o.in_place {
        let s = team.host()?.alloc(o.src.mem.len())?;
        team.copy(s.mem(), o.src.mem)?;
        Some(s)
    } else {
        None
    };
    let from = copy.as_ref().map_or(o.src.mem, |s| s.mem());
    let take = (0..team.size).map(|g| Ok((g, o.dst.block(g)?))).collect::<Result<Vec<(usize, MemRef)>>>()?;
    scatter_rounds(&team, Some((from, &o.src.blocks)), &take, longest).await
}
