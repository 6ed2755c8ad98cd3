//! Scatter(v): block r of the root's src to rank r's dst (at the root in
//! place, its block stays in src). Scatter's src holds P equal blocks
//! (src.count is the total); scatterv's has a count and displacement per rank.

use super::{Ctx, Validated};
use crate::args::{Blocked, Operands, Scatter};
use crate::error::{Error, Result};
use crate::types::CollType;

pub(super) fn validate(c: &Ctx<'_>) -> Result<Validated> {
    let v = c.ck.coll == CollType::Scatterv;
    let src = match (c.is_root(), v) {
        (false, _) => None,
        (true, false) => Some(c.ck.info("src")?),
        (true, true) => Some(c.ck.info_v("src")?),
    };
    let dst = if c.in_place && c.is_root() { None } else { Some(c.ck.info("dst")?) };
    let count = match (&src, &dst, v) {
        (Some(s), Some(d), false) => {
            c.ck.total_is_p_times("src", s.count, "dst", d.count)?;
            s.count
        }
        (Some(s), None, false) => c.ck.divisible("src", s.count)?,
        (None, Some(d), false) => c.ck.times_p("dst", d.count)?,
        (Some(s), Some(d), true) => {
            let mine = s.block_len(c.rank, c.size);
            if d.count != mine {
                return Err(c.ck.err(format!("dst.count {} differs from src.counts[{}] = {mine}", d.count, c.rank)));
            }
            s.count
        }
        (s, _, _) => s.as_ref().map_or(0, |s| s.count),
    };
    let src_blocked = src.as_ref().map(|s| Blocked { mem: s.mem, blocks: s.blocks(c.size) });
    let own = match (&dst, &src_blocked) {
        (Some(d), _) => d.mem,
        (None, Some(s)) => s.block(c.rank)?,
        (None, None) => return Err(Error::internal(format!("{}: rank {} has no block", c.ck.coll, c.rank))),
    };
    let ops = Operands::Scatter(Scatter { src: src_blocked, dst: own, root: c.root });
    Ok(Validated { count, src, dst, ops })
}
