//! The rooted p2p algorithms, each pinned in turn: gather (knomial, linear),
//! gatherv (linear), scatter (knomial, linear), scatterv (linear), bcast
//! (sag_knomial), fanin and fanout (knomial).
//!
//! Team sizes 1 to 16 (odd, prime, powers of two), every root of small teams
//! and the first, middle and last of larger ones, blocks of 0, 1, 7, 1000 and
//! 5000 elements (the last above the 16 KiB eager limit), in place and not.
//! Element values are derived from (rank, index); outputs are poisoned before
//! each run and compared exactly, gaps between v-blocks included. Every case
//! of a team runs inside one world, and each rank returns what it found wrong.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrocoll::{ActiveSet, BufferInfoV, Coll, CollArgs, CollBuffer, CollFlags, CollType, Element, MemType, Team};
use ferrocoll_tests::world::{TEST_TIMEOUT, pin, run};

const SIZES: [usize; 9] = [1, 2, 3, 4, 5, 7, 8, 11, 16];
/// Elements per block (gather, scatter); 5000 × 4 bytes is past the eager limit.
const BLOCKS: [usize; 5] = [0, 1, 7, 1000, 5000];

/// An element type with values derived from (rank, index) that never equal the poison.
trait Val: Element + PartialEq + std::fmt::Debug {
    fn of(rank: usize, i: usize) -> Self;
    const POISON: Self;
}

impl Val for u32 {
    fn of(rank: usize, i: usize) -> u32 {
        ((rank as u32 + 1) << 24) | (i as u32 & 0xff_ffff)
    }
    const POISON: u32 = 0xdead_beef;
}

impl Val for u8 {
    fn of(rank: usize, i: usize) -> u8 {
        ((rank * 31 + i * 7) % 251) as u8
    }
    const POISON: u8 = 0xff;
}

impl Val for u128 {
    fn of(rank: usize, i: usize) -> u128 {
        ((rank as u128 + 1) << 100) | ((i as u128) << 3) | 1
    }
    const POISON: u128 = 0;
}

fn roots(size: usize) -> Vec<usize> {
    if size <= 5 { (0..size).collect() } else { vec![0, size / 2, size - 1] }
}

/// Compares `got` with `expect(i)` and records the first mismatch under `case`.
fn check<T: Val>(errs: &mut Vec<String>, case: &str, got: &[T], expect: impl Fn(usize) -> T) {
    if let Some(i) = (0..got.len()).find(|&i| got[i] != expect(i)) {
        errs.push(format!("{case}: element {i} is {:?}, expected {:?}", got[i], expect(i)));
    }
}

/// Runs `body` on every rank of a team of `size` with `alg` pinned for `coll`
/// (knomial trees with radix `radix`, 0 for the default), and fails with
/// every rank's findings.
fn world(
    coll: CollType,
    alg: &str,
    radix: usize,
    size: usize,
    body: impl Fn(&Team) -> Vec<String> + Send + Sync + 'static,
) {
    let mut config = pin(coll, alg);
    if radix > 0 {
        let knob = match coll {
            CollType::Bcast => "BCAST_SAG".to_string(),
            _ => coll.to_string().to_uppercase(),
        };
        config.set(&format!("TL_P2P_{knob}_KN_RADIX"), radix.to_string());
    }
    let found: Vec<String> = run(size, &config, move |team, _| {
        let found = body(team);
        settle(team);
        found
    })
    .concat();
    assert!(found.is_empty(), "{coll}/{alg} radix {radix} on {size} ranks:\n{}", found.join("\n"));
}

/// Ends a world with a gather of blocks past the eager limit, which no rank
/// leaves while a peer may still receive from it. Without it, a rank that
/// leaves right after an eager send can fail its peer's pending receive: the
/// in-process transport looks for the message, then (not finding it) checks
/// whether the sender's context is gone, and both may happen in between.
fn settle(team: &Team) {
    let src = vec![0u32; 5000];
    let mut dst = vec![0u32; if team.rank() == 0 { 5000 * team.size() } else { 0 }];
    let dst = if team.rank() == 0 { Some(&mut dst[..]) } else { None };
    Coll::gather(&src, dst, 0).timeout(TEST_TIMEOUT).run(team).expect("settling gather");
}

/// Knomial radices to try (0: the configured default); one for other algorithms.
fn radices(alg: &str) -> &'static [usize] {
    if alg.contains("knomial") { &[0, 2, 3] } else { &[0] }
}

fn gather<T: Val>(team: &Team, n: usize, root: usize, in_place: bool, errs: &mut Vec<String>) {
    let (rank, size) = (team.rank(), team.size());
    let case = format!("gather n {n} root {root} in place {in_place} rank {rank}");
    let src: Vec<T> = (0..n).map(|i| T::of(rank, i)).collect();
    if rank != root {
        Coll::gather(&src, None, root).timeout(TEST_TIMEOUT).run(team).expect(&case);
        return;
    }
    let mut dst = vec![T::POISON; size * n];
    let coll = if in_place {
        dst[root * n..(root + 1) * n].copy_from_slice(&src);
        Coll::gather_in_place_at_root(&mut dst, root)
    } else {
        Coll::gather(&src, Some(&mut dst), root)
    };
    coll.timeout(TEST_TIMEOUT).run(team).expect(&case);
    check(errs, &case, &dst, |i| T::of(i / n, i % n));
}

fn scatter<T: Val>(team: &Team, n: usize, root: usize, in_place: bool, errs: &mut Vec<String>) {
    let (rank, size) = (team.rank(), team.size());
    let case = format!("scatter n {n} root {root} in place {in_place} rank {rank}");
    let mut dst = vec![T::POISON; n];
    if rank != root {
        Coll::scatter(None, &mut dst, root).timeout(TEST_TIMEOUT).run(team).expect(&case);
        return check(errs, &case, &dst, |i| T::of(rank, i));
    }
    let src: Vec<T> = (0..size * n).map(|i| T::of(i / n, i % n)).collect();
    if in_place {
        Coll::scatter_in_place_at_root(&src, root).timeout(TEST_TIMEOUT).run(team).expect(&case);
    } else {
        Coll::scatter(Some(&src), &mut dst, root).timeout(TEST_TIMEOUT).run(team).expect(&case);
        check(errs, &case, &dst, |i| T::of(rank, i));
    }
    check(errs, &format!("{case} (src untouched)"), &src, |i| T::of(i / n, i % n));
}

/// Irregular counts (zeros included) and displacements in reverse rank order
/// with gaps; returns (counts, displs, buffer length).
fn v_layout(size: usize, seed: usize, big: usize) -> (Vec<u64>, Vec<u64>, usize) {
    let counts: Vec<u64> = (0..size).map(|r| [0, 1, 7, big][(r + seed) % 4] as u64).collect();
    let mut displs = vec![0u64; size];
    let mut at = 0u64;
    for r in (0..size).rev() {
        at += (r % 3) as u64;
        displs[r] = at;
        at += counts[r];
    }
    (counts, displs, at as usize + 2)
}

/// What a gathered (or scattered-from) v-buffer holds: rank r's values in its
/// block, `gap` elsewhere.
fn v_expect<T: Val>(counts: &[u64], displs: &[u64], len: usize, gap: T) -> Vec<T> {
    let mut out = vec![gap; len];
    for r in 0..counts.len() {
        for i in 0..counts[r] as usize {
            out[displs[r] as usize + i] = T::of(r, i);
        }
    }
    out
}

/// A v-variant call at the root, in place (the typed API has no such constructor).
fn v_in_place_at_root(team: &Team, coll: CollType, buf: &mut [u32], counts: &[u64], displs: &[u64], root: usize) {
    let info = BufferInfoV {
        buffer: buf.as_mut_ptr().cast(),
        counts: counts.as_ptr().cast(),
        displacements: displs.as_ptr().cast(),
        datatype: u32::DTYPE,
        mem_type: MemType::Host,
    };
    let mut args = CollArgs::new(coll);
    args.root = root as u64;
    args.flags = CollFlags::IN_PLACE | CollFlags::COUNT_64BIT | CollFlags::DISPLACEMENTS_64BIT | CollFlags::TIMEOUT;
    args.timeout = TEST_TIMEOUT.as_secs_f64();
    match coll {
        CollType::Gatherv => args.dst = CollBuffer::InfoV(info),
        _ => args.src = CollBuffer::InfoV(info),
    }
    // SAFETY: buf, counts and displs outlive the request, which is run to
    // completion here; counts and displs are team-size u64 arrays (the flags
    // say so) and every block they describe lies inside buf (v_layout).
    let mut req = unsafe { team.collective_init(&args) }.expect("v in place init");
    req.run().expect("v in place run");
}

fn gatherv(team: &Team, seed: usize, big: usize, root: usize, in_place: bool, errs: &mut Vec<String>) {
    let (rank, size) = (team.rank(), team.size());
    let case = format!("gatherv seed {seed} big {big} root {root} in place {in_place} rank {rank}");
    let (counts, displs, len) = v_layout(size, seed, big);
    let src: Vec<u32> = (0..counts[rank] as usize).map(|i| u32::of(rank, i)).collect();
    if rank != root {
        Coll::gatherv::<u32, u64>(&src, None, root).timeout(TEST_TIMEOUT).run(team).expect(&case);
        return;
    }
    let mut dst = vec![u32::POISON; len];
    if in_place {
        let at = displs[root] as usize;
        dst[at..at + src.len()].copy_from_slice(&src);
        v_in_place_at_root(team, CollType::Gatherv, &mut dst, &counts, &displs, root);
    } else {
        Coll::gatherv(&src, Some((&mut dst, &counts, &displs)), root).timeout(TEST_TIMEOUT).run(team).expect(&case);
    }
    let expect = v_expect(&counts, &displs, len, u32::POISON);
    check(errs, &case, &dst, |i| expect[i]);
}

fn scatterv(team: &Team, seed: usize, big: usize, root: usize, in_place: bool, errs: &mut Vec<String>) {
    let (rank, size) = (team.rank(), team.size());
    let case = format!("scatterv seed {seed} big {big} root {root} in place {in_place} rank {rank}");
    let (counts, displs, len) = v_layout(size, seed, big);
    let mut dst = vec![u32::POISON; counts[rank] as usize];
    if rank != root {
        Coll::scatterv::<u32, u64>(None, &mut dst, root).timeout(TEST_TIMEOUT).run(team).expect(&case);
        return check(errs, &case, &dst, |i| u32::of(rank, i));
    }
    let mut src = v_expect(&counts, &displs, len, 7u32);
    let before = src.clone();
    if in_place {
        v_in_place_at_root(team, CollType::Scatterv, &mut src, &counts, &displs, root);
    } else {
        Coll::scatterv(Some((&src[..], &counts[..], &displs[..])), &mut dst, root)
            .timeout(TEST_TIMEOUT)
            .run(team)
            .expect(&case);
        check(errs, &case, &dst, |i| u32::of(rank, i));
    }
    check(errs, &format!("{case} (src untouched)"), &src, |i| before[i]);
}

fn bcast<T: Val>(team: &Team, n: usize, root: usize, errs: &mut Vec<String>) {
    let rank = team.rank();
    let case = format!("bcast n {n} root {root} rank {rank}");
    let mut buf: Vec<T> = if rank == root { (0..n).map(|i| T::of(root, i)).collect() } else { vec![T::POISON; n] };
    Coll::bcast(&mut buf, root).timeout(TEST_TIMEOUT).run(team).expect(&case);
    check(errs, &case, &buf, |i| T::of(root, i));
}

#[test]
fn gather_every_shape() {
    for alg in ["knomial", "linear"] {
        for (&radix, size) in radices(alg).iter().flat_map(|r| SIZES.iter().map(move |&s| (r, s))) {
            world(CollType::Gather, alg, radix, size, |team| {
                let mut errs = Vec::new();
                for root in roots(team.size()) {
                    for n in BLOCKS {
                        for in_place in [false, true] {
                            gather::<u32>(team, n, root, in_place, &mut errs);
                        }
                    }
                }
                errs
            });
        }
    }
}

#[test]
fn scatter_every_shape() {
    for alg in ["knomial", "linear"] {
        for (&radix, size) in radices(alg).iter().flat_map(|r| SIZES.iter().map(move |&s| (r, s))) {
            world(CollType::Scatter, alg, radix, size, |team| {
                let mut errs = Vec::new();
                for root in roots(team.size()) {
                    for n in BLOCKS {
                        for in_place in [false, true] {
                            scatter::<u32>(team, n, root, in_place, &mut errs);
                        }
                    }
                }
                errs
            });
        }
    }
}

#[test]
fn gatherv_and_scatterv_irregular_layouts() {
    for size in SIZES {
        for coll in [CollType::Gatherv, CollType::Scatterv] {
            world(coll, "linear", 0, size, move |team| {
                let mut errs = Vec::new();
                for root in roots(team.size()) {
                    for (seed, big) in [(0, 3), (1, 1000), (2, 5000), (3, 0)] {
                        for in_place in [false, true] {
                            match coll {
                                CollType::Gatherv => gatherv(team, seed, big, root, in_place, &mut errs),
                                _ => scatterv(team, seed, big, root, in_place, &mut errs),
                            }
                        }
                    }
                }
                errs
            });
        }
    }
}

#[test]
fn bcast_sag_knomial_every_shape() {
    for (&radix, size) in radices("sag_knomial").iter().flat_map(|r| SIZES.iter().map(move |&s| (r, s))) {
        world(CollType::Bcast, "sag_knomial", radix, size, |team| {
            let mut errs = Vec::new();
            for root in roots(team.size()) {
                // Fewer elements than ranks, uneven blocks, and blocks past the eager limit.
                for n in [0, 1, 7, 1000, 5003, 70_001] {
                    bcast::<u32>(team, n, root, &mut errs);
                }
            }
            errs
        });
    }
}

#[test]
fn bcast_sag_knomial_active_set() {
    // Members 6, 4, 2 of a team of 7; the others do not post.
    world(CollType::Bcast, "sag_knomial", 0, 7, |team| {
        let mut errs = Vec::new();
        let set = ActiveSet { start: 6, stride: -2, size: 3 };
        if team.rank() % 2 == 1 || team.rank() == 0 {
            return errs;
        }
        for (tag, n) in [(1u16, 70_000usize), (2, 5)] {
            let mut buf: Vec<u32> =
                if team.rank() == 4 { (0..n).map(|i| u32::of(4, i)).collect() } else { vec![u32::POISON; n] };
            Coll::bcast(&mut buf, 4).active_set(set, tag).timeout(TEST_TIMEOUT).run(team).expect("active-set bcast");
            check(&mut errs, &format!("active set n {n} rank {}", team.rank()), &buf, |i| u32::of(4, i));
        }
        errs
    });
}

#[test]
fn other_element_sizes() {
    for size in [3, 7] {
        for (coll, alg) in [
            (CollType::Gather, "knomial"),
            (CollType::Scatter, "knomial"),
            (CollType::Gather, "linear"),
            (CollType::Scatter, "linear"),
            (CollType::Bcast, "sag_knomial"),
        ] {
            world(coll, alg, 0, size, move |team| {
                let mut errs = Vec::new();
                for root in roots(team.size()) {
                    for n in [1, 5, 20_000] {
                        match coll {
                            CollType::Gather => {
                                gather::<u8>(team, n, root, false, &mut errs);
                                gather::<u128>(team, n / 4, root, true, &mut errs);
                            }
                            CollType::Scatter => {
                                scatter::<u8>(team, n, root, true, &mut errs);
                                scatter::<u128>(team, n / 4, root, false, &mut errs);
                            }
                            _ => {
                                bcast::<u8>(team, n * 3 + 1, root, &mut errs);
                                bcast::<u128>(team, n, root, &mut errs);
                            }
                        }
                    }
                }
                errs
            });
        }
    }
}

#[test]
fn fanin_root_leaves_after_every_rank_entered() {
    for (&radix, size) in radices("knomial").iter().flat_map(|r| SIZES.iter().map(move |&s| (r, s))) {
        let entered = Arc::new(AtomicUsize::new(0));
        world(CollType::Fanin, "knomial", radix, size, move |team| {
            let (rank, size) = (team.rank(), team.size());
            let mut errs = Vec::new();
            for (round, root) in (0..size).chain([0, size - 1]).enumerate() {
                // The last rank enters late, so a root that does not wait is caught.
                if rank == size - 1 && round % 2 == 0 {
                    std::thread::sleep(Duration::from_millis(2));
                }
                // SeqCst: the root's load after the fanin must see every increment made before it.
                entered.fetch_add(1, Ordering::SeqCst);
                Coll::fanin(root).timeout(TEST_TIMEOUT).run(team).expect("fanin");
                let seen = entered.load(Ordering::SeqCst);
                if rank == root && seen < (round + 1) * size {
                    errs.push(format!(
                        "round {round} root {root} left after {seen} entries, expected ≥ {}",
                        (round + 1) * size
                    ));
                }
            }
            errs
        });
    }
}

#[test]
fn fanout_ranks_leave_after_the_root_entered() {
    for (&radix, size) in radices("knomial").iter().flat_map(|r| SIZES.iter().map(move |&s| (r, s))) {
        let root_entered = Arc::new(AtomicUsize::new(0));
        world(CollType::Fanout, "knomial", radix, size, move |team| {
            let (rank, size) = (team.rank(), team.size());
            let mut errs = Vec::new();
            for (round, root) in (0..size).chain([0, size - 1]).enumerate() {
                if rank == root {
                    // The root enters late, so ranks that do not wait for it are caught.
                    if round % 2 == 0 {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    root_entered.fetch_add(1, Ordering::SeqCst);
                }
                Coll::fanout(root).timeout(TEST_TIMEOUT).run(team).expect("fanout");
                let seen = root_entered.load(Ordering::SeqCst);
                if seen < round + 1 {
                    errs.push(format!("round {round} rank {rank} left before root {root} entered ({seen})"));
                }
            }
            errs
        });
    }
}
