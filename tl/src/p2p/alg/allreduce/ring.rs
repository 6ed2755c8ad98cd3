//! Ring allreduce: ring reduce-scatter, then ring allgather.
//!
//! The vector is cut into P blocks with UCC's distribution
//! ([`Blocks::even`]; any count works, blocks may be empty). The ring
//! reduce-scatter ([`reduce_scatter_blocks`]) leaves on rank r the final
//! reduction of block r, computed by rank r alone and written straight into
//! block r of `dst` (it reads the other blocks from `src`, so no copy of
//! `src` to `dst` is needed; in place it reads `dst`, whose other blocks it
//! does not write). The ring allgather then copies each block from its one
//! owner to every rank, so every rank ends with identical bits. Each phase
//! moves (P-1)/P of the vector in P-1 steps.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;
use crate::p2p::alg::allgather::ring::allgather_blocks;
use crate::p2p::alg::blocks::Blocks;
use crate::p2p::alg::reduce_scatter::ring::reduce_scatter_blocks;

/// Every valid argument set is supported.
pub(crate) fn check(_args: &CollInit) -> Result<()> {
    Ok(())
}

pub(crate) async fn run(comm: Comm, args: Arc<CollInit>) -> Result<()> {
    let dst = args.dst.as_ref().ok_or_else(|| Error::internal("allreduce without dst"))?.mem;
    let input = match (&args.src, args.in_place) {
        (_, true) => dst,
        (Some(src), false) => src.mem,
        (None, false) => return Err(Error::internal("allreduce without src and not in place")),
    };
    let blocks = Blocks::even(args.count, comm.size(), args.elem_size());
    let mine = blocks.of(dst, comm.rank())?;
    reduce_scatter_blocks(&comm, &args, input, &blocks, mine).await?;
    allgather_blocks(&comm.phase(1), dst, &blocks).await
}
