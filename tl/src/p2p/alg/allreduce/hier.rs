//! Two-level (hierarchical) allreduce: reduce within each node to its
//! leader, allreduce among the node leaders, broadcast within each node.
//!
//! Nodes and leaders come from the team's layout (`topo::subgroups`: a node
//! is the ranks of one host and switch group, its lowest rank leads), which
//! every rank computes alike. Within a node the router carries messages
//! over shared memory, between nodes over TCP: the vector crosses the
//! network once per node instead of once per rank, which is the point on
//! hosts with many ranks and a slow network.
//!
//! Identical bits: a leader combines its node's vectors in rank order; the
//! leaders run the knomial allreduce's exchange (`UCC_TL_P2P_ALLREDUCE_KN_RADIX`)
//! over their list in node order, each group combining in that order, so
//! every leader ends with the same bits, and every other rank receives its
//! leader's.
//!
//! Limits of this first version: the node phases are linear at the leader
//! (one multi-source reduction, then one send per member) and move whole
//! vectors (no reduce-scatter/allgather split for large messages). On a
//! team over several switch groups, one of them with several nodes, it runs
//! the three-level version instead (`hier3.rs`). It is chosen only by name
//! (`allreduce:@hier`).

use ferrocoll_core::args::Allreduce;
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;

const TAG_NODE_UP: u32 = 0;
const TAG_NODE_DOWN: u32 = 1;
/// The leaders' knomial exchange uses the tags from here on.
const TAG_LEADERS: u32 = 2;

pub(crate) async fn run(comm: Comm, o: Allreduce) -> Result<()> {
    if super::hier3::applies(comm.layout()) {
        return super::hier3::run(comm, o).await;
    }
    let (dst, count, reducer) = (o.dst, o.count, o.reducer);
    let rank = comm.rank();
    let layout = comm.layout();
    let sub = layout.subgroups(rank, None)?;
    let leaders: Vec<usize> = layout.nodes().iter().filter_map(|n| n.first().copied()).collect();
    let one_node = leaders.len() == 1;
    let bytes = dst.len();

    if rank != sub.node_leader {
        comm.send(sub.node_leader, TAG_NODE_UP, o.src).await?;
        return comm.recv(sub.node_leader, TAG_NODE_DOWN, dst).await;
    }

    // Node phase: the leader (lowest rank of its node) combines in rank order.
    let others: Vec<usize> = sub.node.iter().copied().filter(|r| *r != rank).collect();
    if others.is_empty() {
        comm.copy(dst, o.src)?;
    } else {
        let scratch = comm.scratch(bytes * others.len())?;
        let slots = (0..others.len()).map(|i| scratch.mem().range(i * bytes, bytes)).collect::<Result<Vec<_>>>()?;
        let recvs = others.iter().zip(&slots).map(|(&p, &b)| comm.recv(p, TAG_NODE_UP, b));
        ferrocoll_core::engine::try_join_all(recvs).await?;
        let mut srcs = vec![o.src];
        srcs.extend(slots);
        comm.reduce(dst, &srcs, reducer.step(count, one_node))?;
    }

    // Leaders' phase: a knomial allreduce among the leaders, in node order.
    if !one_node {
        let me = leaders.iter().position(|l| *l == rank).ok_or_else(|| {
            Error::internal(format!("rank {rank} leads its node but is not among the leaders {leaders:?}"))
        })?;
        let peer = |m: usize| leaders[m];
        super::knomial::exchange_among(&comm, leaders.len(), me, peer, dst, count, reducer, TAG_LEADERS).await?;
    }

    // Node phase down: every member gets the leader's result.
    let sends = others.iter().map(|&p| comm.isend(p, TAG_NODE_DOWN, dst)).collect::<Result<Vec<_>>>()?;
    ferrocoll_core::engine::try_join_all(sends).await?;
    Ok(())
}
