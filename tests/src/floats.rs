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

/// Machine epsilon (spacing above 1) of a float datatype, as f64.
pub fn epsilon(dt: ferrocoll::DataType) -> f64 {
    use ferrocoll::DataType::*;
    match dt {
        Float8E4M3 => 2f64.powi(-3),
        Float8E5M2 => 2f64.powi(-2),
        Bfloat16 => 2f64.powi(-7),
        Float16 => 2f64.powi(-10),
        Float32 | Float32Complex => 2f64.powi(-23),
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
