//! Ring reduce-scatter.
//!
//! The vector is cut into one block per rank ([`Blocks`]). In step `s`
//! (`0..P-1`) rank r sends its partial sum of block `r-1-s` to its right
//! neighbour and receives the partial sum of block `r-2-s` from its left
//! one, which it combines with its own contribution to that block. A
//! partial travels once around the ring, picking up one contribution per
//! hop, so in the last step rank r receives block r with every
//! contribution but its own: that final reduce (the only one with `last`)
//! writes the result straight to the output. Each block is reduced by one
//! rank only. Partials live in two scratch slots used in turn (one is being
//! sent while the other receives), so the input is only read and any block
//! layout works, uneven and empty blocks included.
//!
//! [`reduce_scatter_blocks`] is the building block shared with ring
//! allreduce and ring reduce_scatterv; [`run`] maps UCC's reduce_scatter
//! buffers onto it: not in place, `src` holds P·B elements and the result
//! goes to `dst`; in place, `dst` holds the whole vector (any count, UCC's
//! block distribution) and rank r's result lands on its own block.

use ferrocoll_core::args::{Blocks, ReduceScatter, Reducer};
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::comm::PHASE_TAGS;
use crate::p2p::pattern::Ring;

pub(crate) async fn run(comm: Comm, o: ReduceScatter) -> Result<()> {
    reduce_scatter_blocks(&comm, &o.reducer, o.src.mem, &o.src.blocks, o.dst).await
}

/// Block whose partial rank `ring.rank` sends in step `s`.
fn send_block(ring: &Ring, s: usize) -> usize {
    ring.back(s + 1)
}

/// Block whose partial rank `ring.rank` receives (and adds to) in step `s`.
fn recv_block(ring: &Ring, s: usize) -> usize {
    ring.back(s + 2)
}

/// Step tag: one per step; tags repeat only after a whole phase's worth of
/// steps, and messages of one sender with one tag are matched in order.
fn step_tag(s: usize) -> u32 {
    (s % PHASE_TAGS as usize) as u32
}

/// Ring reduce-scatter over `blocks` (one per rank) of `input`, this rank's
/// whole vector (only read, unless it contains `out`). On return `out` (block
/// `comm.rank()`'s length; it may be that block of `input` itself) holds the
/// reduction of that block over every rank. Uses the tags of `comm`'s phase.
pub(crate) async fn reduce_scatter_blocks(
    comm: &Comm,
    reducer: &Reducer,
    input: MemRef,
    blocks: &Blocks,
    out: MemRef,
) -> Result<()> {
    let (rank, size, es) = (comm.rank(), comm.size(), reducer.elem_size);
    if blocks.len() != size {
        return Err(Error::internal(format!("ring reduce-scatter over {} blocks for {size} ranks", blocks.len())));
    }
    if out.len() != blocks.bytes(rank) {
        return Err(Error::internal(format!(
            "ring reduce-scatter output of {} bytes for block {rank} of {} bytes",
            out.len(),
            blocks.bytes(rank)
        )));
    }
    if size == 1 {
        // One contribution, still finished by the one `last` reduce.
        return comm.reduce(out, &[blocks.of(input, 0)?], reducer.last(out.len() / es));
    }
    let ring = Ring::new(rank, size);
    let max = (0..size).map(|i| blocks.bytes(i)).max().unwrap_or(0);
    let scratch = comm.scratch(2 * max)?;
    let slots = [scratch.mem().range(0, max)?, scratch.mem().range(max, max)?];
    for s in 0..size - 1 {
        let (sb, rb) = (send_block(&ring, s), recv_block(&ring, s));
        // The partial received in the previous step, or our own block to start.
        let send = if s == 0 { blocks.of(input, sb)? } else { slots[(s - 1) % 2].range(0, blocks.bytes(sb))? };
        let recv = slots[s % 2].range(0, blocks.bytes(rb))?;
        comm.sendrecv(ring.right(), send, ring.left(), recv, step_tag(s)).await?;
        let mine = blocks.of(input, rb)?;
        let count = blocks.bytes(rb) / es;
        if s + 2 == size {
            // rb == rank: the final values (`out` may be `mine`, so it goes first).
            comm.reduce(out, &[mine, recv], reducer.last(count))?;
        } else {
            comm.reduce(recv, &[recv, mine], reducer.partial(count))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rank ends on its own block, receives every other block but the
    /// one it starts with exactly once, and sends what its right neighbour
    /// expects.
    #[test]
    fn blocks_walk_the_ring() {
        for size in 2..20 {
            for rank in 0..size {
                let ring = Ring::new(rank, size);
                let right = Ring::new(ring.right(), size);
                let mut seen = vec![0; size];
                for s in 0..size - 1 {
                    assert_eq!(send_block(&ring, s), recv_block(&right, s));
                    if s > 0 {
                        assert_eq!(send_block(&ring, s), recv_block(&ring, s - 1));
                    }
                    seen[recv_block(&ring, s)] += 1;
                }
                assert_eq!(recv_block(&ring, size - 2), rank);
                assert_eq!(send_block(&ring, 0), ring.left());
                for (b, n) in seen.iter().enumerate() {
                    assert_eq!(*n, usize::from(b != ring.left()), "size {size} rank {rank} block {b}");
                }
            }
        }
    }

    #[test]
    fn tags_stay_in_one_phase() {
        assert_eq!(step_tag(3), 3);
        assert_eq!(step_tag(PHASE_TAGS as usize + 1), 1);
    }
}
