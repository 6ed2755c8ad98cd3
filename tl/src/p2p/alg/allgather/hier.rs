//! Hierarchical allgather(v): the blocks go up the hierarchy
//! (`pattern::hier`: node, switch group, top), each leader gathering its
//! members' spans; the members of the outermost level (the group leaders,
//! or the node leaders under one switch) then exchange their spans, each
//! sending its own to every other one (one message per pair of them: each
//! node's or group's blocks cross a slow link once per receiver); and every
//! leader finally sends the whole result down its levels. Within a node
//! everything moves over shared memory; across, only leaders talk.
//!
//! Blocks land in dst at their own offsets as they arrive (a one-rank span
//! straight into its block); a span of several ranks travels packed in span
//! order. The full result goes down as one message: dst itself where its
//! blocks lie back to back in rank order, else packed (allgatherv's
//! displacements may leave gaps or differ between ranks; the message is the
//! sum of the counts either way). Serves allgather and allgatherv: every
//! rank knows every block's size. Chosen by name (`allgather:@hier`,
//! `allgatherv:@hier`).

use ferrocoll_core::args::{Allgather, Blocked};
use ferrocoll_core::backend::Scratch;
use ferrocoll_core::engine::{try_join_all, try_join2};
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::hier::{Level, levels};

const TAG_UP: u32 = 0;
const TAG_ACROSS: u32 = 1;
const TAG_DOWN: u32 = 2;

pub(crate) async fn run(comm: Comm, o: Allgather) -> Result<()> {
    let rank = comm.rank();
    comm.copy(o.dst.block(rank)?, o.src)?;
    let levels = levels(comm.layout(), rank, None)?;
    let active: Vec<(usize, &Level)> = levels.iter().enumerate().filter(|(_, l)| !l.trivial()).collect();
    let mut led = Vec::new();
    for &(i, level) in &active {
        let c = comm.phase(i as u32);
        if level.outermost {
            exchange(&c, &o.dst, level).await?;
            break;
        }
        if !level.leads() {
            let mine = Span::pack(&c, &o.dst, &level.spans[level.me])?;
            c.send(level.leader_rank(), TAG_UP, mine.mem()).await?;
            let all = Span::slots(&c, &o.dst, &all_ranks(comm.size()))?;
            c.recv(level.leader_rank(), TAG_DOWN, all.mem()).await?;
            all.unpack(&c, &o.dst)?;
            break;
        }
        let spans = level.spans.iter().enumerate().filter(|(m, _)| *m != level.me);
        let slots =
            spans.map(|(m, s)| Ok((level.members[m], Span::slots(&c, &o.dst, s)?))).collect::<Result<Vec<_>>>()?;
        try_join_all(slots.iter().map(|(r, s)| c.recv(*r, TAG_UP, s.mem()))).await?;
        for (_, s) in &slots {
            s.unpack(&c, &o.dst)?;
        }
        led.push((i, level));
    }
    if led.is_empty() {
        return Ok(());
    }
    let all = Span::pack(&comm, &o.dst, &all_ranks(comm.size()))?;
    for &(i, level) in led.iter().rev() {
        let c = comm.phase(i as u32);
        let others = level.members.iter().enumerate().filter(|(m, _)| *m != level.me);
        let sends = others.map(|(_, &r)| c.isend(r, TAG_DOWN, all.mem())).collect::<Result<Vec<_>>>()?;
        try_join_all(sends).await?;
    }
    Ok(())
}

fn all_ranks(size: usize) -> Vec<usize> {
    (0..size).collect()
}

/// The outermost level: every member sends its span to every other member
/// and receives theirs.
async fn exchange(c: &Comm, dst: &Blocked, level: &Level) -> Result<()> {
    let mine = Span::pack(c, dst, &level.spans[level.me])?;
    let others: Vec<usize> = (0..level.members.len()).filter(|&m| m != level.me).collect();
    let slots = others.iter().map(|&m| Span::slots(c, dst, &level.spans[m])).collect::<Result<Vec<_>>>()?;
    let sends =
        others.iter().map(|&m| c.isend(level.members[m], TAG_ACROSS, mine.mem())).collect::<Result<Vec<_>>>()?;
    let recvs = others.iter().zip(&slots).map(|(&m, s)| c.recv(level.members[m], TAG_ACROSS, s.mem()));
    try_join2(try_join_all(recvs), try_join_all(sends)).await?;
    for s in &slots {
        s.unpack(c, dst)?;
    }
    Ok(())
}

/// The blocks of some ranks as one message: a range of dst where they lie
/// back to back there, else a packed scratch.
struct Span {
    ranks: Vec<usize>,
    mem: MemRef,
    /// Set when the span is packed (then unpacked into dst).
    packed: Option<Scratch>,
}

impl Span {
    /// The span's blocks in dst if contiguous in span order, else None.
    fn contiguous(dst: &Blocked, ranks: &[usize]) -> Result<Option<MemRef>> {
        // Empty blocks are skipped: their displacements mean nothing.
        let mut range: Option<(usize, usize)> = None;
        for &r in ranks {
            let (off, len) = dst.blocks.get(r)?;
            if len == 0 {
                continue;
            }
            let end = |from: usize| {
                from.checked_add(len).ok_or_else(|| Error::invalid_param(format!("allgather: block {r} overflows")))
            };
            range = match range {
                None => Some((off, end(off)?)),
                Some((start, at)) if off == at => Some((start, end(at)?)),
                Some(_) => return Ok(None),
            };
        }
        match range {
            None => Ok(Some(MemRef::empty(dst.mem.mem_type()))),
            Some((start, end)) => Ok(Some(dst.mem.range(start, end - start)?)),
        }
    }

    /// Total bytes of the span's blocks.
    fn bytes(dst: &Blocked, ranks: &[usize]) -> Result<usize> {
        ranks.iter().try_fold(0usize, |acc, &r| {
            acc.checked_add(dst.blocks.get(r)?.1).ok_or_else(|| Error::invalid_param("allgather: span size overflows"))
        })
    }

    /// Where to receive the span: dst itself, or scratch to unpack from.
    fn slots(c: &Comm, dst: &Blocked, ranks: &[usize]) -> Result<Span> {
        if let Some(mem) = Span::contiguous(dst, ranks)? {
            return Ok(Span { ranks: ranks.to_vec(), mem, packed: None });
        }
        let s = c.scratch(Span::bytes(dst, ranks)?)?;
        Ok(Span { ranks: ranks.to_vec(), mem: s.mem(), packed: Some(s) })
    }

    /// The span to send: dst itself, or its blocks packed.
    fn pack(c: &Comm, dst: &Blocked, ranks: &[usize]) -> Result<Span> {
        let span = Span::slots(c, dst, ranks)?;
        if span.packed.is_some() {
            let mut at = 0;
            for &r in ranks {
                let b = dst.block(r)?;
                c.copy(span.mem.range(at, b.len())?, b)?;
                at += b.len();
            }
        }
        Ok(span)
    }

    fn mem(&self) -> MemRef {
        self.mem
    }

    /// A received span into dst (nothing to do if it arrived there).
    fn unpack(&self, c: &Comm, dst: &Blocked) -> Result<()> {
        if self.packed.is_none() {
            return Ok(());
        }
        let mut at = 0;
        for &r in &self.ranks {
            let b = dst.block(r)?;
            c.copy(b, self.mem.range(at, b.len())?)?;
            at += b.len();
        }
        Ok(())
    }
}
