//! The reference the kernels are checked against, computed independently:
//! integers on 128-bit patterns masked to the width, floats in `f64`
//! (narrow results rounded once to the type), loc pairs by the stated rules.

use ferrocoll_core::{DataType, ReduceOp};
use half::{bf16, f16};

use super::float_bytes;
use crate::fp8;

/// Little-endian bytes (at most 16) as zero-extended bits.
fn bits(b: &[u8]) -> u128 {
    let mut a = [0u8; 16];
    a[..b.len()].copy_from_slice(b);
    u128::from_le_bytes(a)
}

fn sign_extend(x: u128, width: u32) -> i128 {
    let s = 128 - width;
    ((x << s) as i128) >> s
}

/// The value of a real float element, exactly, in f64.
pub(super) fn float_value(dt: DataType, b: &[u8]) -> f64 {
    let x = bits(b);
    match dt {
        DataType::Float16 => f16::from_bits(x as u16).to_f64(),
        DataType::Bfloat16 => bf16::from_bits(x as u16).to_f64(),
        DataType::Float32 => f64::from(f32::from_bits(x as u32)),
        DataType::Float64 => f64::from_bits(x as u64),
        #[cfg(any(
            all(target_arch = "x86_64", target_os = "linux"),
            all(target_arch = "aarch64", target_os = "linux")
        ))]
        DataType::Float128 => crate::long_double::to_f64(&x.to_le_bytes()),
        DataType::Float8E4M3 => f64::from(fp8::e4m3_to_f32(x as u8)),
        DataType::Float8E5M2 => f64::from(fp8::e5m2_to_f32(x as u8)),
        _ => panic!("{dt} is not a real float"),
    }
}

fn int_result(dt: DataType, op: ReduceOp, elems: &[&[u8]], divisor: Option<usize>) -> Vec<u8> {
    let width = dt.size() as u32 * 8;
    let mask = if width == 128 { u128::MAX } else { (1u128 << width) - 1 };
    let signed = dt.is_signed_integer();
    let less = |a: u128, b: u128| if signed { sign_extend(a, width) < sign_extend(b, width) } else { a < b };
    let truth = |a: u128| u128::from(a != 0);
    let mut acc = bits(elems[0]);
    if matches!(op, ReduceOp::Land | ReduceOp::Lor | ReduceOp::Lxor) {
        acc = truth(acc);
    }
    for e in &elems[1..] {
        let x = bits(e);
        acc = match op {
            ReduceOp::Sum | ReduceOp::Avg => acc.wrapping_add(x) & mask,
            ReduceOp::Prod => acc.wrapping_mul(x) & mask,
            ReduceOp::Max => {
                if less(acc, x) {
                    x
                } else {
                    acc
                }
            }
            ReduceOp::Min => {
                if less(x, acc) {
                    x
                } else {
                    acc
                }
            }
            ReduceOp::Land => acc & truth(x),
            ReduceOp::Lor => acc | truth(x),
            ReduceOp::Lxor => acc ^ truth(x),
            ReduceOp::Band => acc & x,
            ReduceOp::Bor => acc | x,
            ReduceOp::Bxor => acc ^ x,
            _ => unreachable!(),
        };
    }
    if let (ReduceOp::Avg, Some(n)) = (op, divisor) {
        acc = if signed { (sign_extend(acc, width) / n as i128) as u128 & mask } else { acc / n as u128 };
    }
    acc.to_le_bytes()[..dt.size()].to_vec()
}

/// Sign-magnitude code → position on the number line (adjacent values differ by 1).
fn ordinal(code: u128, width: u32) -> i128 {
    let sign = 1u128 << (width - 1);
    let mag = (code & (sign - 1)) as i128;
    if code & sign != 0 { -mag } else { mag }
}

fn real_reference(op: ReduceOp, xs: &[f64], divisor: Option<usize>) -> f64 {
    let mut acc = xs[0];
    for &x in &xs[1..] {
        acc = match op {
            ReduceOp::Sum | ReduceOp::Avg => acc + x,
            ReduceOp::Prod => acc * x,
            ReduceOp::Max => acc.max(x),
            ReduceOp::Min => acc.min(x),
            _ => unreachable!(),
        };
    }
    match (op, divisor) {
        (ReduceOp::Avg, Some(n)) => acc / n as f64,
        _ => acc,
    }
}

/// Error bound for a float result from the f64 reference.
fn tolerance(op: ReduceOp, xs: &[f64], divisor: Option<usize>, eps: f64) -> f64 {
    let n = xs.len() as f64;
    let bound = match op {
        ReduceOp::Max | ReduceOp::Min => 0.0,
        ReduceOp::Prod => n * eps * xs.iter().map(|x| x.abs()).product::<f64>(),
        _ => n * eps * xs.iter().map(|x| x.abs()).sum::<f64>(),
    };
    match (op, divisor) {
        (ReduceOp::Avg, Some(d)) => bound / d as f64 * 2.0,
        _ => bound,
    }
}

fn float_check(dt: DataType, op: ReduceOp, elems: &[&[u8]], got: &[u8], divisor: Option<usize>) -> Result<(), String> {
    let xs: Vec<f64> = elems.iter().map(|e| float_value(dt, e)).collect();
    let want = real_reference(op, &xs, divisor);
    let g = float_value(dt, got);
    if dt.is_narrow_float() {
        // The f64 result rounded once to the type, give or take one ulp
        // (max/min pick an input: exact).
        let width = dt.size() as u32 * 8;
        let (w, gc) = (bits(&float_bytes(dt, want)), bits(got));
        let slack = if matches!(op, ReduceOp::Max | ReduceOp::Min) { 0 } else { 1 };
        let both_nan = want.is_nan() && g.is_nan();
        if both_nan || (!g.is_nan() && (ordinal(w, width) - ordinal(gc, width)).abs() <= slack) {
            return Ok(());
        }
        return Err(format!("got {g} ({gc:#x}), want {want} rounded to {w:#x}, inputs {xs:?}"));
    }
    let eps = if dt == DataType::Float32 { f64::from(f32::EPSILON) } else { f64::EPSILON };
    let tol = tolerance(op, &xs, divisor, eps);
    if (g - want).abs() <= tol || (g == want) {
        Ok(())
    } else {
        Err(format!("got {g}, want {want} ± {tol}, inputs {xs:?}"))
    }
}

fn complex_check(
    dt: DataType,
    op: ReduceOp,
    elems: &[&[u8]],
    got: &[u8],
    divisor: Option<usize>,
) -> Result<(), String> {
    let part = match dt {
        DataType::Float32Complex => DataType::Float32,
        DataType::Float128Complex => DataType::Float128,
        _ => DataType::Float64,
    };
    let ps = part.size();
    let z: Vec<(f64, f64)> = elems.iter().map(|e| (float_value(part, &e[..ps]), float_value(part, &e[ps..]))).collect();
    let (gr, gi) = (float_value(part, &got[..ps]), float_value(part, &got[ps..]));
    let eps = if part == DataType::Float32 { f64::from(f32::EPSILON) } else { f64::EPSILON };
    let (mut wr, mut wi) = z[0];
    for &(r, i) in &z[1..] {
        (wr, wi) = match op {
            ReduceOp::Sum | ReduceOp::Avg => (wr + r, wi + i),
            ReduceOp::Prod => (wr * r - wi * i, wr * i + wi * r),
            _ => unreachable!(),
        };
    }
    let magnitudes: Vec<f64> = z.iter().map(|(r, i)| r.abs() + i.abs()).collect();
    let mut tol = tolerance(if op == ReduceOp::Prod { op } else { ReduceOp::Sum }, &magnitudes, None, eps) * 4.0;
    if let (ReduceOp::Avg, Some(n)) = (op, divisor) {
        (wr, wi, tol) = (wr / n as f64, wi / n as f64, tol / n as f64 * 2.0);
    }
    if (gr - wr).abs() <= tol && (gi - wi).abs() <= tol {
        Ok(())
    } else {
        Err(format!("got ({gr}, {gi}), want ({wr}, {wi}) ± {tol}, inputs {z:?}"))
    }
}

/// The pair maxloc/minloc must produce from `elems` (padding zero).
pub(super) fn loc_result(dt: DataType, op: ReduceOp, elems: &[&[u8]]) -> Vec<u8> {
    let (size, off) = (dt.size(), dt.loc_index_offset());
    let index = |e: &[u8]| i32::from_le_bytes([e[off], e[off + 1], e[off + 2], e[off + 3]]);
    // Ordered key: NaN below everything for maxloc, above for minloc; never a winner over a number.
    let key = |e: &[u8]| -> (bool, f64, i128, u128) {
        let v = &e[..size];
        if dt.is_integer() {
            let b = bits(v);
            (false, 0.0, sign_extend(b, size as u32 * 8), b)
        } else {
            let f = float_value(dt, v);
            (f.is_nan(), f, 0, 0)
        }
    };
    let better = |a: &[u8], b: &[u8]| -> bool {
        let (ka, kb) = (key(a), key(b));
        let lower = index(a) < index(b);
        match (ka.0, kb.0) {
            (true, true) => return lower,
            (true, false) => return false,
            (false, true) => return true,
            _ => {}
        }
        let ord = if dt.is_signed_integer() {
            ka.2.cmp(&kb.2)
        } else if dt.is_integer() {
            ka.3.cmp(&kb.3)
        } else {
            ka.1.partial_cmp(&kb.1).unwrap()
        };
        let ord = if op == ReduceOp::Maxloc { ord } else { ord.reverse() };
        ord.is_gt() || (ord.is_eq() && lower)
    };
    let mut best = elems[0];
    for e in &elems[1..] {
        if better(e, best) {
            best = e;
        }
    }
    let mut out = vec![0u8; dt.loc_pair_size()];
    out[..size].copy_from_slice(&best[..size]);
    out[off..off + 4].copy_from_slice(&best[off..off + 4]);
    out
}

/// Check every element of `got` against the reference of `srcs` (all operands, in order).
pub(super) fn verify(
    dt: DataType,
    op: ReduceOp,
    srcs: &[&[u8]],
    got: &[u8],
    divisor: Option<usize>,
) -> Result<(), String> {
    let esz = op.element_size(dt);
    for i in 0..got.len() / esz {
        let elems: Vec<&[u8]> = srcs.iter().map(|s| &s[i * esz..(i + 1) * esz]).collect();
        let g = &got[i * esz..(i + 1) * esz];
        let r = if op.is_loc() {
            let want = loc_result(dt, op, &elems);
            if want == g { Ok(()) } else { Err(format!("got pair {g:02x?}, want {want:02x?}")) }
        } else if dt.is_integer() {
            let want = int_result(dt, op, &elems, divisor);
            if want == g { Ok(()) } else { Err(format!("got {g:02x?}, want {want:02x?}, inputs {elems:02x?}")) }
        } else if dt.is_complex() {
            complex_check(dt, op, &elems, g, divisor)
        } else {
            float_check(dt, op, &elems, g, divisor)
        };
        r.map_err(|e| format!("element {i}: {e}"))?;
    }
    Ok(())
}
