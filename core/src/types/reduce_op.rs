//! Reduction operations and which datatypes each one is defined for.

use std::fmt;
use std::str::FromStr;

use super::DataType;
use crate::error::{Error, Result};

/// A reduction operation, with UCC's 13 operations in UCC's order.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReduceOp {
    /// Sum (integers wrap).
    Sum = 0,
    /// Product (integers wrap).
    Prod = 1,
    /// Maximum (floats: a NaN input is ignored, as IEEE `maxNum`).
    Max = 2,
    /// Minimum (floats: a NaN input is ignored, as IEEE `minNum`).
    Min = 3,
    /// Logical and of integers: non-zero is true; the result is 0 or 1.
    Land = 4,
    /// Logical or of integers.
    Lor = 5,
    /// Logical exclusive or of integers.
    Lxor = 6,
    /// Bitwise and of integers.
    Band = 7,
    /// Bitwise or of integers.
    Bor = 8,
    /// Bitwise exclusive or of integers.
    Bxor = 9,
    /// Maximum value and its index, on (value, `i32` index) pairs; ties keep the lowest index.
    Maxloc = 10,
    /// Minimum value and its index, on (value, `i32` index) pairs; ties keep the lowest index.
    Minloc = 11,
    /// Sum divided by the number of contributions (integers: truncated).
    Avg = 12,
}

impl ReduceOp {
    /// Every operation, in UCC's order.
    pub const ALL: [ReduceOp; 13] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Land,
        ReduceOp::Lor,
        ReduceOp::Lxor,
        ReduceOp::Band,
        ReduceOp::Bor,
        ReduceOp::Bxor,
        ReduceOp::Maxloc,
        ReduceOp::Minloc,
        ReduceOp::Avg,
    ];

    /// Lower-case name (`sum`, `maxloc`, ...), as in UCC's tools.
    pub const fn name(self) -> &'static str {
        use ReduceOp::*;
        match self {
            Sum => "sum",
            Prod => "prod",
            Max => "max",
            Min => "min",
            Land => "land",
            Lor => "lor",
            Lxor => "lxor",
            Band => "band",
            Bor => "bor",
            Bxor => "bxor",
            Maxloc => "maxloc",
            Minloc => "minloc",
            Avg => "avg",
        }
    }

    /// Operations on (value, index) pairs rather than plain elements.
    pub const fn is_loc(self) -> bool {
        matches!(self, ReduceOp::Maxloc | ReduceOp::Minloc)
    }

    /// Logical or bitwise operations (integers only).
    pub const fn is_bitwise_or_logical(self) -> bool {
        use ReduceOp::*;
        matches!(self, Land | Lor | Lxor | Band | Bor | Bxor)
    }

    /// Size in bytes of one reduced element of `dtype` under this operation:
    /// the datatype's size, or the (value, index) pair size for `maxloc`/`minloc`.
    pub const fn element_size(self, dtype: DataType) -> usize {
        if self.is_loc() { dtype.loc_pair_size() } else { dtype.size() }
    }

    /// Whether this operation is defined for `dtype` on host memory; the
    /// error says why not.
    ///
    /// - integers: every operation;
    /// - real floats (float8 to float64): sum, prod, max, min, avg, maxloc, minloc;
    /// - complex (float32/float64): sum, prod, avg;
    /// - float128 (C's `long double`, as UCC reduces it) and its complex:
    ///   as float64 and float64 complex but maxloc/minloc, where the build
    ///   has `long double` arithmetic ([`HOST_FLOAT128`]: x86-64 and
    ///   aarch64 Linux); elsewhere none.
    pub fn check_dtype(self, dtype: DataType) -> Result<()> {
        if dtype.is_float128() {
            if !HOST_FLOAT128 {
                return Err(Error::not_supported(format!(
                    "reduction {self} on {dtype} is not supported on this target: ferrocoll reduces \
                     float128 as C's long double only on x86-64 and aarch64 Linux (data movement of \
                     {dtype} is supported)"
                )));
            }
            if self.is_loc() {
                return Err(Error::not_supported(format!("reduction {self} on {dtype} is not supported")));
            }
        }
        let ok = if dtype.is_integer() {
            true
        } else if dtype.is_complex() {
            matches!(self, ReduceOp::Sum | ReduceOp::Prod | ReduceOp::Avg)
        } else {
            !self.is_bitwise_or_logical()
        };
        if ok {
            Ok(())
        } else {
            let why = if self.is_bitwise_or_logical() {
                "logical and bitwise operations are defined for integer datatypes only"
            } else {
                "complex numbers are not ordered"
            };
            Err(Error::invalid_param(format!("reduction {self} is not defined for datatype {dtype}: {why}")))
        }
    }

    /// As [`ReduceOp::check_dtype`], for a reduction on device memory: the
    /// device kernels have no float128 arithmetic (nor does UCC's CUDA
    /// executor).
    pub fn check_device_dtype(self, dtype: DataType) -> Result<()> {
        if dtype.is_float128() {
            return Err(Error::not_supported(format!(
                "reduction {self} on {dtype} is not supported on device memory: the device kernels \
                 have no 128-bit float arithmetic (data movement of {dtype} is supported)"
            )));
        }
        self.check_dtype(dtype)
    }
}

/// Whether this build reduces float128 and float128 complex on the host,
/// as C's `long double` (x87 extended on x86-64, IEEE binary128 on
/// aarch64; `ferrocoll-mc`'s `long_double.rs`).
pub const HOST_FLOAT128: bool =
    cfg!(any(all(target_arch = "x86_64", target_os = "linux"), all(target_arch = "aarch64", target_os = "linux")));

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ReduceOp {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let lower = s.trim().to_ascii_lowercase();
        ReduceOp::ALL.iter().copied().find(|op| op.name() == lower).ok_or_else(|| {
            let names: Vec<&str> = ReduceOp::ALL.iter().map(|o| o.name()).collect();
            Error::invalid_param(format!("unknown reduction op {s:?}; expected one of {}", names.join(", ")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_matrix() {
        for op in ReduceOp::ALL {
            assert!(op.check_dtype(DataType::Int32).is_ok(), "{op} int32");
            // float128 reduces as float64 does, but maxloc/minloc, where the
            // host has long double arithmetic; never on a device.
            let host = HOST_FLOAT128 && !op.is_loc();
            assert_eq!(op.check_dtype(DataType::Float128).is_ok(), host && op.check_dtype(DataType::Float64).is_ok());
            let complex = op.check_dtype(DataType::Float64Complex).is_ok();
            assert_eq!(op.check_dtype(DataType::Float128Complex).is_ok(), HOST_FLOAT128 && complex, "{op}");
            let e = op.check_device_dtype(DataType::Float128).unwrap_err();
            assert_eq!(e.status(), crate::Status::NotSupported);
            assert!(e.to_string().contains("device"), "{e}");
            assert_eq!(op.check_device_dtype(DataType::Int32).is_ok(), op.check_dtype(DataType::Int32).is_ok());
        }
        assert!(ReduceOp::Band.check_dtype(DataType::Float32).is_err());
        assert!(ReduceOp::Avg.check_dtype(DataType::Bfloat16).is_ok());
        assert!(ReduceOp::Maxloc.check_dtype(DataType::Float8E4M3).is_ok());
        assert!(ReduceOp::Max.check_dtype(DataType::Float64Complex).is_err());
        assert!(ReduceOp::Prod.check_dtype(DataType::Float32Complex).is_ok());
        let msg = ReduceOp::Lxor.check_dtype(DataType::Float16).unwrap_err().to_string();
        assert!(msg.contains("lxor") && msg.contains("float16"), "{msg}");
    }

    #[test]
    fn names_round_trip() {
        for op in ReduceOp::ALL {
            assert_eq!(op.name().parse::<ReduceOp>().unwrap(), op);
        }
        assert!("mean".parse::<ReduceOp>().is_err());
    }
}
