//! The v-variants' size round on the shm TL (`tl/src/shm/alg/meta.rs`):
//! each rank publishes a table of what it gives and takes and, when its
//! blocks are short, the blocks too — in its inline region when they fit
//! there, else in its data half (an epoch that writes a half), each rank
//! by its own longest block; the round finishes the collective, or single
//! copy does, or data rounds follow. Here the ranks of one call choose
//! differently (one rank's blocks inline, another's in its half, a third's
//! too long to carry or long enough for single copy), calls of every kind
//! follow each other on the same team, and repeated calls run again in the
//! box of their last post: a table or block read from the wrong place, or
//! a region rewritten before its readers were done, gives wrong values.

use std::time::Duration;

use ferrocoll::{Coll, Config, Team};
use ferrocoll_tests::world;

/// Long enough never to fire in a healthy run; a regression fails instead of hanging.
const T: Duration = Duration::from_secs(60);

/// Elements (u32) of a block: empty, inline for any team here (4–400 B),
/// past an inline region (10 KiB, 40 KiB: in the half), past the carry
/// (a half's slot) and in single copy's range (80 KiB, 400 KiB).
const COUNTS: [usize; 8] = [0, 1, 2, 100, 2500, 10_000, 20_000, 100_000];

fn on_shm<R: Send + 'static>(ranks: usize, f: impl Fn(&Team) -> R + Send + Sync + 'static) -> Vec<R> {
    let mut c = Config::new();
    c.set("TLS", "shm,self");
    world::run(ranks, &c, move |team, _| f(team))
}

/// Element `k` of what rank `r` gives rank `j` in iteration `i`.
fn value(i: usize, r: usize, j: usize, k: usize) -> u32 {
    (i as u32 % 101) << 24 | (r as u32) << 18 | (j as u32) << 12 | (k as u32 & 0xfff)
}

/// The counts of iteration `i`: long blocks rare enough that most calls
/// carry everything, and each rank's longest differs from the others'.
fn count(i: usize, r: usize, j: usize) -> usize {
    let pick = (i * 7 + r * 3 + j * 5 + (i / 4) * r) % 23;
    COUNTS[match pick {
        0..=5 => 1,
        6..=10 => 2,
        11..=14 => 3,
        15 => 0,
        16..=17 => 4,
        18 => 5,
        19 => 6,
        20 => 7,
        _ => pick % 4,
    }]
}

/// Displacements of blocks of `counts`, back to back in order.
fn packed(counts: &[usize]) -> Vec<u32> {
    counts.iter().scan(0, |at, &c| Some(std::mem::replace(at, *at + c) as u32)).collect()
}

fn as_u32(v: &[usize]) -> Vec<u32> {
    v.iter().map(|&c| c as u32).collect()
}

/// The counts of iteration `i` with short blocks only (at most 400 B):
/// every call carries its blocks, even on a large team.
fn short(i: usize, r: usize, j: usize) -> usize {
    COUNTS[(i + r * 3 + j * 5) % 4]
}

/// One alltoallv, gatherv and scatterv of iteration `i`, checked, with the
/// counts of `pattern`; every other iteration also an alltoallv in place
/// (counts symmetric).
fn round(team: &Team, i: usize, pattern: usize) -> ferrocoll::Result<()> {
    round_of(team, i, &|r, j| count(pattern, r, j))
}

fn round_of(team: &Team, i: usize, c: &(dyn Fn(usize, usize) -> usize + Sync)) -> ferrocoll::Result<()> {
    let (p, me) = (team.size(), team.rank());
    let wrong = |what: &str| Err(ferrocoll::Error::internal(format!("iteration {i}: wrong {what}")));

    // Alltoallv: block j of my src goes to rank j; block r of my dst comes from rank r.
    let send: Vec<usize> = (0..p).map(|j| c(me, j)).collect();
    let recv: Vec<usize> = (0..p).map(|r| c(r, me)).collect();
    let src: Vec<u32> = (0..p).flat_map(|j| (0..send[j]).map(move |k| value(i, me, j, k))).collect();
    let mut dst = vec![0u32; recv.iter().sum()];
    let (sc, sd, rc, rd) = (as_u32(&send), packed(&send), as_u32(&recv), packed(&recv));
    Coll::alltoallv(&src, &sc, &sd, &mut dst, &rc, &rd).timeout(T).run(team)?;
    if (0..p).any(|r| (0..recv[r]).any(|k| dst[rd[r] as usize + k] != value(i, r, me, k))) {
        return wrong("alltoallv");
    }

    if i.is_multiple_of(2) {
        let sym = |a: usize, b: usize| c(a.min(b), a.max(b));
        let counts: Vec<usize> = (0..p).map(|j| sym(me, j)).collect();
        let (cc, cd) = (as_u32(&counts), packed(&counts));
        let mut buf: Vec<u32> = (0..p).flat_map(|j| (0..counts[j]).map(move |k| value(i, me, j, k))).collect();
        Coll::alltoallv_in_place(&mut buf, &cc, &cd).timeout(T).run(team)?;
        if (0..p).any(|r| (0..counts[r]).any(|k| buf[cd[r] as usize + k] != value(i, r, me, k))) {
            return wrong("alltoallv in place");
        }
    }

    // Gatherv to a root that moves: rank r's block is c(r, root) long.
    let root = i % p;
    let mine: Vec<u32> = (0..c(me, root)).map(|k| value(i, me, root, k)).collect();
    let blocks: Vec<usize> = (0..p).map(|r| c(r, root)).collect();
    let (gc, gd) = (as_u32(&blocks), packed(&blocks));
    let mut all = vec![0u32; blocks.iter().sum()];
    let dst = (me == root).then_some((&mut all[..], &gc[..], &gd[..]));
    Coll::gatherv(&mine, dst, root).timeout(T).run(team)?;
    if me == root && (0..p).any(|r| (0..blocks[r]).any(|k| all[gd[r] as usize + k] != value(i, r, root, k))) {
        return wrong("gatherv");
    }

    // Scatterv from another root: rank j's block is c(root, j) long.
    let root = (i + 1) % p;
    let blocks: Vec<usize> = (0..p).map(|j| c(root, j)).collect();
    let (sc, sd) = (as_u32(&blocks), packed(&blocks));
    let whole: Vec<u32> = (0..p).flat_map(|j| (0..blocks[j]).map(move |k| value(i, root, j, k))).collect();
    let mut got = vec![0u32; blocks[me]];
    let src = (me == root).then_some((&whole[..], &sc[..], &sd[..]));
    Coll::scatterv(src, &mut got, root).timeout(T).run(team)?;
    if (0..blocks[me]).any(|k| got[k] != value(i, root, me, k)) {
        return wrong("scatterv");
    }
    Ok(())
}

fn check(out: Vec<ferrocoll::Result<()>>, what: &str) {
    for (rank, r) in out.into_iter().enumerate() {
        r.unwrap_or_else(|e| panic!("{what}, rank {rank}: {e}"));
    }
}

#[test]
fn ranks_that_carry_their_blocks_in_different_places_give_right_values() {
    for ranks in [2, 3] {
        let out = on_shm(ranks, |team| (0..120).try_for_each(|i| round(team, i, i)));
        check(out, &format!("{ranks} ranks"));
    }
}

/// The same calls posted again and again run in the box of their last
/// post (`one_epoch::restart`), alone or between others.
#[test]
fn repeated_calls_give_right_values() {
    let out = on_shm(3, |team| {
        (0..40).try_for_each(|i| {
            // Four posts of one pattern, then the next.
            round(team, i, i / 4)
        })
    });
    check(out, "3 ranks, repeated");
}

/// A team whose tables are too long for an inline region (175 ranks: 3 ×
/// 8 × 175 bytes, past the 4 192 that tables may take of one, `meta.rs`)
/// keeps them, and the blocks, in the data halves:
/// short blocks carried there, then longer ones. Two short rounds and one
/// long, with blocks of at most 80 KiB (single copy's range still): 175
/// threads on a 2-core machine take seconds per round, and an alltoallv's
/// buffers grow with the square of the ranks (2.2 GB with the 400 KiB
/// blocks of the other tests).
#[test]
fn a_team_too_large_for_inline_tables_gives_right_values() {
    let out = on_shm(175, |team| {
        (0..2).try_for_each(|i| round_of(team, i, &|r, j| short(i, r, j)))?;
        round_of(team, 4, &|r, j| count(4, r, j).min(20_000))
    });
    check(out, "175 ranks");
}

/// Gatherv on two ranks, every pair of block lengths and both roots: the
/// other rank leaves without the root's table when it carries its block,
/// and the root's own block (which moves from its input to its place
/// only) does not count towards the longest block (`meta.rs`) — so a long
/// own block beside a short one, or the reverse, must still land whole.
#[test]
fn gatherv_on_two_ranks_takes_every_pair_of_block_lengths() {
    let out = on_shm(2, |team| {
        let me = team.rank();
        let mut i = 0;
        for root in 0..2 {
            for a in COUNTS {
                for b in COUNTS {
                    i += 1;
                    let len = |r: usize| if r == root { a } else { b };
                    let mine: Vec<u32> = (0..len(me)).map(|k| value(i, me, root, k)).collect();
                    let blocks = [len(0), len(1)];
                    let (gc, gd) = (as_u32(&blocks), packed(&blocks));
                    let mut all = vec![0u32; a + b];
                    let dst = (me == root).then_some((&mut all[..], &gc[..], &gd[..]));
                    Coll::gatherv(&mine, dst, root).timeout(T).run(team)?;
                    let right = (0..2).all(|r| (0..blocks[r]).all(|k| all[gd[r] as usize + k] == value(i, r, root, k)));
                    if me == root && !right {
                        return Err(ferrocoll::Error::internal(format!("root {root}, blocks {blocks:?}: wrong")));
                    }
                }
            }
        }
        Ok(())
    });
    check(out, "2 ranks");
}
