//! The two staged exchanges of the data-moving collectives.
//!
//! [`gather_rounds`] (allgather(v), gather(v)): each round every rank
//! publishes the next piece of its own block (a half's worth); every rank
//! with a destination copies every other rank's piece into place.
//!
//! [`scatter_rounds`] (scatter(v), alltoall(v)): each round every giving
//! rank (the root, or everyone) publishes, in slot j of its half (a P-th of
//! it), the next piece of its block for rank j; each rank copies its slot
//! from every rank it takes from.
//!
//! A rank's own piece goes straight from its buffer to where it lands,
//! after it published and before it waits for the others: not through the
//! segment (a slot only its own rank reads), and while the others publish.
//!
//! Both walk as many rounds as the longest block needs, on every rank, so
//! that every rank goes through the same epochs; pieces are cut at byte
//! granularity (these collectives only copy).

use ferrocoll_core::args::{Blocked, Blocks};
use ferrocoll_core::{Error, MemRef, Result};

use super::rounds::{piece, piece_of, rounds};
use crate::shm::cache::copy_out;
use crate::shm::epoch::Flag;
use crate::shm::one_epoch::OneEpoch;
use crate::shm::team::ShmTeam;

/// Publish `mine` piece by piece where the others `read` it (see
/// `OneEpoch::Gather`); where `dst` is `Some`, copy every other rank's
/// piece into its block of it, and this rank's own whole from `mine`
/// (nothing when it is already there). `longest`: the longest block that
/// moves between ranks, in bytes (a gather(v)'s root's own may be longer).
/// Blocks that fit an inline region go in one epoch through those.
pub(crate) async fn gather_rounds(
    team: &ShmTeam,
    mine: MemRef,
    dst: Option<&Blocked>,
    longest: usize,
    read: bool,
) -> Result<()> {
    if team.fits_inline(longest) {
        return team.one_epoch(&OneEpoch::Gather { mine, dst: dst.cloned(), read }).await;
    }
    let (p, me) = (team.size, team.rank);
    let cap = team.pipeline_round();
    for k in 0..rounds(longest, cap) {
        let e = team.begin().await?;
        if read {
            let part = piece_of(mine, cap, k)?;
            team.copy_in(team.seg.data(me, e)?.range(0, part.len())?, part)?;
        }
        team.publish(Flag::Arrive, e)?;
        if let Some(d) = dst {
            if k == 0 {
                copy_out(team, d.block(me)?, mine, d.mem.len())?;
            }
            team.wait(Flag::Arrive, &team.all, e).await?;
            for r in (0..p).filter(|&r| r != me) {
                let theirs = piece_of(d.block(r)?, cap, k)?;
                copy_out(team, theirs, team.seg.data(r, e)?.range(0, theirs.len())?, d.mem.len())?;
            }
        }
        team.publish(Flag::Done, e)?;
    }
    Ok(())
}

/// Where `give` is `Some` (a buffer and its block per receiver), publish
/// block j's next piece in slot j each round; copy the pieces of `take`
/// (`(giver, where its block for this rank lands)`) out of the givers' slots.
/// `longest`: the longest block any rank gives, in bytes.
pub(crate) async fn scatter_rounds(
    team: &ShmTeam,
    give: Option<(MemRef, &Blocks)>,
    take: &[(usize, MemRef)],
    longest: usize,
) -> Result<()> {
    let (p, me) = (team.size, team.rank);
    let slot = team.pipeline_round() / p;
    // What this rank gives itself: from its block for itself into where that lands.
    let own = match (give, take.iter().find(|&&(g, _)| g == me)) {
        (Some((from, blocks)), Some(&(_, into))) => Some((blocks.of(from, me)?, into)),
        (None, Some(_)) => return Err(Error::internal(format!("rank {me} takes a block from itself but gives none"))),
        (_, None) => None,
    };
    for k in 0..rounds(longest, slot) {
        let e = team.begin().await?;
        if let Some((from, blocks)) = give {
            let half = team.seg.data(me, e)?;
            for j in (0..p).filter(|&j| j != me) {
                let block = blocks.of(from, j)?;
                let (s, l) = piece(block.len(), slot, k);
                team.copy_in(half.range(j * slot, l)?, block.range(s, l)?)?;
            }
            team.publish(Flag::Arrive, e)?;
        }
        if let Some((mine, into)) = own {
            let ((s, l), (from, n)) = (piece(into.len(), slot, k), piece(mine.len(), slot, k));
            team.copy(into.range(s, l)?, mine.range(from, n)?)?;
        }
        for &(g, into) in take.iter().filter(|&&(g, _)| g != me) {
            let (s, l) = piece(into.len(), slot, k);
            if l > 0 {
                team.wait(Flag::Arrive, &[g], e).await?;
                // Plain copies: streaming ones measured slower here (`cache::copy_out`).
                team.copy(into.range(s, l)?, team.seg.data(g, e)?.range(me * slot, l)?)?;
            }
        }
        team.publish(Flag::Done, e)?;
    }
    Ok(())
}
