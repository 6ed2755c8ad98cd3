//! Linear gather: every non-root rank sends its block straight to the root,
//! which posts all `size - 1` receives at once, each into its sender's block
//! of dst. One step, `size - 1` messages into the root: fine for small teams
//! or small blocks, and the building block of srg reduce ([`gather_blocks`]).
//!
//! The root's own block is copied locally (nothing to do in place). The
//! same code serves gatherv: the root's dst [`Blocks`] are either an even
//! split or per-rank counts and displacements, so
//! uneven and empty blocks need nothing special: an empty block is an empty
//! message, which keeps both sides' message sizes equal, wherever its
//! displacement points.

use ferrocoll_core::args::{Blocks, Gather};
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;

const TAG: u32 = 0;

/// Gather or gatherv (the layout of dst at the root says which).
pub(crate) async fn run(comm: Comm, o: Gather) -> Result<()> {
    match &o.dst {
        Some(dst) => {
            comm.copy(dst.block(comm.rank())?, o.src)?;
            receive_all(&comm, o.root, |r| dst.block(r)).await
        }
        None => comm.send(o.root, TAG, o.src).await,
    }
}

/// Linear gather over an arbitrary block layout: every rank's own block
/// (`blocks` entry `comm.rank()`) of its `buf` goes to the same block of the
/// root's `buf`. Building block of srg reduce.
pub(crate) async fn gather_blocks(comm: &Comm, buf: MemRef, blocks: &Blocks, root: usize) -> Result<()> {
    if blocks.len() != comm.size() {
        return Err(Error::internal(format!("gather of {} blocks over a team of {}", blocks.len(), comm.size())));
    }
    if comm.rank() == root {
        receive_all(comm, root, |r| blocks.of(buf, r)).await
    } else {
        comm.send(root, TAG, blocks.of(buf, comm.rank())?).await
    }
}

/// At the root: receive every other rank's message into `slot(rank)`, all at once.
async fn receive_all(comm: &Comm, root: usize, slot: impl Fn(usize) -> Result<MemRef>) -> Result<()> {
    let recvs =
        (0..comm.size()).filter(|&r| r != root).map(|r| Ok(comm.recv(r, TAG, slot(r)?))).collect::<Result<Vec<_>>>()?;
    try_join_all(recvs).await
}
