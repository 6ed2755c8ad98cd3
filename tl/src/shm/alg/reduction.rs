//! Allreduce and reduce through the segment.
//!
//! `onestep` (small messages): every rank publishes its input, then every
//! rank that needs the result (all of them for allreduce, the root for
//! reduce) reduces all inputs into its own result — one synchronisation,
//! P-fold redundant arithmetic, which is what small messages want.
//!
//! `rsag` (large messages): reduce-scatter + allgather over slices. Each
//! round, every rank publishes the slices of a chunk of its input that the
//! others reduce (slice r for rank r; a half of its area holds the chunk);
//! rank r reduces slice r from all P inputs — the others' in the segment,
//! its own straight from its buffer — into its results part; then every
//! rank that needs the result copies all the results into its destination.
//! Per rank and byte of the vector that moves: copy in (P-1)/P (read +
//! write), reduce (read 1, write 1/P), copy out 1 (read + write):
//! 2(P-1)/P + 1 + 1/P + 2 bytes, 4.5 for two ranks. Chunks are half a rank's
//! area (`UCC_TL_SHM_DATA_SIZE`), so the working set stays in cache.
//!
//! Every rank combines the inputs in rank order, so all ranks get identical
//! bits; every reduction here produces final values.

use ferrocoll_core::args::{Reducer, block_count, block_offset};
use ferrocoll_core::{MemRef, Result};

use super::rounds::{piece_of, rounds, whole};
use crate::shm::epoch::Flag;
use crate::shm::one_epoch::OneEpoch;
use crate::shm::team::ShmTeam;

/// Reduce `input` of every rank one chunk a round; the ranks whose `out` is
/// `Some` (every rank, or the root) reduce whole chunks into it. An input
/// that fits an inline region goes in one epoch through those.
pub(crate) async fn onestep(team: &ShmTeam, input: MemRef, out: Option<MemRef>, reducer: &Reducer) -> Result<()> {
    if team.fits_inline(input.len()) {
        return team.one_epoch(&OneEpoch::Reduce { src: input, out, reducer: *reducer }).await;
    }
    let es = reducer.elem_size;
    let cap = whole(team.seg.layout().data, es);
    for k in 0..rounds(input.len(), cap) {
        let e = team.begin().await?;
        let chunk = piece_of(input, cap, k)?;
        team.copy(team.seg.data(team.rank, e)?.range(0, chunk.len())?, chunk)?;
        team.publish(Flag::Arrive, e)?;
        if let Some(out) = out {
            team.wait(Flag::Arrive, &team.all, e).await?;
            let dst = piece_of(out, cap, k)?;
            let n = chunk.len();
            team.with_parts(|r| team.seg.data(r, e)?.range(0, n), |srcs| team.reduce(dst, srcs, reducer.last(n / es)))?;
        }
        team.publish(Flag::Done, e)?;
    }
    Ok(())
}

/// Reduce `input` of every rank by reduce-scatter of slices, then (on the
/// ranks whose `out` is `Some`) allgather of the reduced slices.
pub(crate) async fn rsag(team: &ShmTeam, input: MemRef, out: Option<MemRef>, reducer: &Reducer) -> Result<()> {
    let es = reducer.elem_size;
    let (p, me) = (team.size, team.rank);
    let cap = whole(team.seg.layout().data, es);
    for k in 0..rounds(input.len(), cap) {
        let e = team.begin().await?;
        let chunk = piece_of(input, cap, k)?;
        let elems = chunk.len() / es;
        let slice = |r: usize| (block_offset(elems, p, r) * es, block_count(elems, p, r) * es);
        // Publish the slices the others reduce; ours is read from the input directly.
        let half = team.seg.data(me, e)?;
        for r in (0..p).filter(|&r| r != me) {
            let (o, l) = slice(r);
            team.copy(half.range(o, l)?, chunk.range(o, l)?)?;
        }
        team.publish(Flag::Arrive, e)?;
        team.wait(Flag::Arrive, &team.all, e).await?;
        // My slice of the chunk, from every rank's input in rank order, into my results part.
        let (off, n) = slice(me);
        let srcs = team
            .all
            .iter()
            .map(|&r| if r == me { chunk.range(off, n) } else { team.seg.data(r, e)?.range(off, n) })
            .collect::<Result<Vec<_>>>()?;
        team.reduce(team.seg.results(me, e)?.range(0, n)?, &srcs, reducer.last(n / es))?;
        team.publish(Flag::Reduced, e)?;
        if let Some(out) = out {
            let dst = piece_of(out, cap, k)?;
            // Plain copies even into destinations larger than the cache:
            // streaming ones measured slower here (`cache::copy_out`). Mine
            // first: it is ready, and copying it overlaps the others' reductions.
            let copy = |r: usize| {
                let (o, l) = slice(r);
                team.copy(dst.range(o, l)?, team.seg.results(r, e)?.range(0, l)?)
            };
            copy(me)?;
            team.wait(Flag::Reduced, &team.all, e).await?;
            for r in (0..p).filter(|&r| r != me) {
                copy(r)?;
            }
        }
        team.publish(Flag::Done, e)?;
    }
    Ok(())
}
