//! Allgather(v): this rank's block (src, or in place its block of dst) to
//! every rank's dst. Allgather's dst holds P equal blocks (dst.count is the
//! total); allgatherv's has a count and displacement per rank.

use super::{Ctx, Validated};
use crate::args::{Allgather, Blocked, Operands};
use crate::error::Result;
use crate::types::CollType;

pub(super) fn validate(c: &Ctx<'_>) -> Result<Validated> {
    let v = c.ck.coll == CollType::Allgatherv;
    let dst = if v { c.ck.info_v("dst")? } else { c.ck.info("dst")? };
    let src = if c.in_place { None } else { Some(c.ck.info("src")?) };
    match (&src, v) {
        (Some(s), false) => c.ck.total_is_p_times("dst", dst.count, "src", s.count)?,
        (None, false) => {
            c.ck.divisible("dst", dst.count)?;
        }
        (Some(s), true) => {
            let mine = dst.block_len(c.rank, c.size);
            if s.count != mine {
                return Err(c.ck.err(format!("src.count {} differs from dst.counts[{}] = {mine}", s.count, c.rank)));
            }
        }
        (None, true) => {}
    }
    let dst_blocked = Blocked { mem: dst.mem, blocks: dst.blocks(c.size) };
    let own = match &src {
        Some(s) => s.mem,
        None => dst_blocked.block(c.rank)?,
    };
    let ops = Operands::Allgather(Allgather { src: own, dst: dst_blocked });
    Ok(Validated { count: dst.count, src, dst: Some(dst), ops })
}
