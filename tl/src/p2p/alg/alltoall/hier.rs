//! Hierarchical alltoall(v) (node leaders aggregate): blocks between ranks
//! of one node go straight to their rank (shared memory); every block for
//! another node goes to the node's leader, the leaders exchange one message
//! per pair of nodes, and each leader hands its members what came for them.
//! The inter-node links carry one message per node pair instead of one per
//! rank pair — the point when messages are small and links slow.
//!
//! Messages (leaders are nodes' lowest ranks, `topo::subgroups`):
//! - up: rank i of node A sends its leader, per other node B, its blocks for
//!   B's ranks back to back (tag B); the leader places them, member by
//!   member, in its message for B: blocks i→j, i-major (i in A, then j in B);
//! - across: leader A sends that to leader B and receives B's, which is
//!   k-major (k in B, then i in A);
//! - down: leader A sends member i, per node B, the blocks k→i for k in B
//!   (tag B), picked out of B's message.
//!
//! Sizes: alltoall's blocks are alike on every rank, so leaders know them;
//! alltoallv's ranks first send their leader their send and receive counts
//! (2·size integers). Any number of ranks per node, uneven, non-contiguous.
//! In place, dst is first copied (pairwise's [`Input`]). Two levels only:
//! switch groups are not a level here. Chosen by name (`alltoall:@hier`,
//! `alltoallv:@hier`).

use ferrocoll_core::args::{Alltoall, Blocked, Blocks};
use ferrocoll_core::backend::Scratch;
use ferrocoll_core::engine::{try_join_all, try_join2};
use ferrocoll_core::{Error, MemRef, Result};

use super::pairwise::Input;
use crate::p2p::Comm;

const PHASE_SIZES: u32 = 0;
const PHASE_NODE: u32 = 1;
const PHASE_UP: u32 = 2;
const PHASE_ACROSS: u32 = 3;
const PHASE_DOWN: u32 = 4;

/// Alltoall: every rank's blocks have the same layout.
pub(crate) async fn run(comm: Comm, o: Alltoall) -> Result<()> {
    run_with(comm, o, false).await
}

/// Alltoallv: leaders learn their members' counts first.
pub(crate) async fn run_v(comm: Comm, o: Alltoall) -> Result<()> {
    run_with(comm, o, true).await
}

fn add(a: usize, b: usize) -> Result<usize> {
    a.checked_add(b).ok_or_else(|| Error::invalid_param(format!("alltoall: {a} + {b} bytes overflows")))
}

fn sum(it: impl IntoIterator<Item = usize>) -> Result<usize> {
    it.into_iter().try_fold(0, add)
}

async fn run_with(comm: Comm, o: Alltoall, exchange_sizes: bool) -> Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    let input = Input::new(&comm, &o)?;
    let (src, sblocks, dst) = (input.mem, &input.blocks, &o.dst);
    if !o.in_place {
        comm.copy(dst.block(rank)?, sblocks.of(src, rank)?)?;
    }
    let nodes = comm.layout().nodes();
    let mut node_of = vec![usize::MAX; size];
    for (n, ranks) in nodes.iter().enumerate() {
        for &r in ranks {
            if let Some(slot) = node_of.get_mut(r) {
                *slot = n;
            }
        }
    }
    let a = *node_of.get(rank).filter(|n| **n < nodes.len()).ok_or_else(|| Error::internal("alltoall: no node"))?;
    let node = &nodes[a];
    let leader = node[0];
    let others: Vec<usize> = (0..nodes.len()).filter(|&b| b != a).collect();
    let (c_node, c_sizes, c_up, c_across, c_down) = (
        comm.phase(PHASE_NODE),
        comm.phase(PHASE_SIZES),
        comm.phase(PHASE_UP),
        comm.phase(PHASE_ACROSS),
        comm.phase(PHASE_DOWN),
    );

    // Within the node: straight to the rank.
    let peers: Vec<usize> = node.iter().copied().filter(|&j| j != rank).collect();
    let sends = peers.iter().map(|&j| c_node.isend(j, 0, sblocks.of(src, j)?)).collect::<Result<Vec<_>>>()?;
    let recvs = peers.iter().map(|&j| Ok(c_node.recv(j, 0, dst.block(j)?))).collect::<Result<Vec<_>>>()?;
    let within = try_join2(try_join_all(sends), try_join_all(recvs));
    if others.is_empty() {
        return within.await;
    }

    // My blocks for each other node, back to back (node order, then rank order).
    let mut sections = Vec::with_capacity(others.len());
    let mut at = 0;
    for &b in &others {
        let len = sum(nodes[b].iter().map(|&j| sblocks.bytes(j)))?;
        sections.push((at, len));
        at = add(at, len)?;
    }
    let packed = comm.scratch(at)?;
    for (&b, &(off, _)) in others.iter().zip(&sections) {
        let mut p = off;
        for &j in &nodes[b] {
            let blk = sblocks.of(src, j)?;
            comm.copy(packed.mem().range(p, blk.len())?, blk)?;
            p += blk.len();
        }
    }
    let sizes = encode(sblocks, &dst.blocks, size);

    let across = async {
        if rank != leader {
            member(&c_sizes, &c_up, &c_down, leader, exchange_sizes, &sizes, &packed, &sections, &others, nodes, dst)
                .await
        } else {
            let ctx = Leader { c_sizes: &c_sizes, c_up: &c_up, c_across: &c_across, c_down: &c_down, nodes, a, rank };
            ctx.run(exchange_sizes, &sizes, &packed, &sections, &others, dst).await
        }
    };
    try_join2(within, across).await.map(|_| ())
}

/// Send and receive counts of this rank as bytes (little-endian u64s).
fn encode(sblocks: &Blocks, dblocks: &Blocks, size: usize) -> Vec<u8> {
    (0..size)
        .map(|j| sblocks.bytes(j))
        .chain((0..size).map(|k| dblocks.bytes(k)))
        .flat_map(|v| (v as u64).to_le_bytes())
        .collect()
}

/// Counts from [`encode`]'s bytes: (send bytes per rank, receive bytes per rank).
fn decode(bytes: &[u8], size: usize) -> Result<(Vec<usize>, Vec<usize>)> {
    let v = bytes
        .chunks_exact(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            usize::try_from(u64::from_le_bytes(w))
                .map_err(|_| Error::invalid_param("alltoallv: a count overflows usize"))
        })
        .collect::<Result<Vec<usize>>>()?;
    if v.len() != 2 * size {
        return Err(Error::internal(format!("alltoallv: {} counts for a team of {size}", v.len())));
    }
    Ok((v[..size].to_vec(), v[size..].to_vec()))
}

/// A non-leader: counts and sections up, then each other node's blocks down.
#[allow(clippy::too_many_arguments)]
async fn member(
    c_sizes: &Comm,
    c_up: &Comm,
    c_down: &Comm,
    leader: usize,
    exchange_sizes: bool,
    sizes: &[u8],
    packed: &Scratch,
    sections: &[(usize, usize)],
    others: &[usize],
    nodes: &[Vec<usize>],
    dst: &Blocked,
) -> Result<()> {
    if exchange_sizes {
        // SAFETY: `sizes` lives, unmodified, until this send has completed (awaited here).
        let m = unsafe { MemRef::from_slice(sizes) };
        c_sizes.send(leader, 0, m).await?;
    }
    let ups = others
        .iter()
        .zip(sections)
        .map(|(&b, &(off, len))| c_up.isend(leader, b as u32, packed.mem().range(off, len)?))
        .collect::<Result<Vec<_>>>()?;
    let mut downs = Vec::with_capacity(others.len());
    for &b in others {
        let len = sum(nodes[b].iter().map(|&k| dst.blocks.bytes(k)))?;
        downs.push((b, c_down.scratch(len)?));
    }
    let recvs = downs.iter().map(|(b, s)| c_down.recv(leader, *b as u32, s.mem()));
    try_join2(try_join_all(ups), try_join_all(recvs)).await?;
    for (b, s) in &downs {
        let mut at = 0;
        for &k in &nodes[*b] {
            let blk = dst.block(k)?;
            c_down.copy(blk, s.mem().range(at, blk.len())?)?;
            at += blk.len();
        }
    }
    Ok(())
}

/// A node leader's view.
struct Leader<'a> {
    c_sizes: &'a Comm,
    c_up: &'a Comm,
    c_across: &'a Comm,
    c_down: &'a Comm,
    nodes: &'a [Vec<usize>],
    /// My node's index.
    a: usize,
    rank: usize,
}

impl Leader<'_> {
    #[allow(clippy::too_many_arguments)]
    async fn run(
        &self,
        exchange_sizes: bool,
        sizes: &[u8],
        packed: &Scratch,
        sections: &[(usize, usize)],
        others: &[usize],
        dst: &Blocked,
    ) -> Result<()> {
        let node = &self.nodes[self.a];
        let size = sizes.len() / 16;
        // Every member's (send, receive) bytes per rank, in node order.
        let counts: Vec<(Vec<usize>, Vec<usize>)> = if exchange_sizes {
            let mut bufs: Vec<Vec<u8>> = node.iter().map(|_| vec![0u8; sizes.len()]).collect();
            {
                let mut recvs = Vec::new();
                for (&i, buf) in node.iter().zip(bufs.iter_mut()) {
                    if i != self.rank {
                        // SAFETY: `buf` lives, and nothing else touches it, until the receive completes (awaited below).
                        let m = unsafe { MemRef::from_mut_slice(buf) };
                        recvs.push(self.c_sizes.recv(i, 0, m));
                    }
                }
                try_join_all(recvs).await?;
            }
            node.iter()
                .zip(&bufs)
                .map(|(&i, b)| decode(if i == self.rank { sizes } else { b }, size))
                .collect::<Result<_>>()?
        } else {
            let mine = decode(sizes, size)?;
            node.iter().map(|_| mine.clone()).collect()
        };

        // Up: per other node B, member i's section at i's offset of out[B] (i-major).
        let mut outs = Vec::with_capacity(others.len());
        let mut ups = Vec::new();
        for (s, &b) in others.iter().enumerate() {
            let per: Vec<usize> =
                counts.iter().map(|(send, _)| sum(self.nodes[b].iter().map(|&j| send[j]))).collect::<Result<_>>()?;
            let out = self.c_up.scratch(sum(per.iter().copied())?)?;
            let mut at = 0;
            for (&i, &len) in node.iter().zip(&per) {
                let slot = out.mem().range(at, len)?;
                if i == self.rank {
                    let (off, mine) = sections[s];
                    self.c_up.copy(slot, packed.mem().range(off, mine)?)?;
                } else {
                    ups.push((i, b, slot));
                }
                at += len;
            }
            outs.push(out);
        }
        try_join_all(ups.iter().map(|&(i, b, slot)| self.c_up.recv(i, b as u32, slot))).await?;

        // Across: one message each way per pair of nodes (k-major from B's side).
        let mut ins = Vec::with_capacity(others.len());
        for &b in others {
            let len = sum(self.nodes[b]
                .iter()
                .map(|&k| sum(counts.iter().map(|(_, recv)| recv[k])))
                .collect::<Result<Vec<_>>>()?)?;
            ins.push(self.c_across.scratch(len)?);
        }
        let sends = others
            .iter()
            .zip(&outs)
            .map(|(&b, out)| self.c_across.isend(self.nodes[b][0], 0, out.mem()))
            .collect::<Result<Vec<_>>>()?;
        let recvs = others.iter().zip(&ins).map(|(&b, inb)| self.c_across.recv(self.nodes[b][0], 0, inb.mem()));
        try_join2(try_join_all(recvs), try_join_all(sends)).await?;

        // Down: member i's blocks from node B, picked out of in[B].
        let mut downs = Vec::new();
        let mut keep = Vec::new();
        for (&b, inb) in others.iter().zip(&ins) {
            // Offset of block k→i in in[B]: k-major, then i in node order.
            let mut offsets = vec![Vec::with_capacity(self.nodes[b].len()); node.len()];
            let mut at = 0;
            for &k in &self.nodes[b] {
                for (m, (_, recv)) in counts.iter().enumerate() {
                    offsets[m].push((at, recv[k]));
                    at = add(at, recv[k])?;
                }
            }
            for (m, &i) in node.iter().enumerate() {
                if i == self.rank {
                    for (&k, &(off, len)) in self.nodes[b].iter().zip(&offsets[m]) {
                        self.c_down.copy(dst.block(k)?, inb.mem().range(off, len)?)?;
                    }
                    continue;
                }
                let d = self.c_down.scratch(sum(offsets[m].iter().map(|o| o.1))?)?;
                let mut p = 0;
                for &(off, len) in &offsets[m] {
                    self.c_down.copy(d.mem().range(p, len)?, inb.mem().range(off, len)?)?;
                    p += len;
                }
                downs.push((i, b, d.mem()));
                keep.push(d);
            }
        }
        let sends = downs.iter().map(|&(i, b, m)| self.c_down.isend(i, b as u32, m)).collect::<Result<Vec<_>>>()?;
        try_join_all(sends).await?;
        drop(keep);
        Ok(())
    }
}
