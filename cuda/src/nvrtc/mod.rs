//! NVRTC, the runtime compiler: its probe, and compilation of CUDA C to
//! PTX or to a CUBIN with the compiler's log on failure.
//!
//! The probe ([`version`]) checks, once per process: `libnvrtc.so.13`
//! loads, it exports every entry point in [`SYMBOLS`], and `nvrtcVersion`
//! answers. A failure is `Error(NotSupported)` naming the library, the
//! symbol or the call, never a panic, and it is kept. The library is found
//! through the loader's path: `LD_LIBRARY_PATH` must name its folder before
//! the process starts (setting it later has no effect on `dlopen`).

mod program;
mod ptx;

use std::ffi::c_int;

use ferrocoll_core::{Error, Result};

use crate::error::nvrtc_check;
use crate::kept::Kept;
use crate::sys::{Library, load, nvrtc as sys};

pub use program::{compile_cubin, compile_ptx};
pub use ptx::Ptx;

/// Every NVRTC entry point that ferrocoll calls (a unit test checks that
/// each call in this module's source is listed).
pub const SYMBOLS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcGetErrorString",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetPTXSize",
    "nvrtcGetPTX",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
    "nvrtcDestroyProgram",
];

/// NVRTC's version `(major, minor)`, probed once per process (see the
/// module docs); `NotSupported` naming `libnvrtc.so.13` when it cannot be
/// loaded.
///
/// ```
/// match ferrocoll_cuda::nvrtc::version() {
///     Ok((major, minor)) => println!("NVRTC {major}.{minor}"),
///     Err(e) => println!("no NVRTC: {e}"),
/// }
/// ```
pub fn version() -> Result<(u32, u32)> {
    static VERSION: Kept<(u32, u32)> = Kept::new();
    VERSION
        .get_or_init(|| {
            load(Library::Nvrtc, SYMBOLS)?;
            let (mut major, mut minor): (c_int, c_int) = (0, 0);
            // SAFETY: the library exports nvrtcVersion (checked by `load`);
            // the call only writes the two ints we own.
            nvrtc_check("nvrtcVersion", unsafe { sys::nvrtcVersion(&mut major, &mut minor) })
                .map_err(|e| Error::not_supported(e.context().to_string()))?;
            Ok((u32::try_from(major).unwrap_or(0), u32::try_from(minor).unwrap_or(0)))
        })
        .copied()
}

/// `Ok` when NVRTC can be loaded; `Err(NotSupported)` naming
/// `libnvrtc.so.13` (never a panic) when it cannot. See [`version`].
pub fn probe() -> Result<()> {
    version().map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll_core::Status;

    #[test]
    fn the_probe_never_panics_and_names_the_library() {
        match version() {
            Ok((major, _)) => assert!(major >= 12, "NVRTC {major}"),
            Err(e) => {
                assert_eq!(e.status(), Status::NotSupported, "{e}");
                assert!(e.context().contains("libnvrtc.so.13"), "{e}");
                assert_eq!(probe().unwrap_err().to_string(), e.to_string(), "kept");
            }
        }
    }

    #[test]
    fn every_nvrtc_call_of_this_module_is_in_the_probe_list() {
        let sources = [include_str!("mod.rs"), include_str!("program.rs"), include_str!("../error.rs")];
        crate::sys::assert_calls_listed(&sources, "nvrtc", SYMBOLS);
    }
}
