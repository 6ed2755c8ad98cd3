//! Linear scatter: the root sends every other rank its block straight from
//! src, all sends started at once, and copies its own block locally
//! (nothing to do in place: it stays in src). Non-root ranks receive their
//! block straight into dst. One step, `size - 1` messages out of the root.
//!
//! The same code serves scatterv: [`Buf::block`](ferrocoll_core::args::Buf::block)
//! resolves either the even split or per-rank counts and displacements, so
//! uneven and empty blocks need nothing special: an empty block is an empty
//! message, which keeps both sides' message sizes equal, wherever its
//! displacement points.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;

const TAG: u32 = 0;

/// Every valid argument set is supported.
pub(crate) fn check(_args: &CollInit) -> Result<()> {
    Ok(())
}

/// Scatter or scatterv (the layout of src at the root says which).
pub(crate) async fn run(comm: Comm, args: Arc<CollInit>) -> Result<()> {
    crate::p2p::alg::local::copy_own_block(&args, &|d, s| comm.copy(d, s))?;
    let (rank, size, root) = (comm.rank(), comm.size(), args.root);
    if rank != root {
        let dst = args.dst.as_ref().ok_or_else(|| Error::internal(format!("{}: rank {rank} has no dst", args.coll)))?;
        return comm.recv(root, TAG, dst.mem).await;
    }
    let src = args.src.as_ref().ok_or_else(|| Error::internal(format!("{}: the root has no src", args.coll)))?;
    // Every send starts before any is awaited: large sends complete only when
    // their receiver has copied, so waiting on one first would serialise them.
    let sends = (0..size)
        .filter(|&r| r != root)
        .map(|r| comm.isend(r, TAG, src.block(r, size)?))
        .collect::<Result<Vec<_>>>()?;
    try_join_all(sends).await
}
