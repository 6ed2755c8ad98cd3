//! The CUDA driver as the stream engine uses it: a probe that turns a
//! missing library or entry point into `NotSupported` (cudarc would panic),
//! errors that name the failed call, and the context made current first.

use std::sync::OnceLock;

use cudarc::driver::sys::{self, CUcontext, CUresult, cudaError_enum as E};
use ferrocoll_core::{Error, Result, Status};

/// The driver library, as named in messages.
pub(crate) const LIBCUDA: &str = "libcuda.so.1";

/// Every driver entry point the engine (and its tests' helpers) call. Each is
/// looked up once before the first call: cudarc panics on a missing symbol.
const SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDeviceGet",
    "cuDeviceGetCount",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuCtxGetDevice",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamGetCtx",
    "cuStreamSynchronize",
    "cuStreamWaitValue32_v2",
    "cuStreamWaitValue64_v2",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventQuery",
    "cuMemHostAlloc",
    "cuMemHostGetDevicePointer_v2",
    "cuMemFreeHost",
];

/// A handle the driver gave out (context, stream, event) or pinned memory it mapped.
#[derive(Debug)]
pub(crate) struct Raw<T>(pub(crate) *mut T);

impl<T> Clone for Raw<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Raw<T> {}

// SAFETY: driver handles are plain identifiers that the driver accepts from
// any thread (the driver API is thread-safe); the engine makes the handle's
// context current on the calling thread before each call. Pinned memory is
// accessed only through atomics.
unsafe impl<T> Send for Raw<T> {}
// SAFETY: as for Send: sharing a handle shares only its value.
unsafe impl<T> Sync for Raw<T> {}

/// Whether the driver is usable: loaded, complete and initialised (the answer is kept).
pub(crate) fn probe() -> Result<()> {
    static PROBE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            // SAFETY: is_culib_present only tries to dlopen the library; it calls nothing in it.
            if !unsafe { sys::is_culib_present() } {
                return Err(format!(
                    "{LIBCUDA} (the CUDA driver) cannot be loaded: no NVIDIA driver here, or not on the loader path"
                ));
            }
            // SAFETY: the library is present (checked above), so culib() loads it rather than panicking.
            let lib = unsafe { sys::culib() };
            for name in SYMBOLS {
                // SAFETY: looking a symbol up does not call it, and the pointer is dropped at once.
                if unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err() {
                    return Err(format!("{LIBCUDA} has no {name}: the driver is older than CUDA 12"));
                }
            }
            // SAFETY: cuInit exists (checked above) and takes no pointer.
            check(unsafe { sys::cuInit(0) }, "cuInit").map_err(|e| e.context().to_string())
        })
        .clone()
        .map_err(Error::not_supported)
}

/// `Ok` for `CUDA_SUCCESS`, else the error of `call`.
pub(crate) fn check(r: CUresult, call: &str) -> Result<()> {
    if r == E::CUDA_SUCCESS { Ok(()) } else { Err(error(r, call)) }
}

/// The error of a failed driver call, with the driver's code in the message.
pub(crate) fn error(r: CUresult, call: &str) -> Error {
    let status = match r {
        E::CUDA_ERROR_NOT_SUPPORTED => Status::NotSupported,
        E::CUDA_ERROR_OUT_OF_MEMORY => Status::NoMemory,
        E::CUDA_ERROR_INVALID_VALUE
        | E::CUDA_ERROR_INVALID_HANDLE
        | E::CUDA_ERROR_INVALID_CONTEXT
        | E::CUDA_ERROR_CONTEXT_IS_DESTROYED
        | E::CUDA_ERROR_INVALID_DEVICE => Status::InvalidParam,
        _ => Status::NoResource,
    };
    Error::new(status, format!("{call} failed: {r:?}"))
}

/// Make `ctx` current on this thread (every driver call of the engine goes through here first).
pub(crate) fn make_current(ctx: Raw<sys::CUctx_st>) -> Result<()> {
    let ctx: CUcontext = ctx.0;
    // SAFETY: the caller holds a live context (the engine keeps it alive, or
    // its creator promised to); setting it current touches only this thread's state.
    check(unsafe { sys::cuCtxSetCurrent(ctx) }, "cuCtxSetCurrent")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_call_and_code() {
        let e = error(E::CUDA_ERROR_INVALID_HANDLE, "cuEventQuery");
        assert_eq!(e.status(), Status::InvalidParam);
        assert!(e.context().contains("cuEventQuery") && e.context().contains("CUDA_ERROR_INVALID_HANDLE"), "{e}");
        assert_eq!(error(E::CUDA_ERROR_NOT_SUPPORTED, "x").status(), Status::NotSupported);
        assert!(check(E::CUDA_SUCCESS, "x").is_ok());
    }

    #[test]
    fn probe_never_panics() {
        // Here (no driver) it names the library; on a GPU machine it succeeds.
        match probe() {
            Ok(()) => {}
            Err(e) => {
                assert_eq!(e.status(), Status::NotSupported);
                assert!(e.context().contains(LIBCUDA) || e.context().contains("cuInit"), "{e}");
            }
        }
    }
}
