//! Devices: the driver's device handle ([`DeviceId`]) and its attributes,
//! a retained primary context ([`PrimaryContext`]), and the process-wide
//! entry of a device ([`Device`]) that [`Driver::device`](crate::Driver::device)
//! opens once.
//!
//! Primary contexts are the ones the CUDA runtime uses, so memory that
//! PyTorch or CuPy allocated lives in the same context as ferrocoll's.

use std::ffi::c_int;

use ferrocoll_core::{Error, Result};

use crate::context::{Bound, Context};
use crate::error::check;
use crate::probe::loaded;
use crate::sys::driver as sys;

/// A device handle (`CUdevice`; the driver numbers them like ordinals).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceId(sys::CUdevice);

/// The device attributes ferrocoll asks about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attribute {
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`.
    ComputeCapabilityMajor,
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR`.
    ComputeCapabilityMinor,
    /// `CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING`: one address space for host and devices.
    UnifiedAddressing,
    /// `CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS`.
    CanUse64BitStreamMemOps,
}

impl Attribute {
    fn raw(self) -> sys::CUdevice_attribute {
        use sys::CUdevice_attribute as A;
        match self {
            Attribute::ComputeCapabilityMajor => A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            Attribute::ComputeCapabilityMinor => A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            Attribute::UnifiedAddressing => A::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
            Attribute::CanUse64BitStreamMemOps => A::CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
        }
    }
}

impl DeviceId {
    /// The handle of device `ordinal` (`cuDeviceGet`); the driver refuses an
    /// ordinal past its count (`InvalidParam`).
    pub fn get(ordinal: usize) -> Result<DeviceId> {
        loaded()?;
        let ord = c_int::try_from(ordinal)
            .map_err(|_| Error::invalid_param(format!("CUDA device ordinal {ordinal} is too large")))?;
        let mut dev: sys::CUdevice = 0;
        // SAFETY: the driver passed the probe; the call writes one handle.
        check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut dev, ord) })?;
        Ok(DeviceId(dev))
    }

    /// Wrap a handle the driver returned.
    pub(crate) fn from_handle(dev: sys::CUdevice) -> DeviceId {
        DeviceId(dev)
    }

    /// The handle's value (its ordinal, for the driver's numbering).
    pub fn raw(self) -> i32 {
        self.0
    }

    /// The value of attribute `a` (`cuDeviceGetAttribute`).
    pub fn attribute(self, a: Attribute) -> Result<i32> {
        let mut v: c_int = 0;
        // SAFETY: the handle came from the driver (so it passed the probe);
        // the call writes one int we own.
        check("cuDeviceGetAttribute", unsafe { sys::cuDeviceGetAttribute(&mut v, a.raw(), self.0) })?;
        Ok(v)
    }
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A reference on a device's primary context (`cuDevicePrimaryCtxRetain`),
/// released on drop (`cuDevicePrimaryCtxRelease`).
#[derive(Debug)]
pub struct PrimaryContext {
    device: DeviceId,
    ctx: Context,
}

impl PrimaryContext {
    /// Retain `device`'s primary context (creating it if no one holds it).
    pub fn retain(device: DeviceId) -> Result<PrimaryContext> {
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: the handle came from the driver; the call writes one
        // context handle, valid until the matching release in Drop.
        check("cuDevicePrimaryCtxRetain", unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, device.0) })?;
        Ok(PrimaryContext { device, ctx: Context::from_handle(ctx) })
    }

    /// The context (valid while `self` lives).
    pub fn context(&self) -> Context {
        self.ctx
    }
}

impl Drop for PrimaryContext {
    fn drop(&mut self) {
        // SAFETY: pairs with the retain in `retain`; the holder dropped
        // everything of the context's that it uses first.
        let r = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device.0) };
        if let Err(e) = check("cuDevicePrimaryCtxRelease", r) {
            ferrocoll_core::log_warn!("{e}");
        }
    }
}

/// A device as ferrocoll keeps it for the process: its retained primary
/// context (never released: [`Driver`](crate::Driver) keeps it to the end)
/// and its compute capability.
#[derive(Debug)]
pub struct Device {
    ordinal: usize,
    cc: (u32, u32),
    primary: PrimaryContext,
}

impl Device {
    /// Set device `ordinal` up: handle, compute capability, the unified
    /// addressing that ferrocoll's copies and pointer query need, primary
    /// context — in that order, so a device refused for its attributes
    /// gets no context.
    pub(crate) fn open(ordinal: usize) -> Result<Device> {
        let id = DeviceId::get(ordinal)?;
        let attr = |a: Attribute, what: &str| -> Result<u32> {
            let v = id.attribute(a).map_err(|e| e.prefixed(format!("{what} of CUDA device {ordinal}")))?;
            Ok(u32::try_from(v).unwrap_or(0))
        };
        let cc = (
            attr(Attribute::ComputeCapabilityMajor, "compute capability")?,
            attr(Attribute::ComputeCapabilityMinor, "compute capability")?,
        );
        if attr(Attribute::UnifiedAddressing, "unified addressing")? == 0 {
            return Err(Error::not_supported(format!(
                "CUDA device {ordinal} has no unified addressing, which ferrocoll's copies and pointer query need"
            )));
        }
        let primary = PrimaryContext::retain(id).map_err(|e| e.prefixed(format!("CUDA device {ordinal}")))?;
        Ok(Device { ordinal, cc, primary })
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.cc
    }

    /// The retained primary context.
    pub fn context(&self) -> Context {
        self.primary.context()
    }

    /// Make the primary context current on this thread while the guard
    /// lives ([`Context::bind`]).
    pub fn bind(&self) -> Result<Bound> {
        self.context().bind()
    }
}
