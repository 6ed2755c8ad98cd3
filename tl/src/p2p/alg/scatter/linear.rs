//! Linear scatter: the root sends every other rank its block straight from
//! src, all sends started at once, and copies its own block locally
//! (nothing to do in place: it stays in src). Non-root ranks receive their
//! block straight into dst. One step, `size - 1` messages out of the root.
//!
//! The same code serves scatterv: the root's src blocks are either the
//! even split or per-rank counts and displacements, so
//! uneven and empty blocks need nothing special: an empty block is an empty
//! message, which keeps both sides' message sizes equal, wherever its
//! displacement points.

use ferrocoll_core::Result;
use ferrocoll_core::args::Scatter;
use ferrocoll_core::engine::try_join_all;

use crate::p2p::Comm;

const TAG: u32 = 0;

/// Scatter or scatterv (the layout of src at the root says which).
pub(crate) async fn run(comm: Comm, o: Scatter) -> Result<()> {
    let (rank, size, root) = (comm.rank(), comm.size(), o.root);
    let Some(src) = &o.src else {
        return comm.recv(root, TAG, o.dst).await;
    };
    comm.copy(o.dst, src.block(rank)?)?;
    // Every send starts before any is awaited: large sends complete only when
    // their receiver has copied, so waiting on one first would serialise them.
    let sends =
        (0..size).filter(|&r| r != root).map(|r| comm.isend(r, TAG, src.block(r)?)).collect::<Result<Vec<_>>>()?;
    try_join_all(sends).await
}
