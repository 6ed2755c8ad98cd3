//! What the score map selects by: UCC's memory type and message size of a
//! collective (`ucc_coll_args_mem_type`, `ucc_coll_args_msgsize`).

use super::check::Buf;
use crate::types::{CollType, MemType};

/// UCC's `ucc_coll_args_mem_type`.
pub(super) fn mem_type(coll: CollType, is_root: bool, src: Option<&Buf>, dst: Option<&Buf>) -> MemType {
    use CollType::*;
    let mt = |b: Option<&Buf>| b.map(|b| b.mem.mem_type());
    let pick = match coll {
        Barrier | Fanin | Fanout => None,
        Bcast => mt(src),
        Reduce | Gather | Gatherv => {
            if is_root {
                mt(dst).or(mt(src))
            } else {
                mt(src)
            }
        }
        Scatter | Scatterv => {
            if is_root {
                mt(src).or(mt(dst))
            } else {
                mt(dst)
            }
        }
        _ => mt(dst).or(mt(src)),
    };
    pick.unwrap_or(MemType::Host)
}

/// UCC's `ucc_coll_args_msgsize` (asymmetric v-variants count as 0).
pub(super) fn msgsize(
    coll: CollType,
    is_root: bool,
    size: usize,
    total: usize,
    src: Option<&Buf>,
    dst: Option<&Buf>,
) -> u64 {
    use CollType::*;
    let bytes = |b: Option<&Buf>| b.map_or(0, |b| (b.count as u64).saturating_mul(b.elem_size as u64));
    let n = size as u64;
    match coll {
        Barrier | Fanin | Fanout | Alltoallv | Gatherv | Scatterv => 0,
        Bcast => bytes(src),
        Allreduce | Alltoall | Allgather | ReduceScatter => bytes(dst),
        Allgatherv | ReduceScatterv => dst.map_or(0, |b| (total as u64).saturating_mul(b.elem_size as u64)),
        Reduce => {
            if is_root {
                bytes(dst)
            } else {
                bytes(src)
            }
        }
        Gather => {
            if is_root {
                bytes(dst)
            } else {
                bytes(src).saturating_mul(n)
            }
        }
        Scatter => {
            if is_root {
                bytes(src)
            } else {
                bytes(dst).saturating_mul(n)
            }
        }
    }
}
