//! [`Element`]: Rust types that map to a [`DataType`], for the typed API.

use bytemuck::{Pod, Zeroable};

use crate::types::DataType;

/// A Rust type whose values are elements of a ferrocoll datatype.
///
/// # Safety
/// `size_of::<Self>()` must equal `DTYPE.size()` (or, when `LOC_PAIR` is
/// true, `DTYPE.loc_pair_size()` with the value first and an `i32` index at
/// `DTYPE.loc_index_offset()`), and every bit pattern must be a valid value.
pub unsafe trait Element: Copy + Send + Sync + 'static {
    /// The datatype of one element (of the value, for pairs).
    const DTYPE: DataType;
    /// True for [`ValueIndex`] pairs used by maxloc/minloc.
    const LOC_PAIR: bool = false;
}

macro_rules! element {
    ($($t:ty => $dt:ident),* $(,)?) => {
        $(
            // SAFETY: a primitive of exactly DTYPE.size() bytes; every bit pattern is valid.
            unsafe impl Element for $t { const DTYPE: DataType = DataType::$dt; }
        )*
    };
}

element!(
    i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64, i128 => Int128,
    u8 => Uint8, u16 => Uint16, u32 => Uint32, u64 => Uint64, u128 => Uint128,
    half::f16 => Float16, f32 => Float32, f64 => Float64, half::bf16 => Bfloat16,
    Complex32 => Float32Complex, Complex64 => Float64Complex,
    Float8E4M3 => Float8E4M3, Float8E5M2 => Float8E5M2,
);

/// A complex number of two `f32` (`float32_complex`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Complex32 {
    /// Real part.
    pub re: f32,
    /// Imaginary part.
    pub im: f32,
}

/// A complex number of two `f64` (`float64_complex`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Complex64 {
    /// Real part.
    pub re: f64,
    /// Imaginary part.
    pub im: f64,
}

/// An OCP float8 E4M3 value, stored as its bits (conversions live in `ferrocoll-mc`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
pub struct Float8E4M3(pub u8);

/// An OCP float8 E5M2 value, stored as its bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
pub struct Float8E5M2(pub u8);

/// Padding that keeps a [`ValueIndex`] free of uninitialised bytes.
pub trait LocValue: Element + Default {
    /// Bytes between the value and the index.
    type Gap: Copy + Default + Send + Sync + std::fmt::Debug + 'static;
    /// Bytes after the index.
    type Tail: Copy + Default + Send + Sync + std::fmt::Debug + 'static;
}

/// A (value, index) pair for maxloc/minloc, laid out as the C struct
/// `{ T value; int32_t index; }` (MPI's `MPI_FLOAT_INT` and friends) with
/// its padding made explicit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ValueIndex<T: LocValue> {
    /// The value.
    pub value: T,
    gap: T::Gap,
    /// Its index (ties keep the lowest).
    pub index: i32,
    tail: T::Tail,
}

impl<T: LocValue> ValueIndex<T> {
    /// A pair.
    pub fn new(value: T, index: i32) -> Self {
        ValueIndex { value, gap: T::Gap::default(), index, tail: T::Tail::default() }
    }
}

impl<T: LocValue + PartialEq> PartialEq for ValueIndex<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value && self.index == other.index
    }
}

macro_rules! loc_value {
    ($($t:ty: $gap:literal, $tail:literal);* $(;)?) => {
        $(
            impl LocValue for $t { type Gap = [u8; $gap]; type Tail = [u8; $tail]; }
            // SAFETY: value, explicit gap, i32 index and explicit tail fill the
            // C layout exactly (checked by the layout test below), so the size
            // is DTYPE.loc_pair_size() and any bit pattern is valid.
            unsafe impl Element for ValueIndex<$t> {
                const DTYPE: DataType = <$t as Element>::DTYPE;
                const LOC_PAIR: bool = true;
            }
        )*
    };
}

loc_value!(
    i8: 3, 0; u8: 3, 0; Float8E4M3: 3, 0; Float8E5M2: 3, 0;
    i16: 2, 0; u16: 2, 0; half::f16: 2, 0; half::bf16: 2, 0;
    i32: 0, 0; u32: 0, 0; f32: 0, 0;
    i64: 0, 4; u64: 0, 4; f64: 0, 4;
    i128: 0, 12; u128: 0, 12;
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    fn check<T: LocValue>() {
        assert_eq!(size_of::<ValueIndex<T>>(), T::DTYPE.loc_pair_size(), "{}", T::DTYPE);
        assert_eq!(offset_of!(ValueIndex<T>, index), T::DTYPE.loc_index_offset(), "{}", T::DTYPE);
    }

    #[test]
    fn pair_layouts_match_the_datatype() {
        check::<i8>();
        check::<half::f16>();
        check::<f32>();
        check::<f64>();
        check::<u64>();
        check::<i128>();
        check::<Float8E5M2>();
    }

    #[test]
    fn sizes_match() {
        assert_eq!(size_of::<Complex32>(), DataType::Float32Complex.size());
        assert_eq!(size_of::<Complex64>(), DataType::Float64Complex.size());
        assert_eq!(size_of::<half::bf16>(), DataType::Bfloat16.size());
    }
}
