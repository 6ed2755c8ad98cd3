//! What the memory component keeps per device, next to `ferrocoll-cuda`'s
//! process-wide device (primary context, compute capability): its pools and
//! its kernel module, made on first use of the device.
//!
//! Why process-wide: device memory and modules belong to the process, not
//! to a library object, so every [`CudaMc`](super::CudaMc) shares them (two
//! `Lib`s in one process do not load the kernels twice). Never torn down.

use std::sync::Arc;

use ferrocoll_core::Result;
use ferrocoll_cuda::{Driver, Kept, PerDevice};

use super::pool::{DeviceBacking, Keep, ManagedBacking, PinnedBacking, Pool};
use super::reduce::Kernels;

/// Default cap on the bytes each device pool keeps cached.
pub const DEFAULT_DEVICE_CACHE_LIMIT: usize = 256 << 20;

/// The probed driver and the component's state of each device.
pub(crate) struct Devices {
    pub cuda: &'static Driver,
    devices: PerDevice<Device>,
}

/// The driver probe (`ferrocoll_cuda::driver`), then the component's
/// devices, once per process.
pub(crate) fn devices() -> Result<&'static Devices> {
    static DEVICES: Kept<Devices> = Kept::new();
    DEVICES.get_or_init(|| {
        let cuda = ferrocoll_cuda::driver()?;
        Ok(Devices { cuda, devices: PerDevice::new(cuda.count()) })
    })
}

impl Devices {
    /// Number of devices.
    pub(crate) fn count(&self) -> usize {
        self.cuda.count()
    }

    /// Device `ordinal`, set up on first use.
    pub(crate) fn device(&self, ordinal: usize) -> Result<&Device> {
        self.devices.get_or_init(ordinal, || Device::open(self.cuda.device(ordinal)?))
    }

    /// The device whose context is current on this thread (the user's
    /// choice, as with the CUDA runtime's current device), else device 0.
    pub(crate) fn current_device(&self) -> Result<&Device> {
        self.device(self.cuda.current_ordinal())
    }
}

/// One device: its driver state and what the component keeps for it.
pub(crate) struct Device {
    pub cuda: &'static ferrocoll_cuda::Device,
    /// Device memory scratch.
    pub pool: Arc<Pool<DeviceBacking>>,
    /// Managed memory scratch.
    pub managed_pool: Arc<Pool<ManagedBacking>>,
    /// Pinned host scratch (for staging through the host); keeps its
    /// users' peak ([`Keep::Peak`]: registering memory is slow).
    pub pinned_pool: Arc<Pool<PinnedBacking>>,
    /// The kernels' module, loaded on the first reduction.
    pub kernels: Kept<Kernels>,
}

impl Device {
    fn open(cuda: &'static ferrocoll_cuda::Device) -> Result<Device> {
        let (ordinal, ctx) = (cuda.ordinal(), cuda.context());
        Ok(Device {
            cuda,
            pool: Arc::new(Pool::new(DeviceBacking { ordinal, ctx }, DEFAULT_DEVICE_CACHE_LIMIT)),
            managed_pool: Arc::new(Pool::new(ManagedBacking { ordinal, ctx }, DEFAULT_DEVICE_CACHE_LIMIT)),
            pinned_pool: Arc::new(Pool::keeping(PinnedBacking { ctx }, DEFAULT_DEVICE_CACHE_LIMIT, Keep::Peak)),
            kernels: Kept::new(),
        })
    }
}
