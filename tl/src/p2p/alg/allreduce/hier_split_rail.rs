//! Split-rail hierarchical allreduce (UCC CL/HIER's `split_rail`), for
//! large vectors on nodes of equal size: a reduce-scatter within each node
//! (member p of a node ends with chunk p reduced over its node), an
//! allreduce of chunk p among the p-th members of every node (a *rail*:
//! the knomial exchange, `UCC_TL_P2P_ALLREDUCE_KN_RADIX`), and an allgather
//! within each node. Each rank sends about one vector within its node and
//! 1/n of it across nodes (n ranks a node), where the leader-based `@hier`
//! moves whole vectors through one rank: every rank's link is busy, not
//! only the leader's.
//!
//! Nodes of different sizes have no rails: there it runs `@hier` (which
//! also takes the switch level). Identical bits: chunk p is combined in
//! member order within a node, then by the rail's exchange, identically on
//! the rail's ranks; the allgather only copies. Partial results are
//! finished (avg's division) in the rail exchange (within the node when
//! there is one node). The node phases are linear (every member talks to
//! every other): nodes hold few ranks. Chosen by name (`allreduce:@split_rail`).

use ferrocoll_core::args::{Allreduce, block_count, block_offset};
use ferrocoll_core::engine::{try_join_all, try_join2};
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;

const PHASE_SCATTER: u32 = 0;
const PHASE_RAIL: u32 = 1;
const PHASE_GATHER: u32 = 2;

pub(crate) async fn run(comm: Comm, o: Allreduce) -> Result<()> {
    let layout = comm.layout();
    if !layout.is_even() {
        return super::hier::run(comm, o).await;
    }
    let rank = comm.rank();
    let nodes = layout.nodes();
    let (a, p) = nodes
        .iter()
        .enumerate()
        .find_map(|(a, n)| n.iter().position(|&r| r == rank).map(|p| (a, p)))
        .ok_or_else(|| Error::internal(format!("allreduce: rank {rank} is in no node")))?;
    let node = &nodes[a];
    let n = node.len();
    let rail: Vec<usize> = nodes.iter().map(|nd| nd[p]).collect();
    let (count, reducer) = (o.count, o.reducer);
    let es = reducer.elem_size;
    let chunk = |buf: MemRef, q: usize| -> Result<MemRef> {
        let overflow = || Error::invalid_param(format!("allreduce: chunk {q} of {count} elements of {es} bytes"));
        let off = block_offset(count, n, q).checked_mul(es).ok_or_else(overflow)?;
        let len = block_count(count, n, q).checked_mul(es).ok_or_else(overflow)?;
        buf.range(off, len)
    };
    let mine = chunk(o.dst, p)?;
    let c_p = block_count(count, n, p);
    let others: Vec<usize> = (0..n).filter(|&q| q != p).collect();

    // Reduce-scatter in the node: chunk q of my input to member q; chunk p from every member.
    let c = comm.phase(PHASE_SCATTER);
    let slots = comm.scratch(mine.len().checked_mul(others.len()).ok_or_else(|| Error::invalid_param("overflow"))?)?;
    let bufs = (0..others.len()).map(|i| slots.mem().range(i * mine.len(), mine.len())).collect::<Result<Vec<_>>>()?;
    let sends = others.iter().map(|&q| c.isend(node[q], 0, chunk(o.src, q)?)).collect::<Result<Vec<_>>>()?;
    let recvs = others.iter().zip(&bufs).map(|(&q, &b)| c.recv(node[q], 0, b));
    try_join2(try_join_all(recvs), try_join_all(sends)).await?;
    // In member order (identical bits on every rail).
    let mut srcs = Vec::with_capacity(n);
    let mut from = bufs.iter();
    for q in 0..n {
        srcs.push(if q == p { chunk(o.src, p)? } else { *from.next().ok_or_else(|| Error::internal("slots"))? });
    }
    comm.reduce(mine, &srcs, reducer.step(c_p, rail.len() == 1))?;

    // Allreduce of chunk p along the rail.
    if rail.len() > 1 {
        let peer = |m: usize| rail[m];
        super::knomial::exchange_among(&comm.phase(PHASE_RAIL), rail.len(), a, peer, mine, c_p, reducer, 0).await?;
    }

    // Allgather in the node.
    let c = comm.phase(PHASE_GATHER);
    let sends = others.iter().map(|&q| c.isend(node[q], 0, mine)).collect::<Result<Vec<_>>>()?;
    let recvs = others.iter().map(|&q| Ok(c.recv(node[q], 0, chunk(o.dst, q)?))).collect::<Result<Vec<_>>>()?;
    try_join2(try_join_all(recvs), try_join_all(sends)).await.map(|_| ())
}
