//! Rabenseifner allreduce (sra_knomial): knomial reduce-scatter, then the
//! knomial allgather that retraces it.
//!
//! Ranks beyond the largest power of the radix (`full`) hand their vector
//! to a proxy (`rank % full`) and wait. On the core ranks the recursive
//! k-halving reduce-scatter ([`knomial_reduce_scatter`]) leaves on rank c
//! the final values of its range (an even split of the vector over the core
//! ranks; ranges may be empty when the count is below `full`), computed by
//! rank c alone and written to its place in `dst`. The allgather walks the
//! same steps backwards: at step s each member of the group sends the part
//! of the step's range it now holds whole to the others and receives
//! theirs, so after step 0 every core rank holds the whole vector. Proxies
//! then send it to their extras. Every element is reduced once, by one rank,
//! and copied everywhere else, so all ranks end with identical bits.
//!
//! The reduce-scatter reads `src` and writes only the ranges it keeps, and
//! the allgather fills the rest, so `src` is never copied to `dst`; in place,
//! `dst` is the input. Moves about 2(P-1)/P of the vector per rank in
//! 2·log_radix(full) steps (plus one each way for extras).

use ferrocoll_core::args::Allreduce;
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::alg::reduce_scatter::knomial::{elems, knomial_reduce_scatter, step_parts};
use crate::p2p::pattern::{KnomialExchange, Role};

/// In phase 1: the whole result from a proxy to its extras.
const TAG_FROM_PROXY: u32 = 0;
/// In phase 1: allgather step `s` uses `TAG_STEP + s`.
const TAG_STEP: u32 = 1;

pub(crate) async fn run(comm: Comm, o: Allreduce) -> Result<()> {
    let (rank, size, dst) = (comm.rank(), comm.size(), o.dst);
    let pat = KnomialExchange::new(size, comm.config().allreduce_sra_kn_radix);
    knomial_reduce_scatter(&comm, &o.reducer, &pat, o.src, dst, o.count).await?;
    let comm = comm.phase(1);
    match pat.role(rank) {
        Role::Extra(proxy) => comm.recv(proxy, TAG_FROM_PROXY, dst).await,
        role => {
            allgather(&comm, &pat, dst, o.count, o.reducer.elem_size).await?;
            if let Role::Proxy(extras) = role {
                let sends = extras.iter().map(|&e| comm.isend(e, TAG_FROM_PROXY, dst)).collect::<Result<Vec<_>>>()?;
                try_join_all(sends).await?;
            }
            Ok(())
        }
    }
}

/// The reduce-scatter's steps backwards on core rank `comm.rank()`, which
/// holds its own range of `buf` (`count` elements of `es` bytes): at each
/// step it sends what it holds to its group and receives the group's parts,
/// so that it holds the step's whole range.
async fn allgather(comm: &Comm, pat: &KnomialExchange, buf: MemRef, count: usize, es: usize) -> Result<()> {
    let rank = comm.rank();
    for s in (0..pat.steps).rev() {
        let parts = step_parts(count, pat, rank, s);
        let level = pat.steps - 1 - s;
        let held = elems(buf, parts[pat.digit(rank, level)], es)?;
        let recvs = pat
            .group(rank, level)
            .into_iter()
            .enumerate()
            .filter(|&(_, m)| m != rank)
            .map(|(j, m)| Ok((m, elems(buf, parts[j], es)?)))
            .collect::<Result<Vec<_>>>()?;
        comm.exchange(TAG_STEP + s as u32, held, &recvs).await?;
    }
    Ok(())
}
