//! Exhaustive and property tests of the OFP8 conversions against a float64 model.

use super::*;
use proptest::prelude::*;

/// Independent model of a code's value: the OCP formulas evaluated in f64.
fn model(code: u8, e4m3: bool) -> f64 {
    let (mbits, ebits, bias) = if e4m3 { (3, 4, 7) } else { (2, 5, 15) };
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((code >> mbits) & ((1 << ebits) - 1));
    let mant = f64::from(code & ((1 << mbits) - 1));
    let scale = f64::from(1u32 << mbits);
    if e4m3 && exp == 15 && mant == 7.0 {
        return f64::NAN;
    }
    if !e4m3 && exp == 31 {
        return if mant == 0.0 { sign * f64::INFINITY } else { f64::NAN };
    }
    if exp == 0 {
        sign * mant / scale * 2f64.powi(1 - bias)
    } else {
        sign * (1.0 + mant / scale) * 2f64.powi(exp - bias)
    }
}

fn decode(code: u8, e4m3: bool) -> f32 {
    if e4m3 { e4m3_to_f32(code) } else { e5m2_to_f32(code) }
}

fn encode(x: f32, e4m3: bool) -> u8 {
    if e4m3 { f32_to_e4m3(x) } else { f32_to_e5m2(x) }
}

/// The nearest code by brute force over all 256 (ties to the even mantissa),
/// with the format's overflow rule; None for NaN.
fn nearest(x: f32, e4m3: bool) -> Option<u8> {
    if x.is_nan() {
        return None;
    }
    let xv = f64::from(x);
    let (max, max_code) = if e4m3 { (448.0, E4M3_MAX) } else { (57344.0, E5M2_MAX) };
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    if e4m3 && xv.abs() > max {
        return Some(sign | max_code);
    }
    // IEEE: overflow when |x| >= max + half an ulp at max (the tie goes up, to "even" infinity).
    if !e4m3 && xv.abs() >= 61440.0 {
        return Some(sign | E5M2_INF);
    }
    let mut best: Option<(f64, u8)> = None;
    for c in (0..=0x7f).map(|c| c | sign) {
        let v = model(c, e4m3);
        if !v.is_finite() {
            continue;
        }
        let d = (v - xv).abs();
        best = match best {
            None => Some((d, c)),
            Some((bd, bc)) if d < bd || (d == bd && c & 1 == 0 && bc & 1 == 1) => Some((d, c)),
            keep => keep,
        };
    }
    best.map(|(_, c)| c)
}

#[test]
fn every_code_decodes_to_the_model_and_round_trips() {
    for e4m3 in [true, false] {
        for code in 0..=255u8 {
            let v = decode(code, e4m3);
            let m = model(code, e4m3);
            if m.is_nan() {
                assert!(v.is_nan(), "{code:#04x} e4m3={e4m3}");
                let back = encode(v, e4m3);
                assert!(decode(back, e4m3).is_nan(), "{code:#04x} -> {back:#04x}");
                assert_eq!(back & 0x80, code & 0x80, "NaN keeps its sign");
            } else {
                assert_eq!(f64::from(v), m, "{code:#04x} e4m3={e4m3}");
                assert_eq!(v.is_sign_negative(), code & 0x80 != 0, "{code:#04x} sign");
                assert_eq!(encode(v, e4m3), code, "{code:#04x} round trip e4m3={e4m3}");
            }
        }
    }
    assert_eq!(e4m3_to_f32(E4M3_MAX), 448.0);
    assert_eq!(e5m2_to_f32(E5M2_MAX), 57344.0);
    assert_eq!(e5m2_to_f32(0xfc), f32::NEG_INFINITY);
    assert!(e4m3_to_f32(0xff).is_nan() && e4m3_to_f32(0x7f).is_nan());
}

#[test]
fn ties_round_to_even_between_every_pair_of_neighbours() {
    for e4m3 in [true, false] {
        for code in 0..0x7fu8 {
            let (a, b) = (decode(code, e4m3), decode(code + 1, e4m3));
            if !a.is_finite() || !b.is_finite() {
                continue;
            }
            // The midpoint of two neighbours is exact in f32 (a few more mantissa bits).
            let mid = (a + b) / 2.0;
            let even = if code & 1 == 0 { code } else { code + 1 };
            assert_eq!(encode(mid, e4m3), even, "tie {a} {b} e4m3={e4m3}");
            assert_eq!(encode(-mid, e4m3), even | 0x80, "negative tie {a} {b}");
            let below = f32::from_bits(mid.to_bits() - 1);
            let above = f32::from_bits(mid.to_bits() + 1);
            assert_eq!(encode(below, e4m3), code, "below tie {a} {b}");
            assert_eq!(encode(above, e4m3), code + 1, "above tie {a} {b}");
        }
    }
}

#[test]
fn e4m3_saturates_and_keeps_nan() {
    for (x, want) in [(448.0, 0x7e), (449.0, 0x7e), (464.0, 0x7e), (480.0, 0x7e), (1e30, 0x7e), (f32::MAX, 0x7e)] {
        assert_eq!(f32_to_e4m3(x), want, "{x}");
        assert_eq!(f32_to_e4m3(-x), want | 0x80, "-{x}");
    }
    assert_eq!(f32_to_e4m3(f32::INFINITY), 0x7e);
    assert_eq!(f32_to_e4m3(f32::NEG_INFINITY), 0xfe);
    assert_eq!(f32_to_e4m3(f32::NAN), 0x7f);
    assert_eq!(f32_to_e4m3(-f32::NAN), 0xff);
    assert_eq!(f32_to_e4m3(f32::from_bits(0x7f80_0001)), 0x7f, "signalling NaN");
}

#[test]
fn e5m2_overflows_to_infinity_and_quiets_nan() {
    assert_eq!(f32_to_e5m2(57344.0), 0x7b);
    assert_eq!(f32_to_e5m2(61439.0), 0x7b);
    assert_eq!(f32_to_e5m2(61440.0), 0x7c, "the tie at max + half ulp goes to infinity");
    assert_eq!(f32_to_e5m2(-1e10), 0xfc);
    assert_eq!(f32_to_e5m2(f32::INFINITY), 0x7c);
    assert_eq!(f32_to_e5m2(f32::NAN), E5M2_NAN);
    assert_eq!(f32_to_e5m2(-f32::NAN), E5M2_NAN | 0x80);
    assert_eq!(f32_to_e5m2(f32::from_bits(0x7f80_0001)), E5M2_NAN, "signalling NaN becomes quiet");
}

#[test]
fn subnormals() {
    // E4M3: smallest subnormal 2^-9, smallest normal 2^-6.
    assert_eq!(f32_to_e4m3(2f32.powi(-9)), 0x01);
    assert_eq!(f32_to_e4m3(2f32.powi(-10)), 0x00, "half the smallest subnormal ties to zero");
    assert_eq!(f32_to_e4m3(2f32.powi(-10) * 1.0001), 0x01);
    assert_eq!(f32_to_e4m3(1.5 * 2f32.powi(-9)), 0x02, "tie between 1 and 2 goes to 2");
    assert_eq!(f32_to_e4m3(7.5 * 2f32.powi(-9)), 0x08, "rounds up into the smallest normal");
    assert_eq!(e4m3_to_f32(0x08), 2f32.powi(-6));
    assert_eq!(f32_to_e4m3(-3.0 * 2f32.powi(-9)), 0x83);
    // E5M2: smallest subnormal 2^-16.
    assert_eq!(f32_to_e5m2(2f32.powi(-16)), 0x01);
    assert_eq!(f32_to_e5m2(3.0 * 2f32.powi(-16)), 0x03);
    assert_eq!(f32_to_e5m2(2f32.powi(-17)), 0x00);
    // f32 subnormals are far below both formats: signed zero.
    assert_eq!(f32_to_e4m3(1e-40), 0x00);
    assert_eq!(f32_to_e4m3(-1e-40), 0x80);
    assert_eq!(f32_to_e5m2(-f32::from_bits(1)), 0x80);
    assert_eq!(f32_to_e4m3(-0.0), 0x80);
}

#[test]
fn slice_helpers_convert_and_check_lengths() {
    let codes: Vec<u8> = (0..=255).collect();
    let mut vals = vec![0.0f32; 256];
    e4m3_slice_to_f32(&codes, &mut vals).unwrap();
    let mut back = vec![0u8; 256];
    f32_slice_to_e4m3(&vals, &mut back).unwrap();
    assert_eq!(back, codes);
    e5m2_slice_to_f32(&codes, &mut vals).unwrap();
    f32_slice_to_e5m2(&vals, &mut back).unwrap();
    for (c, b) in codes.iter().zip(&back) {
        if !e5m2_to_f32(*c).is_nan() {
            assert_eq!(b, c);
        }
    }
    let err = f32_slice_to_e5m2(&vals[..3], &mut back).unwrap_err();
    assert!(err.to_string().contains("3") && err.to_string().contains("256"), "{err}");
    assert!(e4m3_slice_to_f32(&codes, &mut vals[..1]).is_err());
}

proptest! {
    #[test]
    fn encoding_is_the_nearest_code(bits in any::<u32>()) {
        let x = f32::from_bits(bits);
        for e4m3 in [true, false] {
            let got = encode(x, e4m3);
            match nearest(x, e4m3) {
                None => prop_assert!(decode(got, e4m3).is_nan()),
                Some(want) => prop_assert_eq!(got, want, "x={} e4m3={}", x, e4m3),
            }
        }
    }

    #[test]
    fn encoding_near_the_range_is_the_nearest_code(x in -70000.0f32..70000.0, scale in -20i32..2) {
        let x = x * 2f32.powi(scale);
        for e4m3 in [true, false] {
            prop_assert_eq!(Some(encode(x, e4m3)), nearest(x, e4m3), "x={} e4m3={}", x, e4m3);
        }
    }
}
