//! [`PinnedHost`]: page-locked host memory that the device can read and
//! write directly (page-aligned heap memory registered with
//! `cuMemHostRegister`, `PORTABLE | DEVICEMAP`; see `pool.rs` for why not
//! `cuMemHostAlloc`).
//!
//! Two uses: fast staging between host and device (DMA without a bounce
//! through pageable memory), and flags that both sides see — the CUDA
//! stream engine writes a completion flag from the host and a stream waits
//! on it through the device pointer (`cuStreamWaitValue32`).

use std::sync::Arc;

use cudarc::driver::sys;
use ferrocoll_core::{MemRef, MemType, Result};

use super::device::Device;
use super::pool::{Backing, PinnedBacking};
use super::probe::check;

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
    host: *mut u8,
    device: u64,
    len: usize,
    backing: PinnedBacking,
    /// Keeps the context the memory was mapped in alive.
    _device: Arc<Device>,
}

// SAFETY: the block is plain host memory owned by this value; moving the
// owner between threads is sound, and freeing binds a context on whichever
// thread drops it.
unsafe impl Send for PinnedHost {}
// SAFETY: shared access only reads the addresses; writing through them is
// the user's business (raw pointers).
unsafe impl Sync for PinnedHost {}

impl PinnedHost {
    /// `len` bytes (at least one) of pinned host memory mapped into `device`'s address space.
    pub(crate) fn alloc(device: &Arc<Device>, len: usize) -> Result<PinnedHost> {
        let backing = PinnedBacking { ctx: super::pool::Ctx(device.ctx()) };
        let size = len.max(1);
        let host = backing.alloc(size)?;
        let mut dptr: sys::CUdeviceptr = 0;
        let mapped = {
            let _bound = device.bind()?;
            // SAFETY: host is a live DEVICEMAP allocation and the context it
            // was made in is current; the call writes one device pointer.
            check("cuMemHostGetDevicePointer", unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dptr, host.cast(), 0) })
        };
        if let Err(e) = mapped {
            backing.free(host, size);
            return Err(e.prefixed(format!("mapping {len} bytes of pinned memory on CUDA device {}", device.ordinal)));
        }
        Ok(PinnedHost { host, device: dptr, len, backing, _device: device.clone() })
    }

    /// The host address.
    pub fn host_ptr(&self) -> *mut u8 {
        self.host
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
        unsafe { MemRef::new(self.host, self.len, MemType::Host) }
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        self.backing.free(self.host, self.len.max(1));
    }
}

impl std::fmt::Debug for PinnedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedHost")
            .field("host", &self.host)
            .field("device", &format_args!("{:#x}", self.device))
            .field("len", &self.len)
            .finish()
    }
}
