//! maxloc / minloc on (value, `i32` index) pairs laid out as the C struct
//! `{ T value; int32_t index; }` ([`DataType::loc_pair_size`] bytes, the index
//! at [`DataType::loc_index_offset`]).
//!
//! The larger (maxloc) or smaller (minloc) value wins; equal values keep the
//! smaller index; a NaN never beats a number (two NaNs: the smaller index).
//! Narrow floats are compared as `f32`. The winner's value bits are copied
//! unchanged, and the padding bytes of dst are written as zero.
//!
//! Pairs are handled as byte arrays (alignment 1, so never staged); this op
//! is rare enough that a scalar loop is fine.

use std::marker::PhantomData;

use ferrocoll_core::backend::ReduceSpec;
use ferrocoll_core::{DataType, Error, Float8E4M3, Float8E5M2, ReduceOp, Result};
use half::{bf16, f16};

use super::driver::{Kernel, Operands, copy_pod, run};
use crate::fp8;

/// The value half of a pair.
trait LocValue {
    /// Bytes of the value.
    const SIZE: usize;
    /// What values are compared as.
    type Key: Copy + PartialOrd;
    /// The value at the start of a pair.
    fn key(pair: &[u8]) -> Self::Key;
    /// Whether the key is a NaN.
    fn is_nan(key: Self::Key) -> bool;
}

macro_rules! loc_int {
    ($($t:ty),*) => {$(
        impl LocValue for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            type Key = $t;
            #[inline(always)]
            fn key(pair: &[u8]) -> $t {
                pair.first_chunk().map_or(0, |b| <$t>::from_ne_bytes(*b))
            }
            #[inline(always)]
            fn is_nan(_: $t) -> bool {
                false
            }
        }
    )*};
}

loc_int!(i8, i16, i32, i64, i128, u8, u16, u32, u64, u128);

macro_rules! loc_float {
    ($($t:ty, $size:expr, $key:ty, |$b:ident| $decode:expr;)*) => {$(
        impl LocValue for $t {
            const SIZE: usize = $size;
            type Key = $key;
            #[inline(always)]
            fn key(pair: &[u8]) -> $key {
                pair.first_chunk::<$size>().map_or(0.0, |$b| $decode)
            }
            #[inline(always)]
            fn is_nan(key: $key) -> bool {
                key.is_nan()
            }
        }
    )*};
}

loc_float!(
    f32, 4, f32, |b| f32::from_ne_bytes(*b);
    f64, 8, f64, |b| f64::from_ne_bytes(*b);
    f16, 2, f32, |b| f16::from_bits(u16::from_ne_bytes(*b)).to_f32();
    bf16, 2, f32, |b| bf16::from_bits(u16::from_ne_bytes(*b)).to_f32();
    Float8E4M3, 1, f32, |b| fp8::e4m3_to_f32(b[0]);
    Float8E5M2, 1, f32, |b| fp8::e5m2_to_f32(b[0]);
);

/// Byte offset of the index in a pair whose value has `size` bytes.
const fn index_offset(size: usize) -> usize {
    if size >= 4 { size } else { 4 }
}

#[inline(always)]
fn index(pair: &[u8], offset: usize) -> i32 {
    pair.get(offset..).and_then(|b| b.first_chunk()).map_or(0, |b| i32::from_ne_bytes(*b))
}

/// Whether pair `new` replaces pair `old`.
#[inline(always)]
fn beats<V: LocValue, const MAX: bool>(new: &[u8], old: &[u8]) -> bool {
    let off = index_offset(V::SIZE);
    let (nv, ov) = (V::key(new), V::key(old));
    let lower_index = index(new, off) < index(old, off);
    match (V::is_nan(nv), V::is_nan(ov)) {
        (true, true) => lower_index,
        (true, false) => false,
        (false, true) => true,
        (false, false) => {
            let better = if MAX { nv > ov } else { nv < ov };
            better || (nv == ov && lower_index)
        }
    }
}

/// maxloc (`MAX`) or minloc on `P`-byte pairs of `V`.
struct Loc<V, const P: usize, const MAX: bool>(PhantomData<V>);

impl<V: LocValue, const P: usize, const MAX: bool> Kernel for Loc<V, P, MAX>
where
    [u8; P]: bytemuck::Pod,
{
    type Elem = [u8; P];
    type Acc = [u8; P];

    #[inline(always)]
    fn load(&self, acc: &mut [[u8; P]], src: &[[u8; P]]) {
        copy_pod(acc, src);
    }

    #[inline(always)]
    fn fold(&self, acc: &mut [[u8; P]], src: &[[u8; P]]) {
        for (a, s) in acc.iter_mut().zip(src) {
            if beats::<V, MAX>(s, a) {
                *a = *s;
            }
        }
    }

    #[inline(always)]
    fn store(&self, dst: &mut [[u8; P]], acc: &mut [[u8; P]]) {
        let off = index_offset(V::SIZE);
        for (d, a) in dst.iter_mut().zip(acc.iter()) {
            // Value and index bytes from the winner; everything else (padding) zero.
            let mut out = [0u8; P];
            for (i, (o, &b)) in out.iter_mut().zip(a).enumerate() {
                if i < V::SIZE || (off..off + 4).contains(&i) {
                    *o = b;
                }
            }
            *d = out;
        }
    }
}

fn pairs<V: LocValue, const P: usize>(ops: Operands<'_>, spec: &ReduceSpec) -> Result<()>
where
    [u8; P]: bytemuck::Pod,
{
    let dt = spec.dtype;
    if V::SIZE != dt.size() || P != dt.loc_pair_size() || index_offset(V::SIZE) != dt.loc_index_offset() {
        return Err(Error::internal(format!("{}-byte {P}-byte-pair loc kernel used for {dt}", V::SIZE)));
    }
    match spec.op {
        ReduceOp::Maxloc => run(&Loc::<V, P, true>(PhantomData), ops),
        ReduceOp::Minloc => run(&Loc::<V, P, false>(PhantomData), ops),
        op => Err(Error::internal(format!("loc kernel used for reduction {op}"))),
    }
}

/// A maxloc or minloc reduction.
pub(crate) fn reduce(ops: Operands<'_>, spec: &ReduceSpec) -> Result<()> {
    use DataType as D;
    match spec.dtype {
        D::Int8 => pairs::<i8, 8>(ops, spec),
        D::Int16 => pairs::<i16, 8>(ops, spec),
        D::Int32 => pairs::<i32, 8>(ops, spec),
        D::Int64 => pairs::<i64, 16>(ops, spec),
        D::Int128 => pairs::<i128, 32>(ops, spec),
        D::Uint8 => pairs::<u8, 8>(ops, spec),
        D::Uint16 => pairs::<u16, 8>(ops, spec),
        D::Uint32 => pairs::<u32, 8>(ops, spec),
        D::Uint64 => pairs::<u64, 16>(ops, spec),
        D::Uint128 => pairs::<u128, 32>(ops, spec),
        D::Float16 => pairs::<f16, 8>(ops, spec),
        D::Bfloat16 => pairs::<bf16, 8>(ops, spec),
        D::Float32 => pairs::<f32, 8>(ops, spec),
        D::Float64 => pairs::<f64, 16>(ops, spec),
        D::Float8E4M3 => pairs::<Float8E4M3, 8>(ops, spec),
        D::Float8E5M2 => pairs::<Float8E5M2, 8>(ops, spec),
        D::Float128 | D::Float32Complex | D::Float64Complex | D::Float128Complex => {
            Err(Error::internal(format!("no {} kernel for {} (check_dtype passed)", spec.op, spec.dtype)))
        }
    }
}
