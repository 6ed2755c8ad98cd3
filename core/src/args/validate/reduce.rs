//! Reduce: src of N elements on every rank, dst of N at the root; in place,
//! the root's dst is its input.

use super::{Ctx, Validated};
use crate::args::{Operands, Reduce};
use crate::error::{Error, Result};

pub(super) fn validate(c: &Ctx<'_>) -> Result<Validated> {
    let dst = if c.is_root() { Some(c.ck.info("dst")?) } else { None };
    let src = if c.in_place && c.is_root() { None } else { Some(c.ck.info("src")?) };
    if let (Some(s), Some(d)) = (&src, &dst) {
        c.ck.same_count("src", s.count, "dst", d.count)?;
    }
    let input = src.as_ref().or(dst.as_ref()).ok_or_else(|| Error::internal("reduce: no input"))?;
    let ops = Operands::Reduce(Reduce {
        src: input.mem,
        dst: dst.as_ref().map(|d| d.mem),
        root: c.root,
        count: input.count,
        reducer: c.reducer(input),
    });
    Ok(Validated { count: input.count, src, dst, ops })
}
