//! Datatypes: UCC's 18 predefined types plus the float8 formats.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The type of the elements of a buffer.
///
/// The first 18 are UCC's predefined datatypes in UCC's order (the
/// discriminant is the index `n` of `UCC_PREDEFINED_DT(n)`); the float8
/// formats are ferrocoll's extension (NCCL has them, UCC does not).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DataType {
    /// `i8`
    Int8 = 0,
    /// `i16`
    Int16 = 1,
    /// `i32`
    Int32 = 2,
    /// `i64`
    Int64 = 3,
    /// `i128`
    Int128 = 4,
    /// `u8`
    Uint8 = 5,
    /// `u16`
    Uint16 = 6,
    /// `u32`
    Uint32 = 7,
    /// `u64`
    Uint64 = 8,
    /// `u128`
    Uint128 = 9,
    /// IEEE binary16 (`half::f16`)
    Float16 = 10,
    /// `f32`
    Float32 = 11,
    /// `f64`
    Float64 = 12,
    /// bfloat16 (`half::bf16`)
    Bfloat16 = 13,
    /// IEEE binary128: data movement only (Rust has no stable 128-bit float).
    Float128 = 14,
    /// Two `f32`: real, imaginary.
    Float32Complex = 15,
    /// Two `f64`: real, imaginary.
    Float64Complex = 16,
    /// Two binary128: data movement only.
    Float128Complex = 17,
    /// OCP float8 E4M3 (no infinities; the largest finite value is 448).
    Float8E4M3 = 18,
    /// OCP float8 E5M2 (IEEE-like, with infinities).
    Float8E5M2 = 19,
}

impl DataType {
    /// Every datatype, in discriminant order.
    pub const ALL: [DataType; 20] = [
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::Int128,
        DataType::Uint8,
        DataType::Uint16,
        DataType::Uint32,
        DataType::Uint64,
        DataType::Uint128,
        DataType::Float16,
        DataType::Float32,
        DataType::Float64,
        DataType::Bfloat16,
        DataType::Float128,
        DataType::Float32Complex,
        DataType::Float64Complex,
        DataType::Float128Complex,
        DataType::Float8E4M3,
        DataType::Float8E5M2,
    ];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        use DataType::*;
        match self {
            Int8 | Uint8 | Float8E4M3 | Float8E5M2 => 1,
            Int16 | Uint16 | Float16 | Bfloat16 => 2,
            Int32 | Uint32 | Float32 => 4,
            Int64 | Uint64 | Float64 | Float32Complex => 8,
            Int128 | Uint128 | Float128 | Float64Complex => 16,
            Float128Complex => 32,
        }
    }

    /// The name used by UCC's tools and by ferrocoll's perftest (`float32`, `bfloat16`, ...).
    pub const fn name(self) -> &'static str {
        use DataType::*;
        match self {
            Int8 => "int8",
            Int16 => "int16",
            Int32 => "int32",
            Int64 => "int64",
            Int128 => "int128",
            Uint8 => "uint8",
            Uint16 => "uint16",
            Uint32 => "uint32",
            Uint64 => "uint64",
            Uint128 => "uint128",
            Float16 => "float16",
            Float32 => "float32",
            Float64 => "float64",
            Bfloat16 => "bfloat16",
            Float128 => "float128",
            Float32Complex => "float32_complex",
            Float64Complex => "float64_complex",
            Float128Complex => "float128_complex",
            Float8E4M3 => "float8_e4m3",
            Float8E5M2 => "float8_e5m2",
        }
    }

    /// Signed or unsigned integer (8 to 128 bits).
    pub const fn is_integer(self) -> bool {
        (self as u8) <= DataType::Uint128 as u8
    }

    /// Signed integer.
    pub const fn is_signed_integer(self) -> bool {
        (self as u8) <= DataType::Int128 as u8
    }

    /// Real floating point of any width, float8 included.
    pub const fn is_real_float(self) -> bool {
        use DataType::*;
        matches!(self, Float16 | Float32 | Float64 | Bfloat16 | Float128 | Float8E4M3 | Float8E5M2)
    }

    /// Complex floating point.
    pub const fn is_complex(self) -> bool {
        use DataType::*;
        matches!(self, Float32Complex | Float64Complex | Float128Complex)
    }

    /// Floats narrower than `f32` (reduced in `f32` and rounded once when written).
    pub const fn is_narrow_float(self) -> bool {
        use DataType::*;
        matches!(self, Float16 | Bfloat16 | Float8E4M3 | Float8E5M2)
    }

    /// UCC's float128 or its complex: C's `long double` in 16 bytes (x87
    /// extended on x86-64, binary128 on aarch64), for which Rust has no type.
    pub const fn is_float128(self) -> bool {
        matches!(self, DataType::Float128 | DataType::Float128Complex)
    }

    /// Size in bytes of one (value, index) pair for `maxloc`/`minloc`: the C
    /// struct `{ T value; int32_t index; }` with C's alignment and padding
    /// (as MPI's `MPI_FLOAT_INT` and friends).
    pub const fn loc_pair_size(self) -> usize {
        let align = if self.size() > 4 { self.size() } else { 4 };
        let raw = self.size() + 4;
        raw.div_ceil(align) * align
    }

    /// Byte offset of the index within a (value, index) pair.
    pub const fn loc_index_offset(self) -> usize {
        if self.size() >= 4 { self.size() } else { 4 }
    }

    /// Parse from the discriminant (as in UCC's `UCC_PREDEFINED_DT(n)`).
    pub fn from_index(n: u8) -> Result<DataType> {
        DataType::ALL
            .get(usize::from(n))
            .copied()
            .ok_or_else(|| Error::invalid_param(format!("datatype index {n} is not a predefined datatype (0..=19)")))
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DataType {
    type Err = Error;

    /// Parses the names of [`DataType::name`], case-insensitively, plus the
    /// short forms `f16 bf16 f32 f64 fp8_e4m3 fp8_e5m2 e4m3 e5m2`.
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.trim().to_ascii_lowercase();
        let alias = match lower.as_str() {
            "f16" | "half" | "fp16" => Some(DataType::Float16),
            "bf16" => Some(DataType::Bfloat16),
            "f32" | "float" => Some(DataType::Float32),
            "f64" | "double" => Some(DataType::Float64),
            "fp8_e4m3" | "e4m3" | "float8e4m3" => Some(DataType::Float8E4M3),
            "fp8_e5m2" | "e5m2" | "float8e5m2" => Some(DataType::Float8E5M2),
            _ => None,
        };
        alias.or_else(|| DataType::ALL.iter().copied().find(|d| d.name() == lower)).ok_or_else(|| {
            let names: Vec<&str> = DataType::ALL.iter().map(|d| d.name()).collect();
            Error::invalid_param(format!("unknown datatype {s:?}; expected one of {}", names.join(", ")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for dt in DataType::ALL {
            assert_eq!(dt.name().parse::<DataType>().unwrap(), dt);
            assert_eq!(DataType::from_index(dt as u8).unwrap(), dt);
        }
        assert!("float33".parse::<DataType>().unwrap_err().to_string().contains("float33"));
        assert!(DataType::from_index(20).is_err());
    }

    #[test]
    fn loc_pairs_follow_c_layout() {
        // struct { T v; int32_t i; } on x86_64 / aarch64
        assert_eq!(DataType::Int8.loc_pair_size(), 8);
        assert_eq!(DataType::Float16.loc_pair_size(), 8);
        assert_eq!(DataType::Float32.loc_pair_size(), 8);
        assert_eq!(DataType::Float64.loc_pair_size(), 16);
        assert_eq!(DataType::Int128.loc_pair_size(), 32);
        assert_eq!(DataType::Int8.loc_index_offset(), 4);
        assert_eq!(DataType::Float64.loc_index_offset(), 8);
    }

    #[test]
    fn classes() {
        assert!(DataType::Uint128.is_integer());
        assert!(!DataType::Float16.is_integer());
        assert!(DataType::Int64.is_signed_integer());
        assert!(!DataType::Uint8.is_signed_integer());
        assert!(DataType::Float8E5M2.is_narrow_float());
        assert!(DataType::Float128Complex.is_float128());
    }
}
