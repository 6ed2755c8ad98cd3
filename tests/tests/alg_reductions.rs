//! The p2p reduction algorithms, each pinned in turn: allreduce (ring,
//! sra_knomial), reduce_scatter (ring, knomial), reduce_scatterv (ring) and
//! reduce (knomial, srg_knomial).
//!
//! Team sizes 1 to 16 (odd, prime, powers of two), knomial radices that
//! leave extra ranks, counts of 0, 1, 7, 1000, 4099 and 40 000 elements (the
//! last past the 16 KiB eager limit per block), in place and not, roots
//! first, middle and last. i64 sums of values derived from (rank, index) are
//! compared exactly with a reference computed here; f64 averages within
//! 1e-12; f32 allreduce sums must be bitwise identical on every rank; in
//! place, reduce_scatter(v) must leave the other ranks' blocks alone.
//! Outputs are poisoned before each run. Every case of a team runs inside
//! one world, and each rank returns what it found wrong.

use ferrocoll::{Coll, CollType, Element, ReduceOp, Team};
use ferrocoll_tests::rng::Rng;
use ferrocoll_tests::world::{TEST_TIMEOUT, pin, run};

const SIZES: [usize; 9] = [1, 2, 3, 4, 5, 7, 8, 11, 16];
/// Vector lengths; 40 000 i64 is past the eager limit even in 16 blocks.
const COUNTS: [usize; 6] = [0, 1, 7, 1000, 4099, 40_000];

/// An element type with inputs derived from (rank, index) and a reference.
trait Num: Element + PartialEq + std::fmt::Debug {
    const POISON: Self;
    fn of(rank: usize, i: usize) -> Self;
    /// `op` of element `i` over ranks `0..size`, computed independently.
    fn expect(size: usize, i: usize, op: ReduceOp) -> Self;
    fn close(got: Self, want: Self) -> bool;
}

impl Num for i64 {
    const POISON: i64 = i64::MIN;
    fn of(rank: usize, i: usize) -> i64 {
        (rank as i64 + 1) * 1_000_003 - (i as i64 % 977) * 7919 + (i as i64 * rank as i64) % 13
    }
    fn expect(size: usize, i: usize, op: ReduceOp) -> i64 {
        assert_eq!(op, ReduceOp::Sum, "i64 reference is for sums");
        (0..size).map(|r| i64::of(r, i)).sum()
    }
    fn close(got: i64, want: i64) -> bool {
        got == want
    }
}

impl Num for f64 {
    const POISON: f64 = f64::MAX;
    fn of(rank: usize, i: usize) -> f64 {
        Rng::from_parts(&[rank as u64, i as u64]).f64_in(-100.0, 100.0)
    }
    fn expect(size: usize, i: usize, op: ReduceOp) -> f64 {
        let sum: f64 = (0..size).map(|r| f64::of(r, i)).sum();
        if op == ReduceOp::Avg { sum / size as f64 } else { sum }
    }
    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-12 * want.abs().max(1.0)
    }
}

impl Num for f32 {
    const POISON: f32 = f32::MAX;
    fn of(rank: usize, i: usize) -> f32 {
        Rng::from_parts(&[rank as u64, i as u64, 32]).f64_in(-1.0, 1.0) as f32
    }
    fn expect(size: usize, i: usize, op: ReduceOp) -> f32 {
        assert_eq!(op, ReduceOp::Sum, "f32 reference is for sums");
        (0..size).map(|r| f64::from(f32::of(r, i))).sum::<f64>() as f32
    }
    fn close(got: f32, want: f32) -> bool {
        (got - want).abs() <= 1e-5
    }
}

/// Compares `got` with the reference of elements `first..` and records the first mismatch.
fn check<T: Num>(errs: &mut Vec<String>, case: &str, got: &[T], first: usize, size: usize, op: ReduceOp) {
    if let Some(j) = (0..got.len()).find(|&j| !T::close(got[j], T::expect(size, first + j, op))) {
        errs.push(format!(
            "{case}: element {} is {:?}, expected {:?}",
            first + j,
            got[j],
            T::expect(size, first + j, op)
        ));
    }
}

/// In place, these algorithms change only the rank's own block of the buffer.
fn untouched<T: Num>(errs: &mut Vec<String>, case: &str, buf: &[T], rank: usize, own: std::ops::Range<usize>) {
    if let Some(i) = (0..buf.len()).find(|i| !own.contains(i) && buf[*i] != T::of(rank, *i)) {
        errs.push(format!("{case}: element {i} outside the own block {own:?} changed to {:?}", buf[i]));
    }
}

/// UCC's block distribution, recomputed here: (offset, count) of block `r`.
fn block(total: usize, size: usize, r: usize) -> (usize, usize) {
    let (q, rem) = (total / size, total % size);
    (r * q + r.min(rem), q + usize::from(r < rem))
}

fn roots(size: usize) -> Vec<usize> {
    let mut r = vec![0, size / 2, size - 1];
    r.dedup();
    r
}

/// Runs `body` on every rank of a team of `size` with `alg` pinned for
/// `coll` (and `TL_P2P_<knob>_KN_RADIX` set to `radix` when it is above 0);
/// fails with every rank's findings.
fn world(
    coll: CollType,
    alg: &str,
    knob: &str,
    radix: usize,
    size: usize,
    body: impl Fn(&Team) -> Vec<String> + Send + Sync + 'static,
) {
    let mut config = pin(coll, alg);
    if radix > 0 {
        config.set(&format!("TL_P2P_{knob}_KN_RADIX"), radix.to_string());
    }
    let found: Vec<String> = run(size, &config, move |team, _| body(team)).concat();
    assert!(found.is_empty(), "{coll}/{alg} radix {radix} on {size} ranks:\n{}", found.join("\n"));
}

fn allreduce<T: Num>(team: &Team, n: usize, in_place: bool, op: ReduceOp, errs: &mut Vec<String>) -> Vec<T> {
    let (rank, size) = (team.rank(), team.size());
    let case = format!("allreduce {op} n {n} in place {in_place} rank {rank}");
    let src: Vec<T> = (0..n).map(|i| T::of(rank, i)).collect();
    let mut dst = vec![T::POISON; n];
    let coll = if in_place {
        dst.copy_from_slice(&src);
        Coll::allreduce_in_place(&mut dst, op)
    } else {
        Coll::allreduce(&src, &mut dst, op)
    };
    coll.timeout(TEST_TIMEOUT).run(team).expect(&case);
    check(errs, &case, &dst, 0, size, op);
    dst
}

/// Not in place `n` is the block (src holds P·n); in place it is the whole vector.
fn reduce_scatter<T: Num>(team: &Team, n: usize, in_place: bool, op: ReduceOp, errs: &mut Vec<String>) {
    let (rank, size) = (team.rank(), team.size());
    let case = format!("reduce_scatter {op} n {n} in place {in_place} rank {rank}");
    if in_place {
        let mut buf: Vec<T> = (0..n).map(|i| T::of(rank, i)).collect();
        Coll::reduce_scatter_in_place(&mut buf, op).timeout(TEST_TIMEOUT).run(team).expect(&case);
        let (off, len) = block(n, size, rank);
        check(errs, &case, &buf[off..off + len], off, size, op);
        untouched(errs, &case, &buf, rank, off..off + len);
    } else {
        let src: Vec<T> = (0..size * n).map(|i| T::of(rank, i)).collect();
        let mut dst = vec![T::POISON; n];
        Coll::reduce_scatter(&src, &mut dst, op).timeout(TEST_TIMEOUT).run(team).expect(&case);
        check(errs, &case, &dst, rank * n, size, op);
    }
}

/// Irregular counts around `n`: some ranks get none.
fn v_counts(n: usize, size: usize) -> Vec<u32> {
    (0..size).map(|r| [n, 0, n / 3 + 1][r % 3] as u32).collect()
}

fn reduce_scatterv<T: Num>(team: &Team, n: usize, in_place: bool, op: ReduceOp, errs: &mut Vec<String>) {
    let (rank, size) = (team.rank(), team.size());
    let case = format!("reduce_scatterv {op} n {n} in place {in_place} rank {rank}");
    let counts = v_counts(n, size);
    let total: usize = counts.iter().map(|&c| c as usize).sum();
    let off: usize = counts[..rank].iter().map(|&c| c as usize).sum();
    let mine = counts[rank] as usize;
    let src: Vec<T> = (0..total).map(|i| T::of(rank, i)).collect();
    if in_place {
        let mut buf = src;
        Coll::reduce_scatterv_in_place(&mut buf, &counts, op).timeout(TEST_TIMEOUT).run(team).expect(&case);
        check(errs, &case, &buf[off..off + mine], off, size, op);
        untouched(errs, &case, &buf, rank, off..off + mine);
    } else {
        let mut dst = vec![T::POISON; mine];
        Coll::reduce_scatterv(&src, &mut dst, &counts, op).timeout(TEST_TIMEOUT).run(team).expect(&case);
        check(errs, &case, &dst, off, size, op);
    }
}

fn reduce<T: Num>(team: &Team, n: usize, root: usize, in_place: bool, op: ReduceOp, errs: &mut Vec<String>) {
    let (rank, size) = (team.rank(), team.size());
    let case = format!("reduce {op} n {n} root {root} in place {in_place} rank {rank}");
    let src: Vec<T> = (0..n).map(|i| T::of(rank, i)).collect();
    if rank != root {
        Coll::reduce(&src, None, op, root).timeout(TEST_TIMEOUT).run(team).expect(&case);
        return;
    }
    let mut dst = vec![T::POISON; n];
    let coll = if in_place {
        dst.copy_from_slice(&src);
        Coll::reduce_in_place_at_root(&mut dst, op, root)
    } else {
        Coll::reduce(&src, Some(&mut dst), op, root)
    };
    coll.timeout(TEST_TIMEOUT).run(team).expect(&case);
    check(errs, &case, &dst, 0, size, op);
}

/// Every (size, radix) world for one algorithm; `radices` lists the knob values (0: default).
fn every_size(coll: CollType, alg: &str, knob: &str, radices: &[usize], body: fn(&Team, &mut Vec<String>)) {
    for &size in &SIZES {
        for &radix in radices {
            world(coll, alg, knob, radix, size, move |team| {
                let mut errs = Vec::new();
                body(team, &mut errs);
                errs
            });
        }
    }
}

fn allreduce_cases(team: &Team, errs: &mut Vec<String>) {
    for n in COUNTS {
        for in_place in [false, true] {
            allreduce::<i64>(team, n, in_place, ReduceOp::Sum, errs);
        }
    }
    allreduce::<f64>(team, 1000, false, ReduceOp::Avg, errs);
    allreduce::<f64>(team, 7, true, ReduceOp::Avg, errs);
}

fn reduce_scatter_cases(team: &Team, errs: &mut Vec<String>) {
    for n in COUNTS {
        // Not in place, n is the block: keep the biggest total moderate.
        reduce_scatter::<i64>(team, n.min(4099), false, ReduceOp::Sum, errs);
        reduce_scatter::<i64>(team, n, true, ReduceOp::Sum, errs);
    }
    reduce_scatter::<i64>(team, 40_000 / team.size(), false, ReduceOp::Sum, errs);
    reduce_scatter::<f64>(team, 333, false, ReduceOp::Avg, errs);
    reduce_scatter::<f64>(team, 1001, true, ReduceOp::Avg, errs);
}

fn reduce_scatterv_cases(team: &Team, errs: &mut Vec<String>) {
    for n in COUNTS {
        for in_place in [false, true] {
            reduce_scatterv::<i64>(team, n, in_place, ReduceOp::Sum, errs);
        }
    }
    reduce_scatterv::<f64>(team, 1000, false, ReduceOp::Avg, errs);
    reduce_scatterv::<f64>(team, 7, true, ReduceOp::Avg, errs);
}

fn reduce_cases(team: &Team, errs: &mut Vec<String>) {
    for root in roots(team.size()) {
        for n in COUNTS {
            for in_place in [false, true] {
                reduce::<i64>(team, n, root, in_place, ReduceOp::Sum, errs);
            }
        }
        reduce::<f64>(team, 1000, root, false, ReduceOp::Avg, errs);
        reduce::<f64>(team, 7, root, true, ReduceOp::Avg, errs);
    }
}

#[test]
fn allreduce_ring_every_shape() {
    every_size(CollType::Allreduce, "ring", "ALLREDUCE", &[0], allreduce_cases);
}

#[test]
fn allreduce_sra_knomial_every_shape() {
    every_size(CollType::Allreduce, "sra_knomial", "ALLREDUCE_SRA", &[0, 3, 4], allreduce_cases);
}

#[test]
fn reduce_scatter_ring_every_shape() {
    every_size(CollType::ReduceScatter, "ring", "REDUCE_SCATTER", &[0], reduce_scatter_cases);
}

#[test]
fn reduce_scatter_knomial_every_shape() {
    every_size(CollType::ReduceScatter, "knomial", "REDUCE_SCATTER", &[0, 3, 4], reduce_scatter_cases);
}

#[test]
fn reduce_scatterv_ring_every_shape() {
    every_size(CollType::ReduceScatterv, "ring", "REDUCE_SCATTERV", &[0], reduce_scatterv_cases);
}

#[test]
fn reduce_knomial_every_shape() {
    every_size(CollType::Reduce, "knomial", "REDUCE", &[0, 2, 3], reduce_cases);
}

#[test]
fn reduce_srg_knomial_every_shape() {
    every_size(CollType::Reduce, "srg_knomial", "REDUCE_SRG", &[0, 2, 3], reduce_cases);
}

/// f32 sums: every rank of an allreduce holds the same bits (each element
/// is reduced by one rank and copied to the others).
#[test]
fn allreduce_f32_is_bitwise_identical_on_every_rank() {
    for (alg, knob, radix) in
        [("ring", "ALLREDUCE", 0), ("sra_knomial", "ALLREDUCE_SRA", 0), ("sra_knomial", "ALLREDUCE_SRA", 3)]
    {
        for size in [3, 5, 7, 16] {
            let mut config = pin(CollType::Allreduce, alg);
            if radix > 0 {
                config.set(&format!("TL_P2P_{knob}_KN_RADIX"), radix.to_string());
            }
            let results = run(size, &config, |team, _| {
                let mut errs = Vec::new();
                let bits: Vec<Vec<u32>> = [1000, 4099, 40_000]
                    .into_iter()
                    .flat_map(|n| [false, true].map(|ip| (n, ip)))
                    .map(|(n, ip)| {
                        allreduce::<f32>(team, n, ip, ReduceOp::Sum, &mut errs).iter().map(|x| x.to_bits()).collect()
                    })
                    .collect();
                (bits, errs)
            });
            let errs: Vec<String> = results.iter().flat_map(|r| r.1.clone()).collect();
            assert!(errs.is_empty(), "{alg} radix {radix} on {size} ranks:\n{}", errs.join("\n"));
            for (rank, (bits, _)) in results.iter().enumerate().skip(1) {
                for (case, (a, b)) in results[0].0.iter().zip(bits).enumerate() {
                    let diff = a.iter().zip(b).position(|(x, y)| x != y);
                    assert_eq!(
                        diff, None,
                        "{alg} radix {radix} on {size} ranks: case {case} rank {rank} differs from rank 0"
                    );
                }
            }
        }
    }
}
