//! Alltoall(v): every rank publishes, in slot j of its half, the next
//! piece of its block for rank j, and copies its slot from every rank
//! ([`scatter_rounds`]). Alltoall's blocks are all equal; alltoallv's sizes
//! are agreed on first in a size round, which carries the blocks too when
//! they are short (`meta.rs`): one epoch, through the inline regions when
//! they fit there. In place, a rank gives from a copy
//! of dst, since the blocks it receives land in dst. An alltoall whose
//! whole buffer fits an inline region takes one epoch through those
//! (`one_epoch.rs`), and in place needs no copy: what it publishes is it.

use ferrocoll_core::CollType::{Alltoall, Alltoallv};
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
    Alg::new(Alltoall, 0, "staged", STAGED, Run::Alltoall(staged_or_inline)),
    Alg::new(
        Alltoallv,
        0,
        "staged",
        STAGED,
        Run::Alltoall(|p, o| p.one_epoch_with(|t| SizeRound::new(t, VCall::Alltoall { take: takes(t, &o)?, o }))),
    ),
    Alg::new(Alltoall, 1, "cma", SINGLE_COPY, Run::Alltoall(|p, o| p.run(move |t| cma(t, o)))),
];

/// Every rank reads its block of every other rank's buffer
/// ([`single_copy`]); staged where it cannot, and in place (the blocks a
/// rank reads would land where the others still read).
async fn cma(team: Exec, o: args::Alltoall) -> Result<()> {
    if team.reach.on() && !o.in_place {
        let take = team.others(|g| o.dst.block(g))?;
        let give = Some(Offer::PerRank(o.src.mem, &o.src.blocks));
        let own = Some((o.dst.block(team.rank)?, o.src.block(team.rank)?));
        if single_copy(&team, Alltoall, give, &take, true, own).await? == Outcome::Done {
            return Ok(());
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
    exchange(&team, &o, &takes(&team, &o)?, longest).await
}

/// `(g, block g of dst)` for every rank g: what this rank takes.
fn takes(team: &ShmTeam, o: &args::Alltoall) -> Result<Vec<(usize, MemRef)>> {
    (0..team.size).map(|g| Ok((g, o.dst.block(g)?))).collect()
}

/// The blocks in rounds of slots (`take`: from [`takes`]), `longest` the
/// longest of any rank; in place, given from a copy of dst.
pub(super) async fn exchange(
    team: &ShmTeam,
    o: &args::Alltoall,
    take: &[(usize, MemRef)],
    longest: usize,
) -> Result<()> {
    let copy = if o.in_place {
        let s = team.host()?.alloc(o.src.mem.len())?;
        team.copy(s.mem(), o.src.mem)?;
        Some(s)
    } else {
        None
    };
    let from = copy.as_ref().map_or(o.src.mem, |s| s.mem());
    scatter_rounds(team, Some((from, &o.src.blocks)), take, longest).await
}
