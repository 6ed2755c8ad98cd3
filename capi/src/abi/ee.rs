//! Execution engines and events (`ucc_ee_params_t`, `ucc_ev_t`).

use std::ffi::c_void;

/// `UCC_EE_CUDA_STREAM`.
pub const EE_CUDA_STREAM: u32 = 0;
/// `UCC_EE_CPU_THREAD`.
pub const EE_CPU_THREAD: u32 = 1;
/// `UCC_EE_ROCM_STREAM`.
pub const EE_ROCM_STREAM: u32 = 2;

/// `ucc_ev_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Ev {
    /// `ucc_event_type_t` (one bit: post 1, complete 2, compute complete 4, overflow 8).
    pub ev_type: u32,
    /// The user's context for the event.
    pub ev_context: *mut c_void,
    /// Its size.
    pub ev_context_size: usize,
    /// The request the event is about (or, for a triggered post, the one to post).
    pub req: *mut c_void,
}

/// `ucc_ee_params_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EeParams {
    /// `ucc_ee_type_t`.
    pub ee_type: u32,
    /// A CUDA stream's `cudaStream_t`.
    pub ee_context: *mut c_void,
    /// Its size.
    pub ee_context_size: usize,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<Ev>() == 32);
    assert!(offset_of!(Ev, ev_context) == 8);
    assert!(offset_of!(Ev, ev_context_size) == 16);
    assert!(offset_of!(Ev, req) == 24);
    assert!(size_of::<EeParams>() == 24);
    assert!(offset_of!(EeParams, ee_context) == 8);
    assert!(offset_of!(EeParams, ee_context_size) == 16);
};
