//! The process-wide driver state: one entry per device, each with its
//! retained primary context, compute capability, pools and kernel module,
//! created on first use.
//!
//! Why process-wide: primary contexts, device memory and modules belong to
//! the process, not to a library object, so every [`CudaMc`](super::CudaMc)
//! shares them (two `Lib`s in one process do not load the kernels twice).
//! The state is never torn down: the primary contexts stay retained until
//! the process exits, which is what the CUDA runtime does too.

use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{self, CUcontext, CUdevice, CUdevice_attribute};
use ferrocoll_core::{Error, Result};

use super::pool::{Ctx, DeviceBacking, ManagedBacking, PinnedBacking, Pool};
use super::probe::{check, probe_driver};
use super::reduce::Kernels;

/// Default cap on the bytes each device pool keeps cached.
pub const DEFAULT_DEVICE_CACHE_LIMIT: usize = 256 << 20;

/// A device, or why it cannot be used (kept, so the failure is not retried at every call).
type DeviceSlot = OnceLock<std::result::Result<Arc<Device>, Error>>;

/// The loaded driver and its devices.
pub(crate) struct Driver {
    devices: Box<[DeviceSlot]>,
}

static DRIVER: OnceLock<std::result::Result<Arc<Driver>, Error>> = OnceLock::new();

/// The driver, probed once per process (see [`probe_driver`]).
pub(crate) fn driver() -> Result<Arc<Driver>> {
    DRIVER
        .get_or_init(|| {
            let n = probe_driver()?;
            Ok(Arc::new(Driver { devices: (0..n).map(|_| OnceLock::new()).collect() }))
        })
        .as_ref()
        .map(Arc::clone)
        .map_err(Error::duplicate)
}

impl Driver {
    /// Number of devices.
    pub(crate) fn count(&self) -> usize {
        self.devices.len()
    }

    /// Device `ordinal`, set up on first use.
    pub(crate) fn device(&self, ordinal: usize) -> Result<Arc<Device>> {
        let slot = self.devices.get(ordinal).ok_or_else(|| {
            Error::invalid_param(format!("CUDA device {ordinal} does not exist ({} devices)", self.devices.len()))
        })?;
        slot.get_or_init(|| Device::open(ordinal)).as_ref().map(Arc::clone).map_err(Error::duplicate)
    }

    /// The device whose context is current on this thread (the user's
    /// choice, as with the CUDA runtime's current device), else device 0.
    pub(crate) fn current_device(&self) -> Result<Arc<Device>> {
        let mut ctx: CUcontext = std::ptr::null_mut();
        // SAFETY: the driver is initialised; cuCtxGetCurrent writes one handle (null if none).
        let has_ctx = unsafe { sys::cuCtxGetCurrent(&mut ctx) } == sys::CUresult::CUDA_SUCCESS && !ctx.is_null();
        if has_ctx {
            let mut dev: CUdevice = 0;
            // SAFETY: a context is current (checked above); cuCtxGetDevice writes its device.
            if unsafe { sys::cuCtxGetDevice(&mut dev) } == sys::CUresult::CUDA_SUCCESS {
                if let Ok(ordinal) = usize::try_from(dev) {
                    return self.device(ordinal);
                }
            }
        }
        self.device(0)
    }
}

/// One device: its primary context and what ferrocoll keeps for it.
pub(crate) struct Device {
    pub ordinal: usize,
    ctx: CUcontext,
    /// Compute capability (major, minor).
    pub cc: (u32, u32),
    /// Device memory scratch.
    pub pool: Arc<Pool<DeviceBacking>>,
    /// Managed memory scratch.
    pub managed_pool: Arc<Pool<ManagedBacking>>,
    /// Pinned host scratch (for staging through the host).
    pub pinned_pool: Arc<Pool<PinnedBacking>>,
    /// The kernels' module, loaded on the first reduction.
    pub kernels: OnceLock<std::result::Result<Kernels, Error>>,
}

// SAFETY: a CUcontext is a process-wide driver handle that the driver lets
// any thread make current; the other fields are Send + Sync on their own.
unsafe impl Send for Device {}
// SAFETY: as for Send; shared access only reads the handle.
unsafe impl Sync for Device {}

impl Device {
    fn open(ordinal: usize) -> Result<Arc<Device>> {
        let ord = std::ffi::c_int::try_from(ordinal)
            .map_err(|_| Error::invalid_param(format!("CUDA device ordinal {ordinal} is too large")))?;
        let mut dev: CUdevice = 0;
        // SAFETY: the driver is initialised (only reachable through `driver()`);
        // cuDeviceGet writes one handle for an ordinal below the device count.
        check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut dev, ord) })?;
        let attr = |a: CUdevice_attribute, what: &str| -> Result<u32> {
            let mut v: std::ffi::c_int = 0;
            // SAFETY: dev is a valid device handle; the call writes one int.
            check("cuDeviceGetAttribute", unsafe { sys::cuDeviceGetAttribute(&mut v, a, dev) })
                .map_err(|e| e.prefixed(format!("{what} of CUDA device {ordinal}")))?;
            Ok(u32::try_from(v).unwrap_or(0))
        };
        let cc = (
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability")?,
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability")?,
        );
        if attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, "unified addressing")? == 0 {
            return Err(Error::not_supported(format!(
                "CUDA device {ordinal} has no unified addressing, which ferrocoll's copies and pointer query need"
            )));
        }
        let mut ctx: CUcontext = std::ptr::null_mut();
        // SAFETY: dev is valid; the retained primary context stays alive until
        // released, and it is never released (see the module docs).
        check("cuDevicePrimaryCtxRetain", unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) })
            .map_err(|e| e.prefixed(format!("CUDA device {ordinal}")))?;
        Ok(Arc::new(Device {
            ordinal,
            ctx,
            cc,
            pool: Arc::new(Pool::new(DeviceBacking { ordinal, ctx: Ctx(ctx) }, DEFAULT_DEVICE_CACHE_LIMIT)),
            managed_pool: Arc::new(Pool::new(ManagedBacking { ordinal, ctx: Ctx(ctx) }, DEFAULT_DEVICE_CACHE_LIMIT)),
            pinned_pool: Arc::new(Pool::new(PinnedBacking { ctx: Ctx(ctx) }, DEFAULT_DEVICE_CACHE_LIMIT)),
            kernels: OnceLock::new(),
        }))
    }

    /// Make this device's primary context current on the calling thread
    /// (driver calls may come from any thread that progresses a context).
    pub(crate) fn bind(&self) -> Result<Bound> {
        bind(self.ctx)
    }

    /// The retained primary context.
    pub(crate) fn ctx(&self) -> CUcontext {
        self.ctx
    }
}

/// Proof that a context was made current on this thread; restores the
/// thread's previous context, if it had another one, when dropped.
pub(crate) struct Bound {
    pushed: bool,
    /// Not Send: the binding belongs to the thread that made it.
    _thread: std::marker::PhantomData<*const ()>,
}

/// Make `ctx` current: nothing to do when it already is; set it when the
/// thread has no context (and leave it, so the next call is free); push it
/// over a different context of the user's and pop it again on drop.
pub(crate) fn bind(ctx: CUcontext) -> Result<Bound> {
    let mut cur: CUcontext = std::ptr::null_mut();
    // SAFETY: the driver is initialised (a context exists); the call writes one handle.
    check("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut cur) })?;
    let unbound = Bound { pushed: false, _thread: std::marker::PhantomData };
    if cur == ctx {
        return Ok(unbound);
    }
    if cur.is_null() {
        // SAFETY: ctx is a retained primary context, valid for the process's life.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx) })?;
        return Ok(unbound);
    }
    // SAFETY: as above; the matching pop happens in Bound's drop on this thread.
    check("cuCtxPushCurrent", unsafe { sys::cuCtxPushCurrent_v2(ctx) })?;
    Ok(Bound { pushed: true, _thread: std::marker::PhantomData })
}

impl Drop for Bound {
    fn drop(&mut self) {
        if self.pushed {
            let mut popped: CUcontext = std::ptr::null_mut();
            // SAFETY: this thread pushed a context in `bind` and nothing popped it since.
            let r = unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
            if r != sys::CUresult::CUDA_SUCCESS {
                ferrocoll_core::log_warn!("cuCtxPopCurrent failed: {r:?}");
            }
        }
    }
}
