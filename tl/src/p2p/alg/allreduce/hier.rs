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
//! vectors (no reduce-scatter/allgather split for large messages); switch
//! groups are not a third level. It is chosen only by name (`allreduce:@hier`).

use ferrocoll_core::args::{Allreduce, Reducer};
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::{KnomialExchange, Role};

const TAG_NODE_UP: u32 = 0;
const TAG_TO_PROXY: u32 = 1;
const TAG_FROM_PROXY: u32 = 2;
const TAG_NODE_DOWN: u32 = 3;
const TAG_STEP: u32 = 4;

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

    // Leaders' phase: a knomial allreduce among the leaders, in node order.
    if !one_node {
        let me = leaders.iter().position(|l| *l == rank).ok_or_else(|| {
            Error::internal(format!("rank {rank} leads its node but is not among the leaders {leaders:?}"))
        })?;
        leaders_allreduce(&comm, &leaders, me, dst, count, reducer).await?;
    }

    // Node phase down: every member gets the leader's result.
    let sends = others.iter().map(|&p| comm.isend(p, TAG_NODE_DOWN, dst)).collect::<Result<Vec<_>>>()?;
    ferrocoll_core::engine::try_join_all(sends).await?;
    Ok(())
}

/// Knomial allreduce of `dst` among `leaders` (team ranks, in node order);
/// this rank is `leaders[me]`. The same exchange as `knomial.rs`, with
/// pattern indices mapped to the leaders' team ranks.
async fn leaders_allreduce(
    comm: &Comm,
    leaders: &[usize],
    me: usize,
    dst: MemRef,
    count: usize,
    reducer: Reducer,
) -> Result<()> {
    let pat = KnomialExchange::new(leaders.len(), comm.config().allreduce_kn_radix);
    let bytes = dst.len();
    let role = pat.role(me);
    match &role {
        Role::Extra(proxy) => {
            comm.send(leaders[*proxy], TAG_TO_PROXY, dst).await?;
            return comm.recv(leaders[*proxy], TAG_FROM_PROXY, dst).await;
        }
        Role::Proxy(extras) => {
            let scratch = comm.scratch(bytes * extras.len())?;
            let slots = (0..extras.len()).map(|i| scratch.mem().range(i * bytes, bytes)).collect::<Result<Vec<_>>>()?;
            let recvs = extras.iter().zip(&slots).map(|(&e, &b)| comm.recv(leaders[e], TAG_TO_PROXY, b));
            ferrocoll_core::engine::try_join_all(recvs).await?;
            // The proxy's index is below its extras': node order is proxy first.
            let mut srcs = vec![dst];
            srcs.extend(slots);
            comm.reduce(dst, &srcs, reducer.step(count, pat.steps == 0))?;
        }
        Role::Core => {}
    }
    if pat.steps > 0 {
        let scratch = comm.scratch(bytes * (pat.radix - 1))?;
        for step in 0..pat.steps {
            let mut slot = 0;
            let mut recvs = Vec::with_capacity(pat.radix - 1);
            let mut srcs = Vec::with_capacity(pat.radix);
            for m in pat.group(me, step) {
                if m == me {
                    srcs.push(dst);
                } else {
                    let buf = scratch.mem().range(slot * bytes, bytes)?;
                    slot += 1;
                    recvs.push((leaders[m], buf));
                    srcs.push(buf);
                }
            }
            comm.exchange(TAG_STEP + step as u32, dst, &recvs).await?;
            comm.reduce(dst, &srcs, reducer.step(count, step + 1 == pat.steps))?;
        }
    }
    if let Role::Proxy(extras) = &role {
        let sends = extras.iter().map(|&e| comm.isend(leaders[e], TAG_FROM_PROXY, dst)).collect::<Result<Vec<_>>>()?;
        ferrocoll_core::engine::try_join_all(sends).await?;
    }
    Ok(())
}
