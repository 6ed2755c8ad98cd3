//! The device kernels compiled for the CPU: the same CUDA C text that NVRTC
//! compiles (`ferrocoll_kernels::source()`), compiled with g++ behind a shim
//! that defines the CUDA built-ins the kernels use, plus serial launchers
//! (for every block, for every thread, call the kernel with `blockIdx` and
//! `threadIdx` set). The kernels never synchronise threads or share memory,
//! so a serial grid computes what the device computes (device-only inline
//! PTX sits under `#ifdef __CUDA_ARCH__`, with C fallbacks of the same
//! arithmetic).
//!
//! Two users: `tests/tests/kernels_emulated.rs` loads the library and
//! checks every kernel against the host; the fake CUDA driver
//! ([`crate::fake_cuda`]) runs its launches with it.
//!
//! The launchers, all `extern "C"`:
//! - `fc_emu_launch_reduce(kernel, const ReduceArgs*, grid, block)`
//! - `fc_emu_launch3(kernel, u64, u64, u64, grid, block)` (`fc_copy`)
//! - `fc_emu_launch2(kernel, u64, u64, grid, block)` (the flag kernels)

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::native::{Unavailable, cached, compile};

/// Prepended to the kernel source: the CUDA built-ins, for g++.
const SHIM_HEAD: &str = r#"
#define __global__
#define __device__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
struct fc_emu_dim3 { unsigned x, y, z; };
// Per OS thread, so that tests (and fake streams) launch independently.
extern "C" {
thread_local fc_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
}
struct alignas(16) uint4 { unsigned x, y, z, w; };
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
"#;

/// Appended: serial launchers, one per kernel signature.
const SHIM_TAIL: &str = r#"
static void fc_emu_grid(unsigned grid, unsigned block) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
}
extern "C" void fc_emu_launch_reduce(const void* kernel, const ReduceArgs* args, unsigned grid, unsigned block) {
    typedef void (*K)(ReduceArgs);
    fc_emu_grid(grid, block);
    for (unsigned b = 0; b < grid; ++b) {
        for (unsigned t = 0; t < block; ++t) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            ((K)kernel)(*args);
        }
    }
}
extern "C" void fc_emu_launch3(const void* kernel, u64 x, u64 y, u64 z, unsigned grid, unsigned block) {
    typedef void (*K)(u64, u64, u64);
    fc_emu_grid(grid, block);
    for (unsigned b = 0; b < grid; ++b) {
        for (unsigned t = 0; t < block; ++t) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            ((K)kernel)(x, y, z);
        }
    }
}
extern "C" void fc_emu_launch2(const void* kernel, u64 x, u64 y, unsigned grid, unsigned block) {
    typedef void (*K)(u64, u64);
    fc_emu_grid(grid, block);
    for (unsigned b = 0; b < grid; ++b) {
        for (unsigned t = 0; t < block; ++t) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            ((K)kernel)(x, y);
        }
    }
}
"#;

/// g++ flags. `-ffp-contract=off`: no fused multiply-add, as NVRTC's
/// `--fmad=false` and the host.
const FLAGS: [&str; 7] =
    ["-std=c++17", "-O2", "-shared", "-fPIC", "-ffp-contract=off", "-fno-strict-aliasing", "-Wall"];

/// File name of the library in its folder.
pub const LIBRARY: &str = "libkernels_emu.so";

fn build() -> Result<PathBuf, Unavailable> {
    let text = format!("{SHIM_HEAD}\n{}\n{SHIM_TAIL}", ferrocoll_kernels::source());
    let key = crate::native::key(&[text.as_bytes(), FLAGS.join(" ").as_bytes()]);
    let dir = cached("kernels-emu", key, |dir: &Path| {
        let cpp = dir.join("kernels_emu.cpp");
        std::fs::write(&cpp, &text).map_err(|e| Unavailable::Fail(format!("write {}: {e}", cpp.display())))?;
        let so = dir.join(LIBRARY);
        let mut args: Vec<&std::ffi::OsStr> = FLAGS.iter().map(std::ffi::OsStr::new).collect();
        args.extend([std::ffi::OsStr::new("-o"), so.as_os_str(), cpp.as_os_str()]);
        compile("g++", &args)
    })?;
    Ok(dir.join(LIBRARY))
}

/// The kernels compiled for the CPU (built on first use, then shared by
/// every test of every binary until the source changes): `Skip` without
/// g++, `Fail` when the source does not compile.
pub fn library() -> Result<&'static Path, Unavailable> {
    static LIB: OnceLock<Result<PathBuf, Unavailable>> = OnceLock::new();
    LIB.get_or_init(build).as_ref().map(PathBuf::as_path).map_err(Clone::clone)
}
