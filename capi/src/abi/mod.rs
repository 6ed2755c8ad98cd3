//! UCC's C ABI as Rust types: the `#[repr(C)]` mirrors of `ucc.h`'s
//! structures and the values of its enums and masks.
//!
//! Enums that C passes in are plain integers here (`u32`, `i32`), never Rust
//! enums: a C caller may pass any value, and a Rust enum holding an
//! undeclared value is undefined behaviour. Each file ends with compile-time
//! checks of sizes and offsets against UCC's x86-64 layout; the C test
//! `layout.c` checks the same numbers against the installed header.

pub mod coll;
pub mod context;
pub mod ee;
pub mod lib;
pub mod team;

pub use coll::*;
pub use context::*;
pub use ee::*;
pub use lib::*;
pub use team::*;

/// `ucc_status_t`.
pub type UccStatus = i32;

/// `UCC_OK`.
pub const UCC_OK: UccStatus = 0;
/// `UCC_INPROGRESS`.
pub const UCC_INPROGRESS: UccStatus = 1;
/// `UCC_OPERATION_INITIALIZED`.
pub const UCC_OPERATION_INITIALIZED: UccStatus = 2;
/// `UCC_ERR_NOT_SUPPORTED`.
pub const UCC_ERR_NOT_SUPPORTED: UccStatus = -1;
/// `UCC_ERR_NOT_IMPLEMENTED`.
pub const UCC_ERR_NOT_IMPLEMENTED: UccStatus = -2;
/// `UCC_ERR_INVALID_PARAM`.
pub const UCC_ERR_INVALID_PARAM: UccStatus = -3;
/// `UCC_ERR_NO_MEMORY`.
pub const UCC_ERR_NO_MEMORY: UccStatus = -4;
/// `UCC_ERR_NO_RESOURCE`.
pub const UCC_ERR_NO_RESOURCE: UccStatus = -5;
/// `UCC_ERR_NO_MESSAGE`.
pub const UCC_ERR_NO_MESSAGE: UccStatus = -6;
/// `UCC_ERR_NOT_FOUND`.
pub const UCC_ERR_NOT_FOUND: UccStatus = -7;
/// `UCC_ERR_TIMED_OUT`.
pub const UCC_ERR_TIMED_OUT: UccStatus = -8;

/// `ucc_thread_mode_t`: `UCC_THREAD_MULTIPLE`, the largest mode.
pub const UCC_THREAD_MULTIPLE: u32 = 2;

/// `ucc_coll_sync_type_t`: `UCC_NO_SYNC_COLLECTIVES`.
pub const UCC_NO_SYNC_COLLECTIVES: u32 = 0;

/// `ucc_memory_type_t` values, `UCC_MEMORY_TYPE_UNKNOWN` (= `LAST`) included.
pub const UCC_MEMORY_TYPE_UNKNOWN: u32 = 5;

/// `ucc_mem_map_params_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemMapParams {
    /// Array of segments.
    pub segments: *mut MemMap,
    /// Number of segments.
    pub n_segments: u64,
}

/// `ucc_mem_map_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemMap {
    /// Start.
    pub address: *mut std::ffi::c_void,
    /// Length in bytes.
    pub len: usize,
}

/// `ucc_oob_coll_t`: the caller's out-of-band allgather.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OobColl {
    /// Post an allgather of `size` bytes per endpoint.
    pub allgather: Option<
        unsafe extern "C" fn(
            src: *mut std::ffi::c_void,
            recv: *mut std::ffi::c_void,
            size: usize,
            info: *mut std::ffi::c_void,
            req: *mut *mut std::ffi::c_void,
        ) -> UccStatus,
    >,
    /// Test a posted allgather.
    pub req_test: Option<unsafe extern "C" fn(req: *mut std::ffi::c_void) -> UccStatus>,
    /// Release a request.
    pub req_free: Option<unsafe extern "C" fn(req: *mut std::ffi::c_void) -> UccStatus>,
    /// Passed to `allgather` as `info`.
    pub coll_info: *mut std::ffi::c_void,
    /// Number of endpoints.
    pub n_oob_eps: u32,
    /// This endpoint.
    pub oob_ep: u32,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<MemMap>() == 16);
    assert!(size_of::<MemMapParams>() == 16);
    assert!(size_of::<OobColl>() == 40);
    assert!(offset_of!(OobColl, coll_info) == 24);
    assert!(offset_of!(OobColl, n_oob_eps) == 32);
    assert!(offset_of!(OobColl, oob_ep) == 36);
};
