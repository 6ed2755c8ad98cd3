//! # The CUDA memory component
//!
//! [`CudaMc`] does to CUDA memory what [`HostMc`](crate::HostMc) does to
//! host memory: scratch from a pool, copies, reductions — plus the pointer
//! query that resolves `MemType::Unknown`, and pinned host memory
//! ([`PinnedHost`]) for staging and for flags a stream waits on.
//!
//! Design decisions:
//! - **Probe, never panic.** [`CudaMc::probe`] is `ferrocoll-cuda`'s driver
//!   probe (`libcuda.so.1` loads and has every entry point ferrocoll calls,
//!   `cuInit`, at least one device); any failure is `Error(NotSupported)`
//!   naming what is missing, and [`default_mcs`](crate::default_mcs) then
//!   leaves the component out (saying why at debug log level). Every driver
//!   call goes through `ferrocoll-cuda`; this module keeps the component's
//!   logic (pools, pointer classification, reduction rounds).
//! - **Primary contexts, bound per call.** Memory and kernels live in each
//!   device's primary context (the one the CUDA runtime uses, so buffers from
//!   PyTorch or CuPy are in the same context). Progress may run on any
//!   thread, so every driver call first makes the right context current: a
//!   thread with no context keeps ours afterwards; a thread whose user set a
//!   different context gets it back when the call returns.
//! - **Which device.** Scratch is allocated on the calling thread's current
//!   device (the user's choice, as with the runtime's `cudaSetDevice`), or
//!   device 0 when the thread has none. Reductions run on the device that
//!   holds the destination (pointer query). Copies need no choice: unified
//!   addressing lets `cuMemcpy` move any pair of addresses from any context.
//!   Nothing touches a device before it is used, so a process that uses GPU
//!   1 creates no context on GPU 0.
//! - **Synchronous.** Copies and reductions run on the per-thread default
//!   stream and are waited for before returning, so callers (host-driven
//!   algorithms) see finished results. A stream-ordered path belongs to the
//!   CUDA stream execution engine.
//! - **Process-wide state.** Retained contexts (`ferrocoll-cuda`'s), loaded
//!   modules and pools belong to the process and are shared by every
//!   `CudaMc`; they are kept until exit.
//! - **Two memory types.** One component serves `cuda`, its
//!   [`managed`](CudaMc::managed) twin serves `cuda_managed`; the pointer
//!   query tells them apart (`CU_POINTER_ATTRIBUTE_IS_MANAGED`), so
//!   `MemType::Unknown` resolves to host, cuda or cuda_managed.
//!
//! Limits: buffers must belong to a device's primary context (as those of
//! the CUDA runtime and the frameworks over it do; memory of a context made
//! with `cuCtxCreate` is copied correctly but may not be reduced);
//! reductions are one kernel launch per 8 sources (rounds beyond);
//! the kernels are compiled with NVRTC on first use (`libnvrtc.so.13` must
//! be on the loader path then); ROCm is not handled.

mod copy;
mod device;
mod pinned;
mod pool;
mod query;
mod reduce;

#[cfg(test)]
mod tests;

use ferrocoll_core::backend::{Mc, PendingCopy, ReduceSpec, Scratch};
use ferrocoll_core::{MemRef, MemType, Result};
use std::sync::Arc;

use ferrocoll_cuda::{EventPool, PerDevice};

pub use device::{DEFAULT_DEVICE_CACHE_LIMIT, PINNED_CACHE};
pub use pinned::PinnedHost;

use device::{Devices, devices};

/// The CUDA memory component (one for device memory, one for managed memory; see the module docs).
///
/// ```no_run
/// use ferrocoll_core::backend::Mc;
/// let mc = ferrocoll_mc::CudaMc::probe()?; // Err(NotSupported) without a driver or device
/// let scratch = mc.alloc(1 << 20)?;         // device memory on the current device
/// assert_eq!(mc.resolve(scratch.mem().addr()), ferrocoll_core::MemType::Cuda);
/// # Ok::<(), ferrocoll_core::Error>(())
/// ```
#[derive(Clone)]
pub struct CudaMc {
    devices: &'static Devices,
    kind: MemType,
    /// Events of started copies, per device: the component's, not the
    /// process's (unlike the pools), so that they are destroyed with it.
    copy_events: Arc<PerDevice<Arc<EventPool>>>,
}

impl CudaMc {
    /// The component for CUDA device memory, if this machine has a usable
    /// driver and at least one device; `Err(NotSupported)` naming what is
    /// missing otherwise (never a panic). Creates no context yet.
    pub fn probe() -> Result<CudaMc> {
        let devices = devices()?;
        Ok(CudaMc { devices, kind: MemType::Cuda, copy_events: Arc::new(PerDevice::new(devices.count())) })
    }

    /// The twin component for CUDA managed memory (same devices, pools and kernels).
    pub fn managed(&self) -> CudaMc {
        CudaMc { kind: MemType::CudaManaged, ..self.clone() }
    }

    /// Number of CUDA devices the driver sees.
    pub fn device_count(&self) -> usize {
        self.devices.count()
    }

    /// Compute capability `(major, minor)` of device `ordinal` (sets the device up).
    pub fn compute_capability(&self, ordinal: usize) -> Result<(u32, u32)> {
        Ok(self.devices.device(ordinal)?.cuda.compute_capability())
    }

    /// What memory `addr` is: `Cuda`, `CudaManaged`, or `Host` for anything
    /// the driver does not place on a device (pageable, pinned or registered
    /// host memory).
    pub fn resolve(&self, addr: *const u8) -> MemType {
        query::query(self.devices, addr).mem_type
    }

    /// The device that holds `addr`, for device and managed memory.
    pub fn device_of(&self, addr: *const u8) -> Option<usize> {
        query::query(self.devices, addr).device
    }

    /// `len` bytes of pinned host memory mapped for the calling thread's
    /// current device (device 0 if none), freed when dropped.
    pub fn alloc_pinned(&self, len: usize) -> Result<PinnedHost> {
        PinnedHost::alloc(self.devices.current_device()?, len)
    }

    /// Bytes of freed scratch the current device's pool of this component's memory type keeps.
    pub fn cached_bytes(&self) -> Result<usize> {
        let d = self.devices.current_device()?;
        Ok(if self.kind == MemType::Cuda { d.pool.cached_bytes() } else { d.managed_pool.cached_bytes() })
    }
}

impl std::fmt::Debug for CudaMc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaMc").field("kind", &self.kind).field("devices", &self.devices.count()).finish()
    }
}

impl Mc for CudaMc {
    fn name(&self) -> &'static str {
        if self.kind == MemType::Cuda { "cuda" } else { "cuda_managed" }
    }

    fn mem_type(&self) -> MemType {
        self.kind
    }

    fn owns(&self, addr: *const u8) -> bool {
        self.resolve(addr) == self.kind
    }

    fn alloc(&self, len: usize) -> Result<Scratch> {
        let d = self.devices.current_device()?;
        if self.kind == MemType::Cuda {
            Ok(Scratch::new(d.pool.take(len)?, d.pool.clone()))
        } else {
            Ok(Scratch::new(d.managed_pool.take(len)?, d.managed_pool.clone()))
        }
    }

    fn alloc_host(&self, len: usize) -> Result<Scratch> {
        let d = self.devices.current_device()?;
        Ok(Scratch::new(d.pinned_pool.take(len)?, d.pinned_pool.clone()))
    }

    fn copy(&self, dst: MemRef, src: MemRef) -> Result<()> {
        copy::copy(self.devices, dst, src)
    }

    fn copy_start(&self, dst: MemRef, src: MemRef) -> Result<PendingCopy> {
        copy::copy_start(self.devices, &self.copy_events, dst, src)
    }

    fn reduce(&self, dst: MemRef, srcs: &[MemRef], spec: &ReduceSpec) -> Result<()> {
        reduce::reduce(self.devices, dst, srcs, spec)
    }
}
