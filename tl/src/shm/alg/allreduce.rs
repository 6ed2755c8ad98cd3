//! Allreduce and reduce through the segment.
//!
//! `onestep` (small messages): every rank publishes its input, then every
//! rank reduces all inputs into its own result — one synchronisation,
//! P-fold redundant arithmetic, which is what small messages want.
//!
//! `rsag` (large messages): reduce-scatter + allgather over slices. Each
//! round, every rank publishes the slices of a chunk of its input that the
//! others reduce (slice r for rank r; a half of its area holds the chunk);
//! rank r reduces slice r from all P inputs — the others' in the segment,
//! its own straight from its buffer — into its results part; then every
//! rank copies all the results into its destination. Per rank and byte of
//! the vector that moves: copy in (P-1)/P (read + write), reduce (read 1,
//! write 1/P), copy out 1 (read + write): 2(P-1)/P + 1 + 1/P + 2 bytes, 4.5
//! for two ranks. Chunks are half a rank's area (`UCC_TL_SHM_DATA_SIZE`), so
//! the working set stays in cache.
//!
//! Every rank combines the inputs in rank order, so all ranks get identical bits.

use std::sync::Arc;

use ferrocoll_core::args::{CollInit, block_count, block_offset};
use ferrocoll_core::{Error, MemRef, Result};

use super::common::{piece_of, rounds, whole};
use crate::shm::epoch::Flag;
use crate::shm::team::ShmTeam;

/// The input of a reduction on this rank (src, or dst in place).
fn input(args: &CollInit) -> Result<MemRef> {
    match (&args.src, &args.dst) {
        (Some(s), _) => Ok(s.mem),
        (None, Some(d)) => Ok(d.mem),
        (None, None) => Err(Error::internal(format!("{} without buffers", args.coll))),
    }
}

/// Where the result goes on this rank (`None`: a reduce's non-root).
fn output(args: &CollInit) -> Option<MemRef> {
    args.dst.as_ref().map(|d| d.mem)
}

/// Allreduce or reduce, one synchronisation per chunk: everyone (allreduce)
/// or the root (reduce) reduces whole chunks.
pub(crate) async fn onestep(team: Arc<ShmTeam>, args: Arc<CollInit>) -> Result<()> {
    let input = input(&args)?;
    let out = output(&args);
    let es = args.elem_size();
    let cap = whole(team.seg.layout().data, es);
    let readers = if args.coll == ferrocoll_core::CollType::Reduce { vec![args.root] } else { team.all.clone() };
    for k in 0..rounds(input.len(), cap) {
        let e = team.begin().await?;
        let chunk = piece_of(input, cap, k)?;
        team.copy(team.seg.data(team.rank, e)?.range(0, chunk.len())?, chunk)?;
        team.publish(Flag::Arrive, e)?;
        if readers.contains(&team.rank) {
            team.wait(Flag::Arrive, &team.all, e).await?;
            let srcs =
                team.all.iter().map(|&r| team.seg.data(r, e)?.range(0, chunk.len())).collect::<Result<Vec<_>>>()?;
            let dst = piece_of(out.ok_or_else(|| Error::internal("reader without dst"))?, cap, k)?;
            team.reduce(&args, dst, &srcs, chunk.len() / es)?;
        }
        team.publish(Flag::Done, e)?;
    }
    Ok(())
}

/// Allreduce or reduce by reduce-scatter + (all)gather of slices.
pub(crate) async fn rsag(team: Arc<ShmTeam>, args: Arc<CollInit>) -> Result<()> {
    let input = input(&args)?;
    let out = output(&args);
    let es = args.elem_size();
    let (p, me) = (team.size, team.rank);
    let cap = whole(team.seg.layout().data, es);
    let gathers = args.coll != ferrocoll_core::CollType::Reduce || me == args.root;
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
        team.reduce(&args, team.seg.results(me, e)?.range(0, n)?, &srcs, n / es)?;
        team.publish(Flag::Reduced, e)?;
        if gathers {
            team.wait(Flag::Reduced, &team.all, e).await?;
            let dst = piece_of(out.ok_or_else(|| Error::internal("gathering rank without dst"))?, cap, k)?;
            for r in 0..p {
                let (o, l) = slice(r);
                team.copy(dst.range(o, l)?, team.seg.results(r, e)?.range(0, l)?)?;
            }
        }
        team.publish(Flag::Done, e)?;
    }
    Ok(())
}
