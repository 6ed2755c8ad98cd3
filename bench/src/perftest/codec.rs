//! Reading and writing one element of any datatype in a byte buffer, as an
//! integer (`i128`), a real (`f64`) or a complex (two `f64`), little-endian.

use ferrocoll::DataType;
use ferrocoll_mc::fp8;
use half::{bf16, f16};

/// How the elements of a datatype are compared by `--check`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Exact integers of `bits` bits.
    Int {
        /// Width.
        bits: u32,
        /// Two's complement.
        signed: bool,
    },
    /// A real float, compared with a tolerance of `eps` per step.
    Real,
    /// A complex of two reals of `part` datatype.
    Complex(DataType),
    /// float128 and its complex where the host does not reduce them: bytes only.
    Opaque,
}

/// The class of `dt`.
pub fn class(dt: DataType) -> Class {
    use DataType::*;
    match dt {
        Float128 | Float128Complex if ferrocoll::ReduceOp::Sum.check_dtype(Float128).is_err() => Class::Opaque,
        Float128Complex => Class::Complex(Float128),
        Float32Complex => Class::Complex(Float32),
        Float64Complex => Class::Complex(Float64),
        d if d.is_integer() => Class::Int { bits: (d.size() * 8) as u32, signed: d.is_signed_integer() },
        _ => Class::Real,
    }
}

/// The machine epsilon of a real datatype (the step between 1 and the next value).
pub fn epsilon(dt: DataType) -> f64 {
    use DataType::*;
    match dt {
        Float16 => f64::powi(2.0, -10),
        Bfloat16 => f64::powi(2.0, -7),
        Float8E4M3 => f64::powi(2.0, -3),
        Float8E5M2 => f64::powi(2.0, -2),
        // float128's inputs and references are f64s.
        Float64 | Float64Complex | Float128 | Float128Complex => f64::EPSILON,
        _ => f32::EPSILON as f64,
    }
}

/// `v` reduced to `bits` bits, sign- or zero-extended back to `i128`.
pub fn wrap(v: i128, bits: u32, signed: bool) -> i128 {
    if bits >= 128 {
        return v;
    }
    let shift = 128 - bits;
    if signed { (v << shift) >> shift } else { ((v as u128) << shift >> shift) as i128 }
}

/// Write integer `v` (truncated to the width of `out`).
pub fn put_int(out: &mut [u8], v: i128) {
    let bytes = v.to_le_bytes();
    let n = out.len().min(16);
    out[..n].copy_from_slice(&bytes[..n]);
}

/// Read an integer of `out.len()` bytes.
pub fn get_int(b: &[u8], signed: bool) -> i128 {
    let mut bytes = [0u8; 16];
    let n = b.len().min(16);
    bytes[..n].copy_from_slice(&b[..n]);
    wrap(i128::from_le_bytes(bytes), (n * 8) as u32, signed)
}

/// Write real `v` as `dt` (rounded to nearest).
pub fn put_real(out: &mut [u8], dt: DataType, v: f64) {
    use DataType::*;
    match dt {
        Float16 => out[..2].copy_from_slice(&f16::from_f64(v).to_le_bytes()),
        Bfloat16 => out[..2].copy_from_slice(&bf16::from_f64(v).to_le_bytes()),
        Float32 => out[..4].copy_from_slice(&(v as f32).to_le_bytes()),
        Float64 => out[..8].copy_from_slice(&v.to_le_bytes()),
        #[cfg(any(
            all(target_arch = "x86_64", target_os = "linux"),
            all(target_arch = "aarch64", target_os = "linux")
        ))]
        Float128 => out[..16].copy_from_slice(&ferrocoll_mc::long_double::from_f64(v)),
        Float8E4M3 => out[0] = fp8::f32_to_e4m3(v as f32),
        Float8E5M2 => out[0] = fp8::f32_to_e5m2(v as f32),
        _ => {}
    }
}

/// Read a real of datatype `dt`.
pub fn get_real(b: &[u8], dt: DataType) -> f64 {
    use DataType::*;
    let arr = |n: usize| {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(&b[..n]);
        a
    };
    match dt {
        Float16 => f16::from_le_bytes([b[0], b[1]]).to_f64(),
        Bfloat16 => bf16::from_le_bytes([b[0], b[1]]).to_f64(),
        Float32 => {
            let a = arr(4);
            f32::from_le_bytes([a[0], a[1], a[2], a[3]]) as f64
        }
        Float64 => f64::from_le_bytes(arr(8)),
        #[cfg(any(
            all(target_arch = "x86_64", target_os = "linux"),
            all(target_arch = "aarch64", target_os = "linux")
        ))]
        Float128 => ferrocoll_mc::long_double::to_f64(&b[..16].try_into().unwrap_or([0; 16])),
        Float8E4M3 => fp8::e4m3_to_f32(b[0]) as f64,
        Float8E5M2 => fp8::e5m2_to_f32(b[0]) as f64,
        _ => f64::NAN,
    }
}

/// `v` rounded to `dt` and back (what storing it would keep).
pub fn round_real(dt: DataType, v: f64) -> f64 {
    let mut b = [0u8; 16];
    put_real(&mut b[..dt.size().min(16)], dt, v);
    get_real(&b, dt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_wrap_and_round_trip() {
        assert_eq!(wrap(300, 8, false), 44);
        assert_eq!(wrap(200, 8, true), -56);
        assert_eq!(wrap(-1, 16, false), 65535);
        let mut b = [0u8; 2];
        put_int(&mut b, -2);
        assert_eq!(get_int(&b, true), -2);
        assert_eq!(get_int(&b, false), 65534);
        let mut w = [0u8; 16];
        put_int(&mut w, i128::MIN);
        assert_eq!(get_int(&w, true), i128::MIN);
    }

    #[test]
    fn reals_round_trip() {
        for dt in [DataType::Float16, DataType::Bfloat16, DataType::Float32, DataType::Float64] {
            assert_eq!(round_real(dt, -5.0), -5.0, "{dt}");
            assert_eq!(round_real(dt, 0.5), 0.5, "{dt}");
        }
        assert_eq!(round_real(DataType::Float8E4M3, 10.0), 10.0);
        assert_eq!(round_real(DataType::Float8E5M2, 8.0), 8.0);
        assert!(class(DataType::Uint128) == Class::Int { bits: 128, signed: false });
        if ferrocoll::ReduceOp::Sum.check_dtype(DataType::Float128).is_ok() {
            assert_eq!(round_real(DataType::Float128, -5.0), -5.0);
            assert_eq!(class(DataType::Float128Complex), Class::Complex(DataType::Float128));
        } else {
            assert_eq!(class(DataType::Float128Complex), Class::Opaque);
        }
    }
}
