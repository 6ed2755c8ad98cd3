//! [`Operands`]: what validation hands to algorithms, per collective — the
//! buffers that exist on this rank, already cut into blocks, with the
//! reduction resolved. An algorithm receives exactly its collective's
//! operands and needs to check nothing: a source that must exist is a
//! [`MemRef`], not an `Option`; in place has been resolved to the buffer
//! that plays each part.
//!
//! The v-variants share their base collective's operands (allgatherv's are
//! [`Allgather`]'s with listed blocks), so an algorithm written over
//! [`Blocks`](super::Blocks) serves both.

use super::blocks::Blocked;
use super::{ActiveSet, Reducer};
use crate::buffer::MemRef;
use crate::error::Result;

/// Allreduce: every rank's `src` reduced into every rank's `dst`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allreduce {
    /// This rank's input (`dst` itself in place).
    pub src: MemRef,
    /// The result.
    pub dst: MemRef,
    /// Elements of the vector.
    pub count: usize,
    /// The arithmetic.
    pub reducer: Reducer,
}

/// Reduce: every rank's `src` reduced into the root's `dst`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reduce {
    /// This rank's input (the root's `dst` in place).
    pub src: MemRef,
    /// The result, at the root only.
    pub dst: Option<MemRef>,
    /// The root's team rank.
    pub root: usize,
    /// Elements of the vector.
    pub count: usize,
    /// The arithmetic.
    pub reducer: Reducer,
}

/// Bcast: the root's `buf` copied to every rank's `buf`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bcast {
    /// Input at the root, output elsewhere.
    pub buf: MemRef,
    /// The root's team rank.
    pub root: usize,
    /// Elements.
    pub count: usize,
    /// Bytes per element.
    pub elem_size: usize,
    /// The ranks taking part when not the whole team (validated: it holds the root and this rank).
    pub active_set: Option<ActiveSet>,
}

impl Bcast {
    /// Team ranks taking part, in order: the active set, or `0..team_size`.
    pub fn members(&self, team_size: usize) -> Vec<usize> {
        match &self.active_set {
            Some(s) => s.members().collect(),
            None => (0..team_size).collect(),
        }
    }
}

/// Allgather(v): every rank's block lands in block `rank` of every rank's `dst`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allgather {
    /// This rank's block: src, or in place its block of `dst`.
    pub src: MemRef,
    /// The result and its blocks (even, or allgatherv's counts and displacements).
    pub dst: Blocked,
}

/// Gather(v): every rank's block lands in its block of the root's `dst`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gather {
    /// This rank's block: src, or at the root in place its block of `dst`.
    pub src: MemRef,
    /// The result and its blocks, at the root only.
    pub dst: Option<Blocked>,
    /// The root's team rank.
    pub root: usize,
}

/// Scatter(v): block `r` of the root's `src` lands in rank r's `dst`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scatter {
    /// The input and its blocks, at the root only.
    pub src: Option<Blocked>,
    /// This rank's block: dst, or at the root in place its block of `src`.
    pub dst: MemRef,
    /// The root's team rank.
    pub root: usize,
}

/// Alltoall(v): block j of rank i's `src` lands in block i of rank j's `dst`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alltoall {
    /// The input and its blocks (in place: `dst`, with `dst`'s blocks).
    pub src: Blocked,
    /// The result and its blocks.
    pub dst: Blocked,
    /// `src` is `dst`: an algorithm must read a block before it is overwritten.
    pub in_place: bool,
}

/// Reduce-scatter(v): block r of the reduction of every rank's vector lands in rank r's `dst`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReduceScatter {
    /// This rank's whole vector cut into one block per rank (in place: `dst`'s whole buffer).
    pub src: Blocked,
    /// Where this rank's block of the result goes (in place: its block of `src`).
    pub dst: MemRef,
    /// Elements of the whole vector.
    pub count: usize,
    /// The arithmetic.
    pub reducer: Reducer,
}

/// The operands of one collective on one rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operands {
    /// Allreduce.
    Allreduce(Allreduce),
    /// Reduce.
    Reduce(Reduce),
    /// Bcast.
    Bcast(Bcast),
    /// Allgather and allgatherv.
    Allgather(Allgather),
    /// Gather and gatherv.
    Gather(Gather),
    /// Scatter and scatterv.
    Scatter(Scatter),
    /// Alltoall and alltoallv.
    Alltoall(Alltoall),
    /// Reduce-scatter and reduce-scatterv.
    ReduceScatter(ReduceScatter),
    /// Barrier: no data.
    Barrier,
    /// Fanin: no data; the root leaves last.
    Fanin {
        /// The root's team rank.
        root: usize,
    },
    /// Fanout: no data; the root enters first.
    Fanout {
        /// The root's team rank.
        root: usize,
    },
}

impl Operands {
    /// The same operands with every buffer replaced by `f(buffer)`: for
    /// running a collective on copies of its buffers (staging). `f` must map
    /// sub-ranges of one buffer into the same copy, so that aliasing (in
    /// place) is kept.
    pub fn map_mem(&self, f: &dyn Fn(MemRef) -> Result<MemRef>) -> Result<Operands> {
        let blocked = |b: &Blocked| -> Result<Blocked> { Ok(Blocked { mem: f(b.mem)?, blocks: b.blocks.clone() }) };
        Ok(match self {
            Operands::Allreduce(o) => Operands::Allreduce(Allreduce { src: f(o.src)?, dst: f(o.dst)?, ..o.clone() }),
            Operands::Reduce(o) => {
                Operands::Reduce(Reduce { src: f(o.src)?, dst: o.dst.map(f).transpose()?, ..o.clone() })
            }
            Operands::Bcast(o) => Operands::Bcast(Bcast { buf: f(o.buf)?, ..o.clone() }),
            Operands::Allgather(o) => Operands::Allgather(Allgather { src: f(o.src)?, dst: blocked(&o.dst)? }),
            Operands::Gather(o) => {
                Operands::Gather(Gather { src: f(o.src)?, dst: o.dst.as_ref().map(blocked).transpose()?, root: o.root })
            }
            Operands::Scatter(o) => Operands::Scatter(Scatter {
                src: o.src.as_ref().map(blocked).transpose()?,
                dst: f(o.dst)?,
                root: o.root,
            }),
            Operands::Alltoall(o) => {
                Operands::Alltoall(Alltoall { src: blocked(&o.src)?, dst: blocked(&o.dst)?, in_place: o.in_place })
            }
            Operands::ReduceScatter(o) => {
                Operands::ReduceScatter(ReduceScatter { src: blocked(&o.src)?, dst: f(o.dst)?, ..o.clone() })
            }
            Operands::Barrier => Operands::Barrier,
            Operands::Fanin { root } => Operands::Fanin { root: *root },
            Operands::Fanout { root } => Operands::Fanout { root: *root },
        })
    }

    /// A short name of the variant, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Operands::Allreduce(_) => "allreduce",
            Operands::Reduce(_) => "reduce",
            Operands::Bcast(_) => "bcast",
            Operands::Allgather(_) => "allgather",
            Operands::Gather(_) => "gather",
            Operands::Scatter(_) => "scatter",
            Operands::Alltoall(_) => "alltoall",
            Operands::ReduceScatter(_) => "reduce_scatter",
            Operands::Barrier => "barrier",
            Operands::Fanin { .. } => "fanin",
            Operands::Fanout { .. } => "fanout",
        }
    }
}
