//! Topology-aware scatter (Kandalla et al., IPDPS 2010), gather's mirror:
//! the root packs its blocks in the order of the hierarchy's spans
//! (`pattern::hier`), then each level's leader sends every member its span
//! in one message, from the top down, so a node's blocks cross the
//! inter-node link once and a switch group's cross the top switch once. The
//! root leads its node, its group and the top (no extra hop). Uneven and
//! non-contiguous nodes need nothing special: a span's blocks travel in
//! span order, and both ends know the span from the layout.
//!
//! A leader's sends all start at once; its own span stays where it is (a
//! range of what it received) for the level below. Scatter's blocks are all
//! as long as this rank's dst. Not pipelined: a leader forwards after its
//! whole span has arrived. Chosen by name (`scatter:@hier`).

use ferrocoll_core::args::Scatter;
use ferrocoll_core::backend::Scratch;
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::hier::levels;

pub(crate) async fn run(comm: Comm, o: Scatter) -> Result<()> {
    let rank = comm.rank();
    let block = o.dst.len();
    let bytes = |ranks: usize| {
        ranks
            .checked_mul(block)
            .ok_or_else(|| Error::invalid_param(format!("scatter: {ranks} blocks of {block} bytes")))
    };
    let levels = levels(comm.layout(), rank, Some(o.root))?;
    let active: Vec<(usize, _)> = levels.iter().enumerate().filter(|(_, l)| !l.trivial()).rev().collect();
    // What this rank holds: its ranks' blocks back to back (at the root, packed from src).
    let mut held: Option<(Scratch, MemRef)> = None;
    if let Some(src) = &o.src {
        let ranks = active.first().map_or_else(|| vec![rank], |(_, l)| l.all_ranks());
        let packed = comm.scratch(bytes(ranks.len())?)?;
        for (k, &r) in ranks.iter().enumerate() {
            comm.copy(packed.mem().range(bytes(k)?, block)?, src.block(r)?)?;
        }
        let mem = packed.mem();
        held = Some((packed, mem));
    }
    for (i, level) in active {
        let comm = comm.phase(i as u32);
        // Where each member's span sits in the leader's buffer.
        let mut at = 0;
        let mut slots = Vec::with_capacity(level.spans.len());
        for span in &level.spans {
            let len = bytes(span.len())?;
            slots.push((at, len));
            at += len;
        }
        let (off, len) = slots[level.me];
        if !level.leads() {
            let mine = comm.scratch(len)?;
            comm.recv(level.leader_rank(), 0, mine.mem()).await?;
            let mem = mine.mem();
            held = Some((mine, mem));
            continue;
        }
        let Some((_, buf)) = &held else {
            return Err(Error::internal(format!("scatter: rank {rank} leads a level but holds nothing")));
        };
        let buf = *buf;
        let sends = (0..level.members.len())
            .filter(|&m| m != level.me)
            .map(|m| comm.isend(level.members[m], 0, buf.range(slots[m].0, slots[m].1)?))
            .collect::<Result<Vec<_>>>()?;
        try_join_all(sends).await?;
        if let Some((_, b)) = &mut held {
            *b = buf.range(off, len)?;
        }
    }
    let Some((_, mine)) = &held else {
        return Err(Error::internal(format!("scatter: rank {rank} received nothing")));
    };
    comm.copy(o.dst, *mine)
}
