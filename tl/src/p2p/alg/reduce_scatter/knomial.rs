//! Knomial reduce-scatter (recursive k-halving).
//!
//! Over `full = radix^steps` core ranks ([`KnomialExchange`]), with the
//! ranks beyond `full` first folding their whole vector into their proxy.
//! Core rank c ends up owning the elements of block c of an even split of
//! the vector over the `full` core ranks ([`span`]), and every subcube of
//! core ranks that differ only in their low digits owns the union of its
//! members' blocks — a contiguous range. Step `s` works on digit
//! `steps-1-s` (largest distance first): each group member holds the range
//! of its current subcube, splits it into `radix` parts (part j: the
//! sub-subcube whose digit is j, possibly empty when the count is small),
//! sends part j to member j and reduces the parts the others send for its
//! own. After the last step (the only reduce with `last`), each core rank
//! holds the final values of its own range in `work`.
//!
//! [`knomial_reduce_scatter`] is that building block, shared with
//! sra_knomial allreduce and srg_knomial reduce. [`run`] then moves each
//! rank's UCC block (even split over all P ranks, in place any count) from
//! the core ranks whose ranges overlap it: when P is a power of the radix
//! and the count divides evenly, the ranges are the blocks and only a local
//! copy remains. `work` is scratch even in place, so in place only the
//! rank's own block of `dst` changes, as with the ring.

use ferrocoll_core::args::{ReduceScatter, Reducer, block_count, block_offset};
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::{KnomialExchange, Role};

const TAG_TO_PROXY: u32 = 0;
const TAG_STEP: u32 = 1;
/// In phase 1: a piece of a rank's block from a core rank.
const TAG_PIECE: u32 = 0;

pub(crate) async fn run(comm: Comm, o: ReduceScatter) -> Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    let (count, es, input, out) = (o.count, o.reducer.elem_size, o.src.mem, o.dst);
    let pat = KnomialExchange::new(size, comm.config().reduce_scatter_kn_radix);
    let mine = (block_offset(count, size, rank), block_count(count, size, rank));
    // Partial sums go to scratch even in place, so that (as with the ring)
    // only this rank's own block of `dst` changes.
    let extra = matches!(pat.role(rank), Role::Extra(_));
    let scratch = comm.scratch(if extra { 0 } else { count * es })?;
    let work = scratch.mem();
    knomial_reduce_scatter(&comm, &o.reducer, &pat, input, work, count).await?;

    // Every rank gathers its block from the core ranks whose ranges overlap it.
    let comm = comm.phase(1);
    let piece_of_mine = |(off, len): (usize, usize)| out.range((off - mine.0) * es, len * es);
    let mut sends = Vec::new();
    if rank < pat.full {
        let held = span(count, pat.full, rank, rank + 1);
        for b in 0..size {
            let block = (block_offset(count, size, b), block_count(count, size, b));
            match intersect(held, block) {
                Some(piece) if b == rank => comm.copy(piece_of_mine(piece)?, elems(work, piece, es)?)?,
                Some(piece) => sends.push(comm.isend(b, TAG_PIECE, elems(work, piece, es)?)?),
                None => {}
            }
        }
    }
    let recvs = (0..pat.full)
        .filter(|&c| c != rank)
        .filter_map(|c| intersect(span(count, pat.full, c, c + 1), mine).map(|p| (c, p)))
        .map(|(c, piece)| Ok(comm.recv(c, TAG_PIECE, piece_of_mine(piece)?)))
        .collect::<Result<Vec<_>>>()?;
    try_join_all(recvs).await?;
    try_join_all(sends).await
}

/// Knomial reduce-scatter: `input` is this rank's whole vector of `count`
/// elements (only read, unless it is `work`). On return a core rank `c`
/// (below `pat.full`) holds the final reduction of the elements
/// `span(count, pat.full, c, c + 1)` at their offsets in `work` (a whole
/// vector's worth of memory that other ranges of it are scribbled on, or
/// `input` itself); other ranks have handed their vector to their proxy and
/// hold nothing (their `work` is not touched and may be empty). Uses the
/// tags of `comm`'s phase.
pub(crate) async fn knomial_reduce_scatter(
    comm: &Comm,
    reducer: &Reducer,
    pat: &KnomialExchange,
    input: MemRef,
    work: MemRef,
    count: usize,
) -> Result<()> {
    let (rank, es) = (comm.rank(), reducer.elem_size);
    let bytes = count * es;
    let role = pat.role(rank);
    if input.len() != bytes || (work.len() != bytes && !matches!(role, Role::Extra(_))) {
        return Err(Error::internal(format!(
            "knomial reduce-scatter of {count} elements with {} input and {} work bytes",
            input.len(),
            work.len()
        )));
    }
    let mut source = match &role {
        Role::Extra(proxy) => return comm.send(*proxy, TAG_TO_PROXY, input).await,
        Role::Proxy(extras) => {
            let scratch = comm.scratch(bytes * extras.len())?;
            let slots = (0..extras.len()).map(|i| scratch.mem().range(i * bytes, bytes)).collect::<Result<Vec<_>>>()?;
            try_join_all(extras.iter().zip(&slots).map(|(&e, &b)| comm.recv(e, TAG_TO_PROXY, b))).await?;
            let mut srcs = vec![input];
            srcs.extend(slots);
            comm.reduce(work, &srcs, reducer.step(count, pat.steps == 0))?;
            work
        }
        // Alone (a team of one): the one contribution, finished by a `last` reduce.
        Role::Core if pat.steps == 0 => return comm.reduce(work, &[input], reducer.last(count)),
        Role::Core => input,
    };
    if pat.steps == 0 {
        return Ok(());
    }
    // The part kept at step 0 is the largest this rank receives.
    let slot = step_parts(count, pat, rank, 0)[pat.digit(rank, pat.steps - 1)].1 * es;
    let scratch = comm.scratch(slot * (pat.radix - 1))?;
    for s in 0..pat.steps {
        let parts = step_parts(count, pat, rank, s);
        let level = pat.steps - 1 - s;
        let kept = parts[pat.digit(rank, level)];
        let tag = TAG_STEP + s as u32;
        let mut sends = Vec::with_capacity(pat.radix - 1);
        let mut recvs = Vec::with_capacity(pat.radix - 1);
        let mut srcs = vec![elems(source, kept, es)?];
        for (j, m) in pat.group(rank, level).into_iter().enumerate().filter(|&(_, m)| m != rank) {
            sends.push(comm.isend(m, tag, elems(source, parts[j], es)?)?);
            let buf = scratch.mem().range(recvs.len() * slot, kept.1 * es)?;
            recvs.push(comm.recv(m, tag, buf));
            srcs.push(buf);
        }
        try_join_all(recvs).await?;
        // The sends read the other parts; this writes only the kept one.
        comm.reduce(elems(work, kept, es)?, &srcs, reducer.step(kept.1, s + 1 == pat.steps))?;
        try_join_all(sends).await?;
        source = work;
    }
    Ok(())
}

/// `(offset, count)` elements of `buf` (elements of `es` bytes).
pub(crate) fn elems(buf: MemRef, (off, len): (usize, usize), es: usize) -> Result<MemRef> {
    buf.range(off * es, len * es)
}

/// `(offset, count)` of the elements that core ranks `lo..hi` own: the
/// blocks of an even split of `count` over `full` core ranks, back to back.
pub(crate) fn span(count: usize, full: usize, lo: usize, hi: usize) -> (usize, usize) {
    let (a, b) = (block_offset(count, full, lo), block_offset(count, full, hi));
    (a, b - a)
}

/// The `radix` parts that core rank `rank`'s group splits its range into at
/// step `step` (part j goes to the member with digit j at that level).
pub(crate) fn step_parts(count: usize, pat: &KnomialExchange, rank: usize, step: usize) -> Vec<(usize, usize)> {
    let width = pat.distance(pat.steps - 1 - step);
    let lo = rank - rank % (width * pat.radix);
    (0..pat.radix).map(|j| span(count, pat.full, lo + j * width, lo + (j + 1) * width)).collect()
}

/// The non-empty common part of two `(offset, count)` ranges.
fn intersect(a: (usize, usize), b: (usize, usize)) -> Option<(usize, usize)> {
    let (lo, hi) = (a.0.max(b.0), (a.0 + a.1).min(b.0 + b.1));
    if lo < hi { Some((lo, hi - lo)) } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn intersections() {
        assert_eq!(intersect((0, 4), (2, 4)), Some((2, 2)));
        assert_eq!(intersect((0, 4), (4, 4)), None);
        assert_eq!(intersect((3, 0), (0, 9)), None);
        assert_eq!(span(10, 4, 1, 3), (3, 5));
    }

    #[test]
    fn power_of_radix_ranges_are_the_blocks() {
        let pat = KnomialExchange::new(8, 2);
        for c in 0..8 {
            assert_eq!(span(13, 8, c, c + 1), (block_offset(13, 8, c), block_count(13, 8, c)));
        }
        // 13 over 8: five blocks of 2, then three of 1.
        assert_eq!(step_parts(13, &pat, 5, 0), vec![(0, 8), (8, 5)]);
        assert_eq!(step_parts(13, &pat, 5, 2), vec![(8, 2), (10, 1)]);
    }

    proptest! {
        /// At every step the parts tile the rank's current range, every group
        /// member computes the same parts, the kept part is the next range,
        /// and the last one is the rank's own span.
        #[test]
        fn parts_nest_down_to_the_own_span(size in 1usize..90, radix in 2usize..6, count in 0usize..300) {
            let pat = KnomialExchange::new(size, radix);
            for rank in 0..pat.full {
                let mut range = (0, count);
                for s in 0..pat.steps {
                    let level = pat.steps - 1 - s;
                    let parts = step_parts(count, &pat, rank, s);
                    prop_assert_eq!(parts.len(), pat.radix);
                    prop_assert_eq!(parts[0].0, range.0);
                    for w in parts.windows(2) {
                        prop_assert_eq!(w[0].0 + w[0].1, w[1].0);
                    }
                    prop_assert_eq!(parts.iter().map(|p| p.1).sum::<usize>(), range.1);
                    for m in pat.group(rank, level) {
                        prop_assert_eq!(&step_parts(count, &pat, m, s), &parts);
                    }
                    range = parts[pat.digit(rank, level)];
                }
                prop_assert_eq!(range, span(count, pat.full, rank, rank + 1));
            }
        }

        /// The core ranks' pieces of every block cover it exactly.
        #[test]
        fn pieces_cover_every_block(size in 1usize..90, radix in 2usize..6, count in 0usize..300) {
            let pat = KnomialExchange::new(size, radix);
            for b in 0..size {
                let block = (block_offset(count, size, b), block_count(count, size, b));
                let covered: usize =
                    (0..pat.full).filter_map(|c| intersect(span(count, pat.full, c, c + 1), block)).map(|p| p.1).sum();
                prop_assert_eq!(covered, block.1);
            }
        }
    }
}
