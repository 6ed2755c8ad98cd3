//! The pointer query: what the driver knows of an address.
//!
//! One `cuPointerGetAttributes` call asks for the memory type, whether the
//! allocation is managed, and its device. Unlike `cuPointerGetAttribute` it
//! succeeds for addresses the driver does not know (filling in zeros), so
//! ordinary host memory costs no error path. What the answer means for
//! ferrocoll (host, cuda or cuda_managed memory) is the memory component's
//! business.

use std::ffi::{c_int, c_void};

use ferrocoll_core::Result;

use crate::probe::loaded;
use crate::sys::driver as sys;

/// Where the driver places an address (`CU_POINTER_ATTRIBUTE_MEMORY_TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryType {
    /// Unknown to the driver (0): ordinary host memory, or not an allocation.
    Unknown,
    /// `CU_MEMORYTYPE_HOST`: pinned or registered host memory.
    Host,
    /// `CU_MEMORYTYPE_DEVICE`: device memory.
    Device,
    /// `CU_MEMORYTYPE_ARRAY`: a CUDA array (not addressable).
    Array,
    /// `CU_MEMORYTYPE_UNIFIED`: unified (managed) memory.
    Unified,
}

impl MemoryType {
    fn from_raw(v: u32) -> MemoryType {
        use sys::CUmemorytype as M;
        match v {
            x if x == M::CU_MEMORYTYPE_HOST as u32 => MemoryType::Host,
            x if x == M::CU_MEMORYTYPE_DEVICE as u32 => MemoryType::Device,
            x if x == M::CU_MEMORYTYPE_ARRAY as u32 => MemoryType::Array,
            x if x == M::CU_MEMORYTYPE_UNIFIED as u32 => MemoryType::Unified,
            _ => MemoryType::Unknown,
        }
    }
}

/// The driver's answer about an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointerAttributes {
    /// Where the memory is.
    pub memory_type: MemoryType,
    /// Whether it is managed memory (`CU_POINTER_ATTRIBUTE_IS_MANAGED`).
    pub is_managed: bool,
    /// The device ordinal of device and managed memory (`-1`, or another
    /// negative value, when the driver names none).
    pub device_ordinal: c_int,
}

/// How a pointer query went, short of an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointerQueryFailure {
    /// `CUDA_ERROR_INVALID_CONTEXT`: this driver wants a current context
    /// for the query; bind one and ask again.
    NoContext,
    /// Any other failure (including no usable driver).
    Failed,
}

/// Ask the driver about `addr` (only looked up, never dereferenced). The
/// failures are values, not [`Error`](ferrocoll_core::Error)s: callers
/// handle them (bind a context, or treat the address as host memory).
pub fn pointer_attributes(addr: *const u8) -> Result<PointerAttributes, PointerQueryFailure> {
    loaded().map_err(|_| PointerQueryFailure::Failed)?;
    let (mut mem_type, mut is_managed, mut ordinal): (u32, u32, c_int) = (0, 0, -1);
    let mut attrs = [
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
    ];
    let mut data: [*mut c_void; 3] =
        [(&raw mut mem_type).cast(), (&raw mut is_managed).cast(), (&raw mut ordinal).cast()];
    // SAFETY: the driver passed the probe; attrs and data are arrays of 3,
    // and each data slot points to a zeroed 4-byte integer of ours, the size
    // the driver writes for these attributes (IS_MANAGED writes a bool into
    // the first byte of a zeroed u32, which reads back as 0 or 1). The
    // address is only looked up.
    let r =
        unsafe { sys::cuPointerGetAttributes(attrs.len() as u32, attrs.as_mut_ptr(), data.as_mut_ptr(), addr as u64) };
    match r {
        sys::CUresult::CUDA_SUCCESS => Ok(PointerAttributes {
            memory_type: MemoryType::from_raw(mem_type),
            is_managed: is_managed != 0,
            device_ordinal: ordinal,
        }),
        sys::CUresult::CUDA_ERROR_INVALID_CONTEXT => Err(PointerQueryFailure::NoContext),
        _ => Err(PointerQueryFailure::Failed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_types_follow_the_driver_enum() {
        use sys::CUmemorytype as M;
        assert_eq!(MemoryType::from_raw(0), MemoryType::Unknown);
        assert_eq!(MemoryType::from_raw(M::CU_MEMORYTYPE_HOST as u32), MemoryType::Host);
        assert_eq!(MemoryType::from_raw(M::CU_MEMORYTYPE_DEVICE as u32), MemoryType::Device);
        assert_eq!(MemoryType::from_raw(M::CU_MEMORYTYPE_ARRAY as u32), MemoryType::Array);
        assert_eq!(MemoryType::from_raw(M::CU_MEMORYTYPE_UNIFIED as u32), MemoryType::Unified);
        assert_eq!(MemoryType::from_raw(99), MemoryType::Unknown);
    }
}
