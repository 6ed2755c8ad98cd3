//! Kernels for the floats narrower than `f32` (f16, bf16, float8 E4M3/E5M2):
//! every source is widened to `f32`, all sources are accumulated in `f32`,
//! avg divides in `f32`, and the result is rounded once when it is written.
//!
//! Conversions: f16 uses F16C when the CPU has it (`f16c.rs`), else
//! `half`'s slice conversion; bf16 is a shift to widen and a branch-free
//! round-to-nearest-even on the `f32` bits to narrow, which vectorises;
//! float8 uses the branch-free conversions of [`crate::fp8`].

use std::marker::PhantomData;

use bytemuck::Pod;
use ferrocoll_core::backend::ReduceSpec;
use ferrocoll_core::{Error, Float8E4M3, Float8E5M2, ReduceOp, Result};
use half::{bf16, f16, slice::HalfFloatSliceExt};

use super::driver::{Kernel, Operands, run};
#[cfg(target_arch = "x86_64")]
use super::f16c;
use super::num::{Add, Max, Min, Mul, Num, Op};
use crate::fp8;

/// A float narrower than `f32`, converted a slice at a time.
pub(crate) trait Narrow: Pod {
    /// `dst[i] = src[i]` widened (exact).
    fn widen(src: &[Self], dst: &mut [f32]);
    /// `acc[i] = op(acc[i], src[i] widened)`.
    fn fold<O: Op<f32>>(acc: &mut [f32], src: &[Self]);
    /// `acc[i] = op(op(acc[i], a[i]), b[i])`, widened; one pass where conversion is cheap.
    #[inline(always)]
    fn fold2<O: Op<f32>>(acc: &mut [f32], a: &[Self], b: &[Self]) {
        Self::fold::<O>(acc, a);
        Self::fold::<O>(acc, b);
    }
    /// `dst[i] = src[i]` rounded to nearest, ties to even.
    fn narrow(src: &[f32], dst: &mut [Self]);
}

/// Elements widened per step by the portable f16 fold (the buffer stays in L1).
const BLOCK: usize = 64;

impl Narrow for f16 {
    #[inline(always)]
    fn widen(src: &[f16], dst: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if f16c::available() {
            // SAFETY: the CPU has AVX2 and F16C, checked just above.
            return unsafe { f16c::widen(src, dst) };
        }
        src.convert_to_f32_slice(dst);
    }

    #[inline(always)]
    fn fold<O: Op<f32>>(acc: &mut [f32], src: &[f16]) {
        #[cfg(target_arch = "x86_64")]
        if f16c::available() {
            // SAFETY: the CPU has AVX2 and F16C, checked just above.
            return unsafe { f16c::fold::<O>(acc, src) };
        }
        f16_fold_portable::<O>(acc, src);
    }

    #[inline(always)]
    fn narrow(src: &[f32], dst: &mut [f16]) {
        #[cfg(target_arch = "x86_64")]
        if f16c::available() {
            // SAFETY: the CPU has AVX2 and F16C, checked just above.
            return unsafe { f16c::narrow(src, dst) };
        }
        dst.convert_from_f32_slice(src);
    }
}

/// The f16 fold without F16C: widen a block at a time with `half`, then fold.
#[inline(always)]
fn f16_fold_portable<O: Op<f32>>(acc: &mut [f32], src: &[f16]) {
    let mut buf = [0.0f32; BLOCK];
    for (a, s) in acc.chunks_mut(BLOCK).zip(src.chunks(BLOCK)) {
        let b = &mut buf[..s.len()];
        s.convert_to_f32_slice(b);
        for (x, &y) in a.iter_mut().zip(b.iter()) {
            *x = O::apply(*x, y);
        }
    }
}

/// bf16 bits of `x`, rounded to nearest even; NaNs stay NaN (made quiet).
#[inline(always)]
pub(crate) fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16;
    let quiet_nan = (b >> 16) | 0x40;
    // Both are computed and one selected, so the loop has no branch to vectorise around.
    (if b & 0x7fff_ffff > 0x7f80_0000 { quiet_nan } else { rounded }) as u16
}

#[inline(always)]
fn bf16_value(x: bf16) -> f32 {
    f32::from_bits(u32::from(x.to_bits()) << 16)
}

impl Narrow for bf16 {
    #[inline(always)]
    fn widen(src: &[bf16], dst: &mut [f32]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = bf16_value(s);
        }
    }

    #[inline(always)]
    fn fold<O: Op<f32>>(acc: &mut [f32], src: &[bf16]) {
        for (a, &s) in acc.iter_mut().zip(src) {
            *a = O::apply(*a, bf16_value(s));
        }
    }

    #[inline(always)]
    fn fold2<O: Op<f32>>(acc: &mut [f32], a: &[bf16], b: &[bf16]) {
        for ((x, &p), &q) in acc.iter_mut().zip(a).zip(b) {
            *x = O::apply(O::apply(*x, bf16_value(p)), bf16_value(q));
        }
    }

    #[inline(always)]
    fn narrow(src: &[f32], dst: &mut [bf16]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = bf16::from_bits(bf16_bits(s));
        }
    }
}

macro_rules! narrow_fp8 {
    ($t:ident, $to_f32:path, $from_f32:path) => {
        impl Narrow for $t {
            #[inline(always)]
            fn widen(src: &[$t], dst: &mut [f32]) {
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d = $to_f32(s.0);
                }
            }

            #[inline(always)]
            fn fold<O: Op<f32>>(acc: &mut [f32], src: &[$t]) {
                for (a, &s) in acc.iter_mut().zip(src) {
                    *a = O::apply(*a, $to_f32(s.0));
                }
            }

            #[inline(always)]
            fn fold2<O: Op<f32>>(acc: &mut [f32], a: &[$t], b: &[$t]) {
                for ((x, &p), &q) in acc.iter_mut().zip(a).zip(b) {
                    *x = O::apply(O::apply(*x, $to_f32(p.0)), $to_f32(q.0));
                }
            }

            #[inline(always)]
            fn narrow(src: &[f32], dst: &mut [$t]) {
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d = $t($from_f32(s));
                }
            }
        }
    };
}

narrow_fp8!(Float8E4M3, fp8::e4m3_to_f32, fp8::f32_to_e4m3);
narrow_fp8!(Float8E5M2, fp8::e5m2_to_f32, fp8::f32_to_e5m2);

/// A narrow-float reduction with accumulator `f32`.
struct Widened<N, O> {
    divisor: Option<usize>,
    _types: PhantomData<(N, O)>,
}

impl<N: Narrow, O: Op<f32>> Kernel for Widened<N, O> {
    type Elem = N;
    type Acc = f32;

    #[inline(always)]
    fn load(&self, acc: &mut [f32], src: &[N]) {
        N::widen(src, acc);
    }

    #[inline(always)]
    fn fold(&self, acc: &mut [f32], src: &[N]) {
        N::fold::<O>(acc, src);
    }

    #[inline(always)]
    fn fold2(&self, acc: &mut [f32], a: &[N], b: &[N]) {
        N::fold2::<O>(acc, a, b);
    }

    #[inline(always)]
    fn store(&self, dst: &mut [N], acc: &mut [f32]) {
        if let Some(n) = self.divisor {
            for a in acc.iter_mut() {
                *a = a.div_count(n);
            }
        }
        N::narrow(acc, dst);
    }
}

fn widened<N: Narrow, O: Op<f32>>(ops: Operands<'_>, divisor: Option<usize>) -> Result<()> {
    run(&Widened::<N, O> { divisor, _types: PhantomData }, ops)
}

/// A reduction of narrow floats.
pub(crate) fn reduce<N: Narrow>(ops: Operands<'_>, spec: &ReduceSpec) -> Result<()> {
    match spec.op {
        ReduceOp::Sum => widened::<N, Add>(ops, None),
        ReduceOp::Avg => widened::<N, Add>(ops, spec.avg_divisor),
        ReduceOp::Prod => widened::<N, Mul>(ops, None),
        ReduceOp::Max => widened::<N, Max>(ops, None),
        ReduceOp::Min => widened::<N, Min>(ops, None),
        _ => {
            Err(Error::internal(format!("no kernel for reduction {} on {} (check_dtype passed)", spec.op, spec.dtype)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounding_matches_half() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let f = f32::from_bits((x >> 32) as u32);
            let ours = bf16::from_bits(bf16_bits(f));
            if f.is_nan() {
                assert!(ours.is_nan(), "{:#x}", f.to_bits());
                assert_eq!(ours.to_bits() & 0x0040, 0x0040, "quiet NaN");
            } else {
                assert_eq!(ours.to_bits(), bf16::from_f32(f).to_bits(), "{f:e}");
            }
        }
        assert_eq!(bf16_bits(f32::from_bits(0x3f80_8000)), 0x3f80, "tie to even (down)");
        assert_eq!(bf16_bits(f32::from_bits(0x3f81_8000)), 0x3f82, "tie to even (up)");
        assert_eq!(bf16_bits(f32::from_bits(0x7f7f_ffff)), 0x7f80, "overflow rounds to infinity");
        assert_eq!(bf16_bits(f32::from_bits(0xff80_0001)), 0xffc0, "signalling NaN becomes quiet");
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn f16c_and_portable_paths_agree() {
        if !f16c::available() {
            eprintln!("skipped: this CPU has no AVX2/F16C, only the portable path runs");
            return;
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for len in (0..40).chain([1000, 2053]) {
            let src: Vec<f16> = (0..len).map(|_| f16::from_bits(next() as u16)).collect();
            let wide: Vec<f32> = (0..len).map(|_| f32::from(next() as i16)).collect();
            let (mut a, mut b) = (vec![0.0f32; len], vec![0.0f32; len]);
            // SAFETY: available() said the CPU has AVX2 and F16C.
            unsafe { f16c::widen(&src, &mut a) };
            src.convert_to_f32_slice(&mut b);
            assert_eq!(bytemuck::cast_slice::<f32, u32>(&a), bytemuck::cast_slice::<f32, u32>(&b), "widen {len}");
            let (mut a, mut b) = (wide.clone(), wide.clone());
            // SAFETY: as above.
            unsafe { f16c::fold::<Add>(&mut a, &src) };
            f16_fold_portable::<Add>(&mut b, &src);
            for (i, (p, q)) in a.iter().zip(&b).enumerate() {
                assert!(p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()), "fold {len}[{i}]: {p} {q}");
            }
            let narrow_src: Vec<f32> = (0..len).map(|_| f32::from_bits(next() as u32)).collect();
            let (mut a, mut b) = (vec![f16::ZERO; len], vec![f16::ZERO; len]);
            // SAFETY: as above.
            unsafe { f16c::narrow(&narrow_src, &mut a) };
            b.convert_from_f32_slice(&narrow_src);
            for (i, (p, q)) in a.iter().zip(&b).enumerate() {
                assert!(p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()), "narrow {len}[{i}]: {p} {q}");
            }
        }
    }
}
