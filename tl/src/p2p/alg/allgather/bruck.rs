//! Bruck allgather: ceil(log2 P) steps for any team size P.
//!
//! Each rank works in a scratch buffer of P blocks, slot i of which ends up
//! holding the block of rank `rank + i (mod P)`. Slot 0 starts as the
//! rank's own block. At step k, with distance `d = 2^k`, a rank sends its
//! first `min(d, P − d)` slots to rank `rank − d` and receives as many
//! from rank `rank + d` into slots `d..`; the slots it has filled double
//! each step, and the last step sends only what is still missing, so no
//! power of two is needed. A final local rotation copies slot i to block
//! `rank + i` of dst (two contiguous copies).
//!
//! Slots must be of equal size and the destination a plain array of them,
//! which allgather guarantees (dst holds P blocks of N elements); [`check`]
//! refuses anything else.

use ferrocoll_core::args::{Allgather, CollInit, Operands};
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;

/// Refuses a destination that is not P equal blocks, one after the other.
pub(crate) fn check(init: &CollInit) -> Result<()> {
    match &init.ops {
        Operands::Allgather(o) if o.dst.blocks.uniform().is_some() => Ok(()),
        _ => Err(Error::not_supported(format!(
            "{}/bruck needs P equal blocks one after the other in dst (count {} over team size {})",
            init.coll, init.count, init.size
        ))),
    }
}

pub(crate) async fn run(comm: Comm, o: Allgather) -> Result<()> {
    let (rank, size, dst, own) = (comm.rank(), comm.size(), o.dst.mem, o.src);
    let n = o.dst.blocks.uniform().ok_or_else(|| Error::internal("allgather/bruck over unequal blocks"))?;
    if n == 0 {
        return Ok(());
    }
    let scratch = comm.scratch(size * n)?;
    let slots = |first: usize, count: usize| scratch.mem().range(first * n, count * n);
    comm.copy(slots(0, 1)?, own)?;
    for (k, step) in (0..).zip(bruck_steps(rank, size)) {
        let (out, into) = (slots(0, step.count)?, slots(step.dist, step.count)?);
        comm.sendrecv(step.send_to, out, step.recv_from, into, k).await?;
    }
    // Slot i holds rank (rank + i)'s block: slots 0..P−rank go to blocks rank..P, the rest to 0..rank.
    let head = size - rank;
    comm.copy(dst.range(rank * n, head * n)?, slots(0, head)?)?;
    comm.copy(dst.range(0, rank * n)?, slots(head, rank)?)
}

/// One step of Bruck allgather, from one rank's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BruckStep {
    /// Distance `2^k`: received slots start here.
    pub dist: usize,
    /// Slots sent (the first ones) and received.
    pub count: usize,
    /// `rank − dist (mod P)`.
    pub send_to: usize,
    /// `rank + dist (mod P)`.
    pub recv_from: usize,
}

/// The steps of `rank` in a team of `size`: distances 1, 2, 4, … below `size`.
pub(crate) fn bruck_steps(rank: usize, size: usize) -> impl Iterator<Item = BruckStep> {
    std::iter::successors(Some(1usize), |d| d.checked_mul(2)).take_while(move |&d| d < size).map(move |dist| {
        BruckStep {
            dist,
            count: dist.min(size - dist),
            send_to: (rank + size - dist) % size,
            recv_from: (rank + dist) % size,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn steps_of_a_team_of_five() {
        let s: Vec<_> = bruck_steps(1, 5).collect();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0], BruckStep { dist: 1, count: 1, send_to: 0, recv_from: 2 });
        assert_eq!(s[2], BruckStep { dist: 4, count: 1, send_to: 2, recv_from: 0 });
        assert_eq!(bruck_steps(0, 1).count(), 0);
    }

    proptest! {
        /// Simulating every rank's slots: each step's message has the size
        /// the receiver expects, and slot i ends with the block of rank + i.
        #[test]
        fn slots_end_rotated(size in 1usize..70) {
            let mut slots: Vec<Vec<Option<usize>>> =
                (0..size).map(|r| (0..size).map(|i| (i == 0).then_some(r)).collect()).collect();
            let steps: Vec<Vec<BruckStep>> = (0..size).map(|r| bruck_steps(r, size).collect()).collect();
            prop_assert_eq!(steps[0].len(), size.next_power_of_two().trailing_zeros() as usize);
            for k in 0..steps[0].len() {
                let before = slots.clone();
                for (r, mine) in steps.iter().enumerate() {
                    let s = mine[k];
                    let theirs = steps[s.recv_from][k];
                    prop_assert_eq!(theirs.send_to, r);
                    prop_assert_eq!(theirs.count, s.count);
                    for i in 0..s.count {
                        prop_assert!(before[s.recv_from][i].is_some());
                        prop_assert!(slots[r][s.dist + i].is_none());
                        slots[r][s.dist + i] = before[s.recv_from][i];
                    }
                }
            }
            for (r, sl) in slots.iter().enumerate() {
                for (i, b) in sl.iter().enumerate() {
                    prop_assert_eq!(*b, Some((r + i) % size));
                }
            }
        }
    }
}
