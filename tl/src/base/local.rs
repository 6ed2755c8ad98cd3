//! A collective among one rank: no communication, only this rank's own
//! contribution moved to where the result expects it. The self TL runs
//! every collective this way, and other TLs hand teams of one to it.

use ferrocoll_core::args::Operands;
use ferrocoll_core::backend::ReduceSpec;
use ferrocoll_core::{Error, MemRef, ReduceOp, Result};

/// Copies `src` to `dst` (equal lengths; nothing when they are the same range).
pub(crate) type Copier<'a> = &'a dyn Fn(MemRef, MemRef) -> Result<()>;

/// `dst = op(srcs...)` as `spec` says; `srcs[0]` may be `dst`.
pub(crate) type Combiner<'a> = &'a dyn Fn(MemRef, &[MemRef], ReduceSpec) -> Result<()>;

/// Whether the reduction of one contribution is that contribution as it
/// is: for the logical operations, which otherwise turn each value into 0
/// or 1 (see [`team_of_one`]). A TL whose algorithms also serve a team of
/// one asks this of a reduction with one source.
pub(crate) fn alone_is_a_copy(op: ReduceOp) -> bool {
    matches!(op, ReduceOp::Land | ReduceOp::Lor | ReduceOp::Lxor)
}

/// The whole collective for a team of one rank. Reductions still go through
/// `reduce`, as the last step with the one contribution, so that their
/// result is finished as with more ranks (an average divides by the
/// divisor its reducer carries) — but for the logical operations, whose one
/// contribution is the result as it is (not turned into 0 or 1): what UCC's
/// TL/SELF and MPI give for a reduction among one rank, a copy.
pub(crate) fn team_of_one(ops: &Operands, copy: Copier<'_>, reduce: Combiner<'_>) -> Result<()> {
    let no = |what: &str| Error::internal(format!("a team of one without {what}"));
    let one = |dst: MemRef, src: MemRef, spec: ReduceSpec| {
        if alone_is_a_copy(spec.op) { copy(dst, src) } else { reduce(dst, &[src], spec) }
    };
    match ops {
        Operands::Allreduce(o) => one(o.dst, o.src, o.reducer.last(o.count)),
        Operands::Reduce(o) => one(o.dst.ok_or_else(|| no("the root's dst"))?, o.src, o.reducer.last(o.count)),
        // The one block is the whole vector.
        Operands::ReduceScatter(o) => one(o.dst, o.src.block(0)?, o.reducer.last(o.count)),
        Operands::Allgather(o) => copy(o.dst.block(0)?, o.src),
        Operands::Gather(o) => copy(o.dst.as_ref().ok_or_else(|| no("the root's dst"))?.block(0)?, o.src),
        Operands::Scatter(o) => copy(o.dst, o.src.as_ref().ok_or_else(|| no("the root's src"))?.block(0)?),
        Operands::Alltoall(o) => copy(o.dst.block(0)?, o.src.block(0)?),
        Operands::Bcast(_) | Operands::Barrier | Operands::Fanin { .. } | Operands::Fanout { .. } => Ok(()),
    }
}
