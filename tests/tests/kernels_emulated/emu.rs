//! The kernels' CUDA C compiled for the CPU (`ferrocoll_tests::kernels_emu`,
//! shared with the fake CUDA driver), loaded here to call each kernel
//! directly on a serial grid.

use std::ffi::{CString, c_void};

use ferrocoll_kernels::ReduceArgs;
use ferrocoll_tests::kernels_emu;
use ferrocoll_tests::native::Unavailable;

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

fn load() -> Result<Emu, Unavailable> {
    let so = kernels_emu::library()?;
    // SAFETY: the library is the kernels compiled by kernels_emu; its only
    // initialisers are the thread-local grid variables (zero-initialised).
    let lib = unsafe { libloading::Library::new(so) }
        .map_err(|e| Unavailable::Fail(format!("load {}: {e}", so.display())))?;
    // SAFETY: the three launchers are defined by kernels_emu's shim with
    // exactly these C signatures; the pointers stay valid while `lib` lives
    // (for the process).
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

/// The emulation library, loaded once per test process; `None` after
/// printing why the test `test` skips; panics when the source does not build.
pub fn emu(test: &str) -> Option<&'static Emu> {
    static EMU: std::sync::OnceLock<Result<Emu, Unavailable>> = std::sync::OnceLock::new();
    match EMU.get_or_init(load) {
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
