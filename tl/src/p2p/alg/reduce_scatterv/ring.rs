//! Ring reduce-scatterv: the ring reduce-scatter building block
//! ([`reduce_scatter_blocks`]) over the blocks that `dst`'s counts describe.
//!
//! The whole vector is the blocks `counts[0], counts[1], …` one after the
//! other (displacements are the prefix sums). Not in place, `src` holds the
//! Σcounts elements and rank r's `counts[r]` results go to the start of
//! `dst`; in place, `dst` holds the whole vector and the result lands on
//! rank r's own block, at offset Σ_{i<r} counts\[i\]. Blocks may be empty
//! (zero counts travel as empty messages) and of any size; the input is only
//! read, apart from the own block in place.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;
use crate::p2p::alg::blocks::Blocks;
use crate::p2p::alg::reduce_scatter::ring::reduce_scatter_blocks;

/// Every valid argument set is supported.
pub(crate) fn check(_args: &CollInit) -> Result<()> {
    Ok(())
}

pub(crate) async fn run(comm: Comm, args: Arc<CollInit>) -> Result<()> {
    let dst = args.dst.as_ref().ok_or_else(|| Error::internal("reduce_scatterv without dst"))?;
    if dst.v.is_none() {
        return Err(Error::internal("reduce_scatterv dst has no counts"));
    }
    let blocks = Blocks::of_buf(dst, comm.size());
    let (input, out) = if args.in_place {
        (dst.mem, blocks.of(dst.mem, comm.rank())?)
    } else {
        let src = args.src.as_ref().ok_or_else(|| Error::internal("reduce_scatterv without src"))?;
        (src.mem, dst.mem)
    };
    reduce_scatter_blocks(&comm, &args, input, &blocks, out).await
}
