//! The one driver probe, and the process-wide driver state it yields.
//!
//! [`driver()`] checks, in order, once per process:
//! 1. `libcuda.so.1` loads (cudarc's `is_culib_present`);
//! 2. it exports every entry point in [`SYMBOLS`] (looked up, not called:
//!    cudarc panics on the first call of a missing one);
//! 3. `cuInit(0)` succeeds;
//! 4. `cuDeviceGetCount` succeeds and is above zero.
//!
//! Any failure is `Error(NotSupported)` naming the library, the symbol or
//! the failing call, never a panic, and it is kept: later calls get a copy
//! without retrying. Success is a [`Driver`]: the device count and one
//! lazily opened [`Device`] per ordinal.
//!
//! Why process-wide: the driver, its primary contexts, device memory and
//! loaded modules belong to the process, not to a ferrocoll object, so
//! every component shares them (two `Lib`s in one process retain each
//! primary context once). The state is never torn down: the primary
//! contexts stay retained until the process exits, as the CUDA runtime does.

use std::ffi::c_int;

use ferrocoll_core::{Error, Result};

use crate::context::{Context, current_device};
use crate::device::Device;
use crate::error::check;
use crate::kept::{Kept, PerDevice};
use crate::sys::{Library, driver as sys, load};

/// Every driver entry point that ferrocoll calls (this crate is the only
/// caller; a unit test checks that each call in its source is listed).
pub const SYMBOLS: &[&str] = &[
    "cuGetErrorString",
    "cuInit",
    "cuDeviceGet",
    "cuDeviceGetCount",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxPushCurrent_v2",
    "cuCtxPopCurrent_v2",
    "cuCtxGetDevice",
    "cuCtxGetId",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamGetCtx",
    "cuStreamSynchronize",
    "cuStreamQuery",
    "cuStreamIsCapturing",
    "cuThreadExchangeStreamCaptureMode",
    "cuStreamWaitValue32_v2",
    "cuStreamWaitValue64_v2",
    "cuStreamWriteValue32_v2",
    "cuStreamWriteValue64_v2",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventQuery",
    "cuMemAlloc_v2",
    "cuMemAllocManaged",
    "cuMemFree_v2",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemHostRegister_v2",
    "cuMemHostUnregister",
    "cuMemHostGetDevicePointer_v2",
    "cuMemcpyAsync",
    "cuPointerGetAttributes",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuLaunchKernel",
];

/// The probed driver: its devices, each opened on first use.
pub struct Driver {
    devices: PerDevice<Device>,
}

/// The driver, probed once per process (see the module docs).
///
/// ```
/// match ferrocoll_cuda::driver() {
///     Ok(driver) => println!("{} CUDA device(s)", driver.count()),
///     Err(e) => println!("no CUDA here: {e}"), // NotSupported, naming what is missing
/// }
/// ```
pub fn driver() -> Result<&'static Driver> {
    static DRIVER: Kept<Driver> = Kept::new();
    DRIVER.get_or_init(probe)
}

fn probe() -> Result<Driver> {
    load(Library::Driver, SYMBOLS)?;
    let not_supported = |e: Error| Error::not_supported(e.context().to_string());
    // SAFETY: the library exports cuInit (checked by `load`); cuInit(0) may
    // be called any number of times from any thread and reads no pointer.
    check("cuInit", unsafe { sys::cuInit(0) }).map_err(not_supported)?;
    let mut n: c_int = 0;
    // SAFETY: the driver is initialised (above); the call writes one int we own.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut n) }).map_err(not_supported)?;
    match usize::try_from(n) {
        Ok(0) | Err(_) => Err(Error::not_supported("no CUDA device: the driver sees 0 devices (cuDeviceGetCount)")),
        Ok(n) => Ok(Driver { devices: PerDevice::new(n) }),
    }
}

impl Driver {
    /// Number of devices the driver sees.
    pub fn count(&self) -> usize {
        self.devices.count()
    }

    /// Device `ordinal`, opened on first use (its primary context retained);
    /// `InvalidParam` for an ordinal past the count.
    pub fn device(&self, ordinal: usize) -> Result<&Device> {
        self.devices.get_or_init(ordinal, || Device::open(ordinal))
    }

    /// The ordinal of the device whose context is current on the calling
    /// thread (the user's choice, as with the CUDA runtime's current
    /// device), else 0. Failing queries count as "no current context".
    pub fn current_ordinal(&self) -> usize {
        if let Ok(Some(_)) = Context::current() {
            if let Ok(ordinal) = current_device().map(|d| usize::try_from(d.raw())) {
                return ordinal.unwrap_or(0);
            }
        }
        0
    }
}

/// `Ok` once the driver passed the probe; every function of this crate
/// that is handed no driver object calls this before touching the driver.
pub(crate) fn loaded() -> Result<()> {
    driver().map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll_core::Status;

    #[test]
    fn the_probe_never_panics_and_names_what_is_missing() {
        match driver() {
            // A machine with a driver and a device.
            Ok(d) => assert!(d.count() > 0),
            Err(e) => {
                assert_eq!(e.status(), Status::NotSupported, "{e}");
                let named = ["libcuda.so.1", "has no", "cuInit", "cuDeviceGetCount"];
                assert!(named.iter().any(|n| e.context().contains(n)), "{e}");
                // Kept: the same answer again, not a retry.
                assert_eq!(driver().err().map(|e| e.to_string()), Some(e.to_string()));
                assert!(loaded().is_err());
            }
        }
    }

    /// Every `sys::cu...(` call written in this crate, so that the probe's
    /// list cannot fall behind the code (cudarc panics on an unlisted,
    /// missing symbol).
    #[test]
    fn every_driver_call_of_this_crate_is_in_the_probe_list() {
        let sources = [
            include_str!("context.rs"),
            include_str!("device.rs"),
            include_str!("error.rs"),
            include_str!("event.rs"),
            include_str!("host.rs"),
            include_str!("memory.rs"),
            include_str!("module.rs"),
            include_str!("pointer.rs"),
            include_str!("probe.rs"),
            include_str!("stream.rs"),
        ];
        crate::sys::assert_calls_listed(&sources, "cu", SYMBOLS);
    }
}
