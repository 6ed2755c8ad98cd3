//! Modules and kernels: load PTX into the current context, look entry
//! points up by name, launch them on a stream.
//!
//! Modules are never unloaded: ferrocoll loads its kernels once per device
//! and keeps them for the life of the process, like the primary context
//! that holds them (so [`Module`] has no `Drop`, and its functions stay
//! valid as long as the context).

use std::ffi::{CString, c_void};

use ferrocoll_core::{Error, Result};

use crate::error::check;
use crate::nvrtc::Ptx;
use crate::probe::loaded;
use crate::stream::Stream;
use crate::sys::driver as sys;

/// A loaded module (`CUmodule`), kept to the end of the process.
#[derive(Debug)]
pub struct Module(sys::CUmodule);

/// A kernel of a [`Module`] (`CUfunction`).
#[derive(Clone, Copy, Debug)]
pub struct Function(sys::CUfunction);

// SAFETY: module and function handles are process-wide driver identifiers
// that the (thread-safe) driver API accepts from any thread whose current
// context holds them; they are never dereferenced here nor unloaded.
unsafe impl Send for Module {}
// SAFETY: as for Send: lookups only pass the handle to the driver.
unsafe impl Sync for Module {}
// SAFETY: as for Module.
unsafe impl Send for Function {}
// SAFETY: as for Module: a launch only passes the handle to the driver.
unsafe impl Sync for Function {}

impl Module {
    /// JIT-compile and load `ptx` into the current context (`cuModuleLoadData`).
    pub fn load_ptx(ptx: &Ptx) -> Result<Module> {
        loaded()?;
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: the driver passed the probe; the image is a NUL-terminated
        // PTX text (Ptx's invariant) that outlives the call; the call writes
        // one handle.
        check("cuModuleLoadData", unsafe { sys::cuModuleLoadData(&mut module, ptx.as_c_str().as_ptr().cast()) })?;
        Ok(Module(module))
    }

    /// The entry point `name` (`cuModuleGetFunction`); the module's context
    /// must be current.
    pub fn function(&self, name: &str) -> Result<Function> {
        let cname =
            CString::new(name).map_err(|_| Error::invalid_param(format!("kernel name {name:?} has a NUL byte")))?;
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: the module is loaded and never unloaded; cname is
        // NUL-terminated and outlives the call; the call writes one handle.
        check("cuModuleGetFunction", unsafe { sys::cuModuleGetFunction(&mut f, self.0, cname.as_ptr()) })?;
        Ok(Function(f))
    }
}

impl Function {
    /// Enqueue the kernel on `stream` over a 1-D grid of `grid` blocks of
    /// `block` threads, without dynamic shared memory (`cuLaunchKernel`).
    /// The module's context must be current.
    ///
    /// # Safety
    /// `params` must hold one pointer per kernel parameter, in order, each
    /// to a live value of that parameter's type and layout (the driver
    /// copies them during the call). Every address the kernel reads or
    /// writes through its parameters must be device-accessible and stay
    /// valid, and untouched by others, until the stream has run it.
    pub unsafe fn launch(&self, grid: u32, block: u32, stream: &Stream, params: &mut [*mut c_void]) -> Result<()> {
        // SAFETY: the function belongs to a module that is never unloaded;
        // the stream is valid (Stream's invariant); the caller keeps the
        // contract above on params and the memory they reach.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                self.0,
                grid,
                1,
                1,
                block,
                1,
                1,
                0,
                stream.handle(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }
}
