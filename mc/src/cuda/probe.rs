//! Finding the CUDA driver without panicking, and turning driver results
//! into [`Error`]s that name the call.
//!
//! cudarc loads `libcuda.so.1` on first use and panics when it is absent,
//! so nothing here touches the driver before
//! [`is_culib_present`](cudarc::driver::sys::is_culib_present) said it loads.

use cudarc::driver::sys::{self, CUresult};
use ferrocoll_core::{Error, Result, Status};

/// The driver library that cudarc loads, as named in errors.
pub(crate) const DRIVER_LIB: &str = "libcuda.so.1";

/// `Ok` for `CUDA_SUCCESS`, else an error that names `call` and the driver's code.
pub(crate) fn check(call: &str, r: CUresult) -> Result<()> {
    if r == CUresult::CUDA_SUCCESS { Ok(()) } else { Err(driver_error(call, r)) }
}

/// The error for a failed driver call: out of memory is `NoMemory`, a
/// missing or too old device or driver is `NotSupported`, anything else
/// (an illegal address in a kernel, a launch failure) `NoMessage`.
pub(crate) fn driver_error(call: &str, r: CUresult) -> Error {
    use CUresult as R;
    let status = match r {
        R::CUDA_ERROR_OUT_OF_MEMORY => Status::NoMemory,
        R::CUDA_ERROR_NO_DEVICE
        | R::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
        | R::CUDA_ERROR_NOT_SUPPORTED
        | R::CUDA_ERROR_STUB_LIBRARY
        | R::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        | R::CUDA_ERROR_NO_BINARY_FOR_GPU => Status::NotSupported,
        _ => Status::NoMessage,
    };
    Error::new(status, format!("{call} failed: {r:?}{}", describe(r)))
}

/// The driver's text for `r` (empty if it has none).
fn describe(r: CUresult) -> String {
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: only called after a driver call returned `r`, so the library is
    // loaded; cuGetErrorString writes a pointer to a static string (or
    // nothing, leaving null) and reads nothing else.
    let ok = unsafe { sys::cuGetErrorString(r, &mut text) } == CUresult::CUDA_SUCCESS;
    if !ok || text.is_null() {
        return String::new();
    }
    // SAFETY: the driver returned a pointer to a NUL-terminated static string.
    let s = unsafe { std::ffi::CStr::from_ptr(text) };
    format!(" ({})", s.to_string_lossy())
}

/// Load and initialise the driver; the number of devices it sees.
///
/// A missing library, a failing `cuInit` and zero devices are all
/// `NotSupported` (the component is then simply not offered).
pub(crate) fn probe_driver() -> Result<usize> {
    // SAFETY: is_culib_present only tries to dlopen the driver library under
    // its usual names and reports whether that worked; it calls no CUDA function.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::not_supported(format!(
            "the CUDA driver library {DRIVER_LIB} cannot be loaded (no NVIDIA driver on this machine, \
             or not on the loader path)"
        )));
    }
    // SAFETY: the library is present (checked above), so the symbol loads;
    // cuInit(0) may be called any number of times from any thread.
    check("cuInit", unsafe { sys::cuInit(0) }).map_err(|e| Error::not_supported(e.context().to_string()))?;
    let mut n: std::ffi::c_int = 0;
    // SAFETY: the driver is initialised; cuDeviceGetCount writes one int.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut n) })?;
    match usize::try_from(n) {
        Ok(0) | Err(_) => Err(Error::not_supported("no CUDA device: the driver sees 0 devices")),
        Ok(n) => Ok(n),
    }
}
