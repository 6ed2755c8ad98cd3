//! Ring allgather.
//!
//! Ranks form the ring 0 → 1 → … → P−1 → 0. At step k (k = 0..P−1) every
//! rank sends block `rank − k` to its right neighbour and receives block
//! `rank − k − 1` from its left one, so after P−1 steps every block has gone
//! once around the ring. Each step moves one block per rank, which makes the
//! ring bandwidth-optimal for large messages and latency-bound (P−1 steps)
//! for small ones.
//!
//! [`allgather_blocks`] works on any [`Blocks`] layout: blocks may be uneven,
//! empty (they still travel, as zero-byte messages, so that a rank that
//! disagrees about a count gets an error instead of a hang), out of order or
//! with gaps. It is the allgather half of ring allreduce and of sag bcast, and
//! all of ring allgatherv. Any team size works: the ring needs no power of two.

use ferrocoll_core::args::{Allgather, Blocks};
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::Ring;

/// Allgather or allgatherv (the layout of `dst` says which). The first
/// step sends this rank's block from `src`, not from the copy just made in
/// `dst`: a neighbour that reads it by CMA reads lines written long before
/// rather than lines this rank has just written, which the kernel copies
/// at about half the speed (BENCHMARKS.md, tenth round: 2 ranks, 256 KiB
/// blocks, 37 against 16 µs).
pub(crate) async fn run(comm: Comm, o: Allgather) -> Result<()> {
    comm.copy(o.dst.block(comm.rank())?, o.src)?;
    ring_from(&comm, o.dst.mem, &o.dst.blocks, Some(o.src)).await
}

/// Ring allgather over an arbitrary block layout: on entry every rank's own
/// block (`blocks` entry `comm.rank()`) of `buf` holds its data; on return
/// every block holds its owner's data. Building block of ring allreduce and
/// sag bcast. Uses step tags `0..P−1` of `comm`'s phase.
pub(crate) async fn allgather_blocks(comm: &Comm, buf: MemRef, blocks: &Blocks) -> Result<()> {
    ring_from(comm, buf, blocks, None).await
}

/// [`allgather_blocks`], the first step sending `own` (this rank's block,
/// elsewhere) when given.
async fn ring_from(comm: &Comm, buf: MemRef, blocks: &Blocks, own: Option<MemRef>) -> Result<()> {
    let ring = Ring::new(comm.rank(), comm.size());
    check_layout(blocks, ring.size)?;
    for step in 1..ring.size {
        let (send, recv) = ring_step_blocks(ring, step);
        let out = match own {
            Some(own) if step == 1 => own,
            _ => blocks.of(buf, send)?,
        };
        let into = blocks.of(buf, recv)?;
        comm.sendrecv(ring.right(), out, ring.left(), into, step as u32 - 1).await?;
    }
    Ok(())
}

/// The blocks a ring rank sends and receives at step `step` (1-based):
/// `(rank − step + 1, rank − step)` modulo the ring size.
pub(crate) fn ring_step_blocks(ring: Ring, step: usize) -> (usize, usize) {
    (ring.back(step - 1), ring.back(step))
}

/// An internal error unless `blocks` has one block per rank of a team of `size`.
pub(crate) fn check_layout(blocks: &Blocks, size: usize) -> Result<()> {
    if blocks.len() != size {
        return Err(Error::internal(format!("allgather over {} blocks in a team of {size}", blocks.len())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll_core::MemType;
    use proptest::prelude::*;

    #[test]
    fn empty_blocks_may_point_anywhere() {
        let mut v = vec![0u8; 8];
        // SAFETY: v outlives m and is not touched while m is used.
        let m = unsafe { MemRef::from_mut_slice(&mut v) };
        let b = Blocks::from_counts(&[2, 0, 3], &[0, 100, 4], 1);
        assert_eq!(b.of(m, 1).unwrap(), MemRef::empty(MemType::Host));
        assert!(check_layout(&b, 4).is_err());
    }

    proptest! {
        /// Simulating the steps: every rank receives each block exactly once,
        /// always from a neighbour that already holds it, and ends with all of them.
        #[test]
        fn every_block_arrives_once(size in 1usize..40) {
            let mut held: Vec<Vec<bool>> = (0..size).map(|r| (0..size).map(|b| b == r).collect()).collect();
            for step in 1..size {
                let before = held.clone();
                let moves: Vec<(usize, usize, usize)> = (0..size)
                    .map(|r| {
                        let ring = Ring::new(r, size);
                        (r, ring.right(), ring_step_blocks(ring, step).0)
                    })
                    .collect();
                for (from, to, b) in moves {
                    prop_assert!(before[from][b], "rank {} sends block {} it lacks", from, b);
                    let (_, expect) = ring_step_blocks(Ring::new(to, size), step);
                    prop_assert_eq!(expect, b);
                    prop_assert!(!held[to][b], "rank {} gets block {} twice", to, b);
                    held[to][b] = true;
                }
            }
            prop_assert!(held.iter().all(|h| h.iter().all(|&x| x)));
        }
    }
}
