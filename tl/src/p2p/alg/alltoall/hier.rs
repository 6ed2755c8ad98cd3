//! Hierarchical alltoall(v) (leaders aggregate): blocks between ranks of
//! one node go straight to their rank (shared memory); every block for
//! another node goes through the node's leader, and the leaders exchange
//! one message per pair of nodes, each leader then handing its members
//! what came for them. On a team over several switch groups, one of them
//! with several nodes, there is a third level: blocks for another group go
//! from the node leaders to their group's leader, the group leaders
//! exchange one message per pair of groups and split what they receive by
//! node. The slow links carry one message per pair of nodes (or groups)
//! instead of one per pair of ranks — the point when blocks are small and
//! links slow.
//!
//! Messages (a node's leader is its lowest rank, a group's its first
//! node's leader, `topo::subgroups`). A *unit* is another node of my group
//! or, with three levels, another group; its ranks in order (a group's:
//! its nodes' ranks, node by node):
//! - up: rank i of node A sends its leader, per unit U, its blocks for U's
//!   ranks back to back (tag U); the leader lays them out member by member,
//!   i-major (i in A, then j in U);
//! - across: for a node unit, leader A sends that to U's leader and
//!   receives U's, which is k-major (k in U, then i in A); for a group unit
//!   G, leader A sends it to its group leader, which concatenates its
//!   nodes' messages (now i in the group, j in G), exchanges with G's
//!   leader, and sends each of its node leaders its part of G's answer
//!   (k in G, then i in that node);
//! - down: leader A sends member i, per unit U, the blocks k→i for k in U
//!   (tag U), picked out of U's answer.
//!
//! Sizes: alltoall's blocks are alike on every rank, so leaders know them;
//! alltoallv's ranks first send their node leader their send and receive
//! counts (2·size integers), which node leaders pass on to their group
//! leader with three levels. Beside each message between two leaders go
//! the send counts behind it, which the receiving leader checks against its
//! ranks' receive counts before it cuts the message by them: counts that
//! differ but add up alike would otherwise hand a rank another rank's bytes.
//! Any number of ranks per node, uneven, not contiguous. In place, dst is
//! first copied (pairwise's [`Input`]).
//! Chosen by name (`alltoall:@hier`, `alltoallv:@hier`).

use std::collections::HashMap;

use ferrocoll_core::args::{Alltoall, Blocked, Blocks};
use ferrocoll_core::backend::Scratch;
use ferrocoll_core::engine::{try_join_all, try_join2};
use ferrocoll_core::topo::Layout;
use ferrocoll_core::{Error, MemRef, Result};

use super::pairwise::Input;
use crate::p2p::Comm;

const PHASE_SIZES: u32 = 0;
const PHASE_NODE: u32 = 1;
const PHASE_UP: u32 = 2;
const PHASE_ACROSS: u32 = 3;
const PHASE_DOWN: u32 = 4;
const PHASE_GROUP_SIZES: u32 = 5;
const PHASE_GROUP_UP: u32 = 6;
const PHASE_GROUPS: u32 = 7;
const PHASE_GROUP_DOWN: u32 = 8;
/// Tag of a message between leaders (phases ACROSS and GROUPS), and of
/// alltoallv's counts behind it ([`pair_counts`]).
const TAG_BLOCKS: u32 = 0;
const TAG_COUNTS: u32 = 1;

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

/// Another part of the team, and how its blocks travel.
struct Unit {
    /// Its ranks, in order.
    ranks: Vec<usize>,
    via: Via,
}

enum Via {
    /// Another node of my group: through its leader, this team rank.
    Node(usize),
    /// Another group (three levels): through my group's leader and its, this group index.
    Group(usize),
}

/// This rank's place: its node, its group and the units.
struct Shape<'a> {
    nodes: &'a [Vec<usize>],
    node: &'a [usize],
    /// Node indices of my group (all nodes with two levels), in order.
    group_nodes: Vec<usize>,
    group_leader: usize,
    /// Each group's leader (three levels).
    group_leaders: Vec<usize>,
    units: Vec<Unit>,
}

impl<'a> Shape<'a> {
    fn new(layout: &'a Layout, rank: usize) -> Result<Shape<'a>> {
        let (nodes, groups) = (layout.nodes(), layout.groups());
        let three = super::super::allreduce::hier3::applies(layout);
        let node_at = nodes.iter().position(|n| n.contains(&rank));
        let a = node_at.ok_or_else(|| Error::internal(format!("alltoall: rank {rank} is in no node")))?;
        let g = groups.iter().position(|ns| ns.contains(&a)).ok_or_else(|| Error::internal("alltoall: no group"))?;
        let leader = |n: usize| nodes[n][0];
        let group_nodes: Vec<usize> = if three { groups[g].clone() } else { (0..nodes.len()).collect() };
        let mut units: Vec<Unit> = group_nodes
            .iter()
            .filter(|&&b| b != a)
            .map(|&b| Unit { ranks: nodes[b].clone(), via: Via::Node(leader(b)) })
            .collect();
        if three {
            for (h, ns) in groups.iter().enumerate().filter(|(h, _)| *h != g) {
                units.push(Unit {
                    ranks: ns.iter().flat_map(|&n| nodes[n].iter().copied()).collect(),
                    via: Via::Group(h),
                });
            }
        }
        Ok(Shape {
            nodes,
            node: &nodes[a],
            group_leader: leader(group_nodes[0]),
            group_leaders: groups.iter().map(|ns| leader(ns[0])).collect(),
            group_nodes,
            units,
        })
    }

    /// The ranks of my group, in order.
    fn group_ranks(&self) -> Vec<usize> {
        self.group_nodes.iter().flat_map(|&n| self.nodes[n].iter().copied()).collect()
    }
}

/// Send and receive byte counts per rank: known alike (alltoall) or per rank (alltoallv).
struct Counts {
    size: usize,
    uniform: Option<(Vec<usize>, Vec<usize>)>,
    per: HashMap<usize, (Vec<usize>, Vec<usize>)>,
}

impl Counts {
    fn of(&self, i: usize) -> Result<&(Vec<usize>, Vec<usize>)> {
        self.uniform
            .as_ref()
            .or_else(|| self.per.get(&i))
            .ok_or_else(|| Error::internal(format!("alltoallv: no counts of rank {i}")))
    }

    /// Bytes rank i sends to rank j.
    fn send(&self, i: usize, j: usize) -> Result<usize> {
        self.of(i)?.0.get(j).copied().ok_or_else(|| Error::internal(format!("alltoall: rank {j} out of range")))
    }

    /// Bytes rank i receives from rank k.
    fn recv(&self, i: usize, k: usize) -> Result<usize> {
        self.of(i)?.1.get(k).copied().ok_or_else(|| Error::internal(format!("alltoall: rank {k} out of range")))
    }

    /// Add the counts of `ranks` from their concatenated encodings.
    fn add(&mut self, ranks: &[usize], bytes: &[u8]) -> Result<()> {
        let one = 16 * self.size;
        if bytes.len() != ranks.len() * one {
            return Err(Error::internal(format!(
                "alltoallv: {} bytes of counts for {} ranks",
                bytes.len(),
                ranks.len()
            )));
        }
        for (&r, b) in ranks.iter().zip(bytes.chunks_exact(one.max(1))) {
            self.per.insert(r, decode(b, self.size)?);
        }
        Ok(())
    }
}

async fn run_with(comm: Comm, o: Alltoall, exchange_sizes: bool) -> Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    let input = Input::new(&comm, &o)?;
    let (src, sblocks, dst) = (input.mem, &input.blocks, &o.dst);
    if !o.in_place {
        comm.copy(dst.block(rank)?, sblocks.of(src, rank)?)?;
    }
    let shape = Shape::new(comm.layout(), rank)?;
    let c_node = comm.phase(PHASE_NODE);

    // Within the node: straight to the rank.
    let peers: Vec<usize> = shape.node.iter().copied().filter(|&j| j != rank).collect();
    let sends = peers.iter().map(|&j| c_node.isend(j, 0, sblocks.of(src, j)?)).collect::<Result<Vec<_>>>()?;
    let recvs = peers.iter().map(|&j| Ok(c_node.recv(j, 0, dst.block(j)?))).collect::<Result<Vec<_>>>()?;
    let within = try_join2(try_join_all(sends), try_join_all(recvs));
    if shape.units.is_empty() {
        return within.await.map(|_| ());
    }

    // My blocks for each unit, back to back.
    let mut sections = Vec::with_capacity(shape.units.len());
    let mut at = 0;
    for u in &shape.units {
        let len = sum(u.ranks.iter().map(|&j| sblocks.bytes(j)))?;
        sections.push((at, len));
        at = add(at, len)?;
    }
    let packed = comm.scratch(at)?;
    for (u, &(off, _)) in shape.units.iter().zip(&sections) {
        let mut p = off;
        for &j in &u.ranks {
            let blk = sblocks.of(src, j)?;
            comm.copy(packed.mem().range(p, blk.len())?, blk)?;
            p += blk.len();
        }
    }
    let sizes = encode(sblocks, &dst.blocks, size);
    let me = Me { comm: &comm, shape: &shape, rank, size, exchange_sizes, sizes: &sizes, dst };
    let across = async {
        if rank != shape.node[0] {
            me.member(&packed, &sections).await
        } else {
            me.node_leader(&packed, &sections).await
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
    let v = crate::p2p::alg::gather::hier::sizes::decode(bytes)?;
    if v.len() != 2 * size {
        return Err(Error::internal(format!("alltoallv: {} counts for a team of {size}", v.len())));
    }
    Ok((v[..size].to_vec(), v[size..].to_vec()))
}

/// What each rank of `from` sends each rank of `to`, `from`-major, as a
/// message: alltoallv's leaders send it beside their blocks, since the
/// receiving leader cuts those by its own ranks' receive counts, and counts
/// that disagree but add up alike would otherwise hand a rank another
/// rank's bytes without an error.
fn pair_counts(counts: &Counts, from: &[usize], to: &[usize]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(from.len() * to.len() * 8);
    for &i in from {
        for &j in to {
            out.extend_from_slice(&(counts.send(i, j)? as u64).to_le_bytes());
        }
    }
    Ok(out)
}

/// Check leader `by`'s [`pair_counts`] (its ranks `from` to this leader's
/// `to`), a peer's words, against what the ranks of `to` expect from them.
fn check_pair_counts(counts: &Counts, by: usize, from: &[usize], to: &[usize], bytes: &[u8]) -> Result<()> {
    let theirs = crate::p2p::alg::gather::hier::sizes::decode(bytes)?;
    let pairs = from.iter().flat_map(|&k| to.iter().map(move |&i| (k, i)));
    for ((k, i), sent) in pairs.zip(theirs) {
        let expected = counts.recv(i, k)?;
        if sent != expected {
            return Err(Error::invalid_param(format!(
                "alltoallv: rank {k} sends rank {i} {sent} bytes (as rank {by} reports), rank {i}'s receive count \
                 for it is {expected} bytes: do the ranks' counts agree?"
            )));
        }
    }
    Ok(())
}

/// What every role of this rank needs.
struct Me<'a> {
    comm: &'a Comm,
    shape: &'a Shape<'a>,
    rank: usize,
    size: usize,
    exchange_sizes: bool,
    /// This rank's encoded counts.
    sizes: &'a [u8],
    dst: &'a Blocked,
}

/// A unit's blocks for a node, held by its leader: k-major (k in the unit, then i in the node).
type Answers = Vec<Scratch>;

impl Me<'_> {
    /// A non-leader: counts and sections up, then each unit's blocks down.
    async fn member(&self, packed: &Scratch, sections: &[(usize, usize)]) -> Result<()> {
        let (c_sizes, c_up, c_down) =
            (self.comm.phase(PHASE_SIZES), self.comm.phase(PHASE_UP), self.comm.phase(PHASE_DOWN));
        let leader = self.shape.node[0];
        if self.exchange_sizes {
            // SAFETY: `sizes` lives, unmodified, until this send has completed (awaited here).
            c_sizes.send(leader, 0, unsafe { MemRef::from_slice(self.sizes) }).await?;
        }
        let ups = sections
            .iter()
            .enumerate()
            .map(|(u, &(off, len))| c_up.isend(leader, u as u32, packed.mem().range(off, len)?))
            .collect::<Result<Vec<_>>>()?;
        let mut downs = Vec::with_capacity(self.shape.units.len());
        for u in &self.shape.units {
            downs.push(c_down.scratch(sum(u.ranks.iter().map(|&k| self.dst.blocks.bytes(k)))?)?);
        }
        let recvs = downs.iter().enumerate().map(|(u, s)| c_down.recv(leader, u as u32, s.mem()));
        try_join2(try_join_all(ups), try_join_all(recvs)).await?;
        for (unit, s) in self.shape.units.iter().zip(&downs) {
            let mut at = 0;
            for &k in &unit.ranks {
                let blk = self.dst.block(k)?;
                self.comm.copy(blk, s.mem().range(at, blk.len())?)?;
                at += blk.len();
            }
        }
        Ok(())
    }

    /// My counts and, with alltoallv, my members' (and their encodings, node order).
    async fn node_counts(&self) -> Result<(Counts, Vec<u8>)> {
        let node = self.shape.node;
        let mut counts = Counts { size: self.size, uniform: None, per: HashMap::new() };
        if !self.exchange_sizes {
            counts.uniform = Some(decode(self.sizes, self.size)?);
            return Ok((counts, Vec::new()));
        }
        let c = self.comm.phase(PHASE_SIZES);
        let one = self.sizes.len();
        let mut all = vec![0u8; one * node.len()];
        {
            let mut recvs = Vec::new();
            for (&i, chunk) in node.iter().zip(all.chunks_mut(one.max(1))) {
                if i == self.rank {
                    chunk.copy_from_slice(self.sizes);
                } else {
                    // SAFETY: `all` lives, and nothing else touches this chunk, until the receive completes (below).
                    recvs.push(c.recv(i, 0, unsafe { MemRef::from_mut_slice(chunk) }));
                }
            }
            try_join_all(recvs).await?;
        }
        counts.add(node, &all)?;
        Ok((counts, all))
    }

    /// A node leader: gather the sections, exchange per unit, hand out the answers.
    async fn node_leader(&self, packed: &Scratch, sections: &[(usize, usize)]) -> Result<()> {
        let (node, units) = (self.shape.node, &self.shape.units);
        let (counts, encoded) = self.node_counts().await?;
        let c_up = self.comm.phase(PHASE_UP);
        // Up: per unit, member i's section at i's offset of out[u] (i-major).
        let mut outs = Vec::with_capacity(units.len());
        let mut ups = Vec::new();
        for (u, unit) in units.iter().enumerate() {
            let per = node
                .iter()
                .map(|&i| sum(unit.ranks.iter().map(|&j| counts.send(i, j)).collect::<Result<Vec<_>>>()?))
                .collect::<Result<Vec<_>>>()?;
            let out = c_up.scratch(sum(per.iter().copied())?)?;
            let mut at = 0;
            for (&i, &len) in node.iter().zip(&per) {
                let slot = out.mem().range(at, len)?;
                if i == self.rank {
                    let (off, mine) = sections[u];
                    c_up.copy(slot, packed.mem().range(off, mine)?)?;
                } else {
                    ups.push((i, u, slot));
                }
                at += len;
            }
            outs.push(out);
        }
        try_join_all(ups.iter().map(|&(i, u, slot)| c_up.recv(i, u as u32, slot))).await?;

        // Across: node units with their leaders, group units through the group leader.
        let mut ins = Vec::with_capacity(units.len());
        for unit in units {
            ins.push(self.comm.scratch(self.answer_bytes(&counts, &unit.ranks, node)?)?);
        }
        let c_across = self.comm.phase(PHASE_ACROSS);
        // alltoallv: the counts behind each message too, (ours, theirs) per node unit.
        let mut checks: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        if self.exchange_sizes {
            for unit in units.iter().filter(|u| matches!(u.via, Via::Node(_))) {
                let ours = pair_counts(&counts, node, &unit.ranks)?;
                checks.push((vec![0u8; ours.len()], ours));
            }
        }
        let mut sends = Vec::new();
        let mut recvs = Vec::new();
        for ((unit, out), inu) in units.iter().zip(&outs).zip(&ins) {
            if let Via::Node(leader) = unit.via {
                sends.push(c_across.isend(leader, TAG_BLOCKS, out.mem())?);
                recvs.push(c_across.recv(leader, TAG_BLOCKS, inu.mem()));
            }
        }
        let leaders = units.iter().filter_map(|u| if let Via::Node(l) = u.via { Some(l) } else { None });
        for (leader, (theirs, ours)) in leaders.clone().zip(checks.iter_mut()) {
            // SAFETY: `checks` outlives these sends and receives (awaited
            // below, or dropped first) and nothing else touches it meanwhile.
            let (ours, theirs) = unsafe { (MemRef::from_slice(ours), MemRef::from_mut_slice(theirs)) };
            sends.push(c_across.isend(leader, TAG_COUNTS, ours)?);
            recvs.push(c_across.recv(leader, TAG_COUNTS, theirs));
        }
        let nodes_done = try_join2(try_join_all(recvs), try_join_all(sends));
        let groups_done = self.through_group(&counts, &encoded, &outs, &ins);
        try_join2(nodes_done, groups_done).await?;
        let node_units = units.iter().filter(|u| matches!(u.via, Via::Node(_)));
        for ((unit, leader), (theirs, _)) in node_units.zip(leaders).zip(&checks) {
            check_pair_counts(&counts, leader, &unit.ranks, node, theirs)?;
        }

        // Down: member i's blocks from unit U, picked out of in[U].
        let c_down = self.comm.phase(PHASE_DOWN);
        let mut downs = Vec::new();
        for (u, (unit, inu)) in units.iter().zip(&ins).enumerate() {
            // Offset of block k→i in in[U]: k-major, then i in node order.
            let mut offsets = vec![Vec::with_capacity(unit.ranks.len()); node.len()];
            let mut at = 0;
            for &k in &unit.ranks {
                for (m, &i) in node.iter().enumerate() {
                    let len = counts.recv(i, k)?;
                    offsets[m].push((at, len));
                    at = add(at, len)?;
                }
            }
            for (m, &i) in node.iter().enumerate() {
                if i == self.rank {
                    for (&k, &(off, len)) in unit.ranks.iter().zip(&offsets[m]) {
                        c_down.copy(self.dst.block(k)?, inu.mem().range(off, len)?)?;
                    }
                    continue;
                }
                let d = c_down.scratch(sum(offsets[m].iter().map(|o| o.1))?)?;
                let mut p = 0;
                for &(off, len) in &offsets[m] {
                    c_down.copy(d.mem().range(p, len)?, inu.mem().range(off, len)?)?;
                    p += len;
                }
                downs.push((i, u, d));
            }
        }
        let sends = downs.iter().map(|(i, u, d)| c_down.isend(*i, *u as u32, d.mem())).collect::<Result<Vec<_>>>()?;
        try_join_all(sends).await.map(|_| ())
    }

    /// Bytes of `from`'s blocks for the ranks `to`: sum over k in `from`, i in `to` of what i receives from k.
    fn answer_bytes(&self, counts: &Counts, from: &[usize], to: &[usize]) -> Result<usize> {
        let mut total = 0;
        for &k in from {
            for &i in to {
                total = add(total, counts.recv(i, k)?)?;
            }
        }
        Ok(total)
    }

    /// The group units of a node leader: its out[u] to the group leader and
    /// in[u] back (or, at the group leader, the whole group's exchange).
    async fn through_group(&self, counts: &Counts, encoded: &[u8], outs: &[Scratch], ins: &Answers) -> Result<()> {
        let group_units: Vec<(usize, usize)> = (self.shape.units.iter().enumerate())
            .filter_map(|(u, unit)| if let Via::Group(h) = unit.via { Some((u, h)) } else { None })
            .collect();
        if group_units.is_empty() {
            return Ok(());
        }
        let gl = self.shape.group_leader;
        if self.rank == gl {
            return self.group_leader(counts, &group_units, outs, ins).await;
        }
        let (c_sizes, c_up, c_down) =
            (self.comm.phase(PHASE_GROUP_SIZES), self.comm.phase(PHASE_GROUP_UP), self.comm.phase(PHASE_GROUP_DOWN));
        let mut sends = Vec::new();
        if self.exchange_sizes {
            // SAFETY: `encoded` lives, unmodified, until these sends complete (awaited below).
            sends.push(c_sizes.isend(gl, 0, unsafe { MemRef::from_slice(encoded) })?);
        }
        for &(u, h) in &group_units {
            sends.push(c_up.isend(gl, h as u32, outs[u].mem())?);
        }
        let recvs = group_units.iter().map(|&(u, h)| c_down.recv(gl, h as u32, ins[u].mem()));
        try_join2(try_join_all(recvs), try_join_all(sends)).await.map(|_| ())
    }

    /// The group leader: its nodes' messages for each other group
    /// concatenated, one exchange per pair of groups, the answers split by node.
    async fn group_leader(
        &self,
        node_counts: &Counts,
        units: &[(usize, usize)],
        outs: &[Scratch],
        ins: &Answers,
    ) -> Result<()> {
        let shape = self.shape;
        let my_nodes: Vec<&[usize]> = shape.group_nodes.iter().map(|&n| shape.nodes[n].as_slice()).collect();
        let (c_sizes, c_up, c_groups, c_down) = (
            self.comm.phase(PHASE_GROUP_SIZES),
            self.comm.phase(PHASE_GROUP_UP),
            self.comm.phase(PHASE_GROUPS),
            self.comm.phase(PHASE_GROUP_DOWN),
        );
        // The counts of every rank of the group.
        let mut counts = Counts { size: self.size, uniform: node_counts.uniform.clone(), per: node_counts.per.clone() };
        if self.exchange_sizes {
            let mut bufs: Vec<Vec<u8>> = my_nodes.iter().map(|n| vec![0u8; n.len() * self.sizes.len()]).collect();
            {
                let mut recvs = Vec::new();
                for (n, buf) in my_nodes.iter().zip(bufs.iter_mut()) {
                    if n[0] != self.rank {
                        // SAFETY: `buf` lives, untouched by anything else, until the receive completes (below).
                        recvs.push(c_sizes.recv(n[0], 0, unsafe { MemRef::from_mut_slice(buf) }));
                    }
                }
                try_join_all(recvs).await?;
            }
            for (n, buf) in my_nodes.iter().zip(&bufs) {
                if n[0] != self.rank {
                    counts.add(n, buf)?;
                }
            }
        }
        let group = shape.group_ranks();
        // Per other group: OUT (node by node: i in the group, j in that group) and IN (k in that group, j in mine).
        let mut outs_g = Vec::with_capacity(units.len());
        let mut ups = Vec::new();
        for &(u, h) in units {
            let theirs = &shape.units[u].ranks;
            let mut per_node = Vec::with_capacity(my_nodes.len());
            for n in &my_nodes {
                let mut len = 0;
                for &i in n.iter() {
                    for &j in theirs {
                        len = add(len, counts.send(i, j)?)?;
                    }
                }
                per_node.push(len);
            }
            let out = c_up.scratch(sum(per_node.iter().copied())?)?;
            let mut at = 0;
            for (n, &len) in my_nodes.iter().zip(&per_node) {
                let slot = out.mem().range(at, len)?;
                if n[0] == self.rank {
                    c_up.copy(slot, outs[u].mem())?;
                } else {
                    ups.push((n[0], h, slot));
                }
                at += len;
            }
            outs_g.push(out);
        }
        try_join_all(ups.iter().map(|&(l, h, slot)| c_up.recv(l, h as u32, slot))).await?;
        let mut ins_g = Vec::with_capacity(units.len());
        for &(u, _) in units {
            ins_g.push(self.comm.scratch(self.answer_bytes(&counts, &shape.units[u].ranks, &group)?)?);
        }
        // alltoallv: the counts behind each message too, (ours, theirs) per group unit.
        let mut checks: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        if self.exchange_sizes {
            for &(u, _) in units {
                let ours = pair_counts(&counts, &group, &shape.units[u].ranks)?;
                checks.push((vec![0u8; ours.len()], ours));
            }
        }
        let mut sends = units
            .iter()
            .zip(&outs_g)
            .map(|(&(_, h), out)| c_groups.isend(shape.group_leaders[h], TAG_BLOCKS, out.mem()))
            .collect::<Result<Vec<_>>>()?;
        let mut recvs: Vec<_> = units
            .iter()
            .zip(&ins_g)
            .map(|(&(_, h), inb)| c_groups.recv(shape.group_leaders[h], TAG_BLOCKS, inb.mem()))
            .collect();
        for (&(_, h), (theirs, ours)) in units.iter().zip(checks.iter_mut()) {
            let gl = shape.group_leaders[h];
            // SAFETY: `checks` outlives these sends and receives (awaited
            // below, or dropped first) and nothing else touches it meanwhile.
            let (ours, theirs) = unsafe { (MemRef::from_slice(ours), MemRef::from_mut_slice(theirs)) };
            sends.push(c_groups.isend(gl, TAG_COUNTS, ours)?);
            recvs.push(c_groups.recv(gl, TAG_COUNTS, theirs));
        }
        try_join2(try_join_all(recvs), try_join_all(sends)).await?;
        for (&(u, h), (theirs, _)) in units.iter().zip(&checks) {
            check_pair_counts(&counts, shape.group_leaders[h], &shape.units[u].ranks, &group, theirs)?;
        }
        // Split each answer by node: for node A, for k in the other group, the blocks k→j for j in A.
        let mut downs = Vec::new();
        for (&(u, h), inb) in units.iter().zip(&ins_g) {
            let theirs = &shape.units[u].ranks;
            let mut pieces: Vec<Vec<(usize, usize)>> = vec![Vec::new(); my_nodes.len()];
            let mut at = 0;
            for &k in theirs {
                for (a, n) in my_nodes.iter().enumerate() {
                    let mut len = 0;
                    for &j in n.iter() {
                        len = add(len, counts.recv(j, k)?)?;
                    }
                    pieces[a].push((at, len));
                    at = add(at, len)?;
                }
            }
            for (n, p) in my_nodes.iter().zip(&pieces) {
                let to = if n[0] == self.rank { None } else { Some(c_down.scratch(sum(p.iter().map(|x| x.1))?)?) };
                let target = to.as_ref().map_or(ins[u].mem(), Scratch::mem);
                let mut q = 0;
                for &(off, len) in p {
                    c_down.copy(target.range(q, len)?, inb.mem().range(off, len)?)?;
                    q += len;
                }
                if let Some(s) = to {
                    downs.push((n[0], h, s));
                }
            }
        }
        let sends = downs.iter().map(|(l, h, s)| c_down.isend(*l, *h as u32, s.mem())).collect::<Result<Vec<_>>>()?;
        try_join_all(sends).await.map(|_| ())
    }
}
