//! Two-level (hierarchical) reduce: a knomial reduce within each node to
//! its leader, then a knomial reduce among the node leaders to the root.
//! The root leads its own node (no extra hop), so its node's partial result
//! is already where the final one goes; every other node's vector crosses
//! the network once. Nodes come from the team's layout (`topo::subgroups`);
//! a node's leader is its lowest rank, or the root in the root's node.
//! Partial results are finished (avg's division) only at the root's last
//! combine. Chosen only by name (`reduce:@hier`).

use ferrocoll_core::args::Reduce;
use ferrocoll_core::{Error, Result};

use super::knomial::{Members, over};
use crate::p2p::Comm;

const TAG_NODE: u32 = 0;
const TAG_LEADERS: u32 = 1;

pub(crate) async fn run(comm: Comm, o: Reduce) -> Result<()> {
    let rank = comm.rank();
    let layout = comm.layout();
    let sub = layout.subgroups(rank, Some(o.root))?;
    let leaders: Vec<usize> = layout
        .nodes()
        .iter()
        .filter_map(|n| if n.contains(&o.root) { Some(o.root) } else { n.first().copied() })
        .collect();
    let position = |list: &[usize], r: usize| {
        list.iter().position(|&x| x == r).ok_or_else(|| Error::internal(format!("reduce: rank {r} not in {list:?}")))
    };
    let node = &sub.node;
    let in_node =
        Members { n: node.len(), me: position(node, rank)?, root: position(node, sub.node_leader)?, tag: TAG_NODE };
    let one_level = leaders.len() == 1;
    if rank != sub.node_leader {
        return over(&comm, in_node, |m| node[m], o.src, None, o.count, o.reducer, false).await;
    }
    // A leader: its node's partial result, in dst at the root, in scratch elsewhere.
    let scratch;
    let partial = match o.dst.filter(|_| rank == o.root) {
        Some(dst) => dst,
        None => {
            scratch = comm.scratch(o.src.len())?;
            scratch.mem()
        }
    };
    over(&comm, in_node, |m| node[m], o.src, Some(partial), o.count, o.reducer, one_level).await?;
    if one_level {
        return Ok(());
    }
    let among = Members {
        n: leaders.len(),
        me: position(&leaders, rank)?,
        root: position(&leaders, o.root)?,
        tag: TAG_LEADERS,
    };
    let out = (rank == o.root).then_some(partial);
    over(&comm, among, |m| leaders[m], partial, out, o.count, o.reducer, true).await
}
