//! reduce_scatter three ways (each by name, `reduce_scatter:@<name>`):
//!
//! - `sat`: the library's own reduce_scatter (`length` is the receive
//!   count), streaming; equal blocks.
//! - `allreduce`: one allreduce of the whole vector into registered scratch,
//!   then this rank's block copied out: one SHARP operation, P times the
//!   data — the choice for small blocks.
//! - `reduces`: one SHARP reduce per root, root r receiving block r, with
//!   `UCC_TL_SHARP_RS_PIPELINE` reduces in flight — the method measured
//!   before the library had reduce_scatter; serves reduce_scatterv too.

use std::collections::VecDeque;

use ferrocoll_core::Result;
use ferrocoll_core::args::ReduceScatter;

use super::{desc, reduce_spec};
use crate::sharp::req::{On, Op, post};
use crate::sharp::sys;
use crate::sharp::team::Exec;

pub(super) async fn sat(x: Exec, o: ReduceScatter) -> Result<()> {
    let (s, sr) = desc(&x, o.src.mem)?;
    let (d, dr) = desc(&x, o.dst)?;
    let recv_count = o.dst.len() / o.reducer.elem_size.max(1);
    let mut spec = reduce_spec(&x, (s, o.src.mem), d, recv_count, o.reducer, 0)?;
    spec.aggr_mode = sys::AGGREGATION_STREAMING;
    post(&x, On::Flat, Op::ReduceScatter(spec), vec![sr, dr])?.await
}

pub(super) async fn via_allreduce(x: Exec, o: ReduceScatter) -> Result<()> {
    let scratch = x.comm.scratch(o.src.mem.len())?;
    let (s, sr) = desc(&x, o.src.mem)?;
    let (d, dr) = desc(&x, scratch.mem())?;
    let spec = reduce_spec(&x, (s, o.src.mem), d, o.count, o.reducer, 0)?;
    post(&x, On::Flat, Op::Allreduce(spec), vec![sr, dr])?.await?;
    let me = x.comm.rank();
    let (off, len) = block(&o, me)?;
    x.comm.copy(o.dst, scratch.mem().range(off, len)?)
}

/// Offset and length in bytes of rank `r`'s block of the source.
fn block(o: &ReduceScatter, r: usize) -> Result<(usize, usize)> {
    let b = o.src.block(r)?;
    Ok((super::offset_in(o.src.mem, b)?, b.len()))
}

pub(super) async fn reduces(x: Exec, o: ReduceScatter) -> Result<()> {
    let (me, size) = (x.comm.rank(), x.comm.size());
    let window = x.team.config.rs_pipeline.max(1);
    let es = o.reducer.elem_size.max(1);
    let (_, sr) = desc(&x, o.src.mem)?;
    let (_, dr) = desc(&x, o.dst)?;
    let mut in_flight = VecDeque::new();
    for root in 0..size {
        let blk = o.src.block(root)?;
        if blk.is_empty() {
            continue; // every rank skips it alike: its count is everyone's
        }
        if in_flight.len() >= window {
            if let Some(oldest) = in_flight.pop_front() {
                oldest.await?;
            }
        }
        let req = {
            let s = sys::DataDesc::host(blk.addr(), blk.len(), sr.mr());
            let d = if root == me { sys::DataDesc::host(o.dst.addr(), o.dst.len(), dr.mr()) } else { s };
            let spec = reduce_spec(&x, (s, blk), d, blk.len() / es, o.reducer, root)?;
            post(&x, On::Flat, Op::Reduce(spec), vec![sr.clone(), dr.clone()])?
        };
        in_flight.push_back(req);
    }
    for r in in_flight {
        r.await?;
    }
    Ok(())
}
