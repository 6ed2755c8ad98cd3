//! [`PinnedHost`]: page-locked host memory that the device can read and
//! write directly (page-aligned heap memory registered with
//! `cuMemHostRegister`, `PORTABLE | DEVICEMAP`: `ferrocoll_cuda`'s
//! [`RegisteredHost`], whose docs say why not `cuMemHostAlloc`).
//!
//! Two uses: fast staging between host and device (DMA without a bounce
//! through pageable memory), and flags that both sides see — the CUDA
//! stream engine writes a completion flag from the host and a stream waits
//! on it through the device pointer (`cuStreamWaitValue32`).

use ferrocoll_core::{MemRef, MemType, Result};
use ferrocoll_cuda::RegisteredHost;

use super::device::Device;

/// A block of pinned, device-mapped host memory; freed on drop.
///
/// ```no_run
/// let mc = ferrocoll_mc::CudaMc::probe()?;
/// let flag = mc.alloc_pinned(8)?;
/// // The host writes through `host_ptr`, a kernel or stream op reads `device_ptr`.
/// assert!(!flag.host_ptr().is_null() && flag.device_ptr() != 0);
/// # Ok::<(), ferrocoll_core::Error>(())
/// ```
pub struct PinnedHost {
    block: RegisteredHost,
    device: u64,
    len: usize,
}

impl PinnedHost {
    /// `len` bytes (at least one) of pinned host memory mapped into `device`'s address space.
    /// The device's primary context is retained for the process, so it outlives the block.
    pub(crate) fn alloc(device: &Device, len: usize) -> Result<PinnedHost> {
        let block = RegisteredHost::alloc(device.cuda.context(), len.max(1))
            .map_err(|e| e.prefixed(format!("pinning {} bytes of host memory", len.max(1))))?;
        // On error `block` is dropped, which unregisters and frees it.
        let dev = block.device_ptr().map_err(|e| {
            e.prefixed(format!("mapping {len} bytes of pinned memory on CUDA device {}", device.cuda.ordinal()))
        })?;
        Ok(PinnedHost { block, device: dev, len })
    }

    /// The host address.
    pub fn host_ptr(&self) -> *mut u8 {
        self.block.host_ptr()
    }

    /// The address kernels and stream memory operations use.
    pub fn device_ptr(&self) -> u64 {
        self.device
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the length is zero (the block then still has one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The block as host memory.
    ///
    /// # Safety
    /// The returned `MemRef` must not be used after `self` is dropped, and
    /// the caller must keep the `MemRef` contract (no one else touches the
    /// bytes while ferrocoll uses them).
    pub unsafe fn mem(&self) -> MemRef {
        // SAFETY: host..host+len is a live host allocation while self lives;
        // the caller keeps the rest of the contract.
        unsafe { MemRef::new(self.host_ptr(), self.len, MemType::Host) }
    }
}

impl std::fmt::Debug for PinnedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedHost")
            .field("host", &self.host_ptr())
            .field("device", &format_args!("{:#x}", self.device))
            .field("len", &self.len)
            .finish()
    }
}
