//! The pointer query: which kind of memory an address is, and on which device.
//!
//! `ferrocoll_cuda::pointer_attributes` asks the driver (one
//! `cuPointerGetAttributes` call for the memory type, whether the
//! allocation is managed, and its device, which succeeds for addresses the
//! driver does not know); this file decides what the answer means here.

use ferrocoll_core::MemType;
use ferrocoll_cuda::{MemoryType, PointerAttributes, PointerQueryFailure, pointer_attributes};

use super::device::Devices;

/// What the driver says about an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PtrInfo {
    /// Host (also pinned or registered host memory), Cuda or CudaManaged.
    pub mem_type: MemType,
    /// The device of device and managed memory.
    pub device: Option<usize>,
}

impl PtrInfo {
    const HOST: PtrInfo = PtrInfo { mem_type: MemType::Host, device: None };
}

/// Ask the driver about `addr`. Anything the driver cannot place (ordinary
/// host memory, a failed query) is host memory.
pub(crate) fn query(devices: &Devices, addr: *const u8) -> PtrInfo {
    if addr.is_null() {
        return PtrInfo::HOST;
    }
    // Unified addressing answers the same in every context, so ask without
    // binding one first: a process that never used a device should not get a
    // context on device 0 because it passed a buffer of unknown type. Only
    // when the driver wants a current context is one bound.
    let attrs = match pointer_attributes(addr) {
        Err(PointerQueryFailure::NoContext) => {
            let Ok(device) = devices.current_device() else { return PtrInfo::HOST };
            let Ok(_bound) = device.cuda.bind() else { return PtrInfo::HOST };
            pointer_attributes(addr)
        }
        other => other,
    };
    match attrs {
        Ok(a) => classify(a),
        Err(_) => PtrInfo::HOST,
    }
}

/// The memory type from the driver's attributes (pure, so it is tested here).
pub(crate) fn classify(a: PointerAttributes) -> PtrInfo {
    let device = usize::try_from(a.device_ordinal).ok();
    if a.is_managed {
        return PtrInfo { mem_type: MemType::CudaManaged, device };
    }
    match a.memory_type {
        MemoryType::Device => PtrInfo { mem_type: MemType::Cuda, device },
        MemoryType::Unified => PtrInfo { mem_type: MemType::CudaManaged, device },
        // Host (pinned or registered), Unknown (unknown to the driver) and
        // arrays (not addressable) are host as far as we go.
        MemoryType::Host | MemoryType::Unknown | MemoryType::Array => PtrInfo::HOST,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(memory_type: MemoryType, is_managed: bool, device_ordinal: i32) -> PointerAttributes {
        PointerAttributes { memory_type, is_managed, device_ordinal }
    }

    #[test]
    fn attributes_map_to_memory_types() {
        let (dev, host) = (MemoryType::Device, MemoryType::Host);
        assert_eq!(classify(attrs(dev, false, 1)), PtrInfo { mem_type: MemType::Cuda, device: Some(1) });
        assert_eq!(classify(attrs(dev, true, 0)), PtrInfo { mem_type: MemType::CudaManaged, device: Some(0) });
        assert_eq!(
            classify(attrs(host, true, 0)).mem_type,
            MemType::CudaManaged,
            "managed wins over the reported type"
        );
        assert_eq!(classify(attrs(host, false, -1)), PtrInfo::HOST, "pinned host memory is host");
        assert_eq!(classify(attrs(MemoryType::Unknown, false, -1)), PtrInfo::HOST, "unknown to the driver is host");
        assert_eq!(classify(attrs(MemoryType::Unified, false, 0)).mem_type, MemType::CudaManaged);
        assert_eq!(classify(attrs(MemoryType::Array, false, 0)), PtrInfo::HOST, "arrays are not addressable");
        assert_eq!(classify(attrs(dev, false, -2)).device, None);
    }
}
