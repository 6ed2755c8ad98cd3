//! Gather(v): every rank's block (src, or at the root in place its block of
//! dst) to its block of the root's dst. Gather's dst holds P equal blocks
//! (dst.count is the total); gatherv's has a count and displacement per rank.

use super::{Ctx, Validated};
use crate::args::{Blocked, Gather, Operands};
use crate::error::{Error, Result};
use crate::types::CollType;

pub(super) fn validate(c: &Ctx<'_>) -> Result<Validated> {
    let v = c.ck.coll == CollType::Gatherv;
    let dst = match (c.is_root(), v) {
        (false, _) => None,
        (true, false) => Some(c.ck.info("dst")?),
        (true, true) => Some(c.ck.info_v("dst")?),
    };
    let src = if c.in_place && c.is_root() { None } else { Some(c.ck.info("src")?) };
    let count = match (&src, &dst, v) {
        (Some(s), Some(d), false) => {
            c.ck.total_is_p_times("dst", d.count, "src", s.count)?;
            d.count
        }
        (None, Some(d), false) => c.ck.divisible("dst", d.count)?,
        (Some(s), None, false) => c.ck.times_p("src", s.count)?,
        (Some(s), Some(d), true) => {
            let mine = d.block_len(c.rank, c.size);
            if s.count != mine {
                return Err(c.ck.err(format!("src.count {} differs from dst.counts[{}] = {mine}", s.count, c.rank)));
            }
            d.count
        }
        (_, d, _) => d.as_ref().map_or(0, |d| d.count),
    };
    let dst_blocked = dst.as_ref().map(|d| Blocked { mem: d.mem, blocks: d.blocks(c.size) });
    let own = match (&src, &dst_blocked) {
        (Some(s), _) => s.mem,
        (None, Some(d)) => d.block(c.rank)?,
        (None, None) => return Err(Error::internal(format!("{}: rank {} has no block", c.ck.coll, c.rank))),
    };
    let ops = Operands::Gather(Gather { src: own, dst: dst_blocked, root: c.root });
    Ok(Validated { count, src, dst, ops })
}
