//! Allgather(v) and gather(v): each round every rank publishes the next
//! piece of its block (a half's worth); every rank (allgather) or the root
//! (gather) copies every other rank's piece into place. gatherv's sizes are
//! known to the root only, so a meta round agrees on the longest block first.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{CollType, Error, Result};

use super::common::{piece_of, rounds, whole};
use super::meta::exchange_sizes;
use crate::p2p::alg::blocks::Blocks;
use crate::shm::epoch::Flag;
use crate::shm::team::ShmTeam;

pub(crate) async fn staged(team: Arc<ShmTeam>, args: Arc<CollInit>) -> Result<()> {
    let (p, me) = (team.size, team.rank);
    let es = args.elem_size();
    // The destination and its blocks, on the ranks that receive.
    let dst = args.dst.as_ref().map(|d| (d.mem, Blocks::of_buf(d, p)));
    // This rank's block: src, or (in place) its place in dst.
    let mine = match (&args.src, &dst) {
        (Some(s), _) => s.mem,
        (None, Some((d, b))) => b.of(*d, me)?,
        (None, None) => return Err(Error::internal(format!("{} without src", args.coll))),
    };
    let longest = match (&dst, args.coll) {
        (_, CollType::Gatherv) => {
            let mut give = vec![0; p];
            give[args.root] = mine.len();
            let take: Vec<usize> = match &dst {
                Some((_, b)) => (0..p).map(|r| if r == me { mine.len() } else { b.bytes(r) }).collect(),
                None => vec![0; p],
            };
            exchange_sizes(&team, args.coll, &give, &take).await?
        }
        (Some((_, b)), _) => (0..p).map(|r| b.bytes(r)).max().unwrap_or(0),
        // gather's blocks are all as long as this rank's.
        (None, _) => mine.len(),
    };
    let cap = whole(team.seg.layout().data, es);
    for k in 0..rounds(longest, cap) {
        let e = team.begin().await?;
        let part = piece_of(mine, cap, k)?;
        team.copy(team.seg.data(me, e)?.range(0, part.len())?, part)?;
        team.publish(Flag::Arrive, e)?;
        if let Some((d, b)) = &dst {
            team.wait(Flag::Arrive, &team.all, e).await?;
            for r in (0..p).filter(|&r| r != me) {
                let theirs = piece_of(b.of(*d, r)?, cap, k)?;
                team.copy(theirs, team.seg.data(r, e)?.range(0, theirs.len())?)?;
            }
            if args.src.is_some() {
                team.copy(piece_of(b.of(*d, me)?, cap, k)?, part)?;
            }
        }
        team.publish(Flag::Done, e)?;
    }
    Ok(())
}
