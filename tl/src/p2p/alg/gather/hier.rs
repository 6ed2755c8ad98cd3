//! Topology-aware gather(v) (Kandalla et al., IPDPS 2010): blocks go up the
//! hierarchy (`pattern::hier`), each level's leader gathering its members'
//! spans in member order, so a node's blocks cross the inter-node link once
//! (in one message from its leader), and a switch group's cross the top
//! switch once. The root leads its node, its group and the top, so nothing
//! takes an extra hop. Uneven and non-contiguous nodes need nothing special:
//! a member's message holds the blocks of its span, in span order, and both
//! ends know the span from the layout.
//!
//! Each leader receives all its members' messages at once into one scratch
//! (its own span first copied in place), then sends that scratch on as one
//! message; the root finally copies every rank's block into dst. Gather's
//! blocks are all as long as this rank's src; gatherv's are known only to
//! their rank and the root, so there each message is preceded by one giving
//! its blocks' sizes ([`sizes`]). Not pipelined: a leader forwards after
//! its whole span has arrived. Chosen by name (`gather:@hier`, `gatherv:@hier`).

use ferrocoll_core::args::Gather;
use ferrocoll_core::backend::Scratch;
use ferrocoll_core::engine::{try_join_all, try_join2};
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::hier::levels;

const TAG_DATA: u32 = 0;
const TAG_SIZES: u32 = 1;

/// Gather: every block is as long as this rank's.
pub(crate) async fn run(comm: Comm, o: Gather) -> Result<()> {
    gather(comm, o, false).await
}

/// Gatherv: block sizes travel with the blocks.
pub(crate) async fn run_v(comm: Comm, o: Gather) -> Result<()> {
    gather(comm, o, true).await
}

async fn gather(comm: Comm, o: Gather, v: bool) -> Result<()> {
    let rank = comm.rank();
    let block = o.src.len();
    // What this rank holds so far: its ranks, their blocks' sizes, the blocks back to back.
    let mut held: Vec<usize> = vec![rank];
    let mut held_sizes = vec![block];
    let mut buf = o.src;
    let mut _scratch: Option<Scratch> = None;
    for (i, level) in levels(comm.layout(), rank, Some(o.root))?.iter().enumerate() {
        if level.trivial() {
            continue;
        }
        let comm = comm.phase(i as u32);
        let leader = level.leader_rank();
        if !level.leads() {
            if !v {
                return comm.send(leader, TAG_DATA, buf).await;
            }
            let header = sizes::encode(&held_sizes);
            // SAFETY: `header` lives, unmodified, until this send completes (awaited here).
            let h = unsafe { MemRef::from_slice(&header) };
            let (hs, ds) = (comm.isend(leader, TAG_SIZES, h)?, comm.isend(leader, TAG_DATA, buf)?);
            return try_join2(hs, ds).await.map(|_| ());
        }
        // Every member's blocks' sizes (mine: what I hold).
        let member_sizes: Vec<Vec<usize>> = if v {
            let mut headers: Vec<Vec<u8>> = level.spans.iter().map(|s| vec![0u8; s.len() * 8]).collect();
            {
                let mut recvs = Vec::new();
                for (m, h) in headers.iter_mut().enumerate().filter(|(m, _)| *m != level.me) {
                    // SAFETY: `h` lives, and nothing else touches it, until the receive completes (awaited below).
                    recvs.push(comm.recv(level.members[m], TAG_SIZES, unsafe { MemRef::from_mut_slice(h) }));
                }
                try_join_all(recvs).await?;
            }
            let mut out = Vec::with_capacity(headers.len());
            for (m, h) in headers.iter().enumerate() {
                out.push(if m == level.me { held_sizes.clone() } else { sizes::decode(h)? });
            }
            out
        } else {
            level.spans.iter().map(|s| vec![block; s.len()]).collect()
        };
        let totals = member_sizes.iter().map(|s| sizes::sum(s.iter().copied())).collect::<Result<Vec<_>>>()?;
        let acc = comm.scratch(sizes::sum(totals.iter().copied())?)?;
        let mut recvs = Vec::with_capacity(level.members.len());
        let mut at = 0;
        for (m, &len) in totals.iter().enumerate() {
            let slot = acc.mem().range(at, len)?;
            at += len;
            if m == level.me {
                comm.copy(slot, buf)?;
            } else {
                recvs.push(comm.recv(level.members[m], TAG_DATA, slot));
            }
        }
        try_join_all(recvs).await?;
        held = level.all_ranks();
        held_sizes = member_sizes.concat();
        buf = acc.mem();
        _scratch = Some(acc);
    }
    let dst = o.dst.as_ref().ok_or_else(|| Error::internal(format!("gather: rank {rank} ended as the root")))?;
    if held.len() != comm.size() {
        return Err(Error::internal(format!("gather: the root holds {} of {} blocks", held.len(), comm.size())));
    }
    let mut at = 0;
    for (&r, &len) in held.iter().zip(&held_sizes) {
        let to = dst.block(r)?;
        if to.len() != len {
            return Err(Error::invalid_param(format!(
                "gatherv: rank {r} sent {len} bytes, the root's count for it is {} bytes",
                to.len()
            )));
        }
        comm.copy(to, buf.range(at, len)?)?;
        at += len;
    }
    Ok(())
}

/// Block sizes as a message: little-endian u64s.
pub(crate) mod sizes {
    use ferrocoll_core::{Error, Result};

    pub(crate) fn encode(sizes: &[usize]) -> Vec<u8> {
        sizes.iter().flat_map(|&s| (s as u64).to_le_bytes()).collect()
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<usize>> {
        bytes
            .chunks_exact(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w.copy_from_slice(c);
                usize::try_from(u64::from_le_bytes(w))
                    .map_err(|_| Error::invalid_param("a block size received overflows usize"))
            })
            .collect()
    }

    pub(crate) fn sum(it: impl IntoIterator<Item = usize>) -> Result<usize> {
        it.into_iter().try_fold(0usize, |a, b| {
            a.checked_add(b).ok_or_else(|| Error::invalid_param(format!("{a} + {b} bytes overflows")))
        })
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn round_trip() {
            let v = vec![0, 7, usize::MAX >> 1, 4099];
            assert_eq!(super::decode(&super::encode(&v)).unwrap(), v);
            assert!(super::sum([usize::MAX, 1]).is_err());
        }
    }
}
