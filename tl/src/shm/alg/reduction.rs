//! Allreduce and reduce through the segment.
//!
//! `onestep` (small messages): every rank publishes its input, then every
//! rank that needs the result (all of them for allreduce, the root for
//! reduce) reduces all inputs into its own result — one synchronisation,
//! P-fold redundant arithmetic, which is what small messages want. A
//! reduce's root reads its own input where it lies; on two ranks that
//! makes `onestep` reduce's algorithm at every size past single copy's
//! (the root moves 3 bytes per byte of the vector, `rsag`'s 4.5).
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
//! `single_copy` (two ranks, mid sizes): every rank that needs the result
//! reads the others' inputs straight from their buffers by cross-memory
//! attach (`single_copy.rs`), a scratch's worth at a time, and reduces them
//! with its own into its result. A peer's input was written long before
//! and is read where it lies, while `rsag`'s reads are of lines the peer
//! has just written (each one a transfer out of the peer's cache): at 64
//! KiB on two ranks that made `rsag` twice Open MPI's reduce
//! (BENCHMARKS.md, tenth round).
//!
//! Every rank combines the inputs in rank order, so all ranks get identical
//! bits; every reduction here produces final values.

use ferrocoll_core::args::{Reducer, block_count, block_offset};
use ferrocoll_core::{CollType, MemRef, Result};

use super::rounds::{piece, piece_of, rounds, whole};
use super::single_copy::{self, Outcome, Status};
use crate::shm::epoch::Flag;
use crate::shm::one_epoch::{OneEpoch, Reduction};
use crate::shm::team::ShmTeam;

/// Reduce `input` of every rank one chunk a round; the ranks whose `out` is
/// `Some` (every rank, or the root) reduce whole chunks into it. An input
/// that fits an inline region goes in one epoch through those.
///
/// `read_by_others`: whether another rank reduces this rank's input (false
/// at a reduce's root, which then reads its own input where it lies rather
/// than copying it into the segment first).
pub(crate) async fn onestep(
    team: &ShmTeam,
    input: MemRef,
    out: Option<MemRef>,
    reducer: &Reducer,
    read_by_others: bool,
) -> Result<()> {
    if team.fits_inline(input.len()) {
        return team
            .one_epoch(&OneEpoch::Reduce { src: input, out, reduction: Reduction::new(reducer, input.len()) })
            .await;
    }
    let es = reducer.elem_size;
    let cap = whole(team.seg.layout().data, es);
    // Whether this rank reduces its own input where it lies: not where it
    // overlaps the result (a reduction's sources after the first may not
    // overlap its destination), unless it is the result itself at rank 0,
    // whose input is the first source: that reduction runs in place.
    let own_where_it_lies = out.is_some_and(|o| !o.overlaps(&input) || (team.rank == 0 && o == input));
    let publish = read_by_others || !own_where_it_lies;
    for k in 0..rounds(input.len(), cap) {
        let e = team.begin().await?;
        let chunk = piece_of(input, cap, k)?;
        let n = chunk.len();
        if publish {
            team.copy_in(team.seg.data(team.rank, e)?.range(0, n)?, chunk)?;
        }
        team.publish(Flag::Arrive, e)?;
        if let Some(out) = out {
            team.wait(Flag::Arrive, &team.all, e).await?;
            let dst = piece_of(out, cap, k)?;
            // Its own input where it lies even when published: the peers
            // read the copy meanwhile (`one_epoch.rs`, `own_input`).
            let part = |r: usize| {
                if r == team.rank && own_where_it_lies { Ok(chunk) } else { team.seg.data(r, e)?.range(0, n) }
            };
            team.with_parts(part, |srcs| team.reduce(dst, srcs, reducer.last(n / es)))?;
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
            team.copy_in(half.range(o, l)?, chunk.range(o, l)?)?;
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
        let results = team.seg.results(me, e)?.range(0, n)?;
        // Where this rank's plain stores into the segment run slow
        // (`copy_in.rs`), its slice is reduced into its own part of the
        // output, which no one else reads, and copied in from there.
        let mine_in_out = match out {
            Some(o) if team.copy_in_streams() && !o.overlaps(&input) => Some(piece_of(o, cap, k)?.range(off, n)?),
            _ => None,
        };
        match mine_in_out {
            Some(mine) => {
                team.reduce(mine, &srcs, reducer.last(n / es))?;
                team.copy_in(results, mine)?;
            }
            None => team.reduce(results, &srcs, reducer.last(n / es))?,
        }
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
            if mine_in_out.is_none() {
                copy(me)?;
            }
            team.wait(Flag::Reduced, &team.all, e).await?;
            for r in (0..p).filter(|&r| r != me) {
                copy(r)?;
            }
        }
        team.publish(Flag::Done, e)?;
    }
    Ok(())
}

/// Bytes of scratch that single copy reads the other ranks' inputs into,
/// per round: a round's inputs and result stay in a core's L2 cache.
const SINGLE_COPY_SCRATCH: usize = 256 << 10;

/// Reduce `input` of every rank by single copy (see the module docs): the
/// ranks whose `out` is `Some` read the others' inputs and reduce them all
/// into it. In place (`out` is `input`), a rank reduces into a buffer of
/// its own and copies it into `out` once every rank has finished reading
/// its input. [`Outcome::Staged`] when a read could not be done: the
/// caller reduces through the segment instead.
pub(crate) async fn single_copy(
    team: &ShmTeam,
    coll: CollType,
    input: MemRef,
    out: Option<MemRef>,
    reducer: &Reducer,
) -> Result<Outcome> {
    single_copy_window(team, coll, input, out.map(|o| (0, o)), reducer).await
}

/// [`single_copy`] of one window of every rank's input: the ranks with an
/// `out` = `(at, out)` reduce bytes `at..at + out.len()` of every rank's
/// input (which all have `input.len()` bytes) into `out`; every rank
/// offers its whole input. Reduce-scatter(v) is this, each rank's window
/// its own block.
pub(crate) async fn single_copy_window(
    team: &ShmTeam,
    coll: CollType,
    input: MemRef,
    window: Option<(usize, MemRef)>,
    reducer: &Reducer,
) -> Result<Outcome> {
    let out = window.map(|(_, o)| o);
    let at = window.map_or(0, |(at, _)| at);
    let e = team.begin().await?;
    single_copy::offer_one(team, e, input)?;
    team.publish(Flag::Arrive, e)?;
    // The ranks this one reads from: every other one, if it needs the result.
    let others: Vec<usize> = match out {
        Some(_) => team.all.iter().copied().filter(|&r| r != team.rank).collect(),
        None => Vec::new(),
    };
    let aside = match out {
        Some(o) if o.overlaps(&input) => Some(team.host()?.alloc(o.len())?),
        _ => None,
    };
    let status = match aside.as_ref().map(|a| a.mem()).or(out) {
        Some(target) => read_and_reduce(team, e, input, at, target, reducer, &others).await?,
        None => {
            single_copy::announce(team, e, [], Status::Read)?;
            Status::Read
        }
    };
    let outcome = single_copy::decide(team, coll, e, status).await;
    if let (Ok(Outcome::Done), Some(out), Some(aside)) = (&outcome, out, &aside) {
        team.copy(out, aside.mem())?;
    }
    team.publish(Flag::Done, e)?;
    outcome
}

/// Read bytes `at..at + out.len()` of every other rank's input a
/// scratch's worth at a time and reduce them with the same bytes of
/// `input`, in rank order, into `out`. The status is announced
/// (`single_copy::announce`) as soon as the last read is done, before the
/// last reduction: a rank that only gives (a reduce's non-root) leaves
/// while the root reduces, as it would after a send.
async fn read_and_reduce(
    team: &ShmTeam,
    e: u64,
    input: MemRef,
    at: usize,
    out: MemRef,
    reducer: &Reducer,
    others: &[usize],
) -> Result<Status> {
    let announce = |status: Status| single_copy::announce(team, e, others.iter().copied(), status).map(|()| status);
    let es = reducer.elem_size;
    let mut addrs = Vec::with_capacity(others.len());
    for &g in others {
        team.wait(Flag::Arrive, &[g], e).await?;
        let [addr, len] = single_copy::offered(team, g, e)?;
        if len != input.len() as u64 {
            return announce(Status::Differs { giver: g as u64, wants: input.len() as u64, offered: len });
        }
        addrs.push(addr);
    }
    let chunk = whole(SINGLE_COPY_SCRATCH / others.len().max(1), es);
    let scratch = team.host()?.alloc(chunk * others.len().max(1))?;
    // At least one round (`rounds`), so the status is always announced.
    let mine = input.range(at, out.len())?;
    let last = rounds(out.len(), chunk).saturating_sub(1);
    for k in 0..=last {
        let (start, n) = piece(out.len(), chunk, k);
        for (i, &addr) in addrs.iter().enumerate() {
            let from = addr.checked_add(at as u64).and_then(|a| a.checked_add(start as u64));
            let Some(from) = from else { return announce(Status::Unreadable) };
            let status = single_copy::read_block(team, others[i], from, scratch.mem().range(i * chunk, n)?);
            if status != Status::Read {
                return announce(status);
            }
        }
        if k == last {
            announce(Status::Read)?;
        }
        // Rank order: this rank's input among the others' copies (the
        // others lie in the scratch in rank order too).
        let me = team.rank;
        team.with_parts(
            |r| match r.cmp(&me) {
                std::cmp::Ordering::Equal => mine.range(start, n),
                std::cmp::Ordering::Less => scratch.mem().range(r * chunk, n),
                std::cmp::Ordering::Greater => scratch.mem().range((r - 1) * chunk, n),
            },
            |srcs| team.reduce(out.range(start, n)?, srcs, reducer.last(n / es)),
        )?;
    }
    Ok(Status::Read)
}
