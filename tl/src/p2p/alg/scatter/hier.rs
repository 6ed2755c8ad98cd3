//! Topology-aware scatter(v) (Kandalla et al., IPDPS 2010), gather's
//! mirror: the root holds its blocks in the order of the hierarchy's spans
//! (`pattern::hier`), and each level's leader sends every member its span,
//! from the top down, so a node's blocks cross the inter-node link once and
//! a switch group's cross the top switch once. The root leads its node, its
//! group and the top (no extra hop). Uneven and non-contiguous nodes need
//! nothing special: a span's blocks travel in span order, and both ends
//! know the span from the layout.
//!
//! A rank holds one buffer: the ranks of its span from above (at the root,
//! the whole team, packed from src), in which the span of every member of
//! every level it leads is a range ([`ranges`]). Messages travel in pieces
//! of gather's [`FRAGMENT`] bytes, and a leader sends on each piece of a
//! member's span as soon as the bytes it covers have arrived: for large
//! messages the levels overlap (pipelining).
//!
//! Scatter's blocks are all as long as this rank's dst; scatterv's are
//! known only to their rank and the root, so there each span is preceded
//! by a message giving its blocks' sizes. Chosen by name (`scatter:@hier`,
//! `scatterv:@hier`).

use std::collections::HashMap;

use ferrocoll_core::args::Scatter;
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::alg::gather::hier::{FRAGMENT, sizes};
use crate::p2p::pattern::hier::{Level, fragments, levels, ranges};

const TAG_SIZES: u32 = 0;
/// Piece k of a message has tag `TAG_DATA + k`.
const TAG_DATA: u32 = 1;

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
    let active: Vec<(usize, &Level)> = levels.iter().enumerate().filter(|(_, l)| !l.trivial()).collect();
    let k = active.iter().position(|(_, l)| !l.leads()).unwrap_or(active.len());
    let (led, up) = (&active[..k], active.get(k));
    let phases: Vec<Comm> = (0..levels.len()).map(|i| comm.phase(i as u32)).collect();

    // The ranks this rank holds and their blocks' sizes.
    let held: Vec<usize> = match (up, led.last()) {
        (Some((_, l)), _) => l.spans[l.me].clone(),
        (None, Some((_, l))) => l.all_ranks(),
        (None, None) => vec![rank],
    };
    let held_sizes: Vec<usize> = match (&o.src, up) {
        (Some(src), _) => held.iter().map(|&r| src.blocks.bytes(r)).collect(),
        (None, Some(&(i, level))) if v => {
            let mut header = vec![0u8; held.len() * 8];
            // SAFETY: `header` lives, and nothing else touches it, until the receive completes (awaited here).
            phases[i].recv(level.leader_rank(), TAG_SIZES, unsafe { MemRef::from_mut_slice(&mut header) }).await?;
            sizes::decode(&header)?
        }
        _ => vec![block; held.len()],
    };
    if held_sizes.len() != held.len() {
        return Err(Error::internal(format!("scatter: {} sizes for {} ranks", held_sizes.len(), held.len())));
    }
    let size_of: HashMap<usize, usize> = held.iter().copied().zip(held_sizes.iter().copied()).collect();
    let bytes = |r: usize| size_of.get(&r).copied().ok_or_else(|| Error::internal(format!("scatter: no size of {r}")));

    let led_levels: Vec<&Level> = led.iter().map(|(_, l)| *l).collect();
    let places = ranges(&led_levels, &bytes)?;
    let total = sizes::sum(held_sizes.iter().copied())?;
    let scratch = comm.scratch(total)?;
    let buf = scratch.mem();
    // Where the bytes come from: src (the root), or pieces from the leader above.
    let mut pieces = Vec::new();
    if let Some(src) = &o.src {
        let mut at = 0;
        for &r in &held {
            let b = src.block(r)?;
            comm.copy(buf.range(at, b.len())?, b)?;
            at += b.len();
        }
    } else if let Some(&(i, level)) = up {
        for (k, &(off, len)) in fragments(total, FRAGMENT).iter().enumerate() {
            pieces.push((off + len, phases[i].recv(level.leader_rank(), TAG_DATA + k as u32, buf.range(off, len)?)));
        }
    }

    // Down: sizes at once, each piece of each member's span once its bytes are here.
    let mut headers = Vec::new();
    let mut out = Vec::new();
    for &(l, member, off, len) in &places.spans {
        let (i, level) = led[l];
        let m = level.members.iter().position(|&x| x == member).ok_or_else(|| Error::internal("scatter: member"))?;
        if v {
            headers.push((
                i,
                member,
                sizes::encode(&level.spans[m].iter().map(|&r| bytes(r)).collect::<Result<Vec<_>>>()?),
            ));
        }
        for (k, &(foff, flen)) in fragments(len, FRAGMENT).iter().enumerate() {
            out.push((off + foff + flen, i, member, k, buf.range(off + foff, flen)?));
        }
    }
    out.sort_by_key(|p| p.0);
    let mut sends = Vec::new();
    for (i, member, h) in &headers {
        // SAFETY: `headers` lives, unmodified, until these sends complete (joined below).
        sends.push(phases[*i].isend(*member, TAG_SIZES, unsafe { MemRef::from_slice(h) })?);
    }
    let mut next = out.iter().peekable();
    let mut ready = |upto: usize, sends: &mut Vec<_>| -> Result<()> {
        while let Some(&&(end, i, member, k, mem)) = next.peek() {
            if end > upto {
                break;
            }
            sends.push(phases[i].isend(member, TAG_DATA + k as u32, mem)?);
            next.next();
        }
        Ok(())
    };
    if pieces.is_empty() {
        ready(total, &mut sends)?;
    }
    for (end, recv) in pieces {
        recv.await?;
        ready(end, &mut sends)?;
    }
    try_join_all(sends).await?;
    // Off the root, this rank's size came in the leader's header: a peer's
    // word, checked only here, after the span is in and passed on (so the
    // leader and the members are not left waiting), before any byte lands.
    if let (None, Some((_, level))) = (&o.src, up) {
        let theirs = bytes(rank)?;
        if theirs != block {
            return Err(Error::invalid_param(format!(
                "scatterv: rank {} sends this rank {theirs} bytes, its receive count is {block} bytes: \
                 do the ranks' counts agree?",
                level.leader_rank()
            )));
        }
    }
    comm.copy(o.dst, buf.range(places.own, block)?)
}
