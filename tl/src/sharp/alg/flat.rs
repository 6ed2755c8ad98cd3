//! One SHARP call over every team rank: allreduce, reduce, bcast, barrier, allgather.

use ferrocoll_core::args::{Allgather, Allreduce, Bcast, Reduce};
use ferrocoll_core::{Error, Result};

use super::{desc, reduce_spec};
use crate::sharp::req::{On, Op, post};
use crate::sharp::sys;
use crate::sharp::team::Exec;

pub(super) async fn allreduce(x: Exec, o: Allreduce) -> Result<()> {
    let (s, sr) = desc(&x, o.src)?;
    let (d, dr) = desc(&x, o.dst)?;
    let spec = reduce_spec(&x, (s, o.src), d, o.count, o.reducer, 0)?;
    post(&x, On::Flat, Op::Allreduce(spec), vec![sr, dr])?.await
}

pub(super) async fn reduce(x: Exec, o: Reduce) -> Result<()> {
    let (s, sr) = desc(&x, o.src)?;
    let mut regs = vec![sr];
    // Only the root receives; elsewhere the send buffer stands in.
    let d = match o.dst {
        Some(dst) => {
            let (d, dr) = desc(&x, dst)?;
            regs.push(dr);
            d
        }
        None => s,
    };
    let spec = reduce_spec(&x, (s, o.src), d, o.count, o.reducer, o.root)?;
    post(&x, On::Flat, Op::Reduce(spec), regs)?.await
}

pub(super) async fn bcast(x: Exec, o: Bcast) -> Result<()> {
    let (b, br) = desc(&x, o.buf)?;
    let root = i32::try_from(o.root).map_err(|_| Error::invalid_param(format!("root {} too large", o.root)))?;
    let spec = sys::BcastSpec { root, buf_desc: b, size: o.buf.len(), reserved: [0; 4] };
    post(&x, On::Flat, Op::Bcast(spec), vec![br])?.await
}

pub(super) async fn barrier(x: Exec) -> Result<()> {
    post(&x, On::Flat, Op::Barrier, Vec::new())?.await
}

pub(super) async fn allgather(x: Exec, o: Allgather) -> Result<()> {
    let (s, sr) = desc(&x, o.src)?;
    let (d, dr) = desc(&x, o.dst.mem)?;
    // Bytes, as a byte datatype: allgather moves data, whatever its type.
    let spec =
        sys::GatherSpec { sbuf_desc: s, rbuf_desc: d, dtype: 11, size: o.src.len(), offset: 0, reserved: [0; 4] };
    post(&x, On::Flat, Op::Allgather(spec), vec![sr, dr])?.await
}
