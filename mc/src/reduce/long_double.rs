//! UCC's float128 is C's `long double` in a 16-byte slot (UCC's CPU
//! executor reduces it as `long double`): on x86-64 Linux the x87 80-bit
//! extended format (64-bit significand with its integer bit, 15-bit
//! exponent, sign; 10 bytes, then 6 of padding), on aarch64 Linux IEEE
//! binary128. [`LongDouble`] does the target's arithmetic with the target's
//! own means — the x87 instructions on x86-64, the soft-float routines of
//! compiler-builtins/libgcc (`__addtf3`, …) on aarch64 — so that a sum or
//! product has the bits a C program's would. Comparisons (max, min) are
//! done here on the bits, for both formats.
//!
//! Other targets have no float128 arithmetic: this module is not built
//! there, and `ReduceOp::check_dtype` refuses float128 reductions
//! (`ferrocoll_core::HOST_FLOAT128`).

use bytemuck::{Pod, Zeroable};
use std::cmp::Ordering;

use super::num::Num;

/// One float128 element as it lies in memory (no alignment: operands may be unaligned).
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub(crate) struct LongDouble(pub(crate) [u8; 16]);

/// The sign bit's byte and mask.
#[cfg(not(target_arch = "aarch64"))]
const SIGN: (usize, u8) = (9, 0x80);
#[cfg(target_arch = "aarch64")]
const SIGN: (usize, u8) = (15, 0x80);

/// What a comparison sees of a value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    /// A NaN, or (x87) an encoding the FPU refuses as an operand: unordered.
    Unordered,
    Zero,
    /// Sign, and a key whose integer order is the magnitude's.
    Number {
        negative: bool,
        magnitude: u128,
    },
}

impl LongDouble {
    fn negative(self) -> bool {
        self.0[SIGN.0] & SIGN.1 != 0
    }

    /// The value with its sign flipped (exact, as C's unary minus).
    fn negated(mut self) -> Self {
        self.0[SIGN.0] ^= SIGN.1;
        self
    }

    /// x87 extended: significand in bytes 0–7 (bit 63 the explicit integer
    /// bit), sign and exponent in bytes 8–9. A denormal with its integer bit
    /// set (a pseudo-denormal) has the value of the normal with exponent 1
    /// and the same significand; an exponent other than 0 without the
    /// integer bit (unnormal, pseudo-infinity, pseudo-NaN) is an invalid
    /// operand for the FPU, which compares it unordered.
    #[cfg(not(target_arch = "aarch64"))]
    fn class(self) -> Class {
        let b = self.0;
        let significand = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        let exponent = u16::from_le_bytes([b[8], b[9]]) & 0x7fff;
        let integer_bit = significand >> 63 == 1;
        match exponent {
            0 if significand == 0 => Class::Zero,
            0x7fff if significand != 1 << 63 => Class::Unordered,
            e if e != 0 && !integer_bit => Class::Unordered,
            e => Class::Number {
                negative: self.negative(),
                magnitude: (u128::from(Ord::max(e, 1)) << 64) | u128::from(significand),
            },
        }
    }

    /// IEEE binary128: the bits without the sign order the magnitudes.
    #[cfg(target_arch = "aarch64")]
    fn class(self) -> Class {
        let bits = u128::from_le_bytes(self.0);
        let magnitude = bits & !(1 << 127);
        let exponent = magnitude >> 112;
        let fraction = magnitude & ((1 << 112) - 1);
        match magnitude {
            0 => Class::Zero,
            _ if exponent == 0x7fff && fraction != 0 => Class::Unordered,
            _ => Class::Number { negative: self.negative(), magnitude },
        }
    }

    fn is_nan(self) -> bool {
        self.class() == Class::Unordered
    }
}

impl PartialEq for LongDouble {
    fn eq(&self, other: &Self) -> bool {
        self.partial_cmp(other) == Some(Ordering::Equal)
    }
}

impl PartialOrd for LongDouble {
    /// The order of the values, as C's `<` and `>` see them (+0 equals -0;
    /// a NaN is unordered).
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        let signed = |c: Class| match c {
            Class::Unordered => None,
            Class::Zero => Some((0i8, 0u128)),
            Class::Number { negative: true, magnitude } => Some((-1, magnitude)),
            Class::Number { negative: false, magnitude } => Some((1, magnitude)),
        };
        let ((sa, ma), (sb, mb)) = (signed(self.class())?, signed(other.class())?);
        Some(match sa.cmp(&sb) {
            Ordering::Equal if sa < 0 => mb.cmp(&ma),
            Ordering::Equal => ma.cmp(&mb),
            unequal => unequal,
        })
    }
}

impl Num for LongDouble {
    #[inline]
    fn add(self, other: Self) -> Self {
        arith::add(self, other)
    }
    /// `a - b` is `a + (-b)` in IEEE and x87 arithmetic alike: same bits.
    #[inline]
    fn sub(self, other: Self) -> Self {
        arith::add(self, other.negated())
    }
    #[inline]
    fn mul(self, other: Self) -> Self {
        arith::mul(self, other)
    }
    // As `f32`/`f64` (num.rs): a NaN operand is ignored, of equal operands
    // the accumulator is kept.
    #[inline]
    fn max(self, other: Self) -> Self {
        if other > self || self.is_nan() { other } else { self }
    }
    #[inline]
    fn min(self, other: Self) -> Self {
        if other < self || self.is_nan() { other } else { self }
    }
    #[inline]
    fn div_count(self, n: usize) -> Self {
        arith::div_count(self, n)
    }
}

/// x87: each operation loads its operands on the FPU stack, computes in the
/// extended format (Linux starts every process with the precision control
/// at 64 bits and round-to-nearest; Rust never changes it) and stores the
/// result, leaving the stack empty as it found it.
#[cfg(target_arch = "x86_64")]
mod arith {
    use super::LongDouble;
    use std::arch::asm;

    /// `$name(a, b)`: both loaded, `$op` (which pops one), the result
    /// stored: its 10 value bytes written by the FPU, its padding zero.
    macro_rules! binary {
        ($name:ident, $op:literal) => {
            #[inline]
            pub(super) fn $name(a: LongDouble, b: LongDouble) -> LongDouble {
                let mut r = LongDouble([0; 16]);
                // SAFETY: `fld`/`fstp tbyte` read 10 bytes of `a` and `b` and
                // write 10 of `r`, all 16 bytes long and live; the two loads,
                // one pop with the operation and one pop with the store leave
                // the x87 stack empty, as the ABI has it.
                unsafe {
                    asm!(
                        "fld tbyte ptr [{a}]",
                        "fld tbyte ptr [{b}]",
                        $op,
                        "fstp tbyte ptr [{r}]",
                        a = in(reg) a.0.as_ptr(),
                        b = in(reg) b.0.as_ptr(),
                        r = in(reg) r.0.as_mut_ptr(),
                        out("st(0)") _,
                        out("st(1)") _,
                        options(nostack),
                    );
                }
                r
            }
        };
    }

    binary!(add, "faddp st(1), st(0)");
    binary!(mul, "fmulp st(1), st(0)");

    /// `a / n`, `n` loaded exactly as a 64-bit integer (a team size fits).
    #[inline]
    pub(super) fn div_count(a: LongDouble, n: usize) -> LongDouble {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let mut r = LongDouble([0; 16]);
        // SAFETY: as `binary!`; `fild qword` reads the 8 bytes of `n`, on the stack of this function.
        unsafe {
            asm!(
                "fld tbyte ptr [{a}]",
                "fild qword ptr [{n}]",
                // st(1) = st(1) / st(0), then pop: a / n.
                "fdivp st(1), st(0)",
                "fstp tbyte ptr [{r}]",
                a = in(reg) a.0.as_ptr(),
                n = in(reg) &n,
                r = in(reg) r.0.as_mut_ptr(),
                out("st(0)") _,
                out("st(1)") _,
                options(nostack),
            );
        }
        r
    }
}

/// aarch64: binary128 has no instructions; C compiles its arithmetic to
/// calls of the soft-float routines, which take and return the value in a
/// vector register (AAPCS64). Rust cannot declare such a function on
/// stable (no `f128`, no vector types in FFI), so the call is made here in
/// assembly, with every register the C ABI lets a callee clobber declared
/// clobbered.
#[cfg(target_arch = "aarch64")]
mod arith {
    use super::LongDouble;
    use std::arch::aarch64::uint8x16_t;
    use std::arch::asm;

    // Only referenced by `sym` below, never called from Rust: the
    // signatures are the assembly's business (values in v0/v1, x0 for the integer).
    unsafe extern "C" {
        fn __addtf3();
        fn __multf3();
        fn __divtf3();
        fn __floatunditf();
    }

    fn to_reg(v: LongDouble) -> uint8x16_t {
        // SAFETY: both are 16 plain bytes.
        unsafe { std::mem::transmute::<[u8; 16], uint8x16_t>(v.0) }
    }

    fn from_reg(v: uint8x16_t) -> LongDouble {
        // SAFETY: both are 16 plain bytes.
        LongDouble(unsafe { std::mem::transmute::<uint8x16_t, [u8; 16]>(v) })
    }

    macro_rules! binary {
        ($name:ident, $routine:ident) => {
            #[inline]
            pub(super) fn $name(a: LongDouble, b: LongDouble) -> LongDouble {
                let r: uint8x16_t;
                // SAFETY: the routine takes two binary128 in v0 and v1 and
                // returns one in v0 (AAPCS64, as C calls it); `clobber_abi`
                // marks every caller-saved register (x30 among them) as
                // clobbered, and the stack pointer is 16-byte aligned in
                // any Rust function on aarch64.
                unsafe {
                    asm!(
                        "bl {f}",
                        f = sym $routine,
                        inlateout("v0") to_reg(a) => r,
                        in("v1") to_reg(b),
                        clobber_abi("C"),
                    );
                }
                from_reg(r)
            }
        };
    }

    binary!(add, __addtf3);
    binary!(mul, __multf3);
    binary!(div, __divtf3);

    /// `a / n`, `n` converted exactly (binary128 holds every 64-bit integer).
    #[inline]
    pub(super) fn div_count(a: LongDouble, n: usize) -> LongDouble {
        let d: uint8x16_t;
        // SAFETY: `__floatunditf` takes a u64 in x0 and returns a binary128
        // in v0; the rest as `binary!`.
        unsafe {
            asm!(
                "bl {f}",
                f = sym __floatunditf,
                in("x0") n as u64,
                lateout("v0") d,
                clobber_abi("C"),
            );
        }
        div(a, from_reg(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::long_double::{from_f64, to_f64};

    fn ld(x: f64) -> LongDouble {
        LongDouble(from_f64(x))
    }

    fn f(x: LongDouble) -> f64 {
        to_f64(&x.0)
    }

    /// 1 + 2^-k, built from its bits (not an f64 for k > 52).
    fn one_plus_ulp(k: u32) -> LongDouble {
        let mut b = from_f64(1.0);
        if cfg!(target_arch = "aarch64") {
            let bits = u128::from_le_bytes(b) | 1 << (112 - k);
            b = bits.to_le_bytes();
        } else {
            let significand = 1u64 << 63 | 1 << (63 - k);
            b[..8].copy_from_slice(&significand.to_le_bytes());
        }
        LongDouble(b)
    }

    /// The target's unit in the last place at 1: 2^-63 (x87), 2^-112 (binary128).
    const ULP_BITS: u32 = if cfg!(target_arch = "aarch64") { 112 } else { 63 };

    #[test]
    fn sums_keep_the_bits_f64_would_lose() {
        let tiny = one_plus_ulp(ULP_BITS).sub(ld(1.0));
        assert_eq!(f(tiny), 2f64.powi(-(ULP_BITS as i32)));
        assert_eq!(ld(1.0).add(tiny).0, one_plus_ulp(ULP_BITS).0);
        // Half an ulp is a tie: round to even, back to 1.
        let half = tiny.mul(ld(0.5));
        assert_eq!(ld(1.0).add(half).0, ld(1.0).0);
        // Half an ulp above an odd significand rounds up, to even.
        assert_eq!(one_plus_ulp(ULP_BITS).add(half).0, one_plus_ulp(ULP_BITS - 1).0);
    }

    #[test]
    fn sub_mul_and_division_by_a_count() {
        assert_eq!(f(ld(5.0).sub(ld(3.0))), 2.0);
        assert_eq!(f(ld(3.0).sub(ld(5.0))), -2.0);
        // x - x is +0 in round-to-nearest.
        let zero = ld(1.5).sub(ld(1.5));
        assert_eq!(zero.0, ld(0.0).0);
        assert_eq!(f(ld(3.0).mul(ld(-7.0))), -21.0);
        assert_eq!(f(ld(10.0).div_count(4)), 2.5);
        // (1 + 2^-31)^2 = 1 + 2^-30 + 2^-62: exact here, not in f64.
        let x = one_plus_ulp(31);
        assert_eq!(x.mul(x).sub(one_plus_ulp(30)).0, ld(2f64.powi(-62)).0);
        // 1/3 rounded to nearest: 0x3ffd_aaaa_aaaa_aaaa_aaab on x87, 0x3ffd_5555…5555 in binary128.
        let third = ld(1.0).div_count(3);
        if cfg!(target_arch = "aarch64") {
            assert_eq!(u128::from_le_bytes(third.0), 0x3ffd_5555_5555_5555_5555_5555_5555_5555);
        } else {
            assert_eq!(third.0[..10], [0xab, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xfd, 0x3f]);
        }
        #[cfg(not(target_arch = "aarch64"))]
        assert_eq!(third.0[10..], [0; 6], "x87 padding written zero");
    }

    #[test]
    fn order_and_max_min_as_for_f64() {
        let values = [-f64::INFINITY, -3.5, -1e-310, -0.0, 0.0, 5e-324, 1.0, 1.0 + f64::EPSILON, 1e300, f64::INFINITY];
        for &a in &values {
            for &b in &values {
                assert_eq!(ld(a).partial_cmp(&ld(b)), a.partial_cmp(&b), "{a:e} against {b:e}");
                assert_eq!(ld(a).max(ld(b)).0, ld(Num::max(a, b)).0, "max({a:e}, {b:e})");
                assert_eq!(ld(a).min(ld(b)).0, ld(Num::min(a, b)).0, "min({a:e}, {b:e})");
            }
            let nan = ld(f64::NAN);
            assert_eq!(nan.partial_cmp(&ld(a)), None);
            assert_eq!(nan.max(ld(a)).0, ld(a).0, "a NaN accumulator gives way");
            assert_eq!(ld(a).min(nan).0, ld(a).0, "a NaN operand is ignored");
        }
        assert!(one_plus_ulp(ULP_BITS) > ld(1.0));
    }

    /// x87 only: a pseudo-denormal equals the normal of the same significand
    /// with exponent 1; an unnormal is no number (the FPU refuses it).
    #[cfg(not(target_arch = "aarch64"))]
    #[test]
    fn x87_encodings_without_an_f64() {
        let mut pseudo = [0u8; 16];
        pseudo[..8].copy_from_slice(&(1u64 << 63 | 5).to_le_bytes());
        let mut normal = pseudo;
        normal[8] = 1;
        assert_eq!(LongDouble(pseudo).partial_cmp(&LongDouble(normal)), Some(Ordering::Equal));
        let mut unnormal = [0u8; 16];
        unnormal[..8].copy_from_slice(&5u64.to_le_bytes());
        unnormal[8] = 0x10;
        assert_eq!(LongDouble(unnormal).partial_cmp(&ld(1.0)), None);
        assert_eq!(ld(2.0).max(LongDouble(unnormal)).0, ld(2.0).0);
        // The FPU turns it into the default NaN when it adds it.
        assert!(LongDouble(unnormal).add(ld(1.0)).is_nan());
    }
}
