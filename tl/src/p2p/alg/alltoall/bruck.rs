//! Bruck alltoall: ceil(log2 P) steps of packed blocks, for any team size P.
//!
//! 1. Local rotation: slot i of a scratch buffer of P blocks gets the
//!    rank's block for rank `rank + i (mod P)`.
//! 2. At step k (distance `d = 2^k < P`) the slots whose index has bit k
//!    set are packed, sent to `rank + d` and replaced by the ones received
//!    from `rank − d`. A block in slot i thus travels exactly i ranks
//!    forward, one binary digit of i per step, staying in slot i.
//! 3. Inverse rotation: slot i now holds the block from rank `rank − i`,
//!    which is copied to that block of dst.
//!
//! Steps need no power of two: the slot indices are below P whatever P is,
//! and a step's message is as many slots as the index range has with bit k
//! set (the same count on both sides). Blocks are equal (alltoall's dst
//! holds P blocks of N elements; [`check`] refuses anything else). In
//! place, the rotation reads dst before anything is written to it.

use ferrocoll_core::args::{Alltoall, CollInit, Operands};
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;

/// Refuses buffers that are not P equal blocks, one after the other.
pub(crate) fn check(init: &CollInit) -> Result<()> {
    match &init.ops {
        Operands::Alltoall(o) if o.src.blocks.uniform().is_some() && o.dst.blocks.uniform().is_some() => Ok(()),
        _ => Err(Error::not_supported(format!(
            "{}/bruck needs P equal blocks one after the other (count {} over team size {})",
            init.coll, init.count, init.size
        ))),
    }
}

pub(crate) async fn run(comm: Comm, o: Alltoall) -> Result<()> {
    let (dst, src) = (o.dst.mem, o.src.mem);
    let (rank, size) = (comm.rank(), comm.size());
    let n = o.dst.blocks.uniform().ok_or_else(|| Error::internal("alltoall/bruck over unequal blocks"))?;
    if n == 0 {
        return Ok(());
    }
    let slots = comm.scratch(size * n)?;
    let slot = |i: usize| slots.mem().range(i * n, n);
    // Slots 0..P−rank take blocks rank..P, the rest blocks 0..rank.
    let head = size - rank;
    comm.copy(slots.mem().range(0, head * n)?, src.range(rank * n, head * n)?)?;
    comm.copy(slots.mem().range(head * n, rank * n)?, src.range(0, rank * n)?)?;
    let most = size.div_ceil(2);
    let (out, into) = (comm.scratch(most * n)?, comm.scratch(most * n)?);
    for (k, dist) in (0..).zip(distances(size)) {
        let moved = moved_slots(size, dist);
        let len = moved.len() * n;
        for (j, &i) in moved.iter().enumerate() {
            comm.copy(out.mem().range(j * n, n)?, slot(i)?)?;
        }
        let (to, from) = ((rank + dist) % size, (rank + size - dist) % size);
        comm.sendrecv(to, out.mem().range(0, len)?, from, into.mem().range(0, len)?, k).await?;
        for (j, &i) in moved.iter().enumerate() {
            comm.copy(slot(i)?, into.mem().range(j * n, n)?)?;
        }
    }
    for i in 0..size {
        comm.copy(dst.range(origin(rank, size, i) * n, n)?, slot(i)?)?;
    }
    Ok(())
}

/// The step distances: 1, 2, 4, … below `size`.
pub(crate) fn distances(size: usize) -> impl Iterator<Item = usize> {
    std::iter::successors(Some(1usize), |d| d.checked_mul(2)).take_while(move |&d| d < size)
}

/// Slots that move at the step of distance `dist` (a power of two): those
/// whose index has that bit set. At most `ceil(size / 2)` of them.
pub(crate) fn moved_slots(size: usize, dist: usize) -> Vec<usize> {
    (0..size).filter(|i| i & dist != 0).collect()
}

/// After the steps, slot `i` of `rank` holds the block sent by this rank: `rank − i (mod size)`.
pub(crate) fn origin(rank: usize, size: usize, i: usize) -> usize {
    (rank + size - i % size) % size
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn slots_of_a_team_of_six() {
        assert_eq!(distances(6).collect::<Vec<_>>(), vec![1, 2, 4]);
        assert_eq!(moved_slots(6, 4), vec![4, 5]);
        assert_eq!(moved_slots(6, 1), vec![1, 3, 5]);
        assert_eq!(origin(1, 6, 3), 4);
        assert_eq!(distances(1).count(), 0);
    }

    proptest! {
        /// Simulating every rank's slots through rotation, steps and inverse
        /// rotation: rank r's block j ends as block r of rank j, and a step
        /// never moves more than ceil(P/2) slots.
        #[test]
        fn blocks_reach_their_ranks(size in 1usize..70) {
            // A block is (sender, receiver).
            let mut slots: Vec<Vec<(usize, usize)>> =
                (0..size).map(|r| (0..size).map(|i| (r, (r + i) % size)).collect()).collect();
            for dist in distances(size) {
                let moved = moved_slots(size, dist);
                prop_assert!(moved.len() <= size.div_ceil(2));
                let before = slots.clone();
                for (r, mine) in slots.iter_mut().enumerate() {
                    let from = (r + size - dist) % size;
                    for &i in &moved {
                        mine[i] = before[from][i];
                    }
                }
            }
            for (r, mine) in slots.iter().enumerate() {
                for (i, &b) in mine.iter().enumerate() {
                    prop_assert_eq!(b, (origin(r, size, i), r));
                }
            }
        }
    }
}
