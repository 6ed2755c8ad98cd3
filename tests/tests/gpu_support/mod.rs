//! Device memory for the GPU tests, managed through cudarc's raw driver
//! calls — independently of ferrocoll's CUDA memory component, which the
//! tests check.
//!
//! Shared by `gpu_mc.rs` and `gpu_colls.rs`; each uses part of it.
#![allow(dead_code)]

use std::sync::OnceLock;

use cudarc::driver::{result, sys};

/// Make device 0's primary context current on this thread (retained once
/// per process). Call only after `skip_unless_gpu` said there is a GPU.
pub fn bind() {
    static CTX: OnceLock<usize> = OnceLock::new();
    let ctx = *CTX.get_or_init(|| {
        let dev = result::device::get(0).expect("cuDeviceGet(0)");
        // SAFETY: dev is a valid device; the primary context stays retained for the process.
        unsafe { result::primary_ctx::retain(dev) }.expect("cuDevicePrimaryCtxRetain") as usize
    });
    // SAFETY: ctx is the retained primary context of device 0.
    unsafe { result::ctx::set_current(ctx as sys::CUcontext) }.expect("cuCtxSetCurrent");
}

/// What kind of memory a [`DevBuf`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `cuMemAlloc`.
    Device,
    /// `cuMemAllocManaged` (attached globally).
    Managed,
    /// `cuMemHostAlloc` (pinned, portable, device-mapped).
    Pinned,
}

/// A block of CUDA memory, freed on drop.
pub struct DevBuf {
    ptr: u64,
    len: usize,
    kind: Kind,
}

impl DevBuf {
    /// `len` bytes (at least one is allocated) of `kind`, contents undefined.
    pub fn new(len: usize, kind: Kind) -> DevBuf {
        bind();
        let n = len.max(1);
        // SAFETY: a context is current (bound above); the memory is only
        // reached through this DevBuf, which frees it once on drop.
        let ptr = unsafe {
            match kind {
                Kind::Device => result::malloc_sync(n).expect("cuMemAlloc"),
                Kind::Managed => {
                    result::malloc_managed(n, sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL).expect("cuMemAllocManaged")
                }
                Kind::Pinned => {
                    let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
                    result::malloc_host(n, flags).expect("cuMemHostAlloc") as u64
                }
            }
        };
        DevBuf { ptr, len, kind }
    }

    /// A block holding `bytes`.
    pub fn from_host(bytes: &[u8], kind: Kind) -> DevBuf {
        let b = DevBuf::new(bytes.len(), kind);
        b.write(bytes);
        b
    }

    /// The address (as ferrocoll takes it).
    pub fn addr(&self) -> *mut u8 {
        self.ptr as *mut u8
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Overwrite the whole block with `bytes` (same length).
    pub fn write(&self, bytes: &[u8]) {
        assert_eq!(bytes.len(), self.len, "write of {} bytes into a {}-byte block", bytes.len(), self.len);
        if bytes.is_empty() {
            return;
        }
        bind();
        // SAFETY: the block holds len bytes; a context is current; the
        // synchronous copy is finished when it returns (unified addressing
        // serves device, managed and pinned blocks alike).
        unsafe { result::memcpy_htod_sync(self.ptr, bytes) }.expect("cuMemcpyHtoD");
        sync();
    }

    /// Fill the block with `byte`.
    pub fn fill(&self, byte: u8) {
        self.write(&vec![byte; self.len]);
    }

    /// The block's bytes.
    pub fn read(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len];
        if self.len == 0 {
            return out;
        }
        bind();
        sync();
        // SAFETY: as in `write`, the other way.
        unsafe { result::memcpy_dtoh_sync(&mut out, self.ptr) }.expect("cuMemcpyDtoH");
        out
    }
}

/// Wait for everything on the device (copies of ferrocoll's run on other streams).
pub fn sync() {
    bind();
    result::ctx::synchronize().expect("cuCtxSynchronize");
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        bind();
        // SAFETY: the block came from the matching allocation in `new` and is freed once.
        let r = unsafe {
            match self.kind {
                Kind::Device | Kind::Managed => result::free_sync(self.ptr),
                Kind::Pinned => result::free_host(self.ptr as *mut std::ffi::c_void),
            }
        };
        if let Err(e) = r {
            eprintln!("freeing a test block failed: {e:?}");
        }
    }
}
