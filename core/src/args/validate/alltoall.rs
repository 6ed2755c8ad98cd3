//! Alltoall(v): block j of src to rank j, whose block i of dst receives it.
//! Alltoall's buffers hold P equal blocks (the counts are totals);
//! alltoallv's have a count and displacement per peer. In place, dst (with
//! its own layout) is the input too.

use super::{Ctx, Validated};
use crate::args::{Alltoall, Blocked, Operands};
use crate::error::Result;
use crate::types::CollType;

pub(super) fn validate(c: &Ctx<'_>) -> Result<Validated> {
    let v = c.ck.coll == CollType::Alltoallv;
    let side = |name: &str| if v { c.ck.info_v(name) } else { c.ck.info(name) };
    let dst = side("dst")?;
    let src = if c.in_place { None } else { Some(side("src")?) };
    if !v {
        if let Some(s) = &src {
            c.ck.same_count("src", s.count, "dst", dst.count)?;
        }
        c.ck.divisible("dst", dst.count)?;
    }
    let dst_blocked = Blocked { mem: dst.mem, blocks: dst.blocks(c.size) };
    let src_blocked = match &src {
        Some(s) => Blocked { mem: s.mem, blocks: s.blocks(c.size) },
        None => dst_blocked.clone(),
    };
    let ops = Operands::Alltoall(Alltoall { src: src_blocked, dst: dst_blocked, in_place: c.in_place });
    Ok(Validated { count: dst.count, src, dst: Some(dst), ops })
}
