//! Context parameters and attributes (`ucc_context_params_t`, `ucc_context_attr_t`).

use super::{MemMapParams, OobColl};

/// `UCC_CONTEXT_PARAM_FIELD_TYPE` (and `UCC_CONTEXT_ATTR_FIELD_TYPE`).
pub const CTX_FIELD_TYPE: u64 = 1 << 0;
/// `UCC_CONTEXT_PARAM_FIELD_SYNC_TYPE` (and the attribute bit).
pub const CTX_FIELD_SYNC_TYPE: u64 = 1 << 1;
/// `UCC_CONTEXT_PARAM_FIELD_OOB`.
pub const CTX_PARAM_OOB: u64 = 1 << 2;
/// `UCC_CONTEXT_PARAM_FIELD_ID`.
pub const CTX_PARAM_ID: u64 = 1 << 3;
/// `UCC_CONTEXT_PARAM_FIELD_MEM_PARAMS`.
pub const CTX_PARAM_MEM_PARAMS: u64 = 1 << 4;
/// `UCC_CONTEXT_ATTR_FIELD_CTX_ADDR`.
pub const CTX_ATTR_CTX_ADDR: u64 = 1 << 2;
/// `UCC_CONTEXT_ATTR_FIELD_CTX_ADDR_LEN`.
pub const CTX_ATTR_CTX_ADDR_LEN: u64 = 1 << 3;
/// `UCC_CONTEXT_ATTR_FIELD_WORK_BUFFER_SIZE`.
pub const CTX_ATTR_WORK_BUFFER_SIZE: u64 = 1 << 4;

/// `UCC_CONTEXT_SHARED` (`UCC_CONTEXT_EXCLUSIVE` is 0).
pub const UCC_CONTEXT_SHARED: u32 = 1;

/// `ucc_context_params_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ContextParams {
    /// Which fields are set.
    pub mask: u64,
    /// `ucc_context_type_t`.
    pub ctx_type: u32,
    /// `ucc_coll_sync_type_t`.
    pub sync_type: u32,
    /// The bootstrap.
    pub oob: OobColl,
    /// The user's context id.
    pub ctx_id: u64,
    /// Memory to attach (one-sided collectives).
    pub mem_params: MemMapParams,
}

/// `ucc_context_attr_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ContextAttr {
    /// Which fields are asked for.
    pub mask: u64,
    /// `ucc_context_type_t`.
    pub ctx_type: u32,
    /// `ucc_coll_sync_type_t`.
    pub sync_type: u32,
    /// The context's address.
    pub ctx_addr: *mut std::ffi::c_void,
    /// Its length.
    pub ctx_addr_len: usize,
    /// Scratch a one-sided collective's `global_work_buffer` must hold.
    pub global_work_buffer_size: u64,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<ContextParams>() == 80);
    assert!(offset_of!(ContextParams, ctx_type) == 8);
    assert!(offset_of!(ContextParams, sync_type) == 12);
    assert!(offset_of!(ContextParams, oob) == 16);
    assert!(offset_of!(ContextParams, ctx_id) == 56);
    assert!(offset_of!(ContextParams, mem_params) == 64);
    assert!(size_of::<ContextAttr>() == 40);
    assert!(offset_of!(ContextAttr, ctx_addr) == 16);
    assert!(offset_of!(ContextAttr, ctx_addr_len) == 24);
    assert!(offset_of!(ContextAttr, global_work_buffer_size) == 32);
};
