//! Element arithmetic for the kernels: one trait for the types that are
//! reduced natively (integers and `f32`/`f64`) and one zero-sized type per
//! binary operation, so that a kernel monomorphises into a plain loop.

use bytemuck::Pod;

/// A natively reduced element type: the integers (wrapping) and `f32`/`f64` (IEEE).
pub(crate) trait Num: Pod + PartialOrd {
    /// Sum (integers wrap).
    fn add(self, other: Self) -> Self;
    /// Difference (integers wrap).
    fn sub(self, other: Self) -> Self;
    /// Product (integers wrap).
    fn mul(self, other: Self) -> Self;
    /// Maximum (floats: a NaN operand is ignored, as IEEE `maxNum`).
    fn max(self, other: Self) -> Self;
    /// Minimum (floats: a NaN operand is ignored, as IEEE `minNum`).
    fn min(self, other: Self) -> Self;
    /// Divided by the number of contributions (integers truncate toward zero).
    fn div_count(self, n: usize) -> Self;
}

/// Integers: bitwise operations and 0/1 truth values for the logical operations.
pub(crate) trait Int: Num {
    /// Bitwise and.
    fn and(self, other: Self) -> Self;
    /// Bitwise or.
    fn or(self, other: Self) -> Self;
    /// Bitwise exclusive or.
    fn xor(self, other: Self) -> Self;
    /// 1 if non-zero, else 0.
    fn truth(self) -> Self;
}

macro_rules! num_int {
    ($($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)]
            fn add(self, other: Self) -> Self { self.wrapping_add(other) }
            #[inline(always)]
            fn sub(self, other: Self) -> Self { self.wrapping_sub(other) }
            #[inline(always)]
            fn mul(self, other: Self) -> Self { self.wrapping_mul(other) }
            #[inline(always)]
            fn max(self, other: Self) -> Self { Ord::max(self, other) }
            #[inline(always)]
            fn min(self, other: Self) -> Self { Ord::min(self, other) }
            #[inline]
            fn div_count(self, n: usize) -> Self {
                // A divisor wider than the type only happens for absurd team
                // sizes; i128 holds every value and divisor of the narrower types.
                match <$t>::try_from(n) {
                    Ok(d) => self.checked_div(d).unwrap_or(self),
                    Err(_) => (self as i128 / n as i128) as $t,
                }
            }
        }
        impl Int for $t {
            #[inline(always)]
            fn and(self, other: Self) -> Self { self & other }
            #[inline(always)]
            fn or(self, other: Self) -> Self { self | other }
            #[inline(always)]
            fn xor(self, other: Self) -> Self { self ^ other }
            #[inline(always)]
            fn truth(self) -> Self { Self::from(self != 0) }
        }
    )*};
}

num_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! num_int128 {
    ($($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)]
            fn add(self, other: Self) -> Self { self.wrapping_add(other) }
            #[inline(always)]
            fn sub(self, other: Self) -> Self { self.wrapping_sub(other) }
            #[inline(always)]
            fn mul(self, other: Self) -> Self { self.wrapping_mul(other) }
            #[inline(always)]
            fn max(self, other: Self) -> Self { Ord::max(self, other) }
            #[inline(always)]
            fn min(self, other: Self) -> Self { Ord::min(self, other) }
            #[inline]
            fn div_count(self, n: usize) -> Self {
                // usize is at most 64 bits, so the divisor always fits.
                self.checked_div(n as $t).unwrap_or(self)
            }
        }
        impl Int for $t {
            #[inline(always)]
            fn and(self, other: Self) -> Self { self & other }
            #[inline(always)]
            fn or(self, other: Self) -> Self { self | other }
            #[inline(always)]
            fn xor(self, other: Self) -> Self { self ^ other }
            #[inline(always)]
            fn truth(self) -> Self { Self::from(self != 0) }
        }
    )*};
}

num_int128!(i128, u128);

macro_rules! num_float {
    ($($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)]
            fn add(self, other: Self) -> Self { self + other }
            #[inline(always)]
            fn sub(self, other: Self) -> Self { self - other }
            #[inline(always)]
            fn mul(self, other: Self) -> Self { self * other }
            // maxNum/minNum as the device kernels (kernels/cuda/ops.cuh)
            // spell them: a NaN operand is ignored, and of equal operands
            // (+0 and -0) the accumulator `self` is kept. `<f32>::max`
            // leaves the zero's sign to the target (aarch64's fmaxnm takes
            // +0, x86's maxss the second operand): these give the same bits
            // on every CPU and on the GPU.
            #[inline(always)]
            fn max(self, other: Self) -> Self { if other > self || self.is_nan() { other } else { self } }
            #[inline(always)]
            fn min(self, other: Self) -> Self { if other < self || self.is_nan() { other } else { self } }
            #[inline]
            fn div_count(self, n: usize) -> Self { self / n as $t }
        }
    )*};
}

num_float!(f32, f64);

/// A binary operation, as a type so that kernels monomorphise per operation.
pub(crate) trait Op<T> {
    /// `a op b`.
    fn apply(a: T, b: T) -> T;
}

/// Sum (also avg before its division).
pub(crate) struct Add;
/// Product.
pub(crate) struct Mul;
/// Maximum.
pub(crate) struct Max;
/// Minimum.
pub(crate) struct Min;
/// Bitwise and (also logical and on 0/1 truth values).
pub(crate) struct And;
/// Bitwise or (also logical or on truth values).
pub(crate) struct Or;
/// Bitwise exclusive or (also logical xor on truth values).
pub(crate) struct Xor;

impl<T: Num> Op<T> for Add {
    #[inline(always)]
    fn apply(a: T, b: T) -> T {
        a.add(b)
    }
}
impl<T: Num> Op<T> for Mul {
    #[inline(always)]
    fn apply(a: T, b: T) -> T {
        a.mul(b)
    }
}
impl<T: Num> Op<T> for Max {
    #[inline(always)]
    fn apply(a: T, b: T) -> T {
        a.max(b)
    }
}
impl<T: Num> Op<T> for Min {
    #[inline(always)]
    fn apply(a: T, b: T) -> T {
        a.min(b)
    }
}
impl<T: Int> Op<T> for And {
    #[inline(always)]
    fn apply(a: T, b: T) -> T {
        a.and(b)
    }
}
impl<T: Int> Op<T> for Or {
    #[inline(always)]
    fn apply(a: T, b: T) -> T {
        a.or(b)
    }
}
impl<T: Int> Op<T> for Xor {
    #[inline(always)]
    fn apply(a: T, b: T) -> T {
        a.xor(b)
    }
}
