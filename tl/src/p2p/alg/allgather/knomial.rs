//! Knomial allgather (recursive k-ing).
//!
//! The first `full = radix^steps` ranks (the core) exchange in `steps`
//! steps. Before step s a core rank holds the blocks of its radix^s-aligned
//! group of core ranks and of the extra ranks those stand for; at step s it
//! sends them to the other radix−1 members of its group (the ranks that
//! differ from it only in base-radix digit s) and receives theirs, so its
//! holdings grow radix-fold and after the last step they are everything.
//!
//! Team sizes that are not a power of the radix: each extra rank
//! `e >= full` sends its block to its proxy `e mod full` first, and gets
//! every other block back from it at the end.
//!
//! Holdings are sets of block indices, cut into runs of consecutive indices
//! (one for the core blocks and one per level of extras): each run travels
//! as one message, in place when its blocks lie back to back in the buffer
//! (even layouts) and packed through scratch otherwise (see [`super::runs`]).
//! Blocks may be uneven or empty; message sizes depend on block counts only.

use std::ops::Range;

use ferrocoll_core::args::{Allgather, Blocks};
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{MemRef, Result};

use super::ring::check_layout;
use super::runs::Staged;
use crate::p2p::Comm;
use crate::p2p::pattern::{KnomialExchange, Role};

const TAG_TO_PROXY: u32 = 0;
/// Two runs from the proxy: the blocks below the extra's and those above.
const TAG_FROM_PROXY: u32 = 1;
const TAG_STEP: u32 = 3;

pub(crate) async fn run(comm: Comm, o: Allgather) -> Result<()> {
    comm.copy(o.dst.block(comm.rank())?, o.src)?;
    allgather_blocks(&comm, o.dst.mem, &o.dst.blocks, comm.config().allgather_kn_radix).await
}

/// Knomial (recursive k-ing) allgather over an arbitrary block layout, same
/// contract as `ring::allgather_blocks`: on entry each rank's own block of
/// `buf` holds its data, on return every block does.
pub(crate) async fn allgather_blocks(comm: &Comm, buf: MemRef, blocks: &Blocks, radix: usize) -> Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    check_layout(blocks, size)?;
    let pat = KnomialExchange::new(size, radix);
    let role = pat.role(rank);
    match &role {
        Role::Extra(proxy) => {
            comm.send(*proxy, TAG_TO_PROXY, blocks.of(buf, rank)?).await?;
            let parts = extra_result_runs(rank, size)
                .map(|run| Staged::incoming(comm, buf, blocks, run))
                .collect::<Result<Vec<_>>>()?;
            try_join_all(parts.iter().zip(TAG_FROM_PROXY..).map(|(p, tag)| comm.recv(*proxy, tag, p.mem))).await?;
            return parts.iter().try_for_each(|p| p.land(comm, buf, blocks));
        }
        Role::Proxy(extras) => {
            let bufs = extras.iter().map(|&e| Ok((e, blocks.of(buf, e)?))).collect::<Result<Vec<_>>>()?;
            try_join_all(bufs.iter().map(|&(e, b)| comm.recv(e, TAG_TO_PROXY, b))).await?;
        }
        Role::Core => {}
    }
    for step in 0..pat.steps {
        let peers: Vec<usize> = pat.group(rank, step).into_iter().filter(|&m| m != rank).collect();
        let tag = |j: usize| TAG_STEP + (step * pat.radix + j) as u32;
        let out = held_runs(&pat, rank, step)
            .into_iter()
            .map(|run| Staged::outgoing(comm, buf, blocks, run))
            .collect::<Result<Vec<_>>>()?;
        let mut sends = Vec::with_capacity(peers.len() * out.len());
        for &m in &peers {
            for (j, o) in out.iter().enumerate() {
                sends.push(comm.isend(m, tag(j), o.mem)?);
            }
        }
        let mut landings = Vec::new();
        for &m in &peers {
            for (j, run) in held_runs(&pat, m, step).into_iter().enumerate() {
                landings.push((m, tag(j), Staged::incoming(comm, buf, blocks, run)?));
            }
        }
        try_join_all(landings.iter().map(|(m, t, l)| comm.recv(*m, *t, l.mem))).await?;
        landings.iter().try_for_each(|(_, _, l)| l.land(comm, buf, blocks))?;
        try_join_all(sends).await?;
    }
    if let Role::Proxy(extras) = &role {
        let mut staged = Vec::new();
        for &e in extras {
            for (run, tag) in extra_result_runs(e, size).zip(TAG_FROM_PROXY..) {
                staged.push((e, tag, Staged::outgoing(comm, buf, blocks, run)?));
            }
        }
        let sends = staged.iter().map(|(e, t, s)| comm.isend(*e, *t, s.mem)).collect::<Result<Vec<_>>>()?;
        try_join_all(sends).await?;
    }
    Ok(())
}

/// Runs of block indices that core rank `rank` holds before step `step`:
/// its radix^step-aligned group of core ranks `[base, base + d)`, then, for
/// each level i ≥ 1 of extras, `[base + i·full, base + d + i·full)` cut at
/// the team size. There are at most `radix` runs (the team is smaller than
/// `radix · full`), which keeps step tags apart.
pub(crate) fn held_runs(pat: &KnomialExchange, rank: usize, step: usize) -> Vec<Range<usize>> {
    let d = pat.distance(step);
    let base = rank - rank % d;
    (0..).map(|i| base + i * pat.full).take_while(|&lo| lo < pat.size).map(|lo| lo..(lo + d).min(pat.size)).collect()
}

/// What an extra rank gets from its proxy at the end: every block but its own, in two runs.
fn extra_result_runs(extra: usize, size: usize) -> impl Iterator<Item = Range<usize>> {
    [0..extra, extra + 1..size].into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn runs_of_a_team_of_eleven() {
        // radix 2: full 8, extras 8, 9, 10 stand behind 0, 1, 2.
        let p = KnomialExchange::new(11, 2);
        assert_eq!(held_runs(&p, 1, 0), vec![1..2, 9..10]);
        assert_eq!(held_runs(&p, 3, 0), vec![3..4]);
        assert_eq!(held_runs(&p, 3, 1), vec![2..4, 10..11]);
        assert_eq!(held_runs(&p, 5, 2), vec![4..8]);
        assert_eq!(extra_result_runs(10, 11).collect::<Vec<_>>(), vec![0..10, 11..11]);
    }

    proptest! {
        /// Simulating the whole schedule (proxy fold-in, steps, hand-back):
        /// a rank only sends blocks it holds, never receives one twice, runs
        /// stay below `radix` in number, and everyone ends with every block.
        #[test]
        fn schedule_delivers_every_block(size in 1usize..80, radix in 2usize..7) {
            let p = KnomialExchange::new(size, radix);
            let mut held: Vec<Vec<bool>> = (0..size).map(|r| (0..size).map(|b| b == r).collect()).collect();
            for e in p.full..size {
                held[e % p.full][e] = true;
            }
            for step in 0..p.steps {
                let before = held.clone();
                for r in 0..p.full {
                    let mine = held_runs(&p, r, step);
                    prop_assert!(mine.len() <= p.radix);
                    let owned: Vec<usize> = (0..size).filter(|&b| before[r][b]).collect();
                    let listed: Vec<usize> = mine.iter().flat_map(|run| run.clone()).collect();
                    prop_assert_eq!(&owned, &listed, "rank {} step {}", r, step);
                    for m in p.group(r, step).into_iter().filter(|&m| m != r) {
                        for b in held_runs(&p, m, step).into_iter().flatten() {
                            prop_assert!(before[m][b] && !held[r][b], "rank {} block {} from {}", r, b, m);
                            held[r][b] = true;
                        }
                    }
                }
            }
            for r in 0..size {
                prop_assert!(held[r % p.full].iter().all(|&x| x), "proxy of {} lacks blocks", r);
            }
        }
    }
}
