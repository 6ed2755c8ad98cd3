//! Knomial allreduce (recursive k-ing).
//!
//! The first `full = radix^steps` ranks exchange whole vectors with the
//! other members of their group at each step and reduce them, so after the
//! last step every one of them holds the full reduction. Ranks beyond `full`
//! hand their vector to a proxy first and get the result back at the end.
//! Every member of a group combines the same partial results in rank order,
//! so every rank ends with identical bits.

use ferrocoll_core::args::Allreduce;
use ferrocoll_core::{MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::{KnomialExchange, Role};

const TAG_TO_PROXY: u32 = 0;
const TAG_FROM_PROXY: u32 = 1;
const TAG_STEP: u32 = 2;

pub(crate) async fn run(comm: Comm, o: Allreduce) -> Result<()> {
    let (dst, count, reducer) = (o.dst, o.count, o.reducer);
    comm.copy(dst, o.src)?;
    let (rank, size) = (comm.rank(), comm.size());
    let pat = KnomialExchange::new(size, comm.config().allreduce_kn_radix);
    let bytes = dst.len();
    let role = pat.role(rank);
    match &role {
        Role::Extra(proxy) => {
            comm.send(*proxy, TAG_TO_PROXY, dst).await?;
            return comm.recv(*proxy, TAG_FROM_PROXY, dst).await;
        }
        Role::Proxy(extras) => {
            let scratch = comm.scratch(bytes * extras.len())?;
            let slots = (0..extras.len()).map(|i| scratch.mem().range(i * bytes, bytes)).collect::<Result<Vec<_>>>()?;
            let recvs: Vec<(usize, MemRef)> = extras.iter().copied().zip(slots.iter().copied()).collect();
            ferrocoll_core::engine::try_join_all(recvs.iter().map(|&(p, b)| comm.recv(p, TAG_TO_PROXY, b))).await?;
            // The proxy's rank is below its extras': rank order is proxy first.
            let mut srcs = vec![dst];
            srcs.extend(slots);
            comm.reduce(dst, &srcs, reducer.step(count, pat.steps == 0))?;
        }
        Role::Core => {}
    }
    if pat.steps > 0 {
        let scratch = comm.scratch(bytes * (pat.radix - 1))?;
        for step in 0..pat.steps {
            let group = pat.group(rank, step);
            let mut slot = 0;
            let mut recvs = Vec::with_capacity(group.len() - 1);
            let mut srcs = Vec::with_capacity(group.len());
            for &m in &group {
                if m == rank {
                    srcs.push(dst);
                } else {
                    let buf = scratch.mem().range(slot * bytes, bytes)?;
                    slot += 1;
                    recvs.push((m, buf));
                    srcs.push(buf);
                }
            }
            comm.exchange(TAG_STEP + step as u32, dst, &recvs).await?;
            comm.reduce(dst, &srcs, reducer.step(count, step + 1 == pat.steps))?;
        }
    }
    if let Role::Proxy(extras) = &role {
        let sends = extras.iter().map(|&e| comm.isend(e, TAG_FROM_PROXY, dst)).collect::<Result<Vec<_>>>()?;
        ferrocoll_core::engine::try_join_all(sends).await?;
    }
    Ok(())
}
