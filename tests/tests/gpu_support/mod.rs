//! Device memory for the GPU tests, made with ferrocoll-cuda's allocation
//! wrappers and the raw driver calls it re-exports — independently of
//! ferrocoll's CUDA memory component (its pools, copies and pointer query),
//! which the tests check.
//!
//! Shared by the GPU tests and `gpu_fake_driver.rs`; each uses part of it
//! ([`reduce`]: the device reduction check; [`stream`]: what the stream
//! engine tests use).
#![allow(dead_code)]

pub mod reduce;
pub mod stream;

use std::sync::OnceLock;

use ferrocoll_cuda::sys::driver as sys;
use ferrocoll_cuda::{Context, DeviceId, HostAlloc, PrimaryContext, memory};

/// Panic with the call's name unless the driver returned success.
fn ok(r: sys::CUresult, call: &str) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "{call}");
}

/// Device 0's primary context, retained once per process (never released).
fn context() -> Context {
    static CTX: OnceLock<PrimaryContext> = OnceLock::new();
    CTX.get_or_init(|| {
        let dev = DeviceId::get(0).expect("cuDeviceGet(0)");
        PrimaryContext::retain(dev).expect("cuDevicePrimaryCtxRetain")
    })
    .context()
}

/// Make device 0's primary context current on this thread. Call only after
/// `skip_unless_gpu` said there is a GPU.
pub fn bind() {
    context().make_current().expect("cuCtxSetCurrent");
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
    /// The pinned block (freed by its own drop), for `Kind::Pinned`.
    pinned: Option<HostAlloc>,
}

impl DevBuf {
    /// `len` bytes (at least one is allocated) of `kind`, contents undefined.
    pub fn new(len: usize, kind: Kind) -> DevBuf {
        bind();
        let n = len.max(1);
        match kind {
            Kind::Device => DevBuf { ptr: memory::alloc(n).expect("cuMemAlloc"), len, pinned: None },
            Kind::Managed => DevBuf { ptr: memory::alloc_managed(n).expect("cuMemAllocManaged"), len, pinned: None },
            Kind::Pinned => {
                let block = HostAlloc::new(context(), n).expect("cuMemHostAlloc");
                DevBuf { ptr: block.host_ptr() as u64, len, pinned: Some(block) }
            }
        }
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
        ok(unsafe { sys::cuMemcpyHtoD_v2(self.ptr, bytes.as_ptr().cast(), bytes.len()) }, "cuMemcpyHtoD");
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
        ok(unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), self.ptr, self.len) }, "cuMemcpyDtoH");
        out
    }
}

/// Wait for everything on the device (copies of ferrocoll's run on other streams).
pub fn sync() {
    bind();
    // SAFETY: a context is current (bound above); the call takes no pointer.
    ok(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize");
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        if self.pinned.is_some() {
            return; // HostAlloc frees itself (with its context made current).
        }
        bind();
        // SAFETY: the block came from memory::alloc or alloc_managed in `new` and is freed once.
        if let Err(e) = unsafe { memory::free(self.ptr) } {
            eprintln!("freeing a test block failed: {e}");
        }
    }
}
