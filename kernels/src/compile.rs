//! NVRTC: the probe that turns a missing library into an error, and the
//! compilation of CUDA C text to PTX for one compute capability.

use std::ffi::c_int;

use cudarc::nvrtc::{CompileError, CompileOptions, Ptx, result::NvrtcError, sys};
use ferrocoll_core::{Error, Result};

/// The library cudarc loads for NVRTC (by bare name, through the loader's path).
pub const NVRTC_LIBRARY: &str = "libnvrtc.so.13";

/// Whether NVRTC can be loaded, and its version as `(major, minor)`.
///
/// Errors with `NotSupported`, naming the library, when it cannot be loaded
/// (never a panic: cudarc panics when a missing library is called, so this is
/// checked first). The loader searches `LD_LIBRARY_PATH`, which must be set
/// before the process starts.
///
/// ```
/// match ferrocoll_kernels::nvrtc_version() {
///     Ok((major, minor)) => println!("NVRTC {major}.{minor}"),
///     Err(e) => println!("no NVRTC: {e}"),
/// }
/// ```
pub fn nvrtc_version() -> Result<(u32, u32)> {
    // SAFETY: is_culib_present only tries to dlopen the candidate names of
    // libnvrtc and reports whether one loaded; it calls no NVRTC function.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::not_supported(format!(
            "NVRTC ({NVRTC_LIBRARY}) cannot be loaded: put the folder holding it on LD_LIBRARY_PATH \
             (a CUDA 13 toolkit's lib64, or the nvidia-cuda-nvrtc wheel's nvidia/cu13/lib; \
             scripts/fetch-nvrtc.sh fetches the wheel)"
        )));
    }
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: the library is present (checked above), so cudarc's lazy symbol
    // load succeeds; nvrtcVersion only writes the two ints we own.
    let status = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(Error::not_supported(format!("nvrtcVersion of {NVRTC_LIBRARY} failed: {status:?}")));
    }
    Ok((u32::try_from(major).unwrap_or(0), u32::try_from(minor).unwrap_or(0)))
}

/// Ok when NVRTC can be loaded; `Err(NotSupported)` naming `libnvrtc.so.13`
/// (never a panic) when it cannot. See [`nvrtc_version`].
pub fn nvrtc_probe() -> Result<()> {
    nvrtc_version().map(|_| ())
}

/// The NVRTC options used for compute capability `major.minor`.
///
/// - `-default-device`: every function is device code without `__device__`;
/// - `--std=c++17`: the kernels use templates and `static_assert`;
/// - `--device-int128`: the 128-bit integer kernels;
/// - `--fmad=false`: no multiply-add contraction, so complex products and
///   the float8 decoding round exactly as the host kernels do (IEEE division
///   and denormals are NVRTC's defaults: `--prec-div=true`, `--ftz=false`).
pub fn compile_options(major: u32, minor: u32) -> Vec<String> {
    vec![
        format!("--gpu-architecture=compute_{major}{minor}"),
        "-default-device".to_string(),
        "--std=c++17".to_string(),
        "--device-int128".to_string(),
        "--fmad=false".to_string(),
        "--ftz=false".to_string(),
        "--prec-div=true".to_string(),
    ]
}

/// Compile CUDA C `src` to PTX for compute capability `major.minor` with
/// [`compile_options`].
///
/// A compilation failure is an `Error` whose message carries NVRTC's log;
/// an unusable library is `NotSupported` (see [`nvrtc_probe`]); a source
/// containing a NUL byte is `InvalidParam`.
pub fn compile_source(src: &str, major: u32, minor: u32) -> Result<Ptx> {
    nvrtc_probe()?;
    if let Some(at) = src.find('\0') {
        return Err(Error::invalid_param(format!("CUDA source has a NUL byte at offset {at}")));
    }
    let arch = format!("compute_{major}{minor}");
    let opts = CompileOptions { options: compile_options(major, minor), ..Default::default() };
    cudarc::nvrtc::compile_ptx_with_opts(src, opts).map_err(|e| match e {
        CompileError::CompileError { nvrtc, options, log } => {
            let log = log.to_string_lossy();
            let why =
                format!("NVRTC failed to compile the kernels for {arch} ({nvrtc:?}, options {options:?}):\n{log}");
            if nvrtc == NvrtcError(sys::nvrtcResult::NVRTC_ERROR_INVALID_OPTION) {
                Error::not_supported(why)
            } else {
                Error::internal(why)
            }
        }
        other => Error::internal(format!("NVRTC failed for {arch}: {other:?}")),
    })
}
