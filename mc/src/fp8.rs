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
//! keeping its sign. Every step is branch-free, so loops over slices vectorise.
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

/// The value of a code: branch-free integer and float steps, so that loops
/// over slices vectorise.
#[inline(always)]
fn decode(code: u8, f: &Format) -> f32 {
    let sign = u32::from(code & 0x80) << 24;
    let a = u32::from(code & 0x7f);
    // Normal: move exponent and mantissa into place and re-bias the exponent.
    let normal = (a << (23 - f.mant_bits)) + ((127 - f.bias) << 23);
    // Subnormal (exponent field 0): mantissa * 2^(1 - bias - mant_bits), exact and normal in f32.
    let scale = f32::from_bits((127 + 1 - f.bias - f.mant_bits) << 23);
    let subnormal = (a as f32 * scale).to_bits();
    let mag = if a < 1 << f.mant_bits { subnormal } else { normal };
    let exp_max = ((1 << f.exp_bits) - 1) << f.mant_bits;
    let mag = if f.finite_only {
        if a == 0x7f { 0x7fc0_0000 } else { mag }
    } else if a > exp_max {
        0x7fc0_0000
    } else if a == exp_max {
        0x7f80_0000
    } else {
        mag
    };
    f32::from_bits(sign | mag)
}

/// Round the magnitude bits of a non-NaN `f32` (`abs` = bits without the sign)
/// to the format, ties to even. The result may exceed the largest finite
/// code (overflow); the caller saturates or maps it to infinity. Both the
/// normal and the subnormal result are computed and one is selected, so
/// loops vectorise.
#[inline(always)]
fn round_magnitude(abs: u32, f: &Format) -> u32 {
    // The f32 biased exponent of the format's smallest normal, 2^(1 - bias).
    let min_normal = 127 + 1 - f.bias;
    let shift = 23 - f.mant_bits;
    // Normal in the format: re-bias the exponent in place and round the
    // dropped mantissa bits to even; a carry rolls into the exponent.
    let t = abs.wrapping_sub((127 - f.bias) << 23);
    let normal = t.wrapping_add((1 << (shift - 1)) - 1 + ((t >> shift) & 1)) >> shift;
    // Subnormal in the format: adding M = 2^23 * q (q the smallest subnormal)
    // makes the FPU round to a multiple of q, ties to even; the low mantissa
    // bits of the sum are then the code (q * 2^mant_bits rounds up into the
    // smallest normal, whose code follows the largest subnormal's).
    let m = f32::from_bits((127 + 1 - f.bias - f.mant_bits + 23) << 23);
    let subnormal = (f32::from_bits(abs) + m).to_bits().wrapping_sub(m.to_bits());
    if abs >> 23 >= min_normal { normal } else { subnormal }
}

/// The value of an E4M3 code (`0x7f`/`0xff` are NaN).
#[inline]
pub fn e4m3_to_f32(code: u8) -> f32 {
    decode(code, &E4M3)
}

/// The value of an E5M2 code (`0x7c`/`0xfc` are ±∞, `0x7d..=0x7f` and negatives NaN).
#[inline]
pub fn e5m2_to_f32(code: u8) -> f32 {
    decode(code, &E5M2)
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
