//! Memory types.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Where a buffer lives, with UCC's values (`ucc_memory_type_t`).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemType {
    /// Host (CPU) memory.
    Host = 0,
    /// CUDA device memory.
    Cuda = 1,
    /// CUDA managed (unified) memory.
    CudaManaged = 2,
    /// ROCm device memory: named for compatibility, refused as unsupported.
    Rocm = 3,
    /// ROCm managed memory: named for compatibility, refused as unsupported.
    RocmManaged = 4,
    /// Not given by the caller: resolved by a pointer query (UCC: `UNKNOWN = LAST = 5`).
    Unknown = 5,
}

impl MemType {
    /// The memory types that can hold data (not `Unknown`).
    pub const CONCRETE: [MemType; 5] =
        [MemType::Host, MemType::Cuda, MemType::CudaManaged, MemType::Rocm, MemType::RocmManaged];

    /// Lower-case name (`host`, `cuda`, `cuda_managed`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            MemType::Host => "host",
            MemType::Cuda => "cuda",
            MemType::CudaManaged => "cuda_managed",
            MemType::Rocm => "rocm",
            MemType::RocmManaged => "rocm_managed",
            MemType::Unknown => "unknown",
        }
    }
}

impl fmt::Display for MemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MemType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "host" | "cpu" => Ok(MemType::Host),
            "cuda" => Ok(MemType::Cuda),
            "cuda_managed" | "cuda-managed" | "cudam" | "managed" => Ok(MemType::CudaManaged),
            "rocm" => Ok(MemType::Rocm),
            "rocm_managed" | "rocm-managed" => Ok(MemType::RocmManaged),
            "unknown" => Ok(MemType::Unknown),
            _ => Err(Error::invalid_param(format!(
                "unknown memory type {s:?}; expected host, cuda, cuda_managed, rocm, rocm_managed"
            ))),
        }
    }
}
