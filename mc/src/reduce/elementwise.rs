//! Kernels for the types reduced in their own arithmetic: integers, `f32`,
//! `f64`, and complex numbers (sum and avg act on the parts; prod is complex
//! multiplication).

use std::marker::PhantomData;

use ferrocoll_core::backend::{PairKernel, ReduceKernel, ReduceSpec};
use ferrocoll_core::{Error, ReduceOp, Result};

use super::Kernels;
use super::driver::{Kernel, Operands, copy_pod, run, sub};
use super::num::{Add, And, Int, Max, Min, Mul, Num, Op, Or, Xor};

/// `acc = op(acc, src)` over the elements; avg divides when storing.
struct Fold<T, O> {
    divisor: Option<usize>,
    _types: PhantomData<(T, O)>,
}

impl<T: Num, O: Op<T>> Fold<T, O> {
    fn new(divisor: Option<usize>) -> Self {
        Fold { divisor, _types: PhantomData }
    }
}

impl<T: Num, O: Op<T>> Kernel for Fold<T, O> {
    type Elem = T;
    type Acc = T;

    #[inline(always)]
    fn load(&self, acc: &mut [T], src: &[T]) {
        copy_pod(acc, src);
    }

    #[inline(always)]
    fn fold(&self, acc: &mut [T], src: &[T]) {
        for (a, &s) in acc.iter_mut().zip(src) {
            *a = O::apply(*a, s);
        }
    }

    #[inline(always)]
    fn fold2(&self, acc: &mut [T], a: &[T], b: &[T]) {
        for ((x, &p), &q) in acc.iter_mut().zip(a).zip(b) {
            *x = O::apply(O::apply(*x, p), q);
        }
    }

    #[inline(always)]
    fn store(&self, dst: &mut [T], acc: &mut [T]) {
        if let Some(n) = self.divisor {
            for (d, &a) in dst.iter_mut().zip(acc.iter()) {
                *d = a.div_count(n);
            }
        } else {
            copy_pod(dst, acc);
        }
    }

    /// The same operations in the same order as `load` then `fold`, so the
    /// same bits; avg (which divides when storing) goes through the accumulator.
    #[inline(always)]
    fn combine2(&self, dst: &mut [T], a: &[T], b: &[T]) -> bool {
        if self.divisor.is_some() {
            return false;
        }
        for ((d, &p), &q) in dst.iter_mut().zip(a).zip(b) {
            *d = O::apply(p, q);
        }
        true
    }

    /// Each element read unaligned from each operand and folded in a
    /// register: the payload of a small collective (two `f32` from two
    /// ranks) took ~250 instructions through the slices of `load`, `fold`
    /// and `store`, most of them copies of one element.
    #[inline(always)]
    fn in_registers(&self, ops: &mut Operands<'_>) -> Option<Result<()>> {
        Some(self.fold_each(ops))
    }
}

impl<T: Num, O: Op<T>> Fold<T, O> {
    /// [`Kernel::in_registers`]: `load`, a `fold` per further source and `store`
    /// on one element at a time.
    #[inline(always)]
    fn fold_each(&self, ops: &mut Operands<'_>) -> Result<()> {
        let n = std::mem::size_of::<T>();
        let Operands { dst, first, rest } = ops;
        for (i, d) in dst.chunks_exact_mut(n).enumerate() {
            let at = i * n;
            let mut acc: T = match first {
                Some(src) => bytemuck::pod_read_unaligned(sub(src, at, n)?),
                None => bytemuck::pod_read_unaligned(d),
            };
            for src in rest.iter() {
                acc = O::apply(acc, bytemuck::pod_read_unaligned(sub(src, at, n)?));
            }
            if let Some(k) = self.divisor {
                acc = acc.div_count(k);
            }
            d.copy_from_slice(bytemuck::bytes_of(&acc));
        }
        Ok(())
    }
}

/// Logical and/or/xor: operands become 0/1 truth values, then the bitwise op.
struct Logical<T, O>(PhantomData<(T, O)>);

impl<T: Int, O: Op<T>> Kernel for Logical<T, O> {
    type Elem = T;
    type Acc = T;

    #[inline(always)]
    fn load(&self, acc: &mut [T], src: &[T]) {
        for (a, &s) in acc.iter_mut().zip(src) {
            *a = s.truth();
        }
    }

    #[inline(always)]
    fn fold(&self, acc: &mut [T], src: &[T]) {
        for (a, &s) in acc.iter_mut().zip(src) {
            *a = O::apply(*a, s.truth());
        }
    }

    #[inline(always)]
    fn store(&self, dst: &mut [T], acc: &mut [T]) {
        copy_pod(dst, acc);
    }
}

/// The divisor of an avg (none for other operations).
fn divisor(spec: &ReduceSpec) -> Option<usize> {
    if spec.op == ReduceOp::Avg { spec.avg_divisor } else { None }
}

fn unsupported(spec: &ReduceSpec) -> Error {
    Error::internal(format!("no kernel for reduction {} on {} (check_dtype passed)", spec.op, spec.dtype))
}

/// The kernels of an integer reduction.
pub(crate) fn int<T: Int>(spec: &ReduceSpec) -> Result<Kernels> {
    use ReduceOp::*;
    let pair = int_pair_of::<T>(spec.op);
    if let Some(kernel) = arithmetic::<T>(spec.op) {
        return Ok((kernel, pair));
    }
    let kernel = match spec.op {
        Band => fold::<T, And>,
        Bor => fold::<T, Or>,
        Bxor => fold::<T, Xor>,
        Land => logical::<T, And>,
        Lor => logical::<T, Or>,
        Lxor => logical::<T, Xor>,
        _ => return Err(unsupported(spec)),
    };
    Ok((kernel, pair))
}

/// The kernel of a real `f32`/`f64` reduction.
pub(crate) fn float<T: Num>(spec: &ReduceSpec) -> Result<Kernels> {
    let kernel = arithmetic::<T>(spec.op).ok_or_else(|| unsupported(spec))?;
    Ok((kernel, pair_of::<T>(spec.op)))
}

/// The kernels of sum (and avg, which divides when storing), prod, max
/// and min, which every real type has.
fn arithmetic<T: Num>(op: ReduceOp) -> Option<ReduceKernel> {
    use ReduceOp::*;
    Some(match op {
        Sum | Avg => fold::<T, Add>,
        Prod => fold::<T, Mul>,
        Max => fold::<T, self::Max>,
        Min => fold::<T, self::Min>,
        _ => return None,
    })
}

/// The pair kernel of a real or integer reduction whose kernel is a
/// [`Fold`] without a divisor (every one but avg, the logical operations
/// and the complex and narrow types): `O::apply(a, b)` on each element, as
/// `Fold`'s element loop and `combine2` compute it.
fn pair_of<T: Num>(op: ReduceOp) -> Option<PairKernel> {
    use ReduceOp::*;
    Some(match op {
        Sum => pair::<T, Add>,
        Prod => pair::<T, Mul>,
        Max => pair::<T, self::Max>,
        Min => pair::<T, self::Min>,
        _ => return None,
    })
}

/// The pair kernels of the bitwise operations on integers.
fn int_pair_of<T: Int>(op: ReduceOp) -> Option<PairKernel> {
    use ReduceOp::*;
    match op {
        Band => Some(pair::<T, And>),
        Bor => Some(pair::<T, Or>),
        Bxor => Some(pair::<T, Xor>),
        _ => pair_of::<T>(op),
    }
}

fn pair<T: Num, O: Op<T>>(dst: &mut [u8], a: &[u8], b: &[u8]) {
    let n = std::mem::size_of::<T>();
    for ((d, a), b) in dst.chunks_exact_mut(n).zip(a.chunks_exact(n)).zip(b.chunks_exact(n)) {
        let v = O::apply(bytemuck::pod_read_unaligned(a), bytemuck::pod_read_unaligned(b));
        d.copy_from_slice(bytemuck::bytes_of(&v));
    }
}

// The kernels, chosen once per prepared reduction: each runs one kernel
// type, so the driver and the element loop are compiled for it.

fn fold<T: Num, O: Op<T>>(dst: &mut [u8], first: Option<&[u8]>, rest: &[&[u8]], spec: &ReduceSpec) -> Result<()> {
    run(&Fold::<T, O>::new(divisor(spec)), Operands { dst, first, rest })
}

fn logical<T: Int, O: Op<T>>(dst: &mut [u8], first: Option<&[u8]>, rest: &[&[u8]], _: &ReduceSpec) -> Result<()> {
    run(&Logical::<T, O>(PhantomData), Operands { dst, first, rest })
}

fn complex_prod<T: Num>(dst: &mut [u8], first: Option<&[u8]>, rest: &[&[u8]], _: &ReduceSpec) -> Result<()> {
    run(&ComplexProd::<T>(PhantomData), Operands { dst, first, rest })
}

/// Complex multiplication on (re, im) pairs.
struct ComplexProd<T>(PhantomData<T>);

impl<T: Num> Kernel for ComplexProd<T> {
    type Elem = [T; 2];
    type Acc = [T; 2];

    #[inline(always)]
    fn load(&self, acc: &mut [[T; 2]], src: &[[T; 2]]) {
        copy_pod(acc, src);
    }

    #[inline(always)]
    fn fold(&self, acc: &mut [[T; 2]], src: &[[T; 2]]) {
        for (a, s) in acc.iter_mut().zip(src) {
            let ([ar, ai], [sr, si]) = (*a, *s);
            *a = [ar.mul(sr).sub(ai.mul(si)), ar.mul(si).add(ai.mul(sr))];
        }
    }

    #[inline(always)]
    fn store(&self, dst: &mut [[T; 2]], acc: &mut [[T; 2]]) {
        copy_pod(dst, acc);
    }
}

/// The kernel of a complex reduction: sum and avg are real reductions of
/// the parts.
pub(crate) fn complex<T: Num>(spec: &ReduceSpec) -> Result<ReduceKernel> {
    Ok(match spec.op {
        ReduceOp::Sum | ReduceOp::Avg => fold::<T, Add>,
        ReduceOp::Prod => complex_prod::<T>,
        _ => return Err(unsupported(spec)),
    })
}
