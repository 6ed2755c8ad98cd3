//! Decoding of narrow floats, written independently of `ferrocoll-mc` so the
//! reference does not share the library's code.

static E4M3: std::sync::LazyLock<[f64; 256]> = std::sync::LazyLock::new(|| table(|b| decode(b, 4, 3, 7, false)));
static E5M2: std::sync::LazyLock<[f64; 256]> = std::sync::LazyLock::new(|| table(|b| decode(b, 5, 2, 15, true)));

fn table(f: impl Fn(u8) -> f64) -> [f64; 256] {
    let mut t = [0.0; 256];
    for (i, v) in t.iter_mut().enumerate() {
        *v = f(i as u8);
    }
    t
}

/// OCP float8 E4M3 (bias 7, no infinities, 0x7f/0xff are NaN) to f64.
pub fn e4m3(bits: u8) -> f64 {
    E4M3[usize::from(bits)]
}

/// OCP float8 E5M2 (bias 15, IEEE-like) to f64.
pub fn e5m2(bits: u8) -> f64 {
    E5M2[usize::from(bits)]
}

fn decode(bits: u8, ebits: u32, mbits: u32, bias: i32, ieee: bool) -> f64 {
    let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = i32::from((bits >> mbits) & ((1 << ebits) - 1) as u8);
    let m = f64::from(bits & ((1 << mbits) - 1) as u8);
    let emax = (1 << ebits) - 1;
    let mscale = f64::from(1u32 << mbits);
    if ieee && e == emax {
        return if m == 0.0 { sign * f64::INFINITY } else { f64::NAN };
    }
    if !ieee && e == emax && m == mscale - 1.0 {
        return f64::NAN;
    }
    if e == 0 { sign * (m / mscale) * 2f64.powi(1 - bias) } else { sign * (1.0 + m / mscale) * 2f64.powi(e - bias) }
}

/// A normal or zero `v` as this target's C `long double` in 16 bytes (UCC's
/// float128): x87 extended on x86-64 (64-bit significand with its integer
/// bit, then sign and exponent, then 6 bytes of padding), IEEE binary128
/// on aarch64. Exact: both formats hold every `f64`. Test inputs only (no
/// subnormals, infinities or NaNs).
pub fn long_double_bytes(v: f64) -> [u8; 16] {
    let bits = v.to_bits();
    let sign = u16::from(bits >> 63 == 1) << 15;
    if v == 0.0 {
        return if cfg!(target_arch = "aarch64") { (u128::from(sign) << 112).to_le_bytes() } else { x87(sign, 0) };
    }
    // v = 1.fraction * 2^(exponent - 1023); both formats' bias is 16383.
    let exponent = ((bits >> 52) & 0x7ff) as u16 + 16383 - 1023;
    let fraction = bits & ((1 << 52) - 1);
    if cfg!(target_arch = "aarch64") {
        (u128::from(sign | exponent) << 112 | u128::from(fraction) << 60).to_le_bytes()
    } else {
        x87(sign | exponent, 1 << 63 | fraction << 11)
    }
}

fn x87(sign_exponent: u16, significand: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&significand.to_le_bytes());
    out[8..10].copy_from_slice(&sign_exponent.to_le_bytes());
    out
}

/// The value of a `long double` (see [`long_double_bytes`]) in `f64`, its
/// significand cut to 64 bits first; NaN for infinities and NaNs.
pub fn long_double_value(b: &[u8]) -> f64 {
    let mut w = [0u8; 16];
    w.copy_from_slice(&b[..16]);
    let bits = u128::from_le_bytes(w);
    let (sign_exponent, significand) = if cfg!(target_arch = "aarch64") {
        let biased = (bits >> 112) as u16;
        let hidden = u64::from(biased & 0x7fff != 0) << 63;
        (biased, hidden | ((bits >> 49) as u64 & !(1 << 63)))
    } else {
        ((bits >> 64) as u16, bits as u64)
    };
    let exponent = i32::from(sign_exponent & 0x7fff);
    if exponent == 0x7fff {
        return f64::NAN;
    }
    let sign = if sign_exponent >> 15 == 1 { -1.0 } else { 1.0 };
    // value = significand * 2^(exponent - 16383 - 63), a denormal's exponent read as 1.
    let e = exponent.max(1) - 16383 - 63;
    sign * significand as f64 * 2f64.powi(e / 2) * 2f64.powi(e - e / 2)
}

/// Machine epsilon (spacing above 1) of a float datatype, as f64.
pub fn epsilon(dt: ferrocoll::DataType) -> f64 {
    use ferrocoll::DataType::*;
    match dt {
        Float8E4M3 => 2f64.powi(-3),
        Float8E5M2 => 2f64.powi(-2),
        Bfloat16 => 2f64.powi(-7),
        Float16 => 2f64.powi(-10),
        Float32 | Float32Complex => 2f64.powi(-23),
        // float128 inputs and references are f64s.
        _ => 2f64.powi(-52),
    }
}

/// The smallest positive subnormal of a float datatype, as f64: the
/// spacing of its values near zero, where rounding errs by up to half of it
/// whatever the magnitude of the operands.
pub fn min_subnormal(dt: ferrocoll::DataType) -> f64 {
    use ferrocoll::DataType::*;
    match dt {
        Float8E4M3 => 2f64.powi(-9),
        Float8E5M2 => 2f64.powi(-16),
        Bfloat16 => 2f64.powi(-133),
        Float16 => 2f64.powi(-24),
        Float32 | Float32Complex => 2f64.powi(-149),
        _ => f64::from_bits(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_doubles_hold_f64s() {
        for v in [1.0, -2.5, 156.25, -0.0, 0.0, 1.0 / 3.0, 1e300, -1e-300] {
            let b = long_double_bytes(v);
            assert_eq!(long_double_value(&b).to_bits(), v.to_bits(), "{v:e}");
        }
        // C's 1.0L: significand 0x8000_0000_0000_0000, exponent 0x3fff.
        let one = long_double_bytes(1.0);
        if cfg!(target_arch = "aarch64") {
            assert_eq!(u128::from_le_bytes(one), 0x3fff << 112);
        } else {
            assert_eq!(one[..10], [0, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0x3f]);
        }
    }

    #[test]
    fn known_values() {
        assert_eq!(e4m3(0x38), 1.0);
        assert_eq!(e4m3(0x7e), 448.0);
        assert!(e4m3(0x7f).is_nan());
        assert_eq!(e4m3(0x01), 2f64.powi(-9));
        assert_eq!(e5m2(0x3c), 1.0);
        assert_eq!(e5m2(0x7b), 57344.0);
        assert_eq!(e5m2(0x7c), f64::INFINITY);
        assert_eq!(e5m2(0xc0), -2.0);
        assert_eq!(min_subnormal(ferrocoll::DataType::Float8E4M3), e4m3(0x01));
        assert_eq!(min_subnormal(ferrocoll::DataType::Float8E5M2), e5m2(0x01));
        assert_eq!(min_subnormal(ferrocoll::DataType::Float16), half::f16::from_bits(1).to_f64());
        assert_eq!(min_subnormal(ferrocoll::DataType::Bfloat16), half::bf16::from_bits(1).to_f64());
        assert_eq!(min_subnormal(ferrocoll::DataType::Float32), f64::from(f32::from_bits(1)));
    }
}
