//! Scatter-allgather bcast for large buffers: the root's buffer is cut into
//! one block per rank, the blocks are scattered over a knomial tree (radix
//! `bcast_sag_kn_radix`) straight into each rank's buffer, then a ring
//! allgather (phase 1) completes every buffer. Each rank moves about twice
//! the buffer instead of `log(size)` times.
//!
//! The blocks are UCC's even split of `count` elements (the first
//! `count % size` get one element more; with `count < size` some are
//! empty), dealt out by virtual rank: rank `r` owns block number
//! `v = r - root (mod size)`. A knomial subtree is a contiguous range of
//! virtual ranks, so under this layout its blocks are one contiguous range
//! of bytes: each tree edge carries a single message, sent from and received
//! into the buffer itself, never wrapping. The allgather takes the same
//! layout (any per-rank layout works for it). A rank joins the allgather
//! only after its scatter sends have completed, so it never overwrites bytes
//! a child is still reading.
//!
//! Active sets: the ring allgather spans the whole team, so a bcast over a
//! strided subset of ranks runs the knomial bcast (whole buffer down the
//! tree of the set's members) instead; every member takes the same branch.

use ferrocoll_core::args::{Bcast, Blocks, block_count, block_offset};
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;
use crate::p2p::alg::allgather::ring::allgather_blocks;
use crate::p2p::pattern::subtree::{subtree, vrank};

const TAG: u32 = 0;

pub(crate) async fn run(comm: Comm, o: Bcast) -> Result<()> {
    if o.active_set.is_some() {
        return super::knomial::run(comm, o).await;
    }
    let (rank, size, root, elem, count, buf) = (comm.rank(), comm.size(), o.root, o.elem_size, o.count, o.buf);
    if buf.len() != count * elem {
        return Err(Error::internal(format!("bcast: buffer of {} bytes for {count} elements", buf.len())));
    }
    let tree = subtree(rank, root, size, comm.config().bcast_sag_kn_radix);
    if let Some(parent) = tree.parent {
        let (off, len) = span(count, size, elem, tree.vrank, tree.len);
        comm.recv(parent, TAG, buf.range(off, len)?).await?;
    }
    let sends = tree
        .children
        .iter()
        .map(|c| {
            let (off, len) = span(count, size, elem, tree.vrank + c.first, c.len);
            comm.isend(c.rank, TAG, buf.range(off, len)?)
        })
        .collect::<Result<Vec<_>>>()?;
    try_join_all(sends).await?;
    allgather_blocks(&comm.phase(1), buf, &dealt_blocks(count, size, root, elem)).await
}

/// `(byte offset, byte length)` of the even blocks `[first, first + n)` of
/// `count` elements of `elem` bytes split over `size`.
fn span(count: usize, size: usize, elem: usize, first: usize, n: usize) -> (usize, usize) {
    let start = block_offset(count, size, first);
    let end = block_offset(count, size, first + n);
    (start * elem, (end - start) * elem)
}

/// The layout in which rank `r` owns even block number `r - root (mod size)`.
fn dealt_blocks(count: usize, size: usize, root: usize, elem: usize) -> Blocks {
    let (counts, displs): (Vec<usize>, Vec<usize>) = (0..size)
        .map(|r| {
            let v = vrank(r, root, size);
            (block_count(count, size, v), block_offset(count, size, v))
        })
        .unzip();
    Blocks::from_counts(&counts, &displs, elem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_of_uneven_and_empty_blocks() {
        // 10 elements over 4: blocks of 3, 3, 2, 2.
        assert_eq!(span(10, 4, 8, 0, 4), (0, 80));
        assert_eq!(span(10, 4, 8, 1, 2), (24, 40));
        assert_eq!(span(10, 4, 8, 3, 1), (64, 16));
        // 2 elements over 5: blocks of 1, 1, 0, 0, 0.
        assert_eq!(span(2, 5, 4, 1, 3), (4, 4));
        assert_eq!(span(2, 5, 4, 2, 3), (8, 0));
        assert_eq!(span(0, 3, 4, 0, 3), (0, 0));
    }

    #[test]
    fn blocks_are_dealt_by_virtual_rank() {
        let b = dealt_blocks(10, 4, 2, 1);
        // Root 2 owns block 0, rank 3 block 1, rank 0 block 2, rank 1 block 3.
        let got: Vec<_> = (0..4).map(|r| b.get(r).ok()).collect();
        assert_eq!(got, vec![Some((6, 2)), Some((8, 2)), Some((0, 3)), Some((3, 3))]);
    }

    /// Every rank's subtree span holds its own block and its children's spans, and
    /// the root's span is the whole buffer, for every shape the tests use.
    #[test]
    fn subtree_spans_contain_the_owned_blocks() {
        for size in 1..20 {
            for count in [0, 1, size - 1, size, 3 * size + 2] {
                for root in [0, size / 2, size - 1] {
                    let blocks = dealt_blocks(count, size, root, 2);
                    for r in 0..size {
                        let t = subtree(r, root, size, 3);
                        let (off, len) = span(count, size, 2, t.vrank, t.len);
                        let (own_off, own_len) = blocks.get(r).unwrap_or((usize::MAX, 0));
                        assert_eq!(own_off, off, "size {size} count {count} root {root} rank {r}");
                        assert!(own_len <= len);
                        if r == root {
                            assert_eq!((off, len), (0, 2 * count));
                        }
                        let mut children = t.children.clone();
                        children.sort_by_key(|c| c.first);
                        let mut at = off + own_len;
                        for c in &children {
                            let (c_off, c_len) = span(count, size, 2, t.vrank + c.first, c.len);
                            assert_eq!(c_off, at);
                            at += c_len;
                        }
                        assert_eq!(at, off + len);
                    }
                }
            }
        }
    }
}
