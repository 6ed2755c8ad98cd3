//! Topology-aware gather (Kandalla et al., IPDPS 2010): blocks go up the
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
//! blocks are all as long as this rank's src. Not pipelined: a leader
//! forwards after its whole span has arrived. Chosen by name (`gather:@hier`).

use ferrocoll_core::args::Gather;
use ferrocoll_core::backend::Scratch;
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::hier::levels;

pub(crate) async fn run(comm: Comm, o: Gather) -> Result<()> {
    let rank = comm.rank();
    let block = o.src.len();
    let bytes = |ranks: usize| {
        ranks.checked_mul(block).ok_or_else(|| Error::invalid_param(format!("gather: {ranks} blocks of {block} bytes")))
    };
    // What this rank holds so far: its ranks and their blocks, back to back.
    let mut held: Vec<usize> = vec![rank];
    let mut buf = o.src;
    let mut scratch: Option<Scratch> = None;
    for (i, level) in levels(comm.layout(), rank, Some(o.root))?.iter().enumerate() {
        if level.trivial() {
            continue;
        }
        let comm = comm.phase(i as u32);
        if !level.leads() {
            return comm.send(level.leader_rank(), 0, buf).await;
        }
        let acc = comm.scratch(bytes(level.spans.iter().map(Vec::len).sum())?)?;
        let mut recvs = Vec::with_capacity(level.members.len());
        let mut at = 0;
        for (m, span) in level.spans.iter().enumerate() {
            let slot = acc.mem().range(at, bytes(span.len())?)?;
            at += slot.len();
            if m == level.me {
                comm.copy(slot, buf)?;
            } else {
                recvs.push(comm.recv(level.members[m], 0, slot));
            }
        }
        try_join_all(recvs).await?;
        held = level.all_ranks();
        buf = acc.mem();
        scratch = Some(acc);
    }
    let dst = o.dst.as_ref().ok_or_else(|| Error::internal(format!("gather: rank {rank} ended as the root")))?;
    if held.len() != comm.size() {
        return Err(Error::internal(format!("gather: the root holds {} of {} blocks", held.len(), comm.size())));
    }
    for (k, &r) in held.iter().enumerate() {
        comm.copy(dst.block(r)?, buf.range(bytes(k)?, block)?)?;
    }
    drop(scratch);
    Ok(())
}
