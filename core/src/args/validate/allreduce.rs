//! Allreduce: src and dst of N elements on every rank; in place, dst is both.

use super::{Ctx, Validated};
use crate::args::{Allreduce, Operands};
use crate::error::Result;

pub(super) fn validate(c: &Ctx<'_>) -> Result<Validated> {
    let dst = c.ck.info("dst")?;
    let src = if c.in_place { None } else { Some(c.ck.info("src")?) };
    if let Some(s) = &src {
        c.ck.same_count("src", s.count, "dst", dst.count)?;
    }
    let ops = Operands::Allreduce(Allreduce {
        src: src.as_ref().map_or(dst.mem, |s| s.mem),
        dst: dst.mem,
        count: dst.count,
        reducer: c.reducer(&dst),
    });
    Ok(Validated { count: dst.count, src, dst: Some(dst), ops })
}
