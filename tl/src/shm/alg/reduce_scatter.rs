//! Reduce-scatter(v) through the segment. Each round every rank publishes,
//! in slot j of its half (a P-th of it), the next piece of its input block
//! j; rank r reduces slot r of every rank into the next piece of its result.
//! Blocks follow UCC's layouts (validation cuts the vector): P equal blocks
//! of src, or (in place) the uneven blocks of the whole vector in dst, or
//! v-counts back to back. A reduce-scatter(v) whose vector fits an inline
//! region takes one epoch through those (`one_epoch.rs`): every rank knows
//! where its block lies in every vector, since every rank holds every count
//! (and the call's signature, which each wait compares, carries a hash of
//! the v-counts: ranks whose counts differ fail instead).

use ferrocoll_core::CollType::{self, ReduceScatter, ReduceScatterv};
use ferrocoll_core::args;
use ferrocoll_core::{Error, Result};

use super::rounds::{piece, rounds, whole};
use super::single_copy::Outcome;
use super::{Exec, STAGED, ShmPost, reduction};
use crate::base::{Alg, AlgFuture, Run};
use crate::shm::epoch::Flag;
use crate::shm::one_epoch::{OneEpoch, Reduction, own_input};

pub(crate) const ALGS: &[Alg<ShmPost>] = &[
    Alg::new(ReduceScatter, 0, "staged", STAGED, Run::ReduceScatter(staged_or_inline)),
    Alg::new(ReduceScatterv, 0, "staged", STAGED, Run::ReduceScatter(staged_or_inline)),
    Alg::new(ReduceScatter, 1, "cma", CMA, Run::ReduceScatter(|p, o| p.run(move |t| cma(t, ReduceScatter, o)))),
    Alg::new(ReduceScatterv, 1, "cma", CMA, Run::ReduceScatter(|p, o| p.run(move |t| cma(t, ReduceScatterv, o)))),
];

const CMA: &str = "each rank reads its block of the others' vectors straight from their buffers by cross-memory \
                   attach and reduces them; staged where the kernel refuses it";

/// Each rank's block of every vector by single copy
/// (`reduction::single_copy_window`), or `staged` where a read could not be done.
async fn cma(team: Exec, coll: CollType, o: args::ReduceScatter) -> Result<()> {
    let (at, n) = o.src.blocks.get(team.rank)?;
    if n != o.dst.len() {
        return Err(Error::internal(format!("a {n}-byte block for a {}-byte result", o.dst.len())));
    }
    if team.reach.on()
        && reduction::single_copy_window(&team, coll, o.src.mem, Some((at, o.dst)), &o.reducer).await? == Outcome::Done
    {
        return Ok(());
    }
    staged(team, o).await
}

/// A vector that fits an inline region goes in one epoch; a larger one in
/// the halves' slots.
fn staged_or_inline(p: ShmPost, o: args::ReduceScatter) -> AlgFuture {
    let one = |o: args::ReduceScatter| OneEpoch::ReduceScatter {
        src: o.src,
        dst: o.dst,
        reduction: Reduction::new(&o.reducer, o.dst.len()),
    };
    p.one_epoch_or(o.src.mem.len(), o, one, staged)
}

async fn staged(team: Exec, o: args::ReduceScatter) -> Result<()> {
    let (p, me) = (team.size, team.rank);
    let es = o.reducer.elem_size;
    let (input, blocks) = (o.src.mem, &o.src.blocks);
    let slot = whole(team.pipeline_round() / p, es);
    let longest = (0..p).map(|r| blocks.bytes(r)).max().unwrap_or(0);
    // This rank's own block is read where it lies, not copied into the
    // segment and read back (`one_epoch.rs`, `own_input`); in place, where
    // it is the result, through the segment.
    let (own_at, _) = blocks.get(me)?;
    let own_apart = own_input(input, o.dst).is_some();
    for k in 0..rounds(longest, slot) {
        let e = team.begin().await?;
        let mine = team.seg.data(me, e)?;
        for j in (0..p).filter(|&j| j != me || !own_apart) {
            let (off, len) = blocks.get(j)?;
            let (s, l) = piece(len, slot, k);
            team.copy_in(mine.range(j * slot, l)?, input.range(off + s, l)?)?;
        }
        team.publish(Flag::Arrive, e)?;
        team.wait(Flag::Arrive, &team.all, e).await?;
        let (s, l) = piece(o.dst.len(), slot, k);
        let part = |r: usize| {
            if r == me && own_apart { input.range(own_at + s, l) } else { team.seg.data(r, e)?.range(me * slot, l) }
        };
        let srcs = team.all.iter().map(|&r| part(r)).collect::<Result<Vec<_>>>()?;
        team.reduce(o.dst.range(s, l)?, &srcs, o.reducer.last(l / es))?;
        team.publish(Flag::Done, e)?;
    }
    Ok(())
}
