//! The part of a collective that needs no communication: moving this rank's
//! own contribution to where the result expects it. Used by the p2p
//! algorithms and by the self TL (for a team of one it is the whole collective).

use ferrocoll_core::args::{Buf, CollInit};
use ferrocoll_core::{CollType, Error, MemRef, Result};

/// Copies `src` to `dst` (equal lengths), in whatever memory they live in.
pub(crate) type Copier<'a> = &'a dyn Fn(MemRef, MemRef) -> Result<()>;

/// Reduces `count` elements: `dst = op(srcs...)` with the final step's
/// finishing (avg division, logical ops giving 0/1); `srcs[0]` may be `dst`.
pub(crate) type Reducer<'a> = &'a dyn Fn(MemRef, &[MemRef], usize) -> Result<()>;

/// Both validated buffers, or an internal error naming the missing one.
fn src_dst(args: &CollInit) -> Result<(&Buf, &Buf)> {
    let missing = |side: &str| Error::internal(format!("{}: validated arguments lack {side}", args.coll));
    Ok((args.src.as_ref().ok_or_else(|| missing("src"))?, args.dst.as_ref().ok_or_else(|| missing("dst"))?))
}

/// Copy this rank's own block to its place in the destination, for the
/// collectives where it gets there without communication: allgather(v)
/// (block `rank`), alltoall(v) (block `rank` to block `rank`), gather(v) and
/// scatter(v) at the root, allreduce (src to dst). Nothing in place.
pub(crate) fn copy_own_block(args: &CollInit, copy: Copier<'_>) -> Result<()> {
    use CollType::*;
    let (r, p) = (args.rank, args.size);
    if args.in_place {
        return Ok(());
    }
    let is_root = r == args.root;
    match args.coll {
        Allreduce => {
            let (s, d) = src_dst(args)?;
            copy(d.mem, s.mem)
        }
        Allgather | Allgatherv => {
            let (s, d) = src_dst(args)?;
            copy(d.block(r, p)?, s.mem)
        }
        Gather | Gatherv if is_root => {
            let (s, d) = src_dst(args)?;
            copy(d.block(r, p)?, s.mem)
        }
        Scatter | Scatterv if is_root => {
            let (s, d) = src_dst(args)?;
            copy(d.mem, s.block(r, p)?)
        }
        Alltoall | Alltoallv => {
            let (s, d) = src_dst(args)?;
            copy(d.block(r, p)?, s.block(r, p)?)
        }
        _ => Ok(()),
    }
}

/// The whole collective for a team of one rank. Reductions still go through
/// `reduce` with the one contribution, so that their result is finished as
/// with more ranks (logical operations give 0 or 1, avg divides by 1).
pub(crate) fn team_of_one(args: &CollInit, copy: Copier<'_>, reduce: Reducer<'_>) -> Result<()> {
    if args.size != 1 {
        return Err(Error::internal(format!("team_of_one called for a team of {}", args.size)));
    }
    if !args.coll.is_reduction() {
        return copy_own_block(args, copy);
    }
    let d = args.dst.as_ref().ok_or_else(|| Error::internal(format!("{} without dst", args.coll)))?;
    // Reduce-scatter(v): the result is the own block, at offset 0 for one rank.
    let count = match &d.v {
        Some(v) => v.counts.first().copied().unwrap_or(0),
        None => d.count,
    };
    let dst = d.mem.range(0, count * d.elem_size)?;
    let src = match &args.src {
        Some(s) => s.mem.range(0, dst.len())?,
        None => dst,
    };
    reduce(dst, &[src], count)
}
