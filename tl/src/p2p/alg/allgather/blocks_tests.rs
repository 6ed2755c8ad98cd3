//! Ring and knomial `allgather_blocks` run end to end (see [`super::harness`])
//! over layouts the public API cannot produce: uneven even splits, blocks
//! out of order, gaps, empty blocks pointing past the buffer, a different
//! layout on every rank, and blocks above the transport's eager size.

use ferrocoll_core::MemRef;

use super::harness::run_ranks;
use super::{knomial, ring};
use crate::p2p::P2pConfig;
use ferrocoll_core::args::Blocks;

const ES: usize = 4;
const POISON: u8 = 0xab;

fn byte(block: usize, j: usize) -> u8 {
    ((block * 31 + j * 7) % 127) as u8
}

fn fill(blocks: &Blocks, buf: &mut [u8], i: usize) {
    let (off, len) = blocks.get(i).unwrap();
    if len == 0 {
        return;
    }
    for (j, b) in buf[off..off + len].iter_mut().enumerate() {
        *b = byte(i, j);
    }
}

/// Rank `rank`'s layout of `counts`: blocks in an order that depends on the
/// rank, a gap before some of them, and empty blocks displaced past the end.
fn scrambled(counts: &[usize], rank: usize) -> (Blocks, usize) {
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
            *d = at + 1000;
        }
    }
    (Blocks::from_counts(counts, &displs, ES), at * ES)
}

enum Alg {
    Ring,
    Knomial(usize),
}

/// Allgather over one layout per rank; every block must arrive and gaps stay poisoned.
fn check(alg: &Alg, layouts: &[(Blocks, usize)]) {
    let size = layouts.len();
    let start = |r: usize, all: bool| {
        let (blocks, len) = &layouts[r];
        let mut buf = vec![POISON; *len];
        for i in (0..size).filter(|&i| all || i == r) {
            fill(blocks, &mut buf, i);
        }
        buf
    };
    let bufs = (0..size).map(|r| start(r, false)).collect();
    let results =
        run_ranks(bufs, &P2pConfig::from_config(&ferrocoll_core::Config::new()).unwrap(), |comm, mem: MemRef| {
            let blocks = layouts[comm.rank()].0.clone();
            async move {
                match alg {
                    Alg::Ring => ring::allgather_blocks(&comm, mem, &blocks).await,
                    Alg::Knomial(radix) => knomial::allgather_blocks(&comm, mem, &blocks, *radix).await,
                }
            }
        });
    for (r, res) in results.into_iter().enumerate() {
        let got = res.unwrap_or_else(|e| panic!("rank {r} of {size}: {e}"));
        assert!(got == start(r, true), "rank {r} of {size}: wrong result");
    }
}

fn algs() -> Vec<Alg> {
    vec![Alg::Ring, Alg::Knomial(2), Alg::Knomial(3), Alg::Knomial(4), Alg::Knomial(5)]
}

#[test]
fn even_splits_with_uneven_blocks() {
    for size in [1, 2, 3, 4, 5, 7, 8, 9, 11, 16] {
        for total in [0, 1, 7, 1000, 5000 * size + 3] {
            let layouts: Vec<_> = (0..size).map(|_| (Blocks::even(total, size, ES), total * ES)).collect();
            for alg in algs() {
                check(&alg, &layouts);
            }
        }
    }
}

#[test]
fn scrambled_layouts_with_empty_and_large_blocks() {
    for size in [1, 2, 3, 5, 6, 7, 10, 13] {
        for pattern in 0..3 {
            let counts: Vec<usize> = (0..size)
                .map(|i| match (i + pattern) % 5 {
                    0 => 0,
                    1 => 1,
                    2 => 7,
                    3 if pattern == 2 => 5000,
                    _ => 13,
                })
                .collect();
            let layouts: Vec<_> = (0..size).map(|r| scrambled(&counts, r)).collect();
            for alg in algs() {
                check(&alg, &layouts);
            }
        }
    }
}

#[test]
fn wrong_layout_is_an_error() {
    let results = run_ranks(
        vec![vec![0u8; 8]; 2],
        &P2pConfig::from_config(&ferrocoll_core::Config::new()).unwrap(),
        |comm, mem| async move { ring::allgather_blocks(&comm, mem, &Blocks::even(2, 3, ES)).await },
    );
    for r in results {
        let e = r.unwrap_err().to_string();
        assert!(e.contains("3 blocks in a team of 2"), "{e}");
    }
}
