//! Two-level (hierarchical) bcast: the root sends to the other nodes'
//! leaders over a knomial tree, then each leader sends within its node over
//! another. The root leads its own node (no extra hop): its data crosses
//! the network once per node, and the ranks of its node get it from it
//! directly.
//!
//! Nodes come from the team's layout (`topo::subgroups`), which every rank
//! computes alike; a node's leader is its lowest rank, or the root in the
//! root's node. A call on an active set (a subset of the team) runs the flat
//! knomial tree over the set: the nodes of a subset are not the team's.
//! Chosen only by name (`bcast:@hier`), like the hierarchical allreduce.

use ferrocoll_core::Result;
use ferrocoll_core::args::Bcast;

use super::knomial;
use crate::p2p::Comm;

const TAG_LEADERS: u32 = 0;
const TAG_NODE: u32 = 1;

pub(crate) async fn run(comm: Comm, o: Bcast) -> Result<()> {
    let members = o.members(comm.size());
    if members.len() != comm.size() {
        return knomial::over(&comm, &members, o.root, o.buf, TAG_LEADERS).await;
    }
    let layout = comm.layout();
    let node = layout.subgroups(comm.rank(), Some(o.root))?;
    let leaders: Vec<usize> = layout
        .nodes()
        .iter()
        .filter_map(|n| if n.contains(&o.root) { Some(o.root) } else { n.first().copied() })
        .collect();
    if node.node_leader == comm.rank() && leaders.len() > 1 {
        knomial::over(&comm, &leaders, o.root, o.buf, TAG_LEADERS).await?;
    }
    if node.node.len() > 1 {
        knomial::over(&comm, &node.node, node.node_leader, o.buf, TAG_NODE).await?;
    }
    Ok(())
}
