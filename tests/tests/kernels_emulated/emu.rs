//! The kernels' CUDA C compiled for the CPU with g++, behind a shim that
//! defines the CUDA built-ins they use, and launched with a serial grid: for
//! every block, for every thread, call the kernel with `blockIdx`/`threadIdx`
//! set. The kernels never synchronise threads or share memory, so a serial
//! grid computes what the device computes (device-only inline PTX sits under
//! `#ifdef __CUDA_ARCH__`, with C fallbacks of the same arithmetic).

use std::ffi::{CString, c_void};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use ferrocoll_kernels::ReduceArgs;

/// Prepended to the kernel source: the CUDA built-ins, for g++.
const SHIM_HEAD: &str = r#"
#define __global__
#define __device__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
struct fc_emu_dim3 { unsigned x, y, z; };
// Per OS thread, so that tests running in parallel launch independently.
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

type LaunchReduce = unsafe extern "C" fn(*const c_void, *const ReduceArgs, u32, u32);
type Launch3 = unsafe extern "C" fn(*const c_void, u64, u64, u64, u32, u32);
type Launch2 = unsafe extern "C" fn(*const c_void, u64, u64, u32, u32);

/// The loaded emulation library.
pub struct Emu {
    lib: libloading::Library,
    launch_reduce: LaunchReduce,
    launch3: Launch3,
    launch2: Launch2,
}

/// Why the emulation is unavailable: skip (no g++) or fail (the source does not build).
pub enum Unavailable {
    Skip(String),
    Fail(String),
}

fn build() -> Result<Emu, Unavailable> {
    let dir: PathBuf = std::env::temp_dir().join(format!("ferrocoll-kernels-emu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| Unavailable::Fail(format!("create {}: {e}", dir.display())))?;
    let cpp = dir.join("kernels_emu.cpp");
    let so = dir.join("libkernels_emu.so");
    let text = format!("{SHIM_HEAD}\n{}\n{SHIM_TAIL}", ferrocoll_kernels::source());
    std::fs::write(&cpp, text).map_err(|e| Unavailable::Fail(format!("write {}: {e}", cpp.display())))?;
    // -ffp-contract=off: no fused multiply-add, as NVRTC's --fmad=false and the host.
    let out = Command::new("g++")
        .args(["-std=c++17", "-O2", "-shared", "-fPIC", "-ffp-contract=off", "-fno-strict-aliasing", "-Wall"])
        .arg("-o")
        .arg(&so)
        .arg(&cpp)
        .output()
        .map_err(|e| Unavailable::Skip(format!("g++ cannot be run: {e}")))?;
    if !out.status.success() {
        return Err(Unavailable::Fail(format!(
            "g++ failed to compile the kernels ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let warnings = String::from_utf8_lossy(&out.stderr);
    if !warnings.trim().is_empty() {
        eprintln!("g++ warnings on the kernel source:\n{warnings}");
    }
    // SAFETY: the library is the kernels compiled just above; its only
    // initialisers are the thread-local grid variables (zero-initialised).
    let lib = unsafe { libloading::Library::new(&so) }
        .map_err(|e| Unavailable::Fail(format!("load {}: {e}", so.display())))?;
    let _ = std::fs::remove_dir_all(&dir);
    // SAFETY: the three launchers are defined in SHIM_TAIL with exactly these
    // C signatures; the pointers stay valid while `lib` lives (for the process).
    let (launch_reduce, launch3, launch2) = unsafe {
        let r = lib.get::<LaunchReduce>(b"fc_emu_launch_reduce\0").map(|s| *s);
        let t = lib.get::<Launch3>(b"fc_emu_launch3\0").map(|s| *s);
        let w = lib.get::<Launch2>(b"fc_emu_launch2\0").map(|s| *s);
        match (r, t, w) {
            (Ok(r), Ok(t), Ok(w)) => (r, t, w),
            _ => return Err(Unavailable::Fail("the emulation launchers are missing".to_string())),
        }
    };
    Ok(Emu { lib, launch_reduce, launch3, launch2 })
}

/// The emulation library, built once per test process; `None` after
/// printing why the test `test` skips; panics when the source does not build.
pub fn emu(test: &str) -> Option<&'static Emu> {
    static EMU: OnceLock<Result<Emu, Unavailable>> = OnceLock::new();
    match EMU.get_or_init(build) {
        Ok(emu) => Some(emu),
        Err(Unavailable::Skip(why)) => {
            eprintln!("{test}: skipped: {why}");
            None
        }
        Err(Unavailable::Fail(why)) => panic!("{test}: {why}"),
    }
}

impl Emu {
    /// The address of the entry point `name`, if the library has it.
    pub fn kernel(&self, name: &str) -> Option<*const c_void> {
        let c = CString::new(name).ok()?;
        // SAFETY: only the symbol's address is taken (as a data pointer); it
        // is called through the launchers with the signature its name implies.
        unsafe { self.lib.get::<*const c_void>(c.as_bytes_with_nul()).ok().map(|s| *s) }
    }

    fn expect_kernel(&self, name: &str) -> *const c_void {
        self.kernel(name).unwrap_or_else(|| panic!("no entry point {name} in the emulation library"))
    }

    /// Run the reduce kernel `name` on a serial grid of `grid` x `block` threads.
    ///
    /// # Safety
    /// Every address in `args` must be valid for the bytes the kernel touches
    /// (as on the device: `count` elements of dst and of each source).
    pub unsafe fn reduce(&self, name: &str, args: &ReduceArgs, grid: u32, block: u32) {
        let k = self.expect_kernel(name);
        // SAFETY: k is a reduce entry point (extern "C" void(ReduceArgs)); the
        // caller guarantees the addresses in args.
        unsafe { (self.launch_reduce)(k, args, grid, block) }
    }

    /// Run `fc_copy(dst, src, bytes)`.
    ///
    /// # Safety
    /// `dst` and `src` must be valid for `bytes` bytes and not overlap.
    pub unsafe fn copy(&self, dst: u64, src: u64, bytes: u64, grid: u32, block: u32) {
        let k = self.expect_kernel(ferrocoll_kernels::COPY_KERNEL);
        // SAFETY: k is fc_copy (extern "C" void(u64, u64, u64)); the caller guarantees the buffers.
        unsafe { (self.launch3)(k, dst, src, bytes, grid, block) }
    }

    /// Run a flag kernel (`fc_flag_write` or `fc_flag_wait`) on one thread.
    ///
    /// # Safety
    /// `flag` must be the address of a live, 8-byte aligned `u64` (an `AtomicU64`).
    pub unsafe fn flag(&self, name: &str, flag: u64, value: u64) {
        let k = self.expect_kernel(name);
        // SAFETY: k is a flag kernel (extern "C" void(u64, u64)); the caller guarantees the flag.
        unsafe { (self.launch2)(k, flag, value, 1, 1) }
    }
}
