//! Topology-aware scatter(v) (Kandalla et al., IPDPS 2010), gather's
//! mirror: the root packs its blocks in the order of the hierarchy's spans
//! (`pattern::hier`), then each level's leader sends every member its span
//! in one message, from the top down, so a node's blocks cross the
//! inter-node link once and a switch group's cross the top switch once. The
//! root leads its node, its group and the top (no extra hop). Uneven and
//! non-contiguous nodes need nothing special: a span's blocks travel in
//! span order, and both ends know the span from the layout.
//!
//! A leader's sends all start at once; its own span stays where it is (a
//! range of what it received) for the level below. Scatter's blocks are all
//! as long as this rank's dst; scatterv's are known only to their rank and
//! the root, so there each span is preceded by a message giving its blocks'
//! sizes. Not pipelined: a leader forwards after its whole span has
//! arrived. Chosen by name (`scatter:@hier`, `scatterv:@hier`).

use ferrocoll_core::args::Scatter;
use ferrocoll_core::backend::Scratch;
use ferrocoll_core::engine::{try_join_all, try_join2};
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::alg::gather::hier::sizes;
use crate::p2p::pattern::hier::levels;

const TAG_DATA: u32 = 0;
const TAG_SIZES: u32 = 1;

/// Scatter: every block is as long as this rank's.
pub(crate) async fn run(comm: Comm, o: Scatter) -> Result<()> {
    scatter(comm, o, false).await
}

/// Scatterv: block sizes travel ahead of the blocks.
pub(crate) async fn run_v(comm: Comm, o: Scatter) -> Result<()> {
    scatter(comm, o, true).await
}

async fn scatter(comm: Comm, o: Scatter, v: bool) -> Result<()> {
    let rank = comm.rank();
    let block = o.dst.len();
    let levels = levels(comm.layout(), rank, Some(o.root))?;
    let active: Vec<(usize, _)> = levels.iter().enumerate().filter(|(_, l)| !l.trivial()).rev().collect();
    // What this rank holds: its ranks' blocks' sizes and the blocks back to back
    // (in the order of its highest level's ranks), and where.
    let mut held_sizes: Vec<usize> = vec![block];
    let mut buf: Option<MemRef> = None;
    let mut _scratch: Option<Scratch> = None;
    if let Some(src) = &o.src {
        let ranks = active.first().map_or_else(|| vec![rank], |(_, l)| l.all_ranks());
        held_sizes = ranks.iter().map(|&r| src.blocks.bytes(r)).collect();
        let packed = comm.scratch(sizes::sum(held_sizes.iter().copied())?)?;
        let mut at = 0;
        for &r in &ranks {
            let b = src.block(r)?;
            comm.copy(packed.mem().range(at, b.len())?, b)?;
            at += b.len();
        }
        buf = Some(packed.mem());
        _scratch = Some(packed);
    }
    for (i, level) in active {
        let comm = comm.phase(i as u32);
        let leader = level.leader_rank();
        if !level.leads() {
            let span = &level.spans[level.me];
            held_sizes = if v {
                let mut header = vec![0u8; span.len() * 8];
                // SAFETY: `header` lives, and nothing else touches it, until the receive completes (awaited here).
                comm.recv(leader, TAG_SIZES, unsafe { MemRef::from_mut_slice(&mut header) }).await?;
                sizes::decode(&header)?
            } else {
                vec![block; span.len()]
            };
            let mine = comm.scratch(sizes::sum(held_sizes.iter().copied())?)?;
            comm.recv(leader, TAG_DATA, mine.mem()).await?;
            buf = Some(mine.mem());
            _scratch = Some(mine);
            continue;
        }
        let Some(whole) = buf else {
            return Err(Error::internal(format!("scatter: rank {rank} leads a level but holds nothing")));
        };
        // Each member's span: its blocks' sizes, and its range of what this rank holds.
        let mut parts = Vec::with_capacity(level.spans.len());
        let (mut first, mut at) = (0, 0);
        for span in &level.spans {
            let s = held_sizes.get(first..first + span.len()).ok_or_else(|| {
                Error::internal(format!("scatter: rank {rank} holds {} blocks, fewer than its spans", held_sizes.len()))
            })?;
            let len = sizes::sum(s.iter().copied())?;
            parts.push((s.to_vec(), whole.range(at, len)?));
            first += span.len();
            at += len;
        }
        let headers: Vec<Vec<u8>> = parts.iter().map(|(s, _)| if v { sizes::encode(s) } else { Vec::new() }).collect();
        let mut sends = Vec::new();
        let mut size_sends = Vec::new();
        for m in (0..level.members.len()).filter(|&m| m != level.me) {
            if v {
                // SAFETY: `headers` lives, unmodified, until these sends complete (awaited below).
                size_sends.push(comm.isend(level.members[m], TAG_SIZES, unsafe { MemRef::from_slice(&headers[m]) })?);
            }
            sends.push(comm.isend(level.members[m], TAG_DATA, parts[m].1)?);
        }
        try_join2(try_join_all(size_sends), try_join_all(sends)).await?;
        let (mine_sizes, mine) = parts.swap_remove(level.me);
        held_sizes = mine_sizes;
        buf = Some(mine);
    }
    let Some(mine) = buf else {
        return Err(Error::internal(format!("scatter: rank {rank} received nothing")));
    };
    comm.copy(o.dst, mine)
}
