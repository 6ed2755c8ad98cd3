//! Collective arguments with UCC's meaning (`ucc_coll_args_t`), and their
//! validation into [`CollInit`], the form that transports trust.
//!
//! Buffer semantics follow UCC, which differ from MPI in places:
//!
//! | collective | src | dst | counts | in place |
//! |---|---|---|---|---|
//! | allreduce | all ranks, N | all ranks, N | N | dst is input and output |
//! | reduce | all ranks, N | root only, N | N | root: dst is its input and the result |
//! | bcast | all ranks: root's input, others' output | unused | N | not allowed (bcast is always in place) |
//! | allgather | N | P·N (total) | dst.count is the total | rank r's block already at dst + r·N |
//! | allgatherv | counts\[rank\] | info_v: counts, displs | per rank | own block already at dst + displs\[rank\] |
//! | alltoall | P·N (total) | P·N (total) | block for peer i at i·N | dst is input and output |
//! | alltoallv | info_v | info_v | per peer, displacements in elements | dst (with dst's counts) is input and output |
//! | reduce_scatter | P·B (total) | B | dst.count is the block | dst.count is the TOTAL; rank r's block of the result lands at its own offset |
//! | reduce_scatterv | Σcounts | info_v: counts per rank | per rank | dst holds Σcounts; result at offset Σ_{i<r} counts\[i\] |
//! | gather | N | root only, P·N | | root: its block already at dst + root·N |
//! | gatherv | counts\[rank\] | root only, info_v | | root: its block already at dst + displs\[root\] |
//! | scatter | root only, P·N | N | | root: its block stays in src |
//! | scatterv | root only, info_v | counts\[rank\] | | root: its block stays in src |
//! | barrier, fanin, fanout | — | — | — | not allowed |
//!
//! When a block count does not divide evenly (in-place reduce_scatter), the
//! first `total % P` blocks hold one extra element ([`block_offset`]).
//!
//! Validation ([`CollInit::validate`], one file per collective under
//! `validate/`) turns these arguments into a [`CollInit`]: what the engine
//! needs to select and run the collective, and the [`Operands`] its
//! algorithms work on.

mod blocks;
mod init;
mod operands;
mod reducer;
mod signature;
mod validate;

use std::sync::Arc;

pub use blocks::{Blocked, Blocks, block_count, block_offset};
pub use init::CollInit;
pub use operands::{Allgather, Allreduce, Alltoall, Bcast, Gather, Operands, Reduce, ReduceScatter, Scatter};
pub use reducer::Reducer;
pub use signature::Signature;
pub(crate) use validate::ArraysRead;

use crate::error::Status;
use crate::types::{CollType, DataType, MemType, ReduceOp};

/// `ucc_coll_buffer_info_t`: a buffer of `count` elements.
#[derive(Clone, Copy, Debug)]
pub struct BufferInfo {
    /// Start of the buffer.
    pub buffer: *mut u8,
    /// Number of elements (see the table above for what it counts).
    pub count: u64,
    /// Element type.
    pub datatype: DataType,
    /// Where it lives (`Unknown`: ask the memory components).
    pub mem_type: MemType,
}

/// `ucc_coll_buffer_info_v_t`: a buffer with a count and a displacement
/// (in elements) per rank.
///
/// `counts` and `displacements` point to team-size arrays of `u32`, or of
/// `u64` when [`CollFlags::COUNT_64BIT`] / [`CollFlags::DISPLACEMENTS_64BIT`] are set.
#[derive(Clone, Copy, Debug)]
pub struct BufferInfoV {
    /// Start of the buffer.
    pub buffer: *mut u8,
    /// Team-size array of element counts.
    pub counts: *const u8,
    /// Team-size array of displacements in elements.
    pub displacements: *const u8,
    /// Element type.
    pub datatype: DataType,
    /// Where it lives.
    pub mem_type: MemType,
}

/// One side (source or destination) of a collective.
#[derive(Clone, Copy, Debug, Default)]
pub enum CollBuffer {
    /// Not used by this collective (or by this rank).
    #[default]
    None,
    /// A plain buffer.
    Info(BufferInfo),
    /// A buffer with per-rank counts and displacements.
    InfoV(BufferInfoV),
}

/// UCC's collective flags (`UCC_COLL_ARGS_FLAG_*`), same bit values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CollFlags(pub u64);

impl CollFlags {
    /// Output buffer is the input buffer.
    pub const IN_PLACE: CollFlags = CollFlags(1);
    /// The request may be posted again after it completes.
    pub const PERSISTENT: CollFlags = CollFlags(2);
    /// v-variant counts are `u64` (else `u32`).
    pub const COUNT_64BIT: CollFlags = CollFlags(4);
    /// v-variant displacements are `u64` (else `u32`).
    pub const DISPLACEMENTS_64BIT: CollFlags = CollFlags(8);
    /// Hint: the source is contiguous.
    pub const CONTIG_SRC_BUFFER: CollFlags = CollFlags(16);
    /// Hint: the destination is contiguous.
    pub const CONTIG_DST_BUFFER: CollFlags = CollFlags(32);
    /// [`CollArgs::timeout`] applies.
    pub const TIMEOUT: CollFlags = CollFlags(64);
    /// Buffers are in mapped memory (`ucc_mem_map`), which lets UCC run a
    /// one-sided algorithm; ferrocoll runs its two-sided ones, which every
    /// rank posts alike: the same result.
    pub const MEM_MAPPED_BUFFERS: CollFlags = CollFlags(128);
    /// ferrocoll's extension (a bit UCC does not use): the buffers of a
    /// maxloc/minloc reduction hold C-layout `{ value; int32_t index }` pairs
    /// of the datatype, and counts count pairs. A raw maxloc/minloc without it
    /// is refused, so that a plain array of values is never read as pairs.
    /// The typed [`Coll`](crate::Coll) API sets it for `ValueIndex<T>` buffers.
    pub const LOC_PAIRS: CollFlags = CollFlags(1 << 48);

    /// Whether every bit of `f` is set.
    pub const fn contains(self, f: CollFlags) -> bool {
        self.0 & f.0 == f.0
    }
}

impl std::ops::BitOr for CollFlags {
    type Output = CollFlags;
    fn bitor(self, rhs: CollFlags) -> CollFlags {
        CollFlags(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for CollFlags {
    fn bitor_assign(&mut self, rhs: CollFlags) {
        self.0 |= rhs.0;
    }
}

/// A strided subset of team ranks (UCC's active set; bcast only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveSet {
    /// First team rank.
    pub start: u64,
    /// Distance between members (may be negative).
    pub stride: i64,
    /// Number of members.
    pub size: u64,
}

impl ActiveSet {
    /// The members' team ranks, in set order. Meaningful for a validated
    /// set (every member inside the team); members outside `usize` are skipped.
    pub fn members(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.size).filter_map(move |i| {
            let m = i128::from(self.start) + i128::from(i) * i128::from(self.stride);
            usize::try_from(m).ok()
        })
    }
}

/// Called once when a request completes, with its status (UCC's `cb`).
pub type CompletionCallback = Arc<dyn Fn(Status) + Send + Sync>;

/// `ucc_coll_args_t`: everything a collective needs, with raw buffers.
///
/// The safe, typed way to build one is [`Coll`](crate::Coll); this struct is
/// for C-style callers who manage their buffers themselves.
#[derive(Clone)]
pub struct CollArgs {
    /// Which collective.
    pub coll_type: CollType,
    /// Source side.
    pub src: CollBuffer,
    /// Destination side.
    pub dst: CollBuffer,
    /// Reduction (reduction collectives only).
    pub op: ReduceOp,
    /// Flags.
    pub flags: CollFlags,
    /// Root rank (rooted collectives), in team ranks.
    pub root: u64,
    /// Timeout in seconds, used when [`CollFlags::TIMEOUT`] is set.
    pub timeout: f64,
    /// Bcast among a strided subset of ranks.
    pub active_set: Option<ActiveSet>,
    /// User tag: matches active-set collectives (which do not take a sequence number).
    pub tag: Option<u16>,
    /// Completion callback.
    pub cb: Option<CompletionCallback>,
}

impl std::fmt::Debug for CollArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollArgs")
            .field("coll_type", &self.coll_type)
            .field("src", &self.src)
            .field("dst", &self.dst)
            .field("op", &self.op)
            .field("flags", &self.flags)
            .field("root", &self.root)
            .field("timeout", &self.timeout)
            .field("active_set", &self.active_set)
            .field("tag", &self.tag)
            .field("cb", &self.cb.as_ref().map(|_| "callback"))
            .finish()
    }
}

impl CollArgs {
    /// Arguments for `coll_type` with no buffers, op sum, root 0, no flags.
    pub fn new(coll_type: CollType) -> CollArgs {
        CollArgs {
            coll_type,
            src: CollBuffer::None,
            dst: CollBuffer::None,
            op: ReduceOp::Sum,
            flags: CollFlags::default(),
            root: 0,
            timeout: 0.0,
            active_set: None,
            tag: None,
            cb: None,
        }
    }
}
