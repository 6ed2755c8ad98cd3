//! Random operands that reach the interesting corners of every datatype, and
//! the comparison of a kernel's result with the host's.

use ferrocoll::{DataType, ReduceOp};
use ferrocoll_mc::fp8;
use ferrocoll_tests::rng::Rng;
use half::{bf16, f16};

/// A float that exercises rounding, overflow and the special values.
fn float_value(rng: &mut Rng, op: ReduceOp) -> f64 {
    match rng.below(20) {
        0 => 0.0,
        1 => -0.0,
        2 => f64::INFINITY,
        3 => f64::NEG_INFINITY,
        4 => f64::NAN,
        5 => rng.f64_in(-1e-6, 1e-6),              // subnormal in the narrow formats
        6 => rng.f64_in(-70000.0, 70000.0),        // beyond float8 and f16 range
        7 => f64::from(rng.below(5) as u32) - 2.0, // ties for max/min
        _ if op == ReduceOp::Prod => rng.f64_in(-2.5, 2.5),
        _ => rng.f64_in(-300.0, 300.0),
    }
}

/// One real element of `dtype` (not integer) as bytes.
fn float_bytes(rng: &mut Rng, dtype: DataType, op: ReduceOp) -> Vec<u8> {
    if rng.below(8) == 0 {
        // Any bit pattern: NaN payloads, subnormals, the largest codes.
        let mut b = vec![0u8; dtype.size()];
        rng.fill(&mut b);
        return b;
    }
    let v = float_value(rng, op);
    match dtype {
        DataType::Float16 => f16::from_f64(v).to_bits().to_le_bytes().to_vec(),
        DataType::Bfloat16 => bf16::from_f64(v).to_bits().to_le_bytes().to_vec(),
        DataType::Float32 => (v as f32).to_le_bytes().to_vec(),
        DataType::Float64 => v.to_le_bytes().to_vec(),
        DataType::Float8E4M3 => vec![fp8::f32_to_e4m3(v as f32)],
        DataType::Float8E5M2 => vec![fp8::f32_to_e5m2(v as f32)],
        DataType::Float32Complex => [(v as f32).to_le_bytes(), (float_value(rng, op) as f32).to_le_bytes()].concat(),
        DataType::Float64Complex => [v.to_le_bytes(), float_value(rng, op).to_le_bytes()].concat(),
        other => panic!("no float values for {other}"),
    }
}

/// One integer element: zero often (logical ops), small values (ties), else any bits.
fn int_bytes(rng: &mut Rng, dtype: DataType) -> Vec<u8> {
    let mut b = vec![0u8; dtype.size()];
    match rng.below(10) {
        0..=2 => {}
        3..=4 => {
            // -2..=2 as the type (two's complement).
            let v = rng.below(5) as i64 - 2;
            for (i, x) in b.iter_mut().enumerate() {
                *x = (v >> (8 * i.min(7))) as u8;
            }
        }
        _ => rng.fill(&mut b),
    }
    b
}

/// `count` operand elements (pairs for maxloc/minloc) of `dtype` for `op`, as bytes.
pub fn operand(rng: &mut Rng, dtype: DataType, op: ReduceOp, count: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(count * op.element_size(dtype));
    for _ in 0..count {
        if op.is_loc() {
            // A (value, index) pair with garbage padding: few distinct values
            // and indices, so ties on both are common.
            let mut pair = vec![0u8; dtype.loc_pair_size()];
            rng.fill(&mut pair);
            let value = if dtype.is_integer() {
                let mut v = int_bytes(rng, dtype);
                if rng.below(2) == 0 {
                    v.iter_mut().skip(1).for_each(|x| *x = 0);
                    v[0] = rng.below(3) as u8;
                }
                v
            } else {
                float_bytes(rng, dtype, op)
            };
            pair[..dtype.size()].copy_from_slice(&value);
            let index = rng.below(6) as i32 - 1;
            let at = dtype.loc_index_offset();
            pair[at..at + 4].copy_from_slice(&index.to_le_bytes());
            out.extend_from_slice(&pair);
        } else if dtype.is_integer() {
            out.extend_from_slice(&int_bytes(rng, dtype));
        } else {
            out.extend_from_slice(&float_bytes(rng, dtype, op));
        }
    }
    out
}

/// Whether the `width`-byte float `bytes` of `dtype`'s component type is a NaN.
fn is_nan(dtype: DataType, bytes: &[u8]) -> bool {
    let u = bytes.iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    match dtype {
        DataType::Float16 => u & 0x7fff > 0x7c00,
        DataType::Bfloat16 => u & 0x7fff > 0x7f80,
        DataType::Float32 | DataType::Float32Complex => (u as u32) & 0x7fff_ffff > 0x7f80_0000,
        DataType::Float64 | DataType::Float64Complex => u & 0x7fff_ffff_ffff_ffff > 0x7ff0_0000_0000_0000,
        DataType::Float8E4M3 => u & 0x7f == 0x7f,
        DataType::Float8E5M2 => u & 0x7f > 0x7c,
        _ => false,
    }
}

/// Compare a kernel's output with the host's: bytes equal, except that two
/// NaNs of a float type are equal whatever their payloads (the device does
/// not keep payloads; see the kernels crate's docs). maxloc/minloc copy the
/// winner's bits, so they compare exactly.
pub fn compare(dtype: DataType, op: ReduceOp, got: &[u8], want: &[u8]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} bytes, expected {}", got.len(), want.len()));
    }
    let width = if op.is_loc() {
        op.element_size(dtype)
    } else if dtype.is_complex() {
        dtype.size() / 2
    } else {
        dtype.size()
    };
    for (i, (g, w)) in got.chunks(width).zip(want.chunks(width)).enumerate() {
        let nan_pair = !op.is_loc() && !dtype.is_integer() && is_nan(dtype, g) && is_nan(dtype, w);
        if g != w && !nan_pair {
            let elem = if dtype.is_complex() && !op.is_loc() { i / 2 } else { i };
            return Err(format!("element {elem}: kernel {g:02x?}, host {w:02x?}"));
        }
    }
    Ok(())
}
