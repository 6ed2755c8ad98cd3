//! The pointer query: which kind of memory an address is, and on which device.
//!
//! One `cuPointerGetAttributes` call asks for the memory type, whether the
//! allocation is managed, and its device. Unlike `cuPointerGetAttribute`
//! it succeeds for addresses the driver does not know (filling in zeros),
//! so ordinary host memory costs no error path.

use cudarc::driver::sys::{self, CUmemorytype, CUpointer_attribute};
use ferrocoll_core::MemType;

use super::device::Driver;

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
pub(crate) fn query(driver: &Driver, addr: *const u8) -> PtrInfo {
    if addr.is_null() {
        return PtrInfo::HOST;
    }
    let mut mem_type: u32 = 0;
    let mut is_managed: u32 = 0;
    let mut ordinal: std::ffi::c_int = -1;
    let mut ask = || {
        (mem_type, is_managed, ordinal) = (0, 0, -1);
        let mut attrs = [
            CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
            CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        ];
        let mut data: [*mut std::ffi::c_void; 3] =
            [(&raw mut mem_type).cast(), (&raw mut is_managed).cast(), (&raw mut ordinal).cast()];
        // SAFETY: the driver is initialised (a Driver exists); attrs and data
        // are arrays of 3, and each data slot points to a zeroed 4-byte
        // integer, the size the driver writes for these attributes
        // (IS_MANAGED writes a bool into the first byte of a zeroed u32,
        // which reads back as 0 or 1). The address is only looked up.
        unsafe {
            sys::cuPointerGetAttributes(
                attrs.len() as u32,
                attrs.as_mut_ptr(),
                data.as_mut_ptr(),
                addr as sys::CUdeviceptr,
            )
        }
    };
    // Unified addressing answers the same in every context, so ask without
    // binding one first: a process that never used a device should not get a
    // context on device 0 because it passed a buffer of unknown type. Only
    // when the driver wants a current context is one bound.
    let mut r = ask();
    if r == sys::CUresult::CUDA_ERROR_INVALID_CONTEXT {
        let Ok(device) = driver.current_device() else { return PtrInfo::HOST };
        let Ok(_bound) = device.bind() else { return PtrInfo::HOST };
        r = ask();
    }
    if r != sys::CUresult::CUDA_SUCCESS {
        return PtrInfo::HOST;
    }
    classify(mem_type, is_managed != 0, ordinal)
}

/// The memory type from the three attributes (pure, so it is tested here).
pub(crate) fn classify(mem_type: u32, is_managed: bool, ordinal: std::ffi::c_int) -> PtrInfo {
    let device = usize::try_from(ordinal).ok();
    if is_managed {
        return PtrInfo { mem_type: MemType::CudaManaged, device };
    }
    match mem_type {
        x if x == CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 => PtrInfo { mem_type: MemType::Cuda, device },
        x if x == CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32 => PtrInfo { mem_type: MemType::CudaManaged, device },
        // CU_MEMORYTYPE_HOST (pinned or registered), 0 (unknown to the
        // driver) and arrays (not addressable) are host as far as we go.
        _ => PtrInfo::HOST,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_map_to_memory_types() {
        let dev = CUmemorytype::CU_MEMORYTYPE_DEVICE as u32;
        let host = CUmemorytype::CU_MEMORYTYPE_HOST as u32;
        assert_eq!(classify(dev, false, 1), PtrInfo { mem_type: MemType::Cuda, device: Some(1) });
        assert_eq!(classify(dev, true, 0), PtrInfo { mem_type: MemType::CudaManaged, device: Some(0) });
        assert_eq!(classify(host, true, 0).mem_type, MemType::CudaManaged, "managed wins over the reported type");
        assert_eq!(classify(host, false, -1), PtrInfo::HOST, "pinned host memory is host");
        assert_eq!(classify(0, false, -1), PtrInfo::HOST, "unknown to the driver is host");
        assert_eq!(classify(dev, false, -2).device, None);
    }
}
