//! The one error table: a failed driver call (`CUresult`) or NVRTC call
//! (`nvrtcResult`) becomes an [`Error`] whose status is chosen here, once
//! for all of ferrocoll, and whose message names the call, the code and the
//! library's own text for it (`cuGetErrorString` / `nvrtcGetErrorString`):
//! `"cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"`.
//!
//! | driver result | status |
//! |---|---|
//! | `OUT_OF_MEMORY` | `NoMemory` |
//! | `NO_DEVICE`, `SYSTEM_DRIVER_MISMATCH`, `NOT_SUPPORTED`, `STUB_LIBRARY`, `UNSUPPORTED_PTX_VERSION`, `NO_BINARY_FOR_GPU` | `NotSupported` |
//! | `INVALID_VALUE`, `INVALID_HANDLE`, `INVALID_CONTEXT`, `CONTEXT_IS_DESTROYED`, `INVALID_DEVICE` | `InvalidParam` |
//! | `ALREADY_MAPPED` (an IPC handle whose allocation this process holds open already) | `NoResource` |
//! | anything else (a launch failure, an illegal address, ECC, ...) | `NoMessage` |
//!
//! | NVRTC result | status |
//! |---|---|
//! | `OUT_OF_MEMORY` | `NoMemory` |
//! | `INVALID_OPTION` (e.g. an architecture NVRTC does not know) | `NotSupported` |
//! | `INVALID_INPUT`, `INVALID_PROGRAM` | `InvalidParam` |
//! | anything else (a compilation error, ...) | `NoMessage` |
//!
//! Why `NoMessage` for the rest: it is UCC's "unhandled error", the status
//! UCC's own CUDA components give a CUDA error they do not classify
//! (`cuda_error_to_ucc_status`). The other candidates would mislead:
//! `NoResource` says "unavailable, try elsewhere or later", but a kernel
//! that faulted or a context that is broken will not get better. The one
//! status ferrocoll acts on is `ALREADY_MAPPED`'s: the IPC cache
//! (`ipc/cache.rs`) then closes the peer's stale mappings and opens again.
//!
//! Results a caller expects and handles (`CUDA_ERROR_NOT_READY` from an
//! event query, `CUDA_ERROR_INVALID_CONTEXT` from a pointer query) never get
//! here: the wrappers of those calls return them as values.

use std::ffi::{CStr, c_char};

use ferrocoll_core::{Error, Result, Status};

use crate::sys::{Library, driver, nvrtc};

/// The status of a failed driver call (see the table in the module docs).
pub fn driver_status(r: driver::CUresult) -> Status {
    use driver::CUresult as R;
    match r {
        R::CUDA_ERROR_OUT_OF_MEMORY => Status::NoMemory,
        R::CUDA_ERROR_NO_DEVICE
        | R::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
        | R::CUDA_ERROR_NOT_SUPPORTED
        | R::CUDA_ERROR_STUB_LIBRARY
        | R::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        | R::CUDA_ERROR_NO_BINARY_FOR_GPU => Status::NotSupported,
        R::CUDA_ERROR_INVALID_VALUE
        | R::CUDA_ERROR_INVALID_HANDLE
        | R::CUDA_ERROR_INVALID_CONTEXT
        | R::CUDA_ERROR_CONTEXT_IS_DESTROYED
        | R::CUDA_ERROR_INVALID_DEVICE => Status::InvalidParam,
        R::CUDA_ERROR_ALREADY_MAPPED => Status::NoResource,
        _ => Status::NoMessage,
    }
}

/// The error of driver call `call` that returned `r`.
pub fn driver_error(call: &str, r: driver::CUresult) -> Error {
    Error::new(driver_status(r), format!("{call} failed: {}", named(format!("{r:?}"), driver_text(r))))
}

/// `Ok` for `CUDA_SUCCESS`, else [`driver_error`].
pub(crate) fn check(call: &str, r: driver::CUresult) -> Result<()> {
    if r == driver::CUresult::CUDA_SUCCESS { Ok(()) } else { Err(driver_error(call, r)) }
}

/// The status of a failed NVRTC call (see the table in the module docs).
pub fn nvrtc_status(r: nvrtc::nvrtcResult) -> Status {
    use nvrtc::nvrtcResult as R;
    match r {
        R::NVRTC_ERROR_OUT_OF_MEMORY => Status::NoMemory,
        R::NVRTC_ERROR_INVALID_OPTION => Status::NotSupported,
        R::NVRTC_ERROR_INVALID_INPUT | R::NVRTC_ERROR_INVALID_PROGRAM => Status::InvalidParam,
        _ => Status::NoMessage,
    }
}

/// The error of NVRTC call `call` that returned `r`.
pub fn nvrtc_error(call: &str, r: nvrtc::nvrtcResult) -> Error {
    Error::new(nvrtc_status(r), format!("{call} failed: {}", named(format!("{r:?}"), nvrtc_text(r))))
}

/// `Ok` for `NVRTC_SUCCESS`, else [`nvrtc_error`].
pub(crate) fn nvrtc_check(call: &str, r: nvrtc::nvrtcResult) -> Result<()> {
    if r == nvrtc::nvrtcResult::NVRTC_SUCCESS { Ok(()) } else { Err(nvrtc_error(call, r)) }
}

/// `CODE (text)`, or just `CODE` when the library has no text or its text
/// is the code's name again (NVRTC's is).
fn named(code: String, text: Option<String>) -> String {
    match text {
        Some(text) if !text.is_empty() && text != code => format!("{code} ({text})"),
        _ => code,
    }
}

/// A library's static error string as text.
fn static_text(text: *const c_char) -> Option<String> {
    if text.is_null() {
        return None;
    }
    // SAFETY: both libraries document their error strings as static,
    // NUL-terminated text; null was excluded above.
    Some(unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned())
}

/// The driver's text for `r`, or none before the driver library was
/// checked (a unit test may build an error without a driver).
fn driver_text(r: driver::CUresult) -> Option<String> {
    if !Library::Driver.ready() {
        return None;
    }
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: the library loads and exports cuGetErrorString (checked just
    // above, so cudarc's lazy lookup cannot panic); the call writes a pointer
    // to a static string, or leaves null for a code it does not know.
    let r = unsafe { driver::cuGetErrorString(r, &mut text) };
    if r == driver::CUresult::CUDA_SUCCESS { static_text(text) } else { None }
}

/// NVRTC's text for `r`, or none before NVRTC was checked.
fn nvrtc_text(r: nvrtc::nvrtcResult) -> Option<String> {
    if !Library::Nvrtc.ready() {
        return None;
    }
    // SAFETY: the library loads and exports nvrtcGetErrorString (checked
    // just above); the call only returns a pointer to a static string.
    static_text(unsafe { nvrtc::nvrtcGetErrorString(r) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use driver::CUresult as R;
    use nvrtc::nvrtcResult as N;

    #[test]
    fn driver_errors_name_the_call_and_code() {
        let e = driver_error("cuEventQuery", R::CUDA_ERROR_INVALID_HANDLE);
        assert_eq!(e.status(), Status::InvalidParam);
        assert!(e.context().contains("cuEventQuery") && e.context().contains("CUDA_ERROR_INVALID_HANDLE"), "{e}");
        assert!(check("x", R::CUDA_SUCCESS).is_ok());
        assert_eq!(check("cuInit", R::CUDA_ERROR_NO_DEVICE).unwrap_err().status(), Status::NotSupported);
    }

    #[test]
    fn the_driver_table() {
        for (r, status) in [
            (R::CUDA_ERROR_OUT_OF_MEMORY, Status::NoMemory),
            (R::CUDA_ERROR_NO_DEVICE, Status::NotSupported),
            (R::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, Status::NotSupported),
            (R::CUDA_ERROR_NOT_SUPPORTED, Status::NotSupported),
            (R::CUDA_ERROR_STUB_LIBRARY, Status::NotSupported),
            (R::CUDA_ERROR_UNSUPPORTED_PTX_VERSION, Status::NotSupported),
            (R::CUDA_ERROR_NO_BINARY_FOR_GPU, Status::NotSupported),
            (R::CUDA_ERROR_INVALID_VALUE, Status::InvalidParam),
            (R::CUDA_ERROR_INVALID_HANDLE, Status::InvalidParam),
            (R::CUDA_ERROR_INVALID_CONTEXT, Status::InvalidParam),
            (R::CUDA_ERROR_CONTEXT_IS_DESTROYED, Status::InvalidParam),
            (R::CUDA_ERROR_INVALID_DEVICE, Status::InvalidParam),
            (R::CUDA_ERROR_LAUNCH_FAILED, Status::NoMessage),
            (R::CUDA_ERROR_ILLEGAL_ADDRESS, Status::NoMessage),
            (R::CUDA_ERROR_UNKNOWN, Status::NoMessage),
        ] {
            assert_eq!(driver_status(r), status, "{r:?}");
            assert_eq!(driver_error("cuX", r).status(), status, "{r:?}");
        }
    }

    #[test]
    fn the_nvrtc_table() {
        for (r, status) in [
            (N::NVRTC_ERROR_OUT_OF_MEMORY, Status::NoMemory),
            (N::NVRTC_ERROR_INVALID_OPTION, Status::NotSupported),
            (N::NVRTC_ERROR_INVALID_INPUT, Status::InvalidParam),
            (N::NVRTC_ERROR_INVALID_PROGRAM, Status::InvalidParam),
            (N::NVRTC_ERROR_COMPILATION, Status::NoMessage),
            (N::NVRTC_ERROR_INTERNAL_ERROR, Status::NoMessage),
        ] {
            assert_eq!(nvrtc_status(r), status, "{r:?}");
        }
        assert_eq!(named("CUDA_ERROR_X".into(), Some("out of memory".into())), "CUDA_ERROR_X (out of memory)");
        assert_eq!(named("NVRTC_ERROR_X".into(), Some("NVRTC_ERROR_X".into())), "NVRTC_ERROR_X", "no echo");
        assert_eq!(named("CUDA_ERROR_X".into(), None), "CUDA_ERROR_X");
        let e = nvrtc_error("nvrtcCompileProgram", N::NVRTC_ERROR_COMPILATION);
        assert!(e.context().starts_with("nvrtcCompileProgram failed: NVRTC_ERROR_COMPILATION"), "{e}");
        assert!(nvrtc_check("x", N::NVRTC_SUCCESS).is_ok());
    }
}
