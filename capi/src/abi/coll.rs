//! Collective arguments (`ucc_coll_args_t`) and the request (`ucc_coll_req_t`).

use std::ffi::c_void;

use super::UccStatus;

/// `UCC_COLL_ARGS_FIELD_FLAGS`.
pub const ARGS_FIELD_FLAGS: u64 = 1 << 0;
/// `UCC_COLL_ARGS_FIELD_TAG`.
pub const ARGS_FIELD_TAG: u64 = 1 << 1;
/// `UCC_COLL_ARGS_FIELD_CB`.
pub const ARGS_FIELD_CB: u64 = 1 << 2;
/// `UCC_COLL_ARGS_FIELD_GLOBAL_WORK_BUFFER`.
pub const ARGS_FIELD_GLOBAL_WORK_BUFFER: u64 = 1 << 3;
/// `UCC_COLL_ARGS_FIELD_ACTIVE_SET`.
pub const ARGS_FIELD_ACTIVE_SET: u64 = 1 << 4;
/// `UCC_COLL_ARGS_FIELD_MEM_MAP_SRC_MEMH`.
pub const ARGS_FIELD_SRC_MEMH: u64 = 1 << 5;
/// `UCC_COLL_ARGS_FIELD_MEM_MAP_DST_MEMH`.
pub const ARGS_FIELD_DST_MEMH: u64 = 1 << 6;

/// The `ucc_coll_args_flags_t` bits ferrocoll gives a meaning to (bits 0..=7,
/// the same values as `ferrocoll::CollFlags`); the memory-handle bits (8, 9)
/// only matter with mapped buffers, which are refused.
pub const ARGS_FLAGS_KNOWN: u64 = 0xff;
/// The memory-handle flags, accepted and ignored.
pub const ARGS_FLAGS_MEMH: u64 = (1 << 8) | (1 << 9);
/// `UCC_COLL_ARGS_HINT_OPTIMIZE_OVERLAP_CPU` (`ucc_coll_args_hints_t`).
pub const ARGS_HINT_OPTIMIZE_OVERLAP_CPU: u64 = 1 << 24;
/// `UCC_COLL_ARGS_HINT_OPTIMIZE_OVERLAP_GPU`.
pub const ARGS_HINT_OPTIMIZE_OVERLAP_GPU: u64 = 1 << 25;
/// `UCC_COLL_ARGS_HINT_OPTIMIZE_LATENCY` (Open MPI's coll/ucc and MPICH set
/// it on every blocking collective).
pub const ARGS_HINT_OPTIMIZE_LATENCY: u64 = 1 << 26;
/// The hint bits: preferences that never change a result, accepted and
/// (ferrocoll's selection is by size and team, not by hint) ignored.
pub const ARGS_HINTS: u64 =
    ARGS_HINT_OPTIMIZE_OVERLAP_CPU | ARGS_HINT_OPTIMIZE_OVERLAP_GPU | ARGS_HINT_OPTIMIZE_LATENCY;

/// `ucc_coll_buffer_info_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BufferInfo {
    /// Start.
    pub buffer: *mut c_void,
    /// Elements.
    pub count: u64,
    /// `ucc_datatype_t`.
    pub datatype: u64,
    /// `ucc_memory_type_t`.
    pub mem_type: u32,
}

/// `ucc_coll_buffer_info_v_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BufferInfoV {
    /// Start (NULL: the displacements are addresses).
    pub buffer: *mut c_void,
    /// Team-size array of counts.
    pub counts: *mut c_void,
    /// Team-size array of displacements, in elements.
    pub displacements: *mut c_void,
    /// `ucc_datatype_t`.
    pub datatype: u64,
    /// `ucc_memory_type_t`.
    pub mem_type: u32,
}

/// The `src` / `dst` union of `ucc_coll_args_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union BufferUnion {
    /// A plain buffer.
    pub info: BufferInfo,
    /// A buffer with per-rank counts.
    pub info_v: BufferInfoV,
}

/// `ucc_coll_callback_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CollCallback {
    /// Called once with the final status.
    pub cb: Option<unsafe extern "C" fn(data: *mut c_void, status: UccStatus)>,
    /// Its first argument.
    pub data: *mut c_void,
}

/// The `active_set` member of `ucc_coll_args_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ActiveSet {
    /// First team rank.
    pub start: u64,
    /// Step.
    pub stride: i64,
    /// Members.
    pub size: u64,
}

/// `ucc_coll_args_t` of UCC 1.3 (184 bytes). Current UCC appends the two
/// memory-handle words ([`CollArgsMemh`]), which a caller from before them
/// does not have: they are read only when their mask bits are set.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollArgs {
    /// Which optional fields are set.
    pub mask: u64,
    /// `ucc_coll_type_t`.
    pub coll_type: u32,
    /// Source.
    pub src: BufferUnion,
    /// Destination.
    pub dst: BufferUnion,
    /// `ucc_reduction_op_t`.
    pub op: u32,
    /// `ucc_coll_args_flags_t` bits (with `ARGS_FIELD_FLAGS`).
    pub flags: u64,
    /// Root team rank.
    pub root: u64,
    /// `ucc_error_type_t` (ignored: errors are local).
    pub error_type: u32,
    /// Tag (with `ARGS_FIELD_TAG`).
    pub tag: u16,
    /// One-sided scratch (with `ARGS_FIELD_GLOBAL_WORK_BUFFER`; unused).
    pub global_work_buffer: *mut c_void,
    /// Completion callback (with `ARGS_FIELD_CB`).
    pub cb: CollCallback,
    /// Seconds (with the timeout flag).
    pub timeout: f64,
    /// Bcast members (with `ARGS_FIELD_ACTIVE_SET`).
    pub active_set: ActiveSet,
}

/// The tail current UCC adds to `ucc_coll_args_t` (at offset 184).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CollArgsMemh {
    /// `src_memh` (local handle or array of global ones).
    pub src_memh: *mut c_void,
    /// `dst_memh`.
    pub dst_memh: *mut c_void,
}

/// `ucc_coll_req_t`: only its first word is public.
#[repr(C)]
#[derive(Debug)]
pub struct CollReq {
    /// What `ucc_collective_test` returns.
    pub status: UccStatus,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<BufferInfo>() == 32);
    assert!(size_of::<BufferInfoV>() == 40);
    assert!(offset_of!(BufferInfoV, datatype) == 24);
    assert!(offset_of!(BufferInfoV, mem_type) == 32);
    assert!(size_of::<BufferUnion>() == 40);
    assert!(size_of::<CollCallback>() == 16);
    assert!(size_of::<ActiveSet>() == 24);
    assert!(offset_of!(CollArgs, coll_type) == 8);
    assert!(offset_of!(CollArgs, src) == 16);
    assert!(offset_of!(CollArgs, dst) == 56);
    assert!(offset_of!(CollArgs, op) == 96);
    assert!(offset_of!(CollArgs, flags) == 104);
    assert!(offset_of!(CollArgs, root) == 112);
    assert!(offset_of!(CollArgs, error_type) == 120);
    assert!(offset_of!(CollArgs, tag) == 124);
    assert!(offset_of!(CollArgs, global_work_buffer) == 128);
    assert!(offset_of!(CollArgs, cb) == 136);
    assert!(offset_of!(CollArgs, timeout) == 152);
    assert!(offset_of!(CollArgs, active_set) == 160);
    assert!(size_of::<CollArgs>() == 184);
    assert!(size_of::<CollArgs>() + size_of::<CollArgsMemh>() == 200);
    assert!(size_of::<CollReq>() == 4);
};
