//! Library parameters and attributes (`ucc_lib_params_t`, `ucc_lib_attr_t`).

/// `UCC_LIB_PARAM_FIELD_THREAD_MODE` (and the attribute bit of the same value).
pub const LIB_FIELD_THREAD_MODE: u64 = 1 << 0;
/// `UCC_LIB_PARAM_FIELD_COLL_TYPES`.
pub const LIB_FIELD_COLL_TYPES: u64 = 1 << 1;
/// `UCC_LIB_PARAM_FIELD_REDUCTION_TYPES`.
pub const LIB_FIELD_REDUCTION_TYPES: u64 = 1 << 2;
/// `UCC_LIB_PARAM_FIELD_SYNC_TYPE`.
pub const LIB_FIELD_SYNC_TYPE: u64 = 1 << 3;

/// `ucc_lib_params_t`; `ucc_lib_attr_t` has the same layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LibParams {
    /// Which fields are set.
    pub mask: u64,
    /// `ucc_thread_mode_t`.
    pub thread_mode: u32,
    /// Collectives the user needs (a set of `ucc_coll_type_t` bits).
    pub coll_types: u64,
    /// Reductions the user needs (bit `1 << op`).
    pub reduction_types: u64,
    /// `ucc_coll_sync_type_t`.
    pub sync_type: u32,
}

/// `ucc_lib_attr_t`.
pub type LibAttr = LibParams;

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<LibParams>() == 40);
    assert!(offset_of!(LibParams, thread_mode) == 8);
    assert!(offset_of!(LibParams, coll_types) == 16);
    assert!(offset_of!(LibParams, reduction_types) == 24);
    assert!(offset_of!(LibParams, sync_type) == 32);
};
