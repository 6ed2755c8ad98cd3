//! UCC's float128 as this target's C `long double` in 16 bytes, to and from
//! `f64`: for benchmarks and tests that write inputs and check results of
//! float128 reductions (the arithmetic is `reduce/long_double.rs`).
//!
//! - x86-64: x87 extended precision. Bytes 0–7 the 64-bit significand with
//!   its explicit integer bit, bytes 8–9 the sign and 15-bit exponent (bias
//!   16383), bytes 10–15 padding (written zero here).
//! - aarch64: IEEE binary128. Sign, 15-bit exponent (bias 16383), 112-bit
//!   fraction with a hidden bit, little-endian.
//!
//! Both hold every `f64` exactly, so [`from_f64`] is exact; [`to_f64`]
//! rounds toward zero to the 64 significand bits it keeps, then to nearest
//! into `f64` (within one `f64` ulp of the value, enough for checks).
//!
//! ```
//! let one_third = ferrocoll_mc::long_double::to_f64(&ferrocoll_mc::long_double::from_f64(1.0 / 3.0));
//! assert_eq!(one_third, 1.0 / 3.0);
//! ```

/// The bias of both formats' exponent.
const BIAS: i32 = 16383;

/// A finite non-zero `f64` as (sign, significand with its top bit set, e):
/// its value is `significand * 2^e`.
fn normalized(x: f64) -> (bool, u64, i32) {
    let bits = x.to_bits();
    let negative = bits >> 63 == 1;
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    let (significand, e) = if exponent == 0 { (fraction, -1074) } else { (fraction | 1 << 52, exponent - 1075) };
    let shift = significand.leading_zeros() as i32;
    (negative, significand << shift, e - shift)
}

/// `x` in this target's float128 format, exactly.
pub fn from_f64(x: f64) -> [u8; 16] {
    let negative = x.is_sign_negative();
    let (biased, significand) = if x == 0.0 {
        (0, 0)
    } else if x.is_infinite() {
        (0x7fff, 1 << 63)
    } else if x.is_nan() {
        // A quiet NaN with the f64's payload.
        (0x7fff, 3 << 62 | (x.to_bits() & ((1 << 51) - 1)) << 11)
    } else {
        // `significand * 2^e` with the top bit at 2^63: the value's exponent is e + 63.
        let (_, significand, e) = normalized(x);
        ((e + 63 + BIAS) as u16, significand)
    };
    encode(negative, biased, significand)
}

#[cfg(not(target_arch = "aarch64"))]
fn encode(negative: bool, biased: u16, significand: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&significand.to_le_bytes());
    out[8..10].copy_from_slice(&(biased | u16::from(negative) << 15).to_le_bytes());
    out
}

#[cfg(target_arch = "aarch64")]
fn encode(negative: bool, biased: u16, significand: u64) -> [u8; 16] {
    // The hidden bit dropped; every f64 is a normal binary128.
    let fraction = u128::from(significand << 1) << 48;
    (u128::from(negative) << 127 | u128::from(biased) << 112 | fraction).to_le_bytes()
}

/// The value of float128 `b` in `f64` (within one `f64` ulp; see the module's doc).
pub fn to_f64(b: &[u8; 16]) -> f64 {
    let (negative, biased, significand) = decode(b);
    let sign = if negative { -1.0 } else { 1.0 };
    if biased == 0x7fff {
        return if significand << 1 == 0 { sign * f64::INFINITY } else { f64::NAN };
    }
    // value = significand * 2^(max(biased, 1) - BIAS - 63)
    let e = i32::from(biased.max(1)) - BIAS - 63;
    // Scaled in two steps: 2^e alone may leave f64's range while the value does not.
    sign * (significand as f64) * 2f64.powi(e / 2) * 2f64.powi(e - e / 2)
}

/// (sign, biased exponent, significand with the integer bit at 2^63).
#[cfg(not(target_arch = "aarch64"))]
fn decode(b: &[u8; 16]) -> (bool, u16, u64) {
    let significand = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    let se = u16::from_le_bytes([b[8], b[9]]);
    (se >> 15 == 1, se & 0x7fff, significand)
}

#[cfg(target_arch = "aarch64")]
fn decode(b: &[u8; 16]) -> (bool, u16, u64) {
    let bits = u128::from_le_bytes(*b);
    let biased = ((bits >> 112) & 0x7fff) as u16;
    let hidden = u64::from(biased != 0) << 63;
    // The fraction's top 63 bits below the integer bit.
    (bits >> 127 == 1, biased, hidden | (bits >> 49) as u64 & ((1 << 63) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f64_values_round_trip_exactly() {
        let values = [
            0.0,
            -0.0,
            1.0,
            -2.5,
            1.0 / 3.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::MIN_POSITIVE / 8.0,
            5e-324,
            -1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for x in values {
            let y = to_f64(&from_f64(x));
            assert_eq!(y.to_bits(), x.to_bits(), "{x:e} came back as {y:e}");
        }
        assert!(to_f64(&from_f64(f64::NAN)).is_nan());
    }

    /// The encodings C's `(long double)1.0` and `-2.0L` have.
    #[test]
    fn encodings_are_the_targets() {
        #[cfg(not(target_arch = "aarch64"))]
        {
            assert_eq!(from_f64(1.0)[..10], [0, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0x3f]);
            assert_eq!(from_f64(-2.0)[..10], [0, 0, 0, 0, 0, 0, 0, 0x80, 0x00, 0xc0]);
            // The smallest f64 denormal, 2^-1074, is a normal x87 number.
            let tiny = from_f64(5e-324);
            assert_eq!(u16::from_le_bytes([tiny[8], tiny[9]]), (16383 - 1074) as u16);
            assert_eq!(tiny[10..], [0; 6]);
        }
        #[cfg(target_arch = "aarch64")]
        {
            assert_eq!(u128::from_le_bytes(from_f64(1.0)), 0x3fff << 112);
            assert_eq!(u128::from_le_bytes(from_f64(-2.0)), 1 << 127 | 0x4000 << 112);
            assert_eq!(u128::from_le_bytes(from_f64(5e-324)), ((16383 - 1074) as u128) << 112);
        }
    }
}
