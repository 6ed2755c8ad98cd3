//! Hand-picked cases: avg division, NaN rules, loc ties, single rounding,
//! saturation, and every way a call can be refused.

use ferrocoll_core::{DataType, ReduceOp, Status};
use half::{bf16, f16};

use super::{Buf, POISON, spec};
use crate::{fp8, reduce_slices, reduce_slices_in_place};

fn reduce<T: bytemuck::Pod>(dt: DataType, op: ReduceOp, divisor: Option<usize>, srcs: &[&[T]]) -> Vec<T> {
    let count = std::mem::size_of_val(srcs[0]) / op.element_size(dt);
    let bytes: Vec<&[u8]> = srcs.iter().map(|s| bytemuck::cast_slice(s)).collect();
    let mut dst = vec![POISON; bytes[0].len()];
    reduce_slices(&mut dst, &bytes, &spec(dt, op, count, divisor)).unwrap();
    dst.chunks_exact(std::mem::size_of::<T>()).map(bytemuck::pod_read_unaligned).collect()
}

#[test]
fn integer_avg_truncates_toward_zero() {
    let (a, b) = ([-7i32, 7, i32::MIN, 5], [0i32, 0, 0, 0]);
    assert_eq!(reduce(DataType::Int32, ReduceOp::Avg, Some(2), &[&a, &b]), [-3, 3, i32::MIN / 2, 2]);
    assert_eq!(reduce(DataType::Int32, ReduceOp::Avg, None, &[&a, &b]), a, "no divisor: the sum");
    // Divisors wider than the type.
    assert_eq!(reduce(DataType::Int8, ReduceOp::Avg, Some(128), &[&[-128i8, 127, -1]]), [-1, 0, 0]);
    assert_eq!(reduce(DataType::Uint8, ReduceOp::Avg, Some(1000), &[&[255u8]]), [0]);
    assert_eq!(reduce(DataType::Uint64, ReduceOp::Avg, Some(3), &[&[u64::MAX], &[2u64]]), [0]);
}

#[test]
fn float_avg_divides_the_sum() {
    let r = reduce(DataType::Float64, ReduceOp::Avg, Some(3), &[&[1.0f64, -3.0], &[2.0, 0.0], &[3.0, 1.5]]);
    assert_eq!(r, [2.0, -0.5]);
    let h = |x: f32| f16::from_f32(x);
    let r = reduce(DataType::Float16, ReduceOp::Avg, Some(4), &[&[h(1.0), h(3.0)], &[h(2.0), h(0.5)]]);
    assert_eq!(r, [h(0.75), h(0.875)]);
}

#[test]
fn max_and_min_ignore_nan_and_sum_propagates_it() {
    let nan = f32::NAN;
    assert_eq!(
        reduce(DataType::Float32, ReduceOp::Max, None, &[&[nan, 1.0, -2.0], &[1.0, nan, -3.0]]),
        [1.0, 1.0, -2.0]
    );
    assert_eq!(reduce(DataType::Float32, ReduceOp::Min, None, &[&[nan, 1.0], &[1.0, nan]]), [1.0, 1.0]);
    assert!(reduce(DataType::Float32, ReduceOp::Sum, None, &[&[nan], &[1.0f32]])[0].is_nan());
    assert!(reduce(DataType::Float64, ReduceOp::Max, None, &[&[f64::NAN], &[f64::NAN]])[0].is_nan());
    let h = |x: f32| f16::from_f32(x);
    assert_eq!(reduce(DataType::Float16, ReduceOp::Max, None, &[&[h(nan)], &[h(-5.0)]]), [h(-5.0)]);
    let b = |x: f32| bf16::from_f32(x);
    assert_eq!(reduce(DataType::Bfloat16, ReduceOp::Min, None, &[&[b(2.0)], &[b(nan)]]), [b(2.0)]);
    let e = fp8::f32_to_e4m3;
    assert_eq!(reduce(DataType::Float8E4M3, ReduceOp::Max, None, &[&[0x7fu8], &[e(3.0)]]), [e(3.0)]);
}

#[test]
fn max_and_min_of_equal_zeros_keep_the_first_source_on_every_cpu() {
    // The device kernels keep the accumulator of equal operands; so must
    // the host, whatever the CPU's own max instruction does with zeros
    // (aarch64's fmaxnm takes +0). Long enough for every vector path.
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let (neg, pos) = (vec![-0.0f32; 67], vec![0.0f32; 67]);
    for op in [ReduceOp::Max, ReduceOp::Min] {
        assert_eq!(bits(&reduce(DataType::Float32, op, None, &[&neg, &pos])), bits(&neg), "{op:?} (-0, +0)");
        assert_eq!(bits(&reduce(DataType::Float32, op, None, &[&pos, &neg])), bits(&pos), "{op:?} (+0, -0)");
        let (n64, p64) = ([-0.0f64; 9], [0.0f64; 9]);
        let r = reduce(DataType::Float64, op, None, &[&n64, &p64, &p64]);
        assert!(r.iter().all(|x| x.to_bits() == (-0.0f64).to_bits()), "{op:?} f64: {r:?}");
        let h = [f16::NEG_ZERO; 33];
        let r = reduce(DataType::Float16, op, None, &[&h, &[f16::ZERO; 33]]);
        assert!(r.iter().all(|x| x.to_bits() == f16::NEG_ZERO.to_bits()), "{op:?} f16: {r:?}");
    }
}

/// A `{ f32 value; i32 index; }` pair's bytes.
fn pair(v: f32, i: i32) -> [u8; 8] {
    let mut p = [0u8; 8];
    p[..4].copy_from_slice(&v.to_le_bytes());
    p[4..].copy_from_slice(&i.to_le_bytes());
    p
}

#[test]
fn loc_ties_take_the_lower_index_and_nan_never_wins() {
    let (a, b, c) = (pair(1.0, 7), pair(1.0, 3), pair(0.5, 1));
    let nan = |i| pair(f32::NAN, i);
    for op in [ReduceOp::Maxloc, ReduceOp::Minloc] {
        let r: Vec<[u8; 8]> = reduce(DataType::Float32, op, None, &[&[a, nan(0), nan(5)], &[b, a, nan(2)]]);
        assert_eq!(r[0], b, "{op}: tie keeps index 3");
        assert_eq!(r[1], a, "{op}: NaN never beats a number");
        assert_eq!(&r[2][4..], &2i32.to_le_bytes(), "{op}: two NaNs keep the lower index");
    }
    let r: Vec<[u8; 8]> = reduce(DataType::Float32, ReduceOp::Minloc, None, &[&[a], &[c], &[b]]);
    assert_eq!(r[0], c);
    // int64 pairs: 16 bytes, index at 8, 4 bytes of tail padding written as zero.
    let p64 = |v: i64, i: i32| {
        let mut p = [0xeeu8; 16];
        p[..8].copy_from_slice(&v.to_le_bytes());
        p[8..12].copy_from_slice(&i.to_le_bytes());
        p
    };
    let r: Vec<[u8; 16]> = reduce(DataType::Int64, ReduceOp::Maxloc, None, &[&[p64(-1, 9)], &[p64(-1, -4)]]);
    let mut want = p64(-1, -4);
    want[12..].fill(0);
    assert_eq!(r[0], want);
}

#[test]
fn narrow_floats_are_rounded_once() {
    // 1 + 2^-8 + 2^-8 = 1 + 2^-7 exactly; rounding after each step would give 1.
    let b = |x: f32| bf16::from_f32(x);
    let r = reduce(DataType::Bfloat16, ReduceOp::Sum, None, &[&[b(1.0)], &[b(2f32.powi(-8))], &[b(2f32.powi(-8))]]);
    assert_eq!(r, [b(1.0 + 2f32.powi(-7))]);
    let h = |x: f32| f16::from_f32(x);
    let r = reduce(DataType::Float16, ReduceOp::Sum, None, &[&[h(1.0)], &[h(2f32.powi(-11))], &[h(2f32.powi(-11))]]);
    assert_eq!(r, [h(1.0 + 2f32.powi(-10))]);
    let e = fp8::f32_to_e4m3;
    let r = reduce(DataType::Float8E4M3, ReduceOp::Sum, None, &[&[e(1.0)], &[e(0.0625)], &[e(0.0625)]]);
    assert_eq!(r, [e(1.125)]);
}

#[test]
fn narrow_overflow_saturates_or_goes_infinite() {
    let e4 = fp8::f32_to_e4m3;
    assert_eq!(reduce(DataType::Float8E4M3, ReduceOp::Sum, None, &[&[e4(448.0)], &[e4(448.0)]]), [fp8::E4M3_MAX]);
    let e5 = fp8::f32_to_e5m2;
    assert_eq!(reduce(DataType::Float8E5M2, ReduceOp::Sum, None, &[&[e5(57344.0)], &[e5(57344.0)]]), [fp8::E5M2_INF]);
    let h = f16::from_f32(65504.0);
    assert_eq!(reduce(DataType::Float16, ReduceOp::Sum, None, &[&[h], &[h]]), [f16::INFINITY]);
}

#[test]
fn in_place_with_no_other_source_finishes_dst() {
    let mut v = [0i16, 5, -3];
    let s = spec(DataType::Int16, ReduceOp::Lor, 3, None);
    reduce_slices_in_place(bytemuck::cast_slice_mut(&mut v), &[], &s).unwrap();
    assert_eq!(v, [0, 1, 1]);
    let mut f = [3.0f32, -6.0];
    let s = spec(DataType::Float32, ReduceOp::Avg, 2, Some(3));
    reduce_slices_in_place(bytemuck::cast_slice_mut(&mut f), &[], &s).unwrap();
    assert_eq!(f, [1.0, -2.0]);
}

#[test]
fn unaligned_operands_give_the_same_result() {
    let a: Vec<f64> = (0..3000).map(|i| f64::from(i) * 0.5).collect();
    let b: Vec<f64> = (0..3000).map(|i| f64::from(i) * -0.25).collect();
    let aligned = reduce(DataType::Float64, ReduceOp::Sum, None, &[&a, &b]);
    for off in 1..8 {
        let ua = Buf::from_bytes(bytemuck::cast_slice(&a), off);
        let ub = Buf::from_bytes(bytemuck::cast_slice(&b), 8 - off);
        let mut dst = Buf::new(a.len() * 8, off);
        reduce_slices(dst.bytes_mut(), &[ua.bytes(), ub.bytes()], &spec(DataType::Float64, ReduceOp::Sum, 3000, None))
            .unwrap();
        assert_eq!(dst.bytes(), bytemuck::cast_slice::<f64, u8>(&aligned), "offset {off}");
    }
}

#[test]
fn refused_combinations_name_dtype_and_op() {
    let mut dst = [0u8; 64];
    let src = [0u8; 64];
    let ordering_complex128 = if ferrocoll_core::HOST_FLOAT128 { Status::InvalidParam } else { Status::NotSupported };
    let cases = [
        (DataType::Float128, ReduceOp::Maxloc, Status::NotSupported),
        (DataType::Float128Complex, ReduceOp::Max, ordering_complex128),
        (DataType::Float32, ReduceOp::Band, Status::InvalidParam),
        (DataType::Bfloat16, ReduceOp::Lxor, Status::InvalidParam),
        (DataType::Float64Complex, ReduceOp::Max, Status::InvalidParam),
        (DataType::Float32Complex, ReduceOp::Maxloc, Status::InvalidParam),
    ];
    for (dt, op, status) in cases {
        let count = 64 / op.element_size(dt);
        for r in [
            reduce_slices(&mut dst, &[&src], &spec(dt, op, count, None)),
            reduce_slices_in_place(&mut dst, &[], &spec(dt, op, count, None)),
        ] {
            let err = r.unwrap_err();
            assert_eq!(err.status(), status, "{dt} {op}: {err}");
            let msg = err.to_string();
            assert!(msg.contains(dt.name()) && msg.contains(op.name()), "{msg}");
        }
    }
}

#[test]
fn bad_shapes_are_errors() {
    let mut dst = [0u8; 16];
    let src = [0u8; 16];
    let s = spec(DataType::Int32, ReduceOp::Sum, 4, None);
    let err = reduce_slices(&mut dst, &[], &s).unwrap_err();
    assert!(err.to_string().contains("no"), "{err}");
    let err = reduce_slices(&mut dst[..12], &[&src], &s).unwrap_err();
    assert!(err.to_string().contains("12"), "{err}");
    let err = reduce_slices(&mut dst, &[&src, &src[..8]], &s).unwrap_err();
    assert!(err.to_string().contains("source 1") && err.to_string().contains('8'), "{err}");
    let err = reduce_slices(&mut dst, &[&src], &spec(DataType::Int32, ReduceOp::Avg, 4, Some(0))).unwrap_err();
    assert!(err.to_string().contains("divisor 0"), "{err}");
    let err = reduce_slices(&mut dst, &[&src], &spec(DataType::Int64, ReduceOp::Sum, usize::MAX, None)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidParam);
    // count 0 with empty slices is fine.
    reduce_slices(&mut [], &[&[]], &spec(DataType::Float16, ReduceOp::Prod, 0, None)).unwrap();
}
