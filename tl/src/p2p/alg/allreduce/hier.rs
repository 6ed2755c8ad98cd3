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
//! Identical bits: a leader combines its node's vectors in rank order, the
//! first leader (rank 0's node) combines the leaders' partial results in
//! node order, and every other rank receives that one result.
//!
//! Limits of this first version: the leaders' phase is linear (the first
//! leader receives from every other one and sends the result back), so it
//! suits a few nodes; the node phases move whole vectors (no
//! reduce-scatter/allgather split for large messages); switch groups are
//! not a third level. It is chosen only by name (`allreduce:@hier`).

use ferrocoll_core::args::Allreduce;
use ferrocoll_core::{MemRef, Result};

use crate::p2p::Comm;

const TAG_NODE_UP: u32 = 0;
const TAG_LEADERS_UP: u32 = 1;
const TAG_LEADERS_DOWN: u32 = 2;
const TAG_NODE_DOWN: u32 = 3;

pub(crate) async fn run(comm: Comm, o: Allreduce) -> Result<()> {
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

    // Leaders' phase: the first leader combines the partials in node order.
    if !one_node {
        let first = leaders[0];
        if rank == first {
            let rest = &leaders[1..];
            let scratch = comm.scratch(bytes * rest.len())?;
            let slots = (0..rest.len()).map(|i| scratch.mem().range(i * bytes, bytes)).collect::<Result<Vec<_>>>()?;
            let recvs = rest.iter().zip(&slots).map(|(&p, &b)| comm.recv(p, TAG_LEADERS_UP, b));
            ferrocoll_core::engine::try_join_all(recvs).await?;
            let mut srcs: Vec<MemRef> = vec![dst];
            srcs.extend(slots);
            comm.reduce(dst, &srcs, reducer.last(count))?;
            let sends = rest.iter().map(|&p| comm.isend(p, TAG_LEADERS_DOWN, dst)).collect::<Result<Vec<_>>>()?;
            ferrocoll_core::engine::try_join_all(sends).await?;
        } else {
            comm.send(first, TAG_LEADERS_UP, dst).await?;
            comm.recv(first, TAG_LEADERS_DOWN, dst).await?;
        }
    }

    // Node phase down: every member gets the leader's result.
    let sends = others.iter().map(|&p| comm.isend(p, TAG_NODE_DOWN, dst)).collect::<Result<Vec<_>>>()?;
    ferrocoll_core::engine::try_join_all(sends).await?;
    Ok(())
}
