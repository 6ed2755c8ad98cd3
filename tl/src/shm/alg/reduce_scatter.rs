//! Reduce-scatter(v) through the segment. Each round every rank publishes,
//! in slot j of its half (a P-th of it), the next piece of its input block
//! j; rank r reduces slot r of every rank into the next piece of its result.
//! Blocks follow UCC's layouts: P equal blocks of src, or (in place) the
//! uneven blocks of the whole vector in dst, or v-counts back to back.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{Error, Result};

use super::common::{piece, rounds, whole};
use crate::p2p::alg::blocks::Blocks;
use crate::shm::epoch::Flag;
use crate::shm::team::ShmTeam;

pub(crate) async fn staged(team: Arc<ShmTeam>, args: Arc<CollInit>) -> Result<()> {
    let p = team.size;
    let es = args.elem_size();
    let dst = args.dst.as_ref().ok_or_else(|| Error::internal("reduce_scatter without dst"))?;
    // Input blocks: the whole vector split by rank.
    let (input, blocks) = match (&args.src, &dst.v) {
        (Some(s), Some(v)) => (s.mem, Blocks::from_counts(&v.counts, &v.displs, es)),
        (Some(s), None) => (s.mem, Blocks::even(s.count, p, es)),
        (None, Some(v)) => (dst.mem, Blocks::from_counts(&v.counts, &v.displs, es)),
        (None, None) => (dst.mem, Blocks::even(dst.count, p, es)),
    };
    // Output: offset 0 of dst, or (in place) the own block's place.
    let own = blocks.get(team.rank)?;
    let out = if args.in_place { dst.mem.range(own.0, own.1)? } else { dst.mem.range(0, own.1)? };
    let slot = whole(team.seg.layout().data / p, es);
    let longest = (0..p).map(|r| blocks.bytes(r)).max().unwrap_or(0);
    for k in 0..rounds(longest, slot) {
        let e = team.begin().await?;
        let mine = team.seg.data(team.rank, e)?;
        for j in 0..p {
            let (off, len) = blocks.get(j)?;
            let (s, l) = piece(len, slot, k);
            team.copy(mine.range(j * slot, l)?, input.range(off + s, l)?)?;
        }
        team.publish(Flag::Arrive, e)?;
        team.wait(Flag::Arrive, &team.all, e).await?;
        let (s, l) = piece(own.1, slot, k);
        let srcs =
            team.all.iter().map(|&r| team.seg.data(r, e)?.range(team.rank * slot, l)).collect::<Result<Vec<_>>>()?;
        team.reduce(&args, out.range(s, l)?, &srcs, l / es)?;
        team.publish(Flag::Done, e)?;
    }
    Ok(())
}
