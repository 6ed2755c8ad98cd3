//! Scatter(v) and alltoall(v): each round every giving rank (the root, or
//! everyone) publishes, in slot j of its half (a P-th of it), the next piece
//! of its block for rank j; rank j copies its slot from every giver. Sizes
//! that only some ranks know (scatterv, alltoallv) are agreed on first in a
//! meta round. In place, alltoall(v) gives from a copy of dst.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{CollType, Error, MemRef, MemType, Result};

use super::common::{piece, rounds, whole};
use super::meta::exchange_sizes;
use crate::p2p::alg::blocks::Blocks;
use crate::shm::epoch::Flag;
use crate::shm::team::ShmTeam;

pub(crate) async fn staged(team: Arc<ShmTeam>, args: Arc<CollInit>) -> Result<()> {
    let (p, me) = (team.size, team.rank);
    let es = args.elem_size();
    let alltoall = matches!(args.coll, CollType::Alltoall | CollType::Alltoallv);
    // What this rank gives, cut per receiver: src, or (alltoall in place) dst.
    let given = match (&args.src, &args.dst) {
        (Some(s), _) if alltoall || me == args.root => Some(s),
        (None, Some(d)) if alltoall => Some(d),
        _ => None,
    };
    let give = given.map(|b| (b.mem, Blocks::of_buf(b, p)));
    // Where this rank's pieces land, per giver.
    let take: Vec<(usize, MemRef)> = match (&args.dst, alltoall) {
        (Some(d), true) => {
            let b = Blocks::of_buf(d, p);
            (0..p).map(|g| Ok((g, b.of(d.mem, g)?))).collect::<Result<_>>()?
        }
        (Some(d), false) => vec![(args.root, d.mem)],
        (None, _) => Vec::new(),
    };
    let longest = match args.coll {
        CollType::Alltoall | CollType::Scatter => args.count / p.max(1) * es,
        _ => {
            let gives: Vec<usize> = (0..p).map(|j| give.as_ref().map_or(0, |(_, b)| b.bytes(j))).collect();
            let mut takes = vec![0; p];
            for &(g, into) in &take {
                takes[g] = into.len();
            }
            // In place at the root of a scatterv, its own block stays put: it takes what it gives itself.
            if args.coll == CollType::Scatterv && me == args.root && take.is_empty() {
                takes[me] = gives[me];
            }
            exchange_sizes(&team, args.coll, &gives, &takes).await?
        }
    };
    // In place, alltoall reads and writes dst: give from a copy.
    let copy = match (&give, args.in_place && alltoall) {
        (Some((m, _)), true) => {
            let s = team.mcs.get(MemType::Host)?.alloc(m.len())?;
            team.copy(s.mem(), *m)?;
            Some(s)
        }
        _ => None,
    };
    let slot = whole(team.seg.layout().data / p, es);
    for k in 0..rounds(longest, slot) {
        let e = team.begin().await?;
        if let Some((m, b)) = &give {
            let from = copy.as_ref().map_or(*m, |s| s.mem());
            let half = team.seg.data(me, e)?;
            for j in 0..p {
                let block = b.of(from, j)?;
                let (s, l) = piece(block.len(), slot, k);
                team.copy(half.range(j * slot, l)?, block.range(s, l)?)?;
            }
            team.publish(Flag::Arrive, e)?;
        }
        for &(g, into) in &take {
            let (s, l) = piece(into.len(), slot, k);
            if l > 0 {
                team.wait(Flag::Arrive, &[g], e).await?;
                team.copy(into.range(s, l)?, team.seg.data(g, e)?.range(me * slot, l)?)?;
            }
        }
        team.publish(Flag::Done, e)?;
    }
    if given.is_none() && args.src.is_none() && args.dst.is_none() {
        return Err(Error::internal(format!("{} without buffers", args.coll)));
    }
    Ok(())
}
