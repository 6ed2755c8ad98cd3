//! The expected result of a reduction at one element, computed from every
//! rank's input independently of the library: integers exactly (wrapping in
//! the datatype's width), reals and complexes in `f64` with a tolerance that
//! grows with the datatype's epsilon and the number of ranks.

use ferrocoll::ReduceOp;

use super::codec::{Class, class, epsilon, get_int, get_real, round_real, wrap};
use super::pattern::Inputs;

/// Why an element is wrong: what it holds and what it should.
#[derive(Clone, Debug, PartialEq)]
pub struct Wrong {
    /// The element as found.
    pub got: String,
    /// What was expected (with the tolerance, for floats).
    pub expected: String,
}

/// The reference for one reduction benchmark.
#[derive(Clone, Copy, Debug)]
pub struct Reference {
    /// Inputs (datatype and operation).
    pub inputs: Inputs,
    /// Team size.
    pub ranks: usize,
    /// The operation.
    pub op: ReduceOp,
}

fn loc_index(got: &[u8], at: usize) -> i32 {
    i32::from_le_bytes([got[at], got[at + 1], got[at + 2], got[at + 3]])
}

impl Reference {
    /// Check `got`, the bytes of result element `k`.
    pub fn check(&self, k: u64, got: &[u8]) -> Result<(), Wrong> {
        match class(self.inputs.dtype) {
            Class::Int { bits, signed } => self.check_int(k, got, bits, signed),
            Class::Real => self.check_real(k, got),
            Class::Complex(part) => self.check_complex(k, got, part),
            // float128 reductions where the library refuses them before they run.
            Class::Opaque => Ok(()),
        }
    }

    fn index_check(&self, got: &[u8], want: usize) -> Result<(), Wrong> {
        let idx = loc_index(got, self.inputs.dtype.loc_index_offset());
        if idx as i64 == want as i64 {
            Ok(())
        } else {
            Err(Wrong { got: format!("index {idx}"), expected: format!("index {want}") })
        }
    }

    fn check_int(&self, k: u64, got: &[u8], bits: u32, signed: bool) -> Result<(), Wrong> {
        use ReduceOp::*;
        let w = |v: i128| wrap(v, bits, signed);
        let xs: Vec<i128> = (0..self.ranks).map(|j| w(i128::from(self.inputs.value(j, k, 0)))).collect();
        let nz = xs.iter().filter(|&&x| x != 0).count();
        let sum = xs.iter().fold(0i128, |a, &x| w(a.wrapping_add(x)));
        let (want, at) = match self.op {
            Sum => (sum, None),
            Avg => (w(sum / self.ranks.max(1) as i128), None),
            Prod => (xs.iter().fold(1i128, |a, &x| w(a.wrapping_mul(x))), None),
            Max | Maxloc => best(&xs, |a, b| a > b),
            Min | Minloc => best(&xs, |a, b| a < b),
            // Among one rank its value as it is (UCC's TL/SELF and MPI copy it).
            Land | Lor | Lxor if xs.len() == 1 => (xs[0], None),
            Land => (i128::from(nz == xs.len()), None),
            Lor => (i128::from(nz > 0), None),
            Lxor => (i128::from(nz % 2 == 1), None),
            Band => (xs.iter().fold(-1i128, |a, &x| a & x), None),
            Bor => (xs.iter().fold(0i128, |a, &x| a | x), None),
            Bxor => (xs.iter().fold(0i128, |a, &x| a ^ x), None),
        };
        let want = w(want);
        let v = get_int(&got[..self.inputs.dtype.size()], signed);
        if v != want {
            return Err(Wrong { got: v.to_string(), expected: want.to_string() });
        }
        match (self.op.is_loc(), at) {
            (true, Some(at)) => self.index_check(got, at),
            _ => Ok(()),
        }
    }

    fn check_real(&self, k: u64, got: &[u8]) -> Result<(), Wrong> {
        use ReduceOp::*;
        let dt = self.inputs.dtype;
        let xs: Vec<f64> = (0..self.ranks).map(|j| round_real(dt, self.inputs.value(j, k, 0) as f64)).collect();
        let n = self.ranks.max(1) as f64;
        let steps = n + 1.0;
        let abs_sum: f64 = xs.iter().map(|x| x.abs()).sum();
        let eps = epsilon(dt);
        let (want, tol, at) = match self.op {
            Sum => (xs.iter().sum::<f64>(), eps * steps * abs_sum, None),
            Avg => (xs.iter().sum::<f64>() / n, eps * steps * abs_sum / n + eps * abs_sum / n, None),
            Prod => {
                let p: f64 = xs.iter().product();
                (p, eps * steps * p.abs(), None)
            }
            Max | Maxloc => {
                let (v, at) = best_f(&xs, |a, b| a > b);
                (v, 0.0, at)
            }
            Min | Minloc => {
                let (v, at) = best_f(&xs, |a, b| a < b);
                (v, 0.0, at)
            }
            _ => (f64::NAN, 0.0, None),
        };
        let v = get_real(got, dt);
        let stored = round_real(dt, want);
        let close = v == stored || (v - want).abs() <= tol;
        if !close {
            return Err(Wrong { got: format!("{v}"), expected: format!("{want} ± {tol:.3e}") });
        }
        match (self.op.is_loc(), at) {
            (true, Some(at)) => self.index_check(got, at),
            _ => Ok(()),
        }
    }

    fn check_complex(&self, k: u64, got: &[u8], part: ferrocoll::DataType) -> Result<(), Wrong> {
        let h = part.size();
        let xs: Vec<(f64, f64)> = (0..self.ranks)
            .map(|j| {
                let re = round_real(part, self.inputs.value(j, k, 0) as f64);
                (re, round_real(part, self.inputs.value(j, k, 1) as f64))
            })
            .collect();
        let n = self.ranks.max(1) as f64;
        let eps = epsilon(part) * 4.0 * (n + 1.0);
        let mag: f64 = xs.iter().map(|(a, b)| a.abs() + b.abs()).sum();
        let sum = xs.iter().fold((0.0, 0.0), |(a, b), (c, d)| (a + c, b + d));
        let (want, tol) = match self.op {
            ReduceOp::Sum => (sum, eps * mag),
            ReduceOp::Avg => ((sum.0 / n, sum.1 / n), eps * mag / n),
            ReduceOp::Prod => {
                let p = xs.iter().fold((1.0, 0.0), |(a, b), (c, d)| (a * c - b * d, a * d + b * c));
                let scale: f64 = xs.iter().map(|(a, b)| a.abs() + b.abs()).product();
                (p, eps * scale)
            }
            _ => ((f64::NAN, f64::NAN), 0.0),
        };
        let v = (get_real(&got[..h], part), get_real(&got[h..2 * h], part));
        let ok = |g: f64, w: f64| g == round_real(part, w) || (g - w).abs() <= tol;
        if ok(v.0, want.0) && ok(v.1, want.1) {
            Ok(())
        } else {
            Err(Wrong {
                got: format!("({}, {})", v.0, v.1), expected: format!("({}, {}) ± {tol:.3e}", want.0, want.1)
            })
        }
    }
}

/// The best value by `better` and the lowest rank holding it.
fn best(xs: &[i128], better: impl Fn(i128, i128) -> bool) -> (i128, Option<usize>) {
    let mut at = 0;
    for (j, &x) in xs.iter().enumerate() {
        if better(x, xs[at]) {
            at = j;
        }
    }
    (xs.get(at).copied().unwrap_or(0), Some(at))
}

fn best_f(xs: &[f64], better: impl Fn(f64, f64) -> bool) -> (f64, Option<usize>) {
    let mut at = 0;
    for (j, &x) in xs.iter().enumerate() {
        if better(x, xs[at]) {
            at = j;
        }
    }
    (xs.get(at).copied().unwrap_or(f64::NAN), Some(at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perftest::codec::{put_int, put_real};
    use ferrocoll::DataType;

    fn reference(dtype: DataType, op: ReduceOp, ranks: usize) -> Reference {
        Reference { inputs: Inputs { dtype, op: Some(op) }, ranks, op }
    }

    #[test]
    fn integer_sum_is_exact_and_wrong_values_are_named() {
        let r = reference(DataType::Int16, ReduceOp::Sum, 3);
        let want: i128 = (0..3).map(|j| i128::from(r.inputs.value(j, 9, 0))).sum();
        let mut b = [0u8; 2];
        put_int(&mut b, want);
        assert!(r.check(9, &b).is_ok());
        put_int(&mut b, want + 1);
        let e = r.check(9, &b).unwrap_err();
        assert_eq!(e.expected, want.to_string());
    }

    #[test]
    fn float_sum_has_a_tolerance_and_nan_fails() {
        let r = reference(DataType::Float32, ReduceOp::Sum, 4);
        let want: f64 = (0..4).map(|j| r.inputs.value(j, 3, 0) as f64).sum();
        let mut b = [0u8; 4];
        put_real(&mut b, DataType::Float32, want);
        assert!(r.check(3, &b).is_ok());
        put_real(&mut b, DataType::Float32, f64::NAN);
        assert!(r.check(3, &b).is_err());
    }

    #[test]
    fn maxloc_wants_the_lowest_rank_among_ties() {
        let r = reference(DataType::Int32, ReduceOp::Maxloc, 5);
        let xs: Vec<i64> = (0..5).map(|j| r.inputs.value(j, 1, 0)).collect();
        let max = *xs.iter().max().unwrap();
        let at = xs.iter().position(|&x| x == max).unwrap();
        let mut b = [0u8; 8];
        put_int(&mut b[..4], i128::from(max));
        b[4..].copy_from_slice(&(at as i32).to_le_bytes());
        assert!(r.check(1, &b).is_ok());
        b[4..].copy_from_slice(&(at as i32 + 1).to_le_bytes());
        assert!(r.check(1, &b).is_err());
    }
}
