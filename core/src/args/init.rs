//! [`CollInit`]: a collective after validation — what the engine selects
//! by and runs, and the [`Operands`] its algorithms work on.

use std::time::Duration;

use super::{ActiveSet, CompletionCallback, Operands};
use crate::buffer::MemRef;
use crate::types::{CollType, DataType, MemType, ReduceOp};

/// Arguments after validation: what transports and algorithms receive.
#[derive(Clone)]
pub struct CollInit {
    /// Collective.
    pub coll: CollType,
    /// This rank in the team.
    pub rank: usize,
    /// Team size.
    pub size: usize,
    /// Root (0 for unrooted collectives).
    pub root: usize,
    /// Reduction (sum when unused).
    pub op: ReduceOp,
    /// Element type of the data (`Uint8` when there is none).
    pub dtype: DataType,
    /// Bytes of one element as the algorithms move it (the pair size for
    /// maxloc/minloc; 1 when there is no data).
    pub elem_size: usize,
    /// In place.
    pub in_place: bool,
    /// Persistent: may be posted again.
    pub persistent: bool,
    /// Timeout from post to completion.
    pub timeout: Option<Duration>,
    /// Memory type used for selection.
    pub mem_type: MemType,
    /// Message size used for selection, in bytes (UCC's `ucc_coll_args_msgsize`).
    pub msgsize: u64,
    /// Elements of the full vector: N for allreduce, reduce and bcast; the
    /// P·N total for allgather, alltoall, gather, scatter and reduce_scatter;
    /// the sum of counts for v-variants.
    pub count: usize,
    /// The user's whole source buffer, when this rank reads one (`None` in place).
    pub src: Option<MemRef>,
    /// The user's whole destination buffer, when this rank writes one.
    pub dst: Option<MemRef>,
    /// Whether the collective writes every byte of `dst` (false in place and
    /// for v-layouts, which may leave gaps): a copy of `dst` that is written
    /// back must then first be filled from it.
    pub dst_fully_written: bool,
    /// What the algorithms work on.
    pub ops: Operands,
    /// Bcast among a subset of ranks.
    pub active_set: Option<ActiveSet>,
    /// User tag.
    pub tag: Option<u16>,
    /// Completion callback.
    pub cb: Option<CompletionCallback>,
}

impl std::fmt::Debug for CollInit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.coll)?;
        if self.coll.is_reduction() {
            write!(f, " {}", self.op)?;
        }
        if !self.coll.is_synchronisation() {
            write!(f, " count {} {}", self.count, self.dtype)?;
        }
        if self.in_place {
            f.write_str(" in-place")?;
        }
        if self.coll.is_rooted() {
            write!(f, " root {}", self.root)?;
        }
        write!(f, " (rank {} of {}, {} bytes, {})", self.rank, self.size, self.msgsize, self.mem_type)
    }
}

impl CollInit {
    /// True when no rank moves any data (UCC's zero-size short-cut applies).
    pub fn is_zero_size(&self) -> bool {
        use CollType::*;
        matches!(self.coll, Allreduce | Allgather | Alltoall | Bcast | Gather | Reduce | Scatter) && self.count == 0
    }
}
