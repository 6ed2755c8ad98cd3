//! Knomial gather: blocks flow up a knomial tree (radix `gather_kn_radix`)
//! rooted at the root, one message per tree edge.
//!
//! In virtual ranks `v = rank - root (mod size)` a rank's subtree is the
//! contiguous range `[v, v + len)` ([`tree`](super::tree)). A rank with
//! children gathers its subtree's blocks in virtual-rank order in scratch
//! (its own block first, each child's message at that child's offset), all
//! children's receives posted at once, then forwards the whole scratch to its
//! parent in one message. A leaf sends its src directly. The root receives
//! each child's message straight into dst unless the child's range wraps
//! past rank `size - 1` to rank 0 (at most one child's can); that one lands
//! in scratch and is copied to dst in two pieces. The root's own block is
//! copied from src (nothing to do in place).
//!
//! Any team size works: the knomial tree covers every rank, and subtrees at
//! the edge of a non-power-of-radix team are simply smaller (their sizes come
//! from the tree, so both ends of an edge agree on the message size). Gather
//! blocks are all the same size, `count / size` elements: this rank's src.

use ferrocoll_core::args::Gather;
use ferrocoll_core::backend::Scratch;
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::subtree::{Run, Subtree, real_runs, subtree};

const TAG: u32 = 0;

pub(crate) async fn run(comm: Comm, o: Gather) -> Result<()> {
    let (rank, size, root, src) = (comm.rank(), comm.size(), o.root, o.src);
    // Gather's blocks are all as long as this rank's.
    let block = src.len();
    let tree = subtree(rank, root, size, comm.config().gather_kn_radix);
    if let Some(dst) = &o.dst {
        comm.copy(dst.block(rank)?, src)?;
        return root_receive(&comm, &tree, dst.mem, block, root).await;
    }
    let parent = tree.parent.ok_or_else(|| Error::internal(format!("gather: rank {rank} has no parent")))?;
    if tree.children.is_empty() {
        return comm.send(parent, TAG, src).await;
    }
    let scratch = comm.scratch(tree.len * block)?;
    let acc = scratch.mem();
    comm.copy(acc.range(0, block)?, src)?;
    let recvs = tree
        .children
        .iter()
        .map(|c| Ok(comm.recv(c.rank, TAG, acc.range(c.first * block, c.len * block)?)))
        .collect::<Result<Vec<_>>>()?;
    try_join_all(recvs).await?;
    comm.send(parent, TAG, acc).await
}

/// The root's part: every child's subtree lands in dst (in real-rank order).
async fn root_receive(comm: &Comm, tree: &Subtree, dst: MemRef, block: usize, root: usize) -> Result<()> {
    let size = comm.size();
    let mut recvs = Vec::with_capacity(tree.children.len());
    // Children whose range wraps: (scratch, the two runs of real ranks).
    let mut wrapped: Vec<(Scratch, Run, Run)> = Vec::new();
    for c in &tree.children {
        match real_runs(tree.vrank + c.first, c.len, root, size) {
            ((first, n), None) => recvs.push(comm.recv(c.rank, TAG, dst.range(first * block, n * block)?)),
            (head, Some(tail)) => {
                let s = comm.scratch(c.len * block)?;
                recvs.push(comm.recv(c.rank, TAG, s.mem()));
                wrapped.push((s, head, tail));
            }
        }
    }
    try_join_all(recvs).await?;
    for (s, (first, n), (tail_first, tail_n)) in &wrapped {
        let (head_bytes, tail_bytes) = (n * block, tail_n * block);
        comm.copy(dst.range(first * block, head_bytes)?, s.mem().range(0, head_bytes)?)?;
        comm.copy(dst.range(tail_first * block, tail_bytes)?, s.mem().range(head_bytes, tail_bytes)?)?;
    }
    Ok(())
}
