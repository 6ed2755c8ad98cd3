//! Three-level allreduce (node → switch group → top), run by
//! `allreduce:@hier` when the team spans several switch groups of which one
//! holds several nodes: a knomial reduce within each node to its leader and
//! within each group to its leader (`pattern::hier`), the knomial allreduce
//! exchange among the group leaders, then a knomial bcast down each group
//! and each node. A vector crosses the top switch only between group
//! leaders, and a group's switch only between its node leaders.
//!
//! Identical bits: every rank ends with the bits of the group leaders'
//! exchange (each group leader's partial is combined in the same order on
//! every leader). Partial results are finished (avg's division) only in the
//! exchange.

use ferrocoll_core::Result;
use ferrocoll_core::args::Allreduce;

use crate::p2p::Comm;
use crate::p2p::alg::{bcast, reduce};
use crate::p2p::pattern::hier::levels;

/// Tag phases of the way down (the way up uses the level's index).
const DOWN: u32 = 8;

/// Whether the layout has a switch level worth a third level: several
/// groups, one of them with several nodes.
pub(crate) fn applies(layout: &ferrocoll_core::topo::Layout) -> bool {
    let groups = layout.groups();
    groups.len() > 1 && groups.iter().any(|g| g.len() > 1)
}

pub(crate) async fn run(comm: Comm, o: Allreduce) -> Result<()> {
    let (dst, count, reducer) = (o.dst, o.count, o.reducer);
    let levels = levels(comm.layout(), comm.rank(), None)?;
    let active: Vec<_> = levels.iter().enumerate().filter(|(_, l)| !l.trivial()).collect();
    if active.is_empty() {
        // Alone in the team: the rank's own vector, finished.
        return comm.reduce(dst, &[o.src], reducer.last(count));
    }
    let mut input = o.src;
    // The levels this rank goes down through, from its highest.
    let mut down = Vec::new();
    for &(i, level) in &active {
        let c = comm.phase(i as u32);
        if level.outermost {
            comm.copy(dst, input)?;
            let peer = |m: usize| level.members[m];
            super::knomial::exchange_among(&c, level.members.len(), level.me, peer, dst, count, reducer, 0).await?;
            break;
        }
        let m = reduce::knomial::Members { n: level.members.len(), me: level.me, root: level.leader, tag: 0 };
        let out = level.leads().then_some(dst);
        reduce::knomial::over(&c, m, |x| level.members[x], input, out, count, reducer, false).await?;
        down.push((i, level));
        if !level.leads() {
            break;
        }
        input = dst;
    }
    for &(i, level) in down.iter().rev() {
        bcast::knomial::over(&comm.phase(DOWN + i as u32), &level.members, level.leader_rank(), dst, 0).await?;
    }
    Ok(())
}
