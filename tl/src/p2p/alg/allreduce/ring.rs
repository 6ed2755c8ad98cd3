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

use ferrocoll_core::Result;
use ferrocoll_core::args::{Allreduce, Blocks};

use crate::p2p::Comm;
use crate::p2p::alg::allgather::ring::allgather_blocks;
use crate::p2p::alg::reduce_scatter::ring::reduce_scatter_blocks;

pub(crate) async fn run(comm: Comm, o: Allreduce) -> Result<()> {
    let blocks = Blocks::even(o.count, comm.size(), o.reducer.elem_size);
    let mine = blocks.of(o.dst, comm.rank())?;
    reduce_scatter_blocks(&comm, &o.reducer, o.src, &blocks, mine).await?;
    allgather_blocks(&comm.phase(1), o.dst, &blocks).await
}
