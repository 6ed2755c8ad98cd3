//! SHARP at the node-leader level: the node's vectors reduced at its
//! leader (the lowest rank of the node, over the TL's router: shared memory
//! within a host), one SHARP allreduce among the node leaders, and the
//! result handed back within the node — whole to every member (allreduce)
//! or each member's block (reduce_scatter).
//!
//! When the library refuses the leaders' allreduce at post, the leaders run
//! p2p's knomial exchange among themselves instead: the members, already
//! waiting for their leader, see no difference. (A refusal must be the same
//! on every leader, as SHARP's group resources are.)
//!
//! Limits: the node phases are linear at the leader, and the whole vector
//! crosses the network for reduce_scatter (a reduce_scatter among leaders
//! would need every node's blocks back to back).

use std::sync::atomic::Ordering;

use ferrocoll_core::args::{Allreduce, ReduceScatter, Reducer};
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, MemRef, Result};

use super::{desc, reduce_spec};
use crate::sharp::req::{On, Op, post};
use crate::sharp::sys;
use crate::sharp::team::Exec;

const TAG_UP: u32 = 0;
const TAG_DOWN: u32 = 1;
/// The leaders' p2p fallback uses the tags from here on.
const TAG_LEADERS: u32 = 2;

/// This rank's node: its members and leader.
fn node(x: &Exec) -> Result<(Vec<usize>, usize)> {
    let sub = x.comm.layout().subgroups(x.comm.rank(), None)?;
    Ok((sub.node, sub.node_leader))
}

/// At the leader: `acc` = the node's vectors combined in rank order (its own is `own`).
async fn node_reduce(x: &Exec, members: &[usize], own: MemRef, acc: MemRef, count: usize, r: Reducer) -> Result<()> {
    let me = x.comm.rank();
    let others: Vec<usize> = members.iter().copied().filter(|&m| m != me).collect();
    if others.is_empty() {
        return x.comm.copy(acc, own);
    }
    let bytes = own.len();
    let scratch = x.comm.scratch(bytes * others.len())?;
    let slots = (0..others.len()).map(|i| scratch.mem().range(i * bytes, bytes)).collect::<Result<Vec<_>>>()?;
    try_join_all(others.iter().zip(&slots).map(|(&p, &b)| x.comm.recv(p, TAG_UP, b))).await?;
    let mut srcs = vec![own];
    srcs.extend(slots);
    x.comm.reduce(acc, &srcs, r.step(count, false))
}

/// At a leader: `buf` (every node's partial result) allreduced among the leaders, in place.
async fn leaders_allreduce(x: &Exec, buf: MemRef, count: usize, r: Reducer) -> Result<()> {
    let attempt = (|| {
        let (d, reg) = desc(x, buf)?;
        let spec = reduce_spec(x, (d, buf), d, count, r, 0)?;
        post(x, On::Leaders, Op::Allreduce(spec), vec![reg])
    })();
    match attempt {
        Ok(req) => req.await,
        Err(e) if sys::is_refusal(&e) => {
            if x.team.trace {
                ferrocoll_core::log::write(
                    ferrocoll_core::log::Level::Info,
                    format_args!(
                        "sharp: {} leaders' step refused ({}); p2p knomial among leaders",
                        x.what,
                        e.context()
                    ),
                );
            }
            let leaders: Vec<usize> = x.comm.layout().nodes().iter().filter_map(|n| n.first().copied()).collect();
            let me = leaders
                .iter()
                .position(|&l| l == x.comm.rank())
                .ok_or_else(|| Error::internal(format!("rank {} is not among the leaders", x.comm.rank())))?;
            let comm = x.comm.clone();
            crate::p2p::alg::allreduce::knomial::exchange_among(
                &comm,
                leaders.len(),
                me,
                |m| leaders[m],
                buf,
                count,
                r,
                TAG_LEADERS,
            )
            .await
        }
        Err(e) => Err(e),
    }
}

pub(super) async fn allreduce(x: Exec, o: Allreduce) -> Result<()> {
    // Messages moved before SHARP is asked: never fall back as a whole.
    x.posted.store(true, Ordering::Relaxed);
    let (members, leader) = node(&x)?;
    if x.comm.rank() != leader {
        x.comm.send(leader, TAG_UP, o.src).await?;
        return x.comm.recv(leader, TAG_DOWN, o.dst).await;
    }
    node_reduce(&x, &members, o.src, o.dst, o.count, o.reducer).await?;
    leaders_allreduce(&x, o.dst, o.count, o.reducer).await?;
    let me = x.comm.rank();
    let sends = members.iter().filter(|&&m| m != me).map(|&m| x.comm.isend(m, TAG_DOWN, o.dst));
    try_join_all(sends.collect::<Result<Vec<_>>>()?).await.map(|_| ())
}

pub(super) async fn reduce_scatter(x: Exec, o: ReduceScatter) -> Result<()> {
    x.posted.store(true, Ordering::Relaxed);
    let (members, leader) = node(&x)?;
    let me = x.comm.rank();
    if me != leader {
        x.comm.send(leader, TAG_UP, o.src.mem).await?;
        return x.comm.recv(leader, TAG_DOWN, o.dst).await;
    }
    let whole = x.comm.scratch(o.src.mem.len())?;
    node_reduce(&x, &members, o.src.mem, whole.mem(), o.count, o.reducer).await?;
    leaders_allreduce(&x, whole.mem(), o.count, o.reducer).await?;
    let block_of = |r: usize| -> Result<MemRef> {
        let b = o.src.block(r)?;
        whole.mem().range(super::offset_in(o.src.mem, b)?, b.len())
    };
    let sends = members
        .iter()
        .filter(|&&m| m != me)
        .map(|&m| x.comm.isend(m, TAG_DOWN, block_of(m)?))
        .collect::<Result<Vec<_>>>()?;
    try_join_all(sends).await?;
    x.comm.copy(o.dst, block_of(me)?)
}
