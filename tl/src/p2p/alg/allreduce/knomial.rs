//! Knomial allreduce (recursive k-ing).
//!
//! The first `full = radix^steps` ranks exchange whole vectors with the
//! other members of their group at each step and reduce them, so after the
//! last step every one of them holds the full reduction. Ranks beyond `full`
//! hand their vector to a proxy first and get the result back at the end.
//! Every member of a group combines the same partial results in rank order,
//! so every rank ends with identical bits.

use ferrocoll_core::args::{Allreduce, Reducer};
use ferrocoll_core::{MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::{KnomialExchange, Role};

/// Tags of one exchange, from its first: to the proxy, from the proxy, then one per step.
const TAGS_BEFORE_STEPS: u32 = 2;

pub(crate) async fn run(comm: Comm, o: Allreduce) -> Result<()> {
    comm.copy(o.dst, o.src)?;
    let (rank, size) = (comm.rank(), comm.size());
    exchange_among(&comm, size, rank, |m| m, o.dst, o.count, o.reducer, 0).await
}

/// The knomial allreduce of `dst` (already holding this rank's input) among
/// `n` members, this rank being member `me`; `peer(m)` is member m's team
/// rank. Uses the tags from `tag0` on (two, then one per step). Also the
/// leaders' level of the hierarchical allreduce (`hier.rs`).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn exchange_among(
    comm: &Comm,
    n: usize,
    me: usize,
    peer: impl Fn(usize) -> usize,
    dst: MemRef,
    count: usize,
    reducer: Reducer,
    tag0: u32,
) -> Result<()> {
    let (to_proxy, from_proxy, first_step) = (tag0, tag0 + 1, tag0 + TAGS_BEFORE_STEPS);
    let pat = KnomialExchange::new(n, comm.config().allreduce_kn_radix);
    let bytes = dst.len();
    let role = pat.role(me);
    match &role {
        Role::Extra(proxy) => {
            comm.send(peer(*proxy), to_proxy, dst).await?;
            return comm.recv(peer(*proxy), from_proxy, dst).await;
        }
        Role::Proxy(extras) => {
            let scratch = comm.scratch(bytes * extras.len())?;
            let slots = (0..extras.len()).map(|i| scratch.mem().range(i * bytes, bytes)).collect::<Result<Vec<_>>>()?;
            let recvs: Vec<(usize, MemRef)> = extras.iter().map(|&e| peer(e)).zip(slots.iter().copied()).collect();
            ferrocoll_core::engine::try_join_all(recvs.iter().map(|&(p, b)| comm.recv(p, to_proxy, b))).await?;
            // The proxy's index is below its extras': member order is proxy first.
            let mut srcs = vec![dst];
            srcs.extend(slots);
            comm.reduce(dst, &srcs, reducer.step(count, pat.steps == 0))?;
        }
        Role::Core => {}
    }
    if pat.steps > 0 {
        let scratch = comm.scratch(bytes * (pat.radix - 1))?;
        for step in 0..pat.steps {
            let group = pat.group(me, step);
            let mut slot = 0;
            let mut recvs = Vec::with_capacity(group.len() - 1);
            let mut srcs = Vec::with_capacity(group.len());
            for &m in &group {
                if m == me {
                    srcs.push(dst);
                } else {
                    let buf = scratch.mem().range(slot * bytes, bytes)?;
                    slot += 1;
                    recvs.push((peer(m), buf));
                    srcs.push(buf);
                }
            }
            comm.exchange(first_step + step as u32, dst, &recvs).await?;
            comm.reduce(dst, &srcs, reducer.step(count, step + 1 == pat.steps))?;
        }
    }
    if let Role::Proxy(extras) = &role {
        let sends = extras.iter().map(|&e| comm.isend(peer(e), from_proxy, dst)).collect::<Result<Vec<_>>>()?;
        ferrocoll_core::engine::try_join_all(sends).await?;
    }
    Ok(())
}
