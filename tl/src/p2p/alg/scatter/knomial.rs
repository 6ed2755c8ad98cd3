//! Knomial scatter: blocks flow down a knomial tree (radix
//! `scatter_kn_radix`) rooted at the root, one message per tree edge; the
//! reverse of knomial gather.
//!
//! In virtual ranks `v = rank - root (mod size)` a rank's subtree is the
//! contiguous range `[v, v + len)` (see the gather folder's `tree` module).
//! The root sends each child its subtree's blocks in one message, straight
//! from src unless the child's range wraps past rank `size - 1` to rank 0
//! (at most one child's can): that one is packed into scratch from its two
//! pieces first. A rank with children receives its subtree's blocks, in
//! virtual-rank order, into scratch, keeps the first (its own) and sends each
//! child its slice; a leaf receives straight into dst. All of a rank's sends
//! start at once and are awaited together, and the scratch they read lives
//! until they complete. The root's own block is copied from src (in place it
//! stays there).
//!
//! Any team size works: the knomial tree covers every rank, and subtrees at
//! the edge of a non-power-of-radix team are simply smaller (their sizes come
//! from the tree, so both ends of an edge agree on the message size). Scatter
//! blocks are all the same size, `count / size` elements: this rank's dst.

use ferrocoll_core::args::Scatter;
use ferrocoll_core::backend::Scratch;
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::subtree::{Subtree, real_runs, subtree};

const TAG: u32 = 0;

pub(crate) async fn run(comm: Comm, o: Scatter) -> Result<()> {
    let (rank, size, root, dst) = (comm.rank(), comm.size(), o.root, o.dst);
    // Scatter's blocks are all as long as this rank's.
    let block = dst.len();
    let tree = subtree(rank, root, size, comm.config().scatter_kn_radix);
    if let Some(src) = &o.src {
        comm.copy(dst, src.block(rank)?)?;
        return root_send(&comm, &tree, src.mem, block, root).await;
    }
    let parent = tree.parent.ok_or_else(|| Error::internal(format!("scatter: rank {rank} has no parent")))?;
    if tree.children.is_empty() {
        return comm.recv(parent, TAG, dst).await;
    }
    let scratch = comm.scratch(tree.len * block)?;
    let acc = scratch.mem();
    comm.recv(parent, TAG, acc).await?;
    let sends = tree
        .children
        .iter()
        .map(|c| comm.isend(c.rank, TAG, acc.range(c.first * block, c.len * block)?))
        .collect::<Result<Vec<_>>>()?;
    comm.copy(dst, acc.range(0, block)?)?;
    try_join_all(sends).await
}

/// The root's part: every child gets its subtree's blocks (in virtual-rank order).
async fn root_send(comm: &Comm, tree: &Subtree, src: MemRef, block: usize, root: usize) -> Result<()> {
    let size = comm.size();
    // Packed messages of children whose range wraps. Declared before the
    // sends so that, on an early error, the sends are dropped (retracted) first.
    let mut packed: Vec<Scratch> = Vec::new();
    let mut sends = Vec::with_capacity(tree.children.len());
    for c in &tree.children {
        let data = match real_runs(tree.vrank + c.first, c.len, root, size) {
            ((first, n), None) => src.range(first * block, n * block)?,
            ((first, n), Some((tail_first, tail_n))) => {
                let s = comm.scratch(c.len * block)?;
                let (head_bytes, tail_bytes) = (n * block, tail_n * block);
                comm.copy(s.mem().range(0, head_bytes)?, src.range(first * block, head_bytes)?)?;
                comm.copy(s.mem().range(head_bytes, tail_bytes)?, src.range(tail_first * block, tail_bytes)?)?;
                let data = s.mem();
                packed.push(s);
                data
            }
        };
        sends.push(comm.isend(c.rank, TAG, data)?);
    }
    try_join_all(sends).await?;
    drop(packed);
    Ok(())
}
