//! Hierarchical bcast: a knomial tree at each level of the hierarchy
//! (`pattern::hier`), top down: among the switch groups' leaders, then
//! among each group's node leaders, then within each node. The root leads
//! its node, its group and the top (no extra hop): its data crosses the top
//! switch once per group, a group's switch once per node, and the ranks of
//! a node get it from their leader over shared memory. With one switch
//! group the top is empty and this is two levels (node leaders, node).
//!
//! Nodes and groups come from the team's layout (`topo::subgroups`), which
//! every rank computes alike. A call on an active set (a subset of the
//! team) runs the flat knomial tree over the set: the nodes of a subset are
//! not the team's. Chosen by name (`bcast:@hier`).

use ferrocoll_core::Result;
use ferrocoll_core::args::Bcast;

use super::knomial;
use crate::p2p::Comm;
use crate::p2p::pattern::hier::levels;

pub(crate) async fn run(comm: Comm, o: Bcast) -> Result<()> {
    let members = o.members(comm.size());
    if members.len() != comm.size() {
        return knomial::over(&comm, &members, o.root, o.buf, 0).await;
    }
    let levels = levels(comm.layout(), comm.rank(), Some(o.root))?;
    for (i, level) in levels.iter().enumerate().rev().filter(|(_, l)| !l.trivial()) {
        knomial::over(&comm.phase(i as u32), &level.members, level.leader_rank(), o.buf, 0).await?;
    }
    Ok(())
}
