//! Knomial barrier: the allreduce pattern with empty messages.

use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{MemRef, MemType, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::{KnomialExchange, Role};

const TAG_TO_PROXY: u32 = 0;
const TAG_FROM_PROXY: u32 = 1;
const TAG_STEP: u32 = 2;

pub(crate) async fn run(comm: Comm) -> Result<()> {
    knomial_sync(&comm, comm.config().barrier_kn_radix).await
}

/// Return only after every rank of the team has called it.
pub(crate) async fn knomial_sync(comm: &Comm, radix: usize) -> Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    let none = MemRef::empty(MemType::Host);
    let pat = KnomialExchange::new(size, radix);
    let role = pat.role(rank);
    match &role {
        Role::Extra(proxy) => {
            comm.send(*proxy, TAG_TO_PROXY, none).await?;
            return comm.recv(*proxy, TAG_FROM_PROXY, none).await;
        }
        Role::Proxy(extras) => try_join_all(extras.iter().map(|&e| comm.recv(e, TAG_TO_PROXY, none))).await?,
        Role::Core => {}
    }
    for step in 0..pat.steps {
        let peers: Vec<(usize, MemRef)> =
            pat.group(rank, step).into_iter().filter(|&m| m != rank).map(|m| (m, none)).collect();
        comm.exchange(TAG_STEP + step as u32, none, &peers).await?;
    }
    if let Role::Proxy(extras) = &role {
        let sends = extras.iter().map(|&e| comm.isend(e, TAG_FROM_PROXY, none)).collect::<Result<Vec<_>>>()?;
        try_join_all(sends).await?;
    }
    Ok(())
}
