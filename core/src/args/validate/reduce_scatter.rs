//! Reduce-scatter(v). reduce_scatter: src holds P·B elements and dst B (in
//! place dst holds the whole vector, any count, UCC's block distribution,
//! and the result lands on the rank's own block). reduce_scatterv: dst's
//! counts cut the vector into blocks placed back to back; src holds the
//! whole vector and dst this rank's block (in place dst holds the vector).

use super::{Ctx, Validated};
use crate::args::{Blocked, Blocks, Operands, ReduceScatter};
use crate::error::Result;
use crate::types::CollType;

pub(super) fn validate(c: &Ctx<'_>) -> Result<Validated> {
    let v = c.ck.coll == CollType::ReduceScatterv;
    let dst = if v { c.ck.info_counts(c.in_place, c.rank)? } else { c.ck.info("dst")? };
    let total = match &dst.v {
        Some(l) => l.counts.iter().sum(),
        None if c.in_place => dst.count,
        None => c.ck.times_p("dst", dst.count)?,
    };
    let src = if c.in_place { None } else { Some(c.ck.info("src")?) };
    if let Some(s) = &src {
        if v {
            if s.count != total {
                return Err(c.ck.err(format!("src.count {} differs from the sum of dst.counts, {total}", s.count)));
            }
        } else {
            c.ck.total_is_p_times("src", s.count, "dst", dst.count)?;
        }
    }
    let blocks = match &dst.v {
        Some(l) => Blocks::back_to_back(&l.counts, dst.elem_size),
        None => Blocks::even(total, c.size, dst.elem_size),
    };
    let vector = Blocked { mem: src.as_ref().map_or(dst.mem, |s| s.mem), blocks };
    let out = if c.in_place { vector.block(c.rank)? } else { dst.mem };
    let ops = Operands::ReduceScatter(ReduceScatter { src: vector, dst: out, count: total, reducer: c.reducer(&dst) });
    Ok(Validated { count: total, src, dst: Some(dst), ops })
}
