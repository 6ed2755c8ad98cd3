//! A collective among one rank: no communication, only this rank's own
//! contribution moved to where the result expects it. The self TL runs
//! every collective this way, and other TLs hand teams of one to it.

use ferrocoll_core::args::Operands;
use ferrocoll_core::{Error, MemRef, ReduceOp, Result};

/// Copies `src` to `dst` (equal lengths; nothing when they are the same range).
pub(crate) type Copier<'a> = &'a dyn Fn(MemRef, MemRef) -> Result<()>;

/// Whether the reduction of one contribution is that contribution as it
/// is: for the logical operations, which otherwise turn each value into 0
/// or 1. A TL whose algorithms also serve a team of one asks this of a
/// reduction with one source (there, one source may also be the last step
/// of more ranks', such as an average's division, which is not a copy).
pub(crate) fn alone_is_a_copy(op: ReduceOp) -> bool {
    matches!(op, ReduceOp::Land | ReduceOp::Lor | ReduceOp::Lxor)
}

/// The whole collective for a team of one rank: a copy of this rank's
/// contribution to where the result expects it, or nothing. A reduction
/// among one rank is its one contribution as it is, whatever the
/// operation (an average divides by one; a logical operation does not
/// turn it into 0 or 1): a copy, as UCC's TL/SELF and MPI make it, and no
/// reduction kernel to prepare at every post.
pub(crate) fn team_of_one(ops: &Operands, copy: Copier<'_>) -> Result<()> {
    let no = |what: &str| Error::internal(format!("a team of one without {what}"));
    match ops {
        Operands::Allreduce(o) => copy(o.dst, o.src),
        Operands::Reduce(o) => copy(o.dst.ok_or_else(|| no("the root's dst"))?, o.src),
        // The one block is the whole vector.
        Operands::ReduceScatter(o) => copy(o.dst, o.src.block(0)?),
        Operands::Allgather(o) => copy(o.dst.block(0)?, o.src),
        Operands::Gather(o) => copy(o.dst.as_ref().ok_or_else(|| no("the root's dst"))?.block(0)?, o.src),
        Operands::Scatter(o) => copy(o.dst, o.src.as_ref().ok_or_else(|| no("the root's src"))?.block(0)?),
        Operands::Alltoall(o) => copy(o.dst.block(0)?, o.src.block(0)?),
        Operands::Bcast(_) | Operands::Barrier | Operands::Fanin { .. } | Operands::Fanout { .. } => Ok(()),
    }
}
