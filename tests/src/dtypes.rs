//! Test inputs per datatype and an independent reference for reductions:
//! integers exact (wrapping, in u128), floats in f64, complex in f64 pairs
//! (float128, C's `long double`, too: its inputs are f64s).
//!
//! Inputs are chosen so that the exact result is representable and finite
//! (small values for sums, values near 1 for products, a handful of values
//! for maxloc/minloc so that ties happen), and each element is a hash of
//! (seed, rank, index) so a rank can compute any other rank's input.

use ferrocoll::{DataType, ReduceOp};

use crate::floats;
use crate::rng::hash;

/// A decoded element.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    /// Integer bits (two's complement, truncated to the datatype's width).
    Int(u128),
    /// A real float.
    Float(f64),
    /// Real and imaginary parts.
    Complex(f64, f64),
    /// (value, index) pair of maxloc/minloc.
    Loc(LocValue, i32),
}

/// The value of a maxloc/minloc pair.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LocValue {
    /// Integer bits.
    Int(u128),
    /// A real float.
    Float(f64),
}

/// Bytes of one element of `dt` (pairs for maxloc/minloc).
pub fn elem_size(dt: DataType, op: Option<ReduceOp>) -> usize {
    op.map_or(dt.size(), |o| o.element_size(dt))
}

fn width_bits(dt: DataType) -> u32 {
    (dt.size() * 8) as u32
}

fn truncate(v: u128, dt: DataType) -> u128 {
    let w = width_bits(dt);
    if w >= 128 { v } else { v & ((1u128 << w) - 1) }
}

/// The integer as a signed value (sign-extended from its width) or unsigned.
fn int_value(bits: u128, dt: DataType) -> i128 {
    let w = width_bits(dt);
    if dt.is_signed_integer() && w < 128 {
        let shift = 128 - w;
        ((bits << shift) as i128) >> shift
    } else {
        bits as i128
    }
}

fn int_less(a: u128, b: u128, dt: DataType) -> bool {
    if dt.is_signed_integer() { int_value(a, dt) < int_value(b, dt) } else { a < b }
}

/// Float8 codes usable as inputs: (e4m3 general, e4m3 near one, e5m2 general, e5m2 near one).
static FP8_CODES: std::sync::LazyLock<[Vec<u8>; 4]> = std::sync::LazyLock::new(|| {
    let pick = |decode: fn(u8) -> f64, near_one: bool| -> Vec<u8> {
        (0..=255u8)
            .filter(|&c| {
                let v = decode(c);
                v.is_finite() && if near_one { (0.85..=1.2).contains(&v) } else { v.abs() <= 4.0 }
            })
            .collect()
    };
    [pick(floats::e4m3, false), pick(floats::e4m3, true), pick(floats::e5m2, false), pick(floats::e5m2, true)]
});

fn fp8_code(dt: DataType, near_one: bool, h: u64) -> u8 {
    let codes = &FP8_CODES[usize::from(dt == DataType::Float8E5M2) * 2 + usize::from(near_one)];
    codes[(h % codes.len() as u64) as usize]
}

/// Write a float input exactly representable in `dt`, suited to `op`.
fn put_float(dt: DataType, op: Option<ReduceOp>, h: u64, out: &mut [u8]) {
    match dt {
        DataType::Float8E4M3 | DataType::Float8E5M2 => out[0] = fp8_code(dt, matches!(op, Some(ReduceOp::Prod)), h),
        _ => write_float(dt, gen_float(dt, op, h), out),
    }
}

/// A float value exactly representable in `dt`, suited to `op`.
fn gen_float(dt: DataType, op: Option<ReduceOp>, h: u64) -> f64 {
    use DataType::*;
    let near_one = matches!(op, Some(ReduceOp::Prod));
    match dt {
        Float8E4M3 => floats::e4m3(fp8_code(dt, near_one, h)),
        Float8E5M2 => floats::e5m2(fp8_code(dt, near_one, h)),
        _ if near_one => [0.75, 0.875, 1.0, 1.125, 1.25][(h % 5) as usize],
        Float16 | Bfloat16 => ((h % 201) as f64 - 100.0) / 8.0,
        _ => ((h % 20001) as f64 - 10000.0) / 64.0,
    }
}

fn write_float(dt: DataType, v: f64, out: &mut [u8]) {
    use DataType::*;
    match dt {
        Float16 => out.copy_from_slice(&half::f16::from_f64(v).to_bits().to_le_bytes()),
        Bfloat16 => out.copy_from_slice(&half::bf16::from_f64(v).to_bits().to_le_bytes()),
        Float32 | Float32Complex => out.copy_from_slice(&(v as f32).to_le_bytes()),
        Float64 | Float64Complex => out.copy_from_slice(&v.to_le_bytes()),
        Float128 | Float128Complex => out.copy_from_slice(&floats::long_double_bytes(v)),
        // float8 inputs are written as codes by put_float.
        _ => {}
    }
}

fn read_float(dt: DataType, b: &[u8]) -> f64 {
    use DataType::*;
    match dt {
        Float16 => half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        Bfloat16 => half::bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        Float32 | Float32Complex => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Float64 | Float64Complex => f64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])),
        Float128 | Float128Complex => floats::long_double_value(b),
        Float8E4M3 => floats::e4m3(b[0]),
        Float8E5M2 => floats::e5m2(b[0]),
        _ => f64::NAN,
    }
}

fn read_int(b: &[u8]) -> u128 {
    let mut w = [0u8; 16];
    w[..b.len()].copy_from_slice(b);
    u128::from_le_bytes(w)
}

/// Write element `idx` of `rank`'s input for a case into `out` (`elem_size` bytes).
pub fn input(dt: DataType, op: Option<ReduceOp>, seed: u64, rank: usize, idx: usize, out: &mut [u8]) {
    let h = hash(&[seed, rank as u64, idx as u64]);
    let h2 = hash(&[h, 1]);
    out.fill(0);
    let reduced = op.is_some_and(|op| op.check_dtype(dt).is_ok());
    if !reduced {
        // Data movement (or a reduction refused before it runs): any bytes.
        for (i, chunk) in out.chunks_mut(8).enumerate() {
            let w = hash(&[h, i as u64 + 7]).to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
        return;
    }
    let op = op.unwrap_or(ReduceOp::Sum);
    let es = dt.size();
    if op.is_loc() {
        let sub = Some(ReduceOp::Max);
        if dt.is_integer() {
            out[..es].copy_from_slice(&((h % 4) as u128).to_le_bytes()[..es]);
        } else {
            put_float(dt, sub, h % 4, &mut out[..es]);
        }
        let at = dt.loc_index_offset();
        out[at..at + 4].copy_from_slice(&((h2 % 1000) as i32).to_le_bytes());
        return;
    }
    if dt.is_integer() {
        let bits: u128 = match op {
            ReduceOp::Land | ReduceOp::Lor | ReduceOp::Lxor => [0u128, 1, u128::from(h2)][(h % 3) as usize],
            _ => (u128::from(h) << 64) | u128::from(h2),
        };
        out.copy_from_slice(&truncate(bits, dt).to_le_bytes()[..es]);
    } else if dt.is_complex() {
        let half = es / 2;
        put_float(dt, Some(op), h, &mut out[..half]);
        if op == ReduceOp::Prod {
            write_float(dt, [-0.25, 0.0, 0.125, 0.25][(h2 % 4) as usize], &mut out[half..]);
        } else {
            put_float(dt, Some(op), h2, &mut out[half..]);
        }
    } else {
        put_float(dt, Some(op), h, out);
    }
}

/// Decode one reduced element.
pub fn decode(dt: DataType, op: ReduceOp, b: &[u8]) -> Val {
    let es = dt.size();
    if op.is_loc() {
        let at = dt.loc_index_offset();
        let idx = i32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let v =
            if dt.is_integer() { LocValue::Int(read_int(&b[..es])) } else { LocValue::Float(read_float(dt, &b[..es])) };
        return Val::Loc(v, idx);
    }
    if dt.is_integer() {
        Val::Int(read_int(&b[..es]))
    } else if dt.is_complex() {
        Val::Complex(read_float(dt, &b[..es / 2]), read_float(dt, &b[es / 2..es]))
    } else {
        Val::Float(read_float(dt, b))
    }
}

fn loc_better(a: &LocValue, ai: i32, b: &LocValue, bi: i32, max: bool, dt: DataType) -> bool {
    let (less, equal) = match (a, b) {
        (LocValue::Int(x), LocValue::Int(y)) => (int_less(*x, *y, dt), x == y),
        (LocValue::Float(x), LocValue::Float(y)) => (x < y, x == y),
        _ => (false, false),
    };
    let greater = !less && !equal;
    if equal {
        ai < bi
    } else if max {
        greater
    } else {
        less
    }
}

/// The reduction of `vals` (one per rank, in any order) computed independently.
pub fn reduce_ref(dt: DataType, op: ReduceOp, vals: &[Val]) -> Val {
    use ReduceOp::*;
    let n = vals.len();
    if op.is_loc() {
        let mut best = vals[0].clone();
        for v in &vals[1..] {
            if let (Val::Loc(bv, bi), Val::Loc(vv, vi)) = (&best, v) {
                if loc_better(vv, *vi, bv, *bi, op == Maxloc, dt) {
                    best = v.clone();
                }
            }
        }
        return best;
    }
    match &vals[0] {
        Val::Int(_) => {
            let ints: Vec<u128> = vals.iter().map(|v| if let Val::Int(x) = v { *x } else { 0 }).collect();
            let t = |x: u128| truncate(x, dt);
            let r = match op {
                Sum | Avg => ints.iter().fold(0u128, |a, &x| t(a.wrapping_add(x))),
                Prod => ints.iter().fold(1u128, |a, &x| t(a.wrapping_mul(x))),
                Max => ints.iter().copied().reduce(|a, x| if int_less(a, x, dt) { x } else { a }).unwrap_or(0),
                Min => ints.iter().copied().reduce(|a, x| if int_less(x, a, dt) { x } else { a }).unwrap_or(0),
                // Among one rank its value as it is (UCC's TL/SELF and MPI copy it).
                Land | Lor | Lxor if n == 1 => ints[0],
                Land => u128::from(ints.iter().all(|&x| x != 0)),
                Lor => u128::from(ints.iter().any(|&x| x != 0)),
                Lxor => u128::from(ints.iter().filter(|&&x| x != 0).count() % 2 == 1),
                Band => ints.iter().fold(u128::MAX, |a, &x| a & x),
                Bor => ints.iter().fold(0, |a, &x| a | x),
                Bxor => ints.iter().fold(0, |a, &x| a ^ x),
                Maxloc | Minloc => 0,
            };
            let r = if op == Avg {
                let q = if dt.is_signed_integer() { (int_value(r, dt) / n as i128) as u128 } else { r / n as u128 };
                t(q)
            } else {
                t(r)
            };
            Val::Int(r)
        }
        Val::Float(_) => {
            let fs: Vec<f64> = vals.iter().map(|v| if let Val::Float(x) = v { *x } else { f64::NAN }).collect();
            Val::Float(match op {
                Sum => fs.iter().sum(),
                Avg => fs.iter().sum::<f64>() / n as f64,
                Prod => fs.iter().product(),
                Max => fs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                Min => fs.iter().copied().fold(f64::INFINITY, f64::min),
                _ => f64::NAN,
            })
        }
        Val::Complex(..) => {
            let cs: Vec<(f64, f64)> =
                vals.iter().map(|v| if let Val::Complex(a, b) = v { (*a, *b) } else { (0.0, 0.0) }).collect();
            let sum = cs.iter().fold((0.0, 0.0), |a, c| (a.0 + c.0, a.1 + c.1));
            match op {
                Sum => Val::Complex(sum.0, sum.1),
                Avg => Val::Complex(sum.0 / n as f64, sum.1 / n as f64),
                Prod => {
                    let p = cs.iter().fold((1.0, 0.0), |a, c| (a.0 * c.0 - a.1 * c.1, a.0 * c.1 + a.1 * c.0));
                    Val::Complex(p.0, p.1)
                }
                _ => Val::Complex(f64::NAN, f64::NAN),
            }
        }
        Val::Loc(..) => vals[0].clone(),
    }
}

/// The reference result of one element and the magnitude its rounding
/// errors scale with.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    /// Exact (integers) or float64 result.
    pub val: Val,
    /// Scale of the float tolerance (Σ|x| for sums, |result| for products).
    pub scale: f64,
    /// Number of contributions.
    pub n: usize,
}

/// The reference reduction of `contrib` with its tolerance scale.
pub fn expected(dt: DataType, op: ReduceOp, contrib: &[Val]) -> Expected {
    let n = contrib.len();
    let val = reduce_ref(dt, op, contrib);
    let scale = match (&val, op) {
        (Val::Float(e), ReduceOp::Prod) => e.abs(),
        (Val::Float(_), _) => contrib.iter().map(|v| if let Val::Float(x) = v { x.abs() } else { 0.0 }).sum(),
        (Val::Complex(..), ReduceOp::Prod) => {
            4.0 * contrib.iter().map(|v| if let Val::Complex(a, b) = v { a.hypot(*b) } else { 1.0 }).product::<f64>()
        }
        (Val::Complex(..), _) => {
            contrib.iter().map(|v| if let Val::Complex(a, b) = v { a.abs() + b.abs() } else { 0.0 }).sum()
        }
        _ => 0.0,
    };
    let scale = if op == ReduceOp::Avg { scale / n as f64 } else { scale };
    Expected { val, scale, n }
}

/// Whether `got` matches `want`; the tolerance for floats grows with the
/// number of contributions (each algorithm step may round) and the dtype's
/// epsilon, relative to the operands' scale, plus the dtype's smallest
/// subnormal per step for results that round near zero (an average of tiny
/// narrow floats may round to zero, whatever its relative error).
pub fn matches(dt: DataType, op: ReduceOp, got: &Val, want: &Expected) -> bool {
    let eps = floats::epsilon(dt);
    let steps = want.n as f64 + 1.0;
    let close = |g: f64, e: f64| {
        if g.is_nan() || e.is_nan() {
            return false;
        }
        (g - e).abs() <= steps * (eps * want.scale + floats::min_subnormal(dt))
    };
    match (got, &want.val) {
        (Val::Int(g), Val::Int(e)) => g == e,
        (Val::Loc(gv, gi), Val::Loc(ev, ei)) => gv == ev && gi == ei,
        (Val::Float(g), Val::Float(e)) => match op {
            ReduceOp::Max | ReduceOp::Min => g == e,
            _ => close(*g, *e),
        },
        (Val::Complex(gr, gi), Val::Complex(er, ei)) => close(*gr, *er) && close(*gi, *ei),
        _ => false,
    }
}

/// Every (datatype, op) pair with a defined reduction on host memory.
pub fn reduction_pairs() -> Vec<(DataType, ReduceOp)> {
    DataType::ALL
        .iter()
        .flat_map(|&dt| ReduceOp::ALL.iter().map(move |&op| (dt, op)))
        .filter(|(dt, op)| op.check_dtype(*dt).is_ok())
        .collect()
}

/// Every (datatype, op) pair with a defined reduction on device memory
/// (the host's but float128).
pub fn device_reduction_pairs() -> Vec<(DataType, ReduceOp)> {
    reduction_pairs().into_iter().filter(|(dt, op)| op.check_device_dtype(*dt).is_ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_reference_wraps_and_divides() {
        let dt = DataType::Int8;
        let v = |x: i8| Val::Int(x as u8 as u128);
        assert_eq!(reduce_ref(dt, ReduceOp::Sum, &[v(100), v(100)]), v(-56));
        assert_eq!(reduce_ref(dt, ReduceOp::Max, &[v(-3), v(2)]), v(2));
        assert_eq!(reduce_ref(dt, ReduceOp::Avg, &[v(-7), v(0)]), v(-3));
        assert_eq!(reduce_ref(DataType::Uint8, ReduceOp::Max, &[Val::Int(200), Val::Int(3)]), Val::Int(200));
        assert_eq!(reduce_ref(DataType::Uint8, ReduceOp::Lor, &[Val::Int(200), Val::Int(3)]), Val::Int(1));
        assert_eq!(reduce_ref(DataType::Uint8, ReduceOp::Lor, &[Val::Int(200)]), Val::Int(200), "one rank: a copy");
    }

    #[test]
    fn loc_ties_take_the_lowest_index() {
        let p = |v: f64, i| Val::Loc(LocValue::Float(v), i);
        assert_eq!(reduce_ref(DataType::Float32, ReduceOp::Maxloc, &[p(2.0, 5), p(2.0, 3), p(1.0, 0)]), p(2.0, 3));
        assert_eq!(reduce_ref(DataType::Float32, ReduceOp::Minloc, &[p(2.0, 5), p(1.0, 9), p(1.0, 4)]), p(1.0, 4));
    }

    #[test]
    fn generated_floats_round_trip() {
        for (dt, op) in reduction_pairs() {
            let es = elem_size(dt, Some(op));
            let mut b = vec![0u8; es];
            for i in 0..50 {
                input(dt, Some(op), 3, 1, i, &mut b);
                let v = decode(dt, op, &b);
                let again = match &v {
                    Val::Float(x) => x.is_finite(),
                    Val::Complex(a, c) => a.is_finite() && c.is_finite(),
                    _ => true,
                };
                assert!(again, "{dt} {op} generated {v:?}");
            }
        }
        // float128 and its complex (5 and 3 operations) where the host reduces them.
        let float128 = if ReduceOp::Sum.check_dtype(DataType::Float128).is_ok() { 5 + 3 } else { 0 };
        assert_eq!(reduction_pairs().len(), 10 * 13 + 6 * 7 + 2 * 3 + float128);
        assert_eq!(device_reduction_pairs().len(), 10 * 13 + 6 * 7 + 2 * 3);
    }
}
