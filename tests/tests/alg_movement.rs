//! The p2p data-movement algorithms, each pinned in turn: allgather
//! (knomial, ring, bruck), allgatherv (ring, linear), alltoall (pairwise,
//! bruck) and alltoallv (pairwise, linear).
//!
//! Every algorithm runs on teams of 1, 2, 3, 4, 5, 7, 8, 11 and 16 ranks,
//! with blocks of 0, 1, 7, 1000 elements and one block above the transport's
//! 16 KiB eager size, in place and not, over u8, u32 and u64. The v-variants
//! use irregular counts (zeros included), displacements with gaps, blocks
//! out of rank order and empty blocks displaced past the end of the buffer.
//! Inputs are derived from (sender, receiver, index), outputs are poisoned
//! before each run, and results are compared exactly, gaps included, with
//! references built here. Each request must have run the pinned algorithm.

use std::fmt::Debug;

use ferrocoll::{
    BufferInfoV, Coll, CollArgs, CollBuffer, CollFlags, CollType, Element, MemType, Request, Result, Team,
};
use ferrocoll_tests::world::{TEST_TIMEOUT, pin, run};

const SIZES: [usize; 9] = [1, 2, 3, 4, 5, 7, 8, 11, 16];

/// A case's verdict: what went wrong, if anything.
type Outcome = std::result::Result<(), String>;

/// One case: (team, algorithm, variant 0..5, in place, dtype 0..3).
type Case = fn(&Team, &'static str, usize, bool, usize) -> Outcome;

/// An element type with a poison value that [`Val::make`] never produces.
trait Val: Element + PartialEq + Debug {
    const POISON: Self;
    fn make(x: u64) -> Self;
}

impl Val for u8 {
    const POISON: u8 = u8::MAX;
    fn make(x: u64) -> u8 {
        (x % 251) as u8
    }
}

impl Val for u32 {
    const POISON: u32 = u32::MAX;
    fn make(x: u64) -> u32 {
        (x % 0xffff_fff1) as u32
    }
}

impl Val for u64 {
    const POISON: u64 = u64::MAX;
    fn make(x: u64) -> u64 {
        x
    }
}

/// Element `k` of what rank `from` contributes for rank `to`.
fn val<T: Val>(from: usize, to: usize, k: usize) -> T {
    T::make(from as u64 * 1_000_003 + to as u64 * 7_919 + k as u64 * 31 + 17)
}

/// Elements in a block above the 16 KiB eager limit.
fn big<T>() -> usize {
    (16 << 10) / std::mem::size_of::<T>() + 37
}

fn block_counts<T>() -> [usize; 5] {
    [0, 1, 7, 1000, big::<T>()]
}

/// Run `coll` and check that the pinned algorithm ran.
fn go(team: &Team, coll: Coll<'_>, alg: &str) -> Outcome {
    let mut req = coll.timeout(TEST_TIMEOUT).init(team).map_err(|e| e.to_string())?;
    finish(&mut req, alg)
}

fn finish(req: &mut Request<'_>, alg: &str) -> Outcome {
    let selected = req.selected().to_string();
    if selected != "none/zero-size" && !selected.ends_with(&format!("/{alg}")) {
        return Err(format!("ran {selected}, not {alg}"));
    }
    req.run().map_err(|e| format!("{selected}: {e}"))
}

fn compare<T: Val>(what: String, got: &[T], want: &[T]) -> Outcome {
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None if got.len() == want.len() => Ok(()),
        None => Err(format!("{what}: {} elements, expected {}", got.len(), want.len())),
        Some(i) => Err(format!("{what}: element {i} is {:?}, expected {:?}", got[i], want[i])),
    }
}

/// Run `case` for every block count, in place and not, cycling u8/u32/u64.
fn each_case(size: usize, coll: CollType, alg: &'static str, case: Case) {
    let failures: Vec<String> = run(size, &pin(coll, alg), move |team, _| {
        let mut failures = Vec::new();
        for variant in 0..5 {
            for in_place in [false, true] {
                let dtype = (variant * 2 + usize::from(in_place)) % 3;
                if let Err(e) = case(team, alg, variant, in_place, dtype) {
                    failures.push(format!("rank {} variant {variant} in_place {in_place}: {e}", team.rank()));
                }
            }
        }
        failures
    })
    .into_iter()
    .flatten()
    .collect();
    assert!(failures.is_empty(), "{coll}/{alg} on {size} ranks:\n{}", failures.join("\n"));
}

macro_rules! by_dtype {
    ($f:ident, $dtype:expr, $($arg:expr),*) => {
        match $dtype {
            0 => $f::<u8>($($arg),*),
            1 => $f::<u32>($($arg),*),
            _ => $f::<u64>($($arg),*),
        }
    };
}

fn allgather<T: Val>(team: &Team, alg: &str, variant: usize, in_place: bool) -> Outcome {
    let (r, p, n) = (team.rank(), team.size(), block_counts::<T>()[variant]);
    let want: Vec<T> = (0..p * n).map(|i| val(i / n.max(1), 0, i % n.max(1))).collect();
    let mut dst = vec![T::POISON; p * n];
    let src: Vec<T> = want[r * n..(r + 1) * n].to_vec();
    if in_place {
        dst[r * n..(r + 1) * n].copy_from_slice(&src);
        go(team, Coll::allgather_in_place(&mut dst), alg)?;
    } else {
        go(team, Coll::allgather(&src, &mut dst), alg)?;
    }
    compare(format!("allgather of {n} per rank"), &dst, &want)
}

fn alltoall<T: Val>(team: &Team, alg: &str, variant: usize, in_place: bool) -> Outcome {
    let (r, p, n) = (team.rank(), team.size(), block_counts::<T>()[variant]);
    let src: Vec<T> = (0..p * n).map(|i| val(r, i / n.max(1), i % n.max(1))).collect();
    let want: Vec<T> = (0..p * n).map(|i| val(i / n.max(1), r, i % n.max(1))).collect();
    let mut dst = vec![T::POISON; p * n];
    if in_place {
        dst.copy_from_slice(&src);
        go(team, Coll::alltoall_in_place(&mut dst), alg)?;
    } else {
        go(team, Coll::alltoall(&src, &mut dst), alg)?;
    }
    compare(format!("alltoall of {n} per block"), &dst, &want)
}

/// Irregular element counts: zeros, small, medium and (variant 4) a large block.
fn irregular<T>(a: usize, b: usize, variant: usize) -> usize {
    match (a * 5 + b * 3 + variant) % 6 {
        0 => 0,
        1 => 1,
        2 => 7,
        3 if variant == 4 => big::<T>(),
        3 => 1000,
        4 => 3,
        _ => 0,
    }
}

/// Displacements for `counts` on rank `rank`: blocks in an order rotated by
/// the rank and reversed, a gap before most. Empty blocks are at 0, or with
/// `far` past the end of the buffer (validation allows any displacement for
/// a count of 0). Returns the displacements and the buffer length.
fn scatter_layout(counts: &[usize], rank: usize, far: bool) -> (Vec<usize>, usize) {
    let p = counts.len();
    let mut displs = vec![0; p];
    let mut at = 0;
    for k in 0..p {
        let i = (p - 1 - k + rank) % p;
        at += (i + rank) % 3;
        displs[i] = at;
        at += counts[i];
    }
    for (d, &c) in displs.iter_mut().zip(counts) {
        if c == 0 {
            *d = if far { at + 5 } else { 0 };
        }
    }
    (displs, at)
}

/// `buf` poisoned, with block i at `displs[i]` filled by `fill(i, k)`.
fn laid_out<T: Val>(counts: &[usize], displs: &[usize], len: usize, fill: impl Fn(usize, usize) -> T) -> Vec<T> {
    let mut buf = vec![T::POISON; len];
    for (i, (&c, &d)) in counts.iter().zip(displs).enumerate() {
        for k in 0..c {
            buf[d + k] = fill(i, k);
        }
    }
    buf
}

fn allgatherv<T: Val>(team: &Team, alg: &str, variant: usize, in_place: bool) -> Outcome {
    let (r, p, far, variant) = (team.rank(), team.size(), variant >= 5, variant % 5);
    let counts: Vec<usize> = (0..p).map(|i| irregular::<T>(i, 0, variant)).collect();
    let (displs, len) = scatter_layout(&counts, r, far);
    let want = laid_out::<T>(&counts, &displs, len, |i, k| val(i, 0, k));
    let src: Vec<T> = (0..counts[r]).map(|k| val(r, 0, k)).collect();
    let (c64, d64): (Vec<u64>, Vec<u64>) = (counts.iter().map(|&c| c as u64).collect(), to_u64(&displs));
    let (c32, d32): (Vec<u32>, Vec<u32>) = (to_u32(&counts), to_u32(&displs));
    let mut dst = vec![T::POISON; len];
    let coll = match (in_place, variant % 2) {
        (true, w) => {
            if counts[r] > 0 {
                dst[displs[r]..displs[r] + counts[r]].copy_from_slice(&src);
            }
            if w == 0 {
                Coll::allgatherv_in_place(&mut dst, &c32, &d32)
            } else {
                Coll::allgatherv_in_place(&mut dst, &c64, &d64)
            }
        }
        (false, 0) => Coll::allgatherv(&src, &mut dst, &c32, &d32),
        (false, _) => Coll::allgatherv(&src, &mut dst, &c64, &d64),
    };
    go(team, coll, alg)?;
    compare(format!("allgatherv of counts {counts:?}"), &dst, &want)
}

fn to_u32(v: &[usize]) -> Vec<u32> {
    v.iter().map(|&x| x as u32).collect()
}

fn to_u64(v: &[usize]) -> Vec<u64> {
    v.iter().map(|&x| x as u64).collect()
}

fn alltoallv<T: Val>(team: &Team, alg: &str, variant: usize, in_place: bool) -> Outcome {
    if in_place {
        return alltoallv_in_place::<T>(team, alg, variant);
    }
    let (r, p, far, variant) = (team.rank(), team.size(), variant >= 5, variant % 5);
    let send: Vec<usize> = (0..p).map(|j| irregular::<T>(r, j, variant)).collect();
    let recv: Vec<usize> = (0..p).map(|j| irregular::<T>(j, r, variant)).collect();
    let (sd, slen) = scatter_layout(&send, r, far);
    let (rd, rlen) = scatter_layout(&recv, r + 1, far);
    let src = laid_out::<T>(&send, &sd, slen, |j, k| val(r, j, k));
    let want = laid_out::<T>(&recv, &rd, rlen, |j, k| val(j, r, k));
    let mut dst = vec![T::POISON; rlen];
    let (sc, sdw, rc, rdw) = (to_u64(&send), to_u64(&sd), to_u64(&recv), to_u64(&rd));
    go(team, Coll::alltoallv(&src, &sc, &sdw, &mut dst, &rc, &rdw), alg)?;
    compare(format!("alltoallv receiving {recv:?}"), &dst, &want)
}

/// Alltoallv in place (dst's counts and displacements for both sides, so
/// the counts are symmetric). The typed API has no builder for it: raw args.
fn alltoallv_in_place<T: Val>(team: &Team, alg: &str, variant: usize) -> Outcome {
    let (r, p, far, variant) = (team.rank(), team.size(), variant >= 5, variant % 5);
    let counts: Vec<usize> = (0..p).map(|j| irregular::<T>(r.min(j), r.max(j), variant)).collect();
    let (displs, len) = scatter_layout(&counts, r, far);
    let mut buf = laid_out::<T>(&counts, &displs, len, |j, k| val(r, j, k));
    let want = laid_out::<T>(&counts, &displs, len, |j, k| val(j, r, k));
    let (c32, d32) = (to_u32(&counts), to_u32(&displs));
    let args = CollArgs {
        dst: CollBuffer::InfoV(BufferInfoV {
            buffer: buf.as_mut_ptr().cast(),
            counts: c32.as_ptr().cast(),
            displacements: d32.as_ptr().cast(),
            datatype: T::DTYPE,
            mem_type: MemType::Host,
        }),
        flags: CollFlags::IN_PLACE | CollFlags::TIMEOUT,
        timeout: TEST_TIMEOUT.as_secs_f64(),
        ..CollArgs::new(CollType::Alltoallv)
    };
    {
        // SAFETY: buf, c32 and d32 outlive the request, which is dropped at
        // the end of this block, and nothing else touches them meanwhile;
        // the counts and displacements are team-size u32 arrays that fit buf.
        let req: Result<Request<'static>> = unsafe { team.collective_init(&args) };
        finish(&mut req.map_err(|e| e.to_string())?, alg)?;
    }
    compare(format!("alltoallv in place with counts {counts:?}"), &buf, &want)
}

fn allgather_case(t: &Team, a: &'static str, v: usize, ip: bool, d: usize) -> Outcome {
    by_dtype!(allgather, d, t, a, v, ip)
}

fn allgatherv_case(t: &Team, a: &'static str, v: usize, ip: bool, d: usize) -> Outcome {
    by_dtype!(allgatherv, d, t, a, v, ip)
}

fn alltoall_case(t: &Team, a: &'static str, v: usize, ip: bool, d: usize) -> Outcome {
    by_dtype!(alltoall, d, t, a, v, ip)
}

fn alltoallv_case(t: &Team, a: &'static str, v: usize, ip: bool, d: usize) -> Outcome {
    by_dtype!(alltoallv, d, t, a, v, ip)
}

macro_rules! alg_test {
    ($name:ident, $coll:ident, $alg:literal, $case:ident) => {
        #[test]
        fn $name() {
            for size in SIZES {
                each_case(size, CollType::$coll, $alg, $case);
            }
        }
    };
}

alg_test!(allgather_knomial, Allgather, "knomial", allgather_case);
alg_test!(allgather_ring, Allgather, "ring", allgather_case);
alg_test!(allgather_bruck, Allgather, "bruck", allgather_case);
alg_test!(allgatherv_ring, Allgatherv, "ring", allgatherv_case);
alg_test!(allgatherv_linear, Allgatherv, "linear", allgatherv_case);
alg_test!(alltoall_pairwise, Alltoall, "pairwise", alltoall_case);
alg_test!(alltoall_bruck, Alltoall, "bruck", alltoall_case);
alg_test!(alltoallv_pairwise, Alltoallv, "pairwise", alltoallv_case);
alg_test!(alltoallv_linear, Alltoallv, "linear", alltoallv_case);

/// Knomial allgather with other radices (extras and proxies in other shapes).
#[test]
fn allgather_knomial_radices() {
    for radix in ["2", "3", "5"] {
        for size in [3, 7, 11, 16] {
            let mut config = pin(CollType::Allgather, "knomial");
            config.set("TL_P2P_ALLGATHER_KN_RADIX", radix);
            let failures: Vec<String> = run(size, &config, |team, _| {
                (0..5).filter_map(|v| allgather::<u32>(team, "knomial", v, v % 2 == 1).err()).collect::<Vec<_>>()
            })
            .into_iter()
            .flatten()
            .collect();
            assert!(failures.is_empty(), "radix {radix} on {size} ranks:\n{}", failures.join("\n"));
        }
    }
}

/// Pairwise alltoall(v) with one exchange in flight and with many.
#[test]
fn pairwise_windows() {
    for posts in ["1", "2", "64"] {
        for (coll, case) in [(CollType::Alltoall, alltoall_case as Case), (CollType::Alltoallv, alltoallv_case)] {
            for size in [5, 8] {
                let mut config = pin(coll, "pairwise");
                config.set("TL_P2P_ALLTOALL_PAIRWISE_NUM_POSTS", posts);
                let failures: Vec<String> = run(size, &config, move |team, _| {
                    (0..5).filter_map(|v| case(team, "pairwise", v, v % 2 == 0, v % 3).err()).collect::<Vec<_>>()
                })
                .into_iter()
                .flatten()
                .collect();
                assert!(failures.is_empty(), "{coll} window {posts} on {size} ranks:\n{}", failures.join("\n"));
            }
        }
    }
}

/// v-variants whose empty blocks are displaced past the end of the buffer,
/// on teams of `sizes`.
fn empty_blocks_far(sizes: &[usize]) {
    let algs: [(CollType, &str, Case); 4] = [
        (CollType::Allgatherv, "ring", allgatherv_case),
        (CollType::Allgatherv, "linear", allgatherv_case),
        (CollType::Alltoallv, "pairwise", alltoallv_case),
        (CollType::Alltoallv, "linear", alltoallv_case),
    ];
    for (coll, alg, case) in algs {
        for &size in sizes {
            let failures: Vec<String> = run(size, &pin(coll, alg), move |team, _| {
                (5..10).filter_map(|v| case(team, alg, v, v % 2 == 0, v % 3).err()).collect::<Vec<_>>()
            })
            .into_iter()
            .flatten()
            .collect();
            assert!(failures.is_empty(), "{coll}/{alg} on {size} ranks:\n{}", failures.join("\n"));
        }
    }
}

#[test]
fn empty_blocks_displaced_past_the_end() {
    empty_blocks_far(&[2, 3, 5, 8]);
}

#[test]
fn empty_blocks_displaced_past_the_end_on_one_rank() {
    empty_blocks_far(&[1]);
}
