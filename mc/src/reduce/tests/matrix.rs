//! Every supported (dtype, op) with 1, 2, 3 and 8 sources, in place and
//! not, aligned and not, over counts 0, 1, 7, 1000 and 4099 (a partial last
//! chunk for every element size), against the reference.

use ferrocoll_core::{DataType, ReduceOp};

use super::reference::verify;
use super::{Buf, POISON, Rng, operand, seed_of, spec, supported};
use crate::{reduce_slices, reduce_slices_in_place};

const SOURCES: [usize; 4] = [1, 2, 3, 8];
const COUNTS: [usize; 5] = [0, 1, 7, 1000, 4099];

/// One case; panics with everything needed to reproduce it.
fn case(dt: DataType, op: ReduceOp, n_srcs: usize, count: usize, in_place: bool, misalign: usize) {
    let seed = seed_of(&[dt as u64, op as u64, n_srcs as u64, count as u64, u64::from(in_place), misalign as u64]);
    let mut rng = Rng::new(seed);
    let bytes = count * op.element_size(dt);
    // Each source aligned or not by a bit of the seed, so mixed cases occur.
    let srcs: Vec<Buf> = (0..n_srcs)
        .map(|i| Buf::from_bytes(&operand(dt, op, count, &mut rng), misalign * ((seed >> (i % 64)) & 1) as usize))
        .collect();
    let src_bytes: Vec<&[u8]> = srcs.iter().map(Buf::bytes).collect();
    // avg: divide by the number of operands on one half of the cases, not at all on the other.
    let divisor = (op == ReduceOp::Avg && seed.is_multiple_of(2)).then_some(n_srcs);
    let s = spec(dt, op, count, divisor);
    let what = format!(
        "{dt} {op} srcs={n_srcs} count={count} in_place={in_place} misalign={misalign} divisor={divisor:?} seed={seed:#x}"
    );
    let mut dst = Buf::new(bytes, misalign);
    if in_place {
        dst.bytes_mut().copy_from_slice(src_bytes[0]);
        reduce_slices_in_place(dst.bytes_mut(), &src_bytes[1..], &s).unwrap_or_else(|e| panic!("{what}: {e}"));
    } else {
        dst.bytes_mut().fill(POISON);
        reduce_slices(dst.bytes_mut(), &src_bytes, &s).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    if let Err(e) = verify(dt, op, &src_bytes, dst.bytes(), divisor) {
        panic!("{what}: {e}");
    }
}

fn matrix(filter: impl Fn(DataType, ReduceOp) -> bool) -> usize {
    let mut cases = 0;
    for (dt, op) in supported().into_iter().filter(|&(dt, op)| filter(dt, op)) {
        for n_srcs in SOURCES {
            for count in COUNTS {
                for in_place in [false, true] {
                    for misalign in [0, 1] {
                        case(dt, op, n_srcs, count, in_place, misalign);
                        cases += 1;
                    }
                }
            }
        }
    }
    cases
}

#[test]
fn integers_every_op() {
    let n = matrix(|dt, op| dt.is_integer() && !op.is_loc());
    assert_eq!(n, 10 * 11 * 80);
}

#[test]
fn f32_and_f64() {
    let n = matrix(|dt, op| matches!(dt, DataType::Float32 | DataType::Float64) && !op.is_loc());
    assert_eq!(n, 2 * 5 * 80);
}

#[test]
fn narrow_floats_round_once() {
    let n = matrix(|dt, op| dt.is_narrow_float() && !op.is_loc());
    assert_eq!(n, 4 * 5 * 80);
}

#[test]
fn complex() {
    let n = matrix(|dt, _| dt.is_complex());
    assert_eq!(n, (2 + usize::from(ferrocoll_core::HOST_FLOAT128)) * 3 * 80);
}

/// C's `long double` (x87 extended, binary128), where the host has it.
#[test]
fn float128() {
    let n = matrix(|dt, _| dt == DataType::Float128);
    assert_eq!(n, if ferrocoll_core::HOST_FLOAT128 { 5 * 80 } else { 0 });
}

#[test]
fn maxloc_and_minloc_pairs() {
    let n = matrix(|_, op| op.is_loc());
    assert_eq!(n, 16 * 2 * 80);
}

#[test]
fn every_supported_pair_is_covered() {
    // Integers: 13 ops; real floats: 7; complex: 3; float128: 5 (no loc)
    // and its complex 3, where the host has long double arithmetic.
    let float128 = if ferrocoll_core::HOST_FLOAT128 { 5 + 3 } else { 0 };
    assert_eq!(supported().len(), 10 * 13 + 6 * 7 + 2 * 3 + float128);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    #[test]
    fn any_supported_case(pick in 0usize..1024, n_srcs in 1usize..10, count in 0usize..3000, in_place: bool, misalign in 0usize..16) {
        let all = supported();
        let (dt, op) = all[pick % all.len()];
        case(dt, op, n_srcs, count, in_place, misalign);
    }
}
