//! f16 <-> f32 with the x86 F16C instructions, 8 lanes at a time.
//!
//! `half`'s slice conversions also use F16C, but 8 elements per call through
//! a function pointer, with a feature check per slice; the f16 sum benchmark
//! ran about 5x slower with them. These functions are compiled with AVX2 and
//! F16C enabled so that conversion and fold share one vectorised loop. The
//! caller checks [`available`] (a cached atomic load) and falls back to `half`.

use std::arch::x86_64::{_MM_FROUND_TO_NEAREST_INT, _mm256_cvtph_ps, _mm256_cvtps_ph};

use half::f16;

use super::num::Op;

/// Whether the CPU has AVX2 and F16C (every x86 CPU with AVX2 has both).
#[inline(always)]
pub(super) fn available() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("f16c")
}

#[inline]
#[target_feature(enable = "avx2,f16c")]
fn widen8(h: [u16; 8]) -> [f32; 8] {
    bytemuck::cast(_mm256_cvtph_ps(bytemuck::cast(h)))
}

#[inline]
#[target_feature(enable = "avx2,f16c")]
fn narrow8(f: [f32; 8]) -> [u16; 8] {
    // Rounding mode 0 in the immediate: to nearest, ties to even (NaNs stay NaN, quiet).
    bytemuck::cast(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(bytemuck::cast(f)))
}

/// Up to 8 values, zero-padded.
#[inline(always)]
fn bits8(s: &[f16]) -> [u16; 8] {
    let mut h = [0u16; 8];
    for (d, x) in h.iter_mut().zip(s) {
        *d = x.to_bits();
    }
    h
}

/// `dst[i] = src[i]` widened.
#[target_feature(enable = "avx2,f16c")]
pub(super) fn widen(src: &[f16], dst: &mut [f32]) {
    let (mut s, mut d) = (src.chunks_exact(8), dst.chunks_exact_mut(8));
    for (sc, dc) in (&mut s).zip(&mut d) {
        dc.copy_from_slice(&widen8(bits8(sc)));
    }
    let w = widen8(bits8(s.remainder()));
    for (x, &y) in d.into_remainder().iter_mut().zip(&w) {
        *x = y;
    }
}

/// `acc[i] = op(acc[i], src[i] widened)`.
#[target_feature(enable = "avx2,f16c")]
pub(super) fn fold<O: Op<f32>>(acc: &mut [f32], src: &[f16]) {
    let (mut s, mut a) = (src.chunks_exact(8), acc.chunks_exact_mut(8));
    for (sc, ac) in (&mut s).zip(&mut a) {
        let w = widen8(bits8(sc));
        for (x, &y) in ac.iter_mut().zip(&w) {
            *x = O::apply(*x, y);
        }
    }
    let w = widen8(bits8(s.remainder()));
    for (x, &y) in a.into_remainder().iter_mut().zip(&w) {
        *x = O::apply(*x, y);
    }
}

/// `dst[i] = src[i]` rounded to f16 (nearest, ties to even).
#[target_feature(enable = "avx2,f16c")]
pub(super) fn narrow(src: &[f32], dst: &mut [f16]) {
    let (mut s, mut d) = (src.chunks_exact(8), dst.chunks_exact_mut(8));
    for (sc, dc) in (&mut s).zip(&mut d) {
        let mut f = [0.0f32; 8];
        f.copy_from_slice(sc);
        for (x, &b) in dc.iter_mut().zip(&narrow8(f)) {
            *x = f16::from_bits(b);
        }
    }
    let mut f = [0.0f32; 8];
    for (x, &y) in f.iter_mut().zip(s.remainder()) {
        *x = y;
    }
    for (x, &b) in d.into_remainder().iter_mut().zip(&narrow8(f)) {
        *x = f16::from_bits(b);
    }
}
