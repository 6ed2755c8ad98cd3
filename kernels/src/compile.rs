//! NVRTC as the kernels use it: the options, and compilation of CUDA C
//! text to PTX for a virtual architecture or to a CUBIN for a real one.
//! The probe and the compiler calls themselves are `ferrocoll-cuda`'s
//! ([`ferrocoll_cuda::nvrtc`]).

use ferrocoll_core::Result;
use ferrocoll_cuda::{Ptx, nvrtc};

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
/// an unusable library is `NotSupported` naming `libnvrtc.so.13` (see
/// [`nvrtc_probe`](crate::nvrtc_probe)), as is an architecture NVRTC does
/// not know; a source containing a NUL byte is `InvalidParam`.
pub fn compile_source(src: &str, major: u32, minor: u32) -> Result<Ptx> {
    nvrtc::compile_ptx(src, &compile_options(major, minor))
        .map_err(|e| e.prefixed(format!("NVRTC compiling the kernels for compute_{major}{minor}")))
}

/// Compile CUDA C `src` to a CUBIN (device machine code) for
/// `sm_<major><minor>`, with the options of [`compile_options`] (the
/// architecture made real): NVRTC runs its built-in ptxas, so inline PTX
/// and register allocation are checked on a machine without a GPU, and a
/// caller may load the result without the driver's JIT step. Errors as
/// [`compile_source`].
pub fn compile_cubin(src: &str, major: u32, minor: u32) -> Result<Vec<u8>> {
    let arch = format!("sm_{major}{minor}");
    let options: Vec<String> = compile_options(major, minor)
        .into_iter()
        .map(|o| if o.starts_with("--gpu-architecture=") { format!("--gpu-architecture={arch}") } else { o })
        .collect();
    nvrtc::compile_cubin(src, &options).map_err(|e| e.prefixed(format!("NVRTC compiling the kernels for {arch}")))
}
