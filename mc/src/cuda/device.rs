//! What the memory component keeps per device, next to `ferrocoll-cuda`'s
//! process-wide device (primary context, compute capability): its pools and
//! its kernel module, made on first use of the device.
//!
//! Why process-wide: device memory and modules belong to the process, not
//! to a library object, so every [`CudaMc`](super::CudaMc) shares them (two
//! `Lib`s in one process do not load the kernels twice). Never torn down.

use std::sync::Arc;

use ferrocoll_core::config::ConfigField;
use ferrocoll_core::{Error, Result};
use ferrocoll_cuda::{Driver, Kept, PerDevice};

use super::pool::{DeviceBacking, Keep, ManagedBacking, PinnedBacking, Pool};
use super::reduce::Kernels;

/// Default cap on the bytes each device pool keeps cached.
pub const DEFAULT_DEVICE_CACHE_LIMIT: usize = 256 << 20;

/// What the pinned staging pool keeps (read from the environment when a
/// device is first used, as the pools are the process's): `peak` (the
/// default: up to the most bytes its users held at once) or a size
/// (`256M`: at most that many bytes).
pub const PINNED_CACHE: ConfigField = ConfigField {
    name: "UCC_MC_CUDA_PINNED_CACHE",
    default: "peak",
    doc: "How much pinned host memory the CUDA staging pool keeps for reuse: peak (up to the most the process's \
          collectives held at once; pinning memory is slow) or a size (at most that much, 0: none). Read from the \
          environment when a CUDA device is first used.",
};

/// The pinned pool's (cap, policy) for a value of [`PINNED_CACHE`]
/// (`None`: unset); `InvalidParam` naming the variable and the value.
pub(crate) fn pinned_keep(value: Option<&str>) -> Result<(usize, Keep)> {
    match value.map(str::trim) {
        None | Some("") => Ok((DEFAULT_DEVICE_CACHE_LIMIT, Keep::Peak)),
        Some(v) if v.eq_ignore_ascii_case("peak") => Ok((DEFAULT_DEVICE_CACHE_LIMIT, Keep::Peak)),
        Some(v) => {
            let bytes = ferrocoll_core::config::parse_size(v)
                .map_err(|e| Error::invalid_param(format!("{}={v:?}: {} (or peak)", PINNED_CACHE.name, e.context())))?;
            Ok((usize::try_from(bytes).unwrap_or(usize::MAX), Keep::UpToCap))
        }
    }
}

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
    /// users' peak ([`Keep::Peak`]: registering memory is slow) unless
    /// [`PINNED_CACHE`] caps it.
    pub pinned_pool: Arc<Pool<PinnedBacking>>,
    /// The kernels' module, loaded on the first reduction.
    pub kernels: Kept<Kernels>,
}

impl Device {
    fn open(cuda: &'static ferrocoll_cuda::Device) -> Result<Device> {
        let (ordinal, ctx) = (cuda.ordinal(), cuda.context());
        let (pinned_cap, pinned) = pinned_keep(std::env::var(PINNED_CACHE.name).ok().as_deref())?;
        Ok(Device {
            cuda,
            pool: Arc::new(Pool::new(DeviceBacking { ordinal, ctx }, DEFAULT_DEVICE_CACHE_LIMIT)),
            managed_pool: Arc::new(Pool::new(ManagedBacking { ordinal, ctx }, DEFAULT_DEVICE_CACHE_LIMIT)),
            pinned_pool: Arc::new(Pool::keeping(PinnedBacking { ctx }, pinned_cap, pinned)),
            kernels: Kept::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_cache_knob_takes_peak_or_a_size_and_names_a_bad_value() {
        assert_eq!(pinned_keep(None).unwrap(), (DEFAULT_DEVICE_CACHE_LIMIT, Keep::Peak));
        assert_eq!(pinned_keep(Some(" Peak ")).unwrap(), (DEFAULT_DEVICE_CACHE_LIMIT, Keep::Peak));
        assert_eq!(pinned_keep(Some("64M")).unwrap(), (64 << 20, Keep::UpToCap));
        assert_eq!(pinned_keep(Some("0")).unwrap(), (0, Keep::UpToCap), "0: keep nothing");
        let e = pinned_keep(Some("lots")).unwrap_err();
        assert_eq!(e.status(), ferrocoll_core::Status::InvalidParam);
        assert!(e.context().contains(PINNED_CACHE.name) && e.context().contains("lots"), "{e}");
    }
}
