//! The part of a collective that needs no communication: moving this rank's
//! own contribution to where the result expects it. Used by the p2p
//! algorithms and by the self TL (for a team of one it is the whole collective).

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{CollType, Error, MemRef, Result};

/// Copies `src` to `dst` (equal lengths), in whatever memory they live in.
pub(crate) type Copier<'a> = &'a dyn Fn(MemRef, MemRef) -> Result<()>;

fn missing(args: &CollInit, side: &str) -> Error {
    Error::internal(format!("{}: validated arguments lack {side}", args.coll))
}

/// Copy this rank's own block to its place in the destination, for the
/// collectives where it gets there without communication: allgather(v)
/// (block `rank`), alltoall(v) (block `rank` to block `rank`), gather(v) and
/// scatter(v) at the root, allreduce (src to dst). Nothing in place.
pub(crate) fn copy_own_block(args: &CollInit, copy: Copier<'_>) -> Result<()> {
    use CollType::*;
    let (r, p) = (args.rank, args.size);
    let is_root = r == args.root;
    match args.coll {
        Allreduce | ReduceScatter | ReduceScatterv | Reduce if args.in_place => Ok(()),
        Allgather | Allgatherv | Alltoall | Alltoallv | Gather | Gatherv | Scatter | Scatterv if args.in_place => {
            Ok(())
        }
        Allreduce => {
            let (s, d) = (
                args.src.as_ref().ok_or_else(|| missing(args, "src"))?,
                args.dst.as_ref().ok_or_else(|| missing(args, "dst"))?,
            );
            copy(d.mem, s.mem)
        }
        Allgather | Allgatherv => {
            let (s, d) = (
                args.src.as_ref().ok_or_else(|| missing(args, "src"))?,
                args.dst.as_ref().ok_or_else(|| missing(args, "dst"))?,
            );
            copy(d.block(r, p)?, s.mem)
        }
        Gather | Gatherv if is_root => {
            let (s, d) = (
                args.src.as_ref().ok_or_else(|| missing(args, "src"))?,
                args.dst.as_ref().ok_or_else(|| missing(args, "dst"))?,
            );
            copy(d.block(r, p)?, s.mem)
        }
        Scatter | Scatterv if is_root => {
            let (s, d) = (
                args.src.as_ref().ok_or_else(|| missing(args, "src"))?,
                args.dst.as_ref().ok_or_else(|| missing(args, "dst"))?,
            );
            copy(d.mem, s.block(r, p)?)
        }
        Alltoall | Alltoallv => {
            let (s, d) = (
                args.src.as_ref().ok_or_else(|| missing(args, "src"))?,
                args.dst.as_ref().ok_or_else(|| missing(args, "dst"))?,
            );
            copy(d.block(r, p)?, s.block(r, p)?)
        }
        _ => Ok(()),
    }
}

/// The whole collective for a team of one rank.
pub(crate) fn team_of_one(args: &CollInit, copy: Copier<'_>) -> Result<()> {
    use CollType::*;
    if args.size != 1 {
        return Err(Error::internal(format!("team_of_one called for a team of {}", args.size)));
    }
    match args.coll {
        Reduce | ReduceScatter | ReduceScatterv if !args.in_place => {
            let (s, d) = (
                args.src.as_ref().ok_or_else(|| missing(args, "src"))?,
                args.dst.as_ref().ok_or_else(|| missing(args, "dst"))?,
            );
            // One contribution: the reduction (average included) is the input itself.
            copy(d.mem.range(0, s.mem.len())?, s.mem)
        }
        _ => copy_own_block(args, copy),
    }
}
