//! Bcast: one buffer (src) on every rank: the root's input, the others' output.

use super::{Ctx, Validated};
use crate::args::{Bcast, Operands};
use crate::error::Result;

pub(super) fn validate(c: &Ctx<'_>) -> Result<Validated> {
    let b = c.ck.info("src")?;
    let ops = Operands::Bcast(Bcast {
        buf: b.mem,
        root: c.root,
        count: b.count,
        elem_size: b.elem_size,
        active_set: c.ck.args.active_set,
    });
    Ok(Validated { count: b.count, src: Some(b), dst: None, ops })
}
