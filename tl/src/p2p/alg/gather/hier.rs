//! Topology-aware gather(v) (Kandalla et al., IPDPS 2010): blocks go up the
//! hierarchy (`pattern::hier`), each level's leader gathering its members'
//! spans in member order, so a node's blocks cross the inter-node link once
//! (from its leader), and a switch group's cross the top switch once. The
//! root leads its node, its group and the top, so nothing takes an extra
//! hop. Uneven and non-contiguous nodes need nothing special: a member's
//! message holds the blocks of its span, in span order, and both ends know
//! the span from the layout.
//!
//! A rank that leads some levels holds one buffer: the ranks of its highest
//! led level, in order ([`ranges`]); every member of every level it leads
//! sends its span straight to its place there. Messages travel in pieces of
//! [`FRAGMENT`] bytes ([`fragments`]), and a leader sends each piece of its
//! buffer up as soon as the bytes before its end have arrived: for large
//! messages the levels overlap (pipelining) instead of each leader waiting
//! for its whole span. The root finally copies every rank's block into dst.
//!
//! Gather's blocks are all as long as this rank's src; gatherv's are known
//! only to their rank and the root, so there the sizes go up first, level
//! by level, each member sending its leader the sizes of its span's blocks.
//! Chosen by name (`gather:@hier`, `gatherv:@hier`).

use std::collections::HashMap;

use ferrocoll_core::args::Gather;
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::hier::{Level, fragments, levels, ranges};

const TAG_SIZES: u32 = 0;
/// Piece k of a message has tag `TAG_DATA + k`.
const TAG_DATA: u32 = 1;
/// Bytes per piece of a message between levels (not tuned: large enough
/// that a piece costs little more than its bytes, small enough that a
/// 16 MiB gather overlaps its levels).
pub(crate) const FRAGMENT: usize = 256 << 10;

/// Gather: every block is as long as this rank's.
pub(crate) async fn run(comm: Comm, o: Gather) -> Result<()> {
    gather(comm, o, false).await
}

/// Gatherv: block sizes go up ahead of the blocks.
pub(crate) async fn run_v(comm: Comm, o: Gather) -> Result<()> {
    gather(comm, o, true).await
}

async fn gather(comm: Comm, o: Gather, v: bool) -> Result<()> {
    let rank = comm.rank();
    let block = o.src.len();
    let levels = levels(comm.layout(), rank, Some(o.root))?;
    let active: Vec<(usize, &Level)> = levels.iter().enumerate().filter(|(_, l)| !l.trivial()).collect();
    let k = active.iter().position(|(_, l)| !l.leads()).unwrap_or(active.len());
    let (led, up) = (&active[..k], active.get(k));
    let phases: Vec<Comm> = (0..levels.len()).map(|i| comm.phase(i as u32)).collect();

    // Sizes, level by level: every rank of my highest led level's span.
    let mut size_of: HashMap<usize, usize> = HashMap::from([(rank, block)]);
    let mut held = vec![rank];
    for &(i, level) in led {
        if v {
            let mut headers: Vec<Vec<u8>> = level.spans.iter().map(|s| vec![0u8; s.len() * 8]).collect();
            {
                let mut recvs = Vec::new();
                for (m, h) in headers.iter_mut().enumerate().filter(|(m, _)| *m != level.me) {
                    // SAFETY: `h` lives, and nothing else touches it, until the receive completes (awaited below).
                    recvs.push(phases[i].recv(level.members[m], TAG_SIZES, unsafe { MemRef::from_mut_slice(h) }));
                }
                try_join_all(recvs).await?;
            }
            for (m, h) in headers.iter().enumerate().filter(|(m, _)| *m != level.me) {
                let sizes = sizes::decode(h)?;
                size_of.extend(level.spans[m].iter().copied().zip(sizes));
            }
        } else {
            size_of.extend(level.all_ranks().into_iter().map(|r| (r, block)));
        }
        held = level.all_ranks();
    }
    let bytes = |r: usize| size_of.get(&r).copied().ok_or_else(|| Error::internal(format!("gather: no size of {r}")));
    let header =
        if v { sizes::encode(&held.iter().map(|&r| bytes(r)).collect::<Result<Vec<_>>>()?) } else { Vec::new() };

    // One buffer for everything this rank leads (its src alone if it leads nothing).
    let led_levels: Vec<&Level> = led.iter().map(|(_, l)| *l).collect();
    let places = ranges(&led_levels, &bytes)?;
    let scratch = if led.is_empty() { None } else { Some(comm.scratch(places.total)?) };
    let buf = scratch.as_ref().map_or(o.src, |s| s.mem());
    comm.copy(buf.range(places.own, block)?, o.src)?;
    // Every piece coming in, by offset.
    let mut pieces = Vec::new();
    for &(l, member, off, len) in &places.spans {
        for (k, &(foff, flen)) in fragments(len, FRAGMENT).iter().enumerate() {
            let at = off + foff;
            pieces.push((at, at + flen, phases[led[l].0].recv(member, TAG_DATA + k as u32, buf.range(at, flen)?)));
        }
    }
    pieces.sort_by_key(|p| p.0);

    let Some(&(i, level)) = up else {
        // The root: everything arrives, then goes to its place in dst.
        try_join_all(pieces.into_iter().map(|p| p.2)).await?;
        return unpack(&comm, &o, buf, &held, &bytes);
    };
    // Up: each piece as soon as the bytes before its end are here.
    let c = &phases[i];
    let leader = level.leader_rank();
    let mut sends = Vec::new();
    if v {
        // SAFETY: `header` lives, unmodified, until this send completes (joined below).
        sends.push(c.isend(leader, TAG_SIZES, unsafe { MemRef::from_slice(&header) })?);
    }
    let out = fragments(buf.len(), FRAGMENT);
    let mut next = 0;
    let mut ready = |upto: usize, sends: &mut Vec<_>| -> Result<()> {
        while let Some(&(foff, flen)) = out.get(next).filter(|(foff, flen)| foff + flen <= upto) {
            sends.push(c.isend(leader, TAG_DATA + next as u32, buf.range(foff, flen)?)?);
            next += 1;
        }
        Ok(())
    };
    // Bytes before the first missing piece are here.
    let mut upto = pieces.first().map_or(buf.len(), |p| p.0);
    ready(upto, &mut sends)?;
    let mut it = pieces.into_iter().peekable();
    while let Some((_, end, recv)) = it.next() {
        recv.await?;
        upto = it.peek().map_or(buf.len(), |p| p.0).max(end);
        ready(upto, &mut sends)?;
    }
    try_join_all(sends).await.map(|_| ())
}

/// At the root: every rank's block from the buffer (ranks in `held` order) into dst.
fn unpack(comm: &Comm, o: &Gather, buf: MemRef, held: &[usize], bytes: &dyn Fn(usize) -> Result<usize>) -> Result<()> {
    let dst =
        o.dst.as_ref().ok_or_else(|| Error::internal(format!("gather: rank {} ended as the root", comm.rank())))?;
    if held.len() != comm.size() {
        return Err(Error::internal(format!("gather: the root holds {} of {} blocks", held.len(), comm.size())));
    }
    let mut at = 0;
    for &r in held {
        let (to, len) = (dst.block(r)?, bytes(r)?);
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
