//! OCP 8-bit floating point (OFP8): conversions between `f32` and the two formats.
//!
//! - **E4M3** ("FN" variant): 1 sign, 4 exponent (bias 7), 3 mantissa bits.
//!   No infinities; `S.1111.111` (`0x7f`, `0xff`) is NaN; the largest finite
//!   value is 448. Converting from `f32` saturates: finite values (and
//!   infinities) beyond ±448 become ±448, as CUDA's `__NV_SATFINITE`.
//! - **E5M2**: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE-like with
//!   infinities and NaNs; the largest finite value is 57344. Converting from
//!   `f32` follows IEEE: values that round beyond the largest finite become ±∞.
//!
//! Both conversions from `f32` round to nearest, ties to even, and produce
//! subnormals. A NaN becomes `0x7f` (E4M3) or the quiet NaN `0x7e` (E5M2),
//! keeping its sign. Decoding is a 256-entry table built at compile time.
//!
//! ```
//! use ferrocoll_mc::fp8;
//! assert_eq!(fp8::e4m3_to_f32(fp8::f32_to_e4m3(1000.0)), 448.0);
//! assert_eq!(fp8::e5m2_to_f32(fp8::f32_to_e5m2(1.0e6)), f32::INFINITY);
//! assert_eq!(fp8::f32_to_e4m3(0.3), 0x2a); // 0.3125 = 1.25 * 2^-2
//! ```

use ferrocoll_core::{Error, Result};

/// One OFP8 format, described by its field widths.
struct Format {
    mant_bits: u32,
    exp_bits: u32,
    bias: u32,
    /// E4M3 "FN": the all-ones exponent holds normal numbers, only all-ones mantissa is NaN.
    finite_only: bool,
}

const E4M3: Format = Format { mant_bits: 3, exp_bits: 4, bias: 7, finite_only: true };
const E5M2: Format = Format { mant_bits: 2, exp_bits: 5, bias: 15, finite_only: false };

/// The largest finite E4M3 code (448).
pub const E4M3_MAX: u8 = 0x7e;
/// The E4M3 NaN code (with the sign bit clear).
pub const E4M3_NAN: u8 = 0x7f;
/// The largest finite E5M2 code (57344).
pub const E5M2_MAX: u8 = 0x7b;
/// The E5M2 infinity code (with the sign bit clear).
pub const E5M2_INF: u8 = 0x7c;
/// The E5M2 quiet NaN produced by conversions (with the sign bit clear).
pub const E5M2_NAN: u8 = 0x7e;

/// The `f32` bits of an OFP8 code (exact: every OFP8 value is an `f32`).
const fn decode_bits(code: u8, f: &Format) -> u32 {
    let sign = ((code as u32) & 0x80) << 24;
    let exp = ((code as u32) >> f.mant_bits) & ((1 << f.exp_bits) - 1);
    let mant = (code as u32) & ((1 << f.mant_bits) - 1);
    let exp_max = (1 << f.exp_bits) - 1;
    if exp == exp_max {
        if f.finite_only {
            if mant == (1 << f.mant_bits) - 1 {
                return sign | 0x7fc0_0000;
            }
        } else if mant == 0 {
            return sign | 0x7f80_0000;
        } else {
            return sign | 0x7fc0_0000;
        }
    }
    if exp == 0 {
        if mant == 0 {
            return sign;
        }
        // Subnormal: mant * 2^(1 - bias - mant_bits); normalise around its leading bit p.
        let p = 31 - mant.leading_zeros();
        let f32_exp = p + 127 + 1 - f.bias - f.mant_bits;
        return sign | (f32_exp << 23) | ((mant - (1 << p)) << (23 - p));
    }
    sign | ((exp + 127 - f.bias) << 23) | (mant << (23 - f.mant_bits))
}

const fn table(f: &Format) -> [f32; 256] {
    let mut t = [0.0f32; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = f32::from_bits(decode_bits(i as u8, f));
        i += 1;
    }
    t
}

/// Every E4M3 code's value.
static E4M3_TABLE: [f32; 256] = table(&E4M3);
/// Every E5M2 code's value.
static E5M2_TABLE: [f32; 256] = table(&E5M2);

/// Round the magnitude bits of a non-NaN `f32` (`abs` = bits without the sign)
/// to the format, ties to even. The result may exceed the largest finite
/// code (overflow); the caller saturates or maps it to infinity.
#[inline(always)]
fn round_magnitude(abs: u32, f: &Format) -> u32 {
    // The f32 biased exponent of the format's smallest normal, 2^(1 - bias).
    let min_normal = 127 + 1 - f.bias;
    let f32_exp = abs >> 23;
    if f32_exp >= min_normal {
        // Re-bias the exponent in place; a mantissa carry rolls into the exponent.
        let shift = 23 - f.mant_bits;
        let t = abs - ((127 - f.bias) << 23);
        (t + (1 << (shift - 1)) - 1 + ((t >> shift) & 1)) >> shift
    } else {
        // Subnormal in the format: the whole significand is shifted right.
        let sig = (abs & 0x007f_ffff) | if f32_exp != 0 { 0x0080_0000 } else { 0 };
        let shift = (23 - f.mant_bits) + (min_normal - f32_exp.max(1));
        if shift > 31 {
            return 0;
        }
        (sig + (1 << (shift - 1)) - 1 + ((sig >> shift) & 1)) >> shift
    }
}

/// The value of an E4M3 code (`0x7f`/`0xff` are NaN).
#[inline]
pub fn e4m3_to_f32(code: u8) -> f32 {
    E4M3_TABLE[usize::from(code)]
}

/// The value of an E5M2 code (`0x7c`/`0xfc` are ±∞, `0x7d..=0x7f` and negatives NaN).
#[inline]
pub fn e5m2_to_f32(code: u8) -> f32 {
    E5M2_TABLE[usize::from(code)]
}

/// `x` rounded to E4M3 (nearest, ties to even); beyond ±448 saturates to ±448; NaN gives NaN.
#[inline]
pub fn f32_to_e4m3(x: f32) -> u8 {
    let bits = x.to_bits();
    let sign = ((bits >> 24) & 0x80) as u8;
    let abs = bits & 0x7fff_ffff;
    if abs > 0x7f80_0000 {
        return sign | E4M3_NAN;
    }
    let mag = round_magnitude(abs, &E4M3);
    // The cast is exact: mag <= E4M3_MAX here.
    sign | if mag > u32::from(E4M3_MAX) { E4M3_MAX } else { mag as u8 }
}

/// `x` rounded to E5M2 (nearest, ties to even); overflow gives ±∞; NaN gives a quiet NaN.
#[inline]
pub fn f32_to_e5m2(x: f32) -> u8 {
    let bits = x.to_bits();
    let sign = ((bits >> 24) & 0x80) as u8;
    let abs = bits & 0x7fff_ffff;
    if abs > 0x7f80_0000 {
        return sign | E5M2_NAN;
    }
    let mag = round_magnitude(abs, &E5M2);
    // The cast is exact: mag <= E5M2_MAX here.
    sign | if mag > u32::from(E5M2_MAX) { E5M2_INF } else { mag as u8 }
}

fn check_lengths(what: &str, src: usize, dst: usize) -> Result<()> {
    if src == dst {
        Ok(())
    } else {
        Err(Error::invalid_param(format!("{what}: source has {src} elements but destination has {dst}")))
    }
}

/// Decode E4M3 codes into `dst` (same length, else `InvalidParam`).
pub fn e4m3_slice_to_f32(src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_lengths("e4m3_slice_to_f32", src.len(), dst.len())?;
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = e4m3_to_f32(s);
    }
    Ok(())
}

/// Decode E5M2 codes into `dst` (same length, else `InvalidParam`).
pub fn e5m2_slice_to_f32(src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_lengths("e5m2_slice_to_f32", src.len(), dst.len())?;
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = e5m2_to_f32(s);
    }
    Ok(())
}

/// Encode `f32` values as E4M3 into `dst` (same length, else `InvalidParam`).
pub fn f32_slice_to_e4m3(src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_lengths("f32_slice_to_e4m3", src.len(), dst.len())?;
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = f32_to_e4m3(s);
    }
    Ok(())
}

/// Encode `f32` values as E5M2 into `dst` (same length, else `InvalidParam`).
pub fn f32_slice_to_e5m2(src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_lengths("f32_slice_to_e5m2", src.len(), dst.len())?;
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = f32_to_e5m2(s);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
