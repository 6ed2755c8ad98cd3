//! `exchange_blocks` run end to end (see the allgather test harness) with
//! per-peer counts that include empty and large blocks, scrambled
//! displacements, and windows from one exchange to all of them.

use ferrocoll_core::MemRef;

use super::pairwise::exchange_blocks;
use crate::p2p::P2pConfig;
use crate::p2p::alg::allgather::harness::run_ranks;
use ferrocoll_core::args::Blocks;

const ES: usize = 8;
const POISON: u8 = 0xab;

/// Elements rank `from` sends to rank `to`.
fn count(from: usize, to: usize, pattern: usize) -> usize {
    match (from * 3 + to + pattern) % 6 {
        0 => 0,
        1 => 1,
        2 => 7,
        3 if pattern == 1 => 3000,
        4 => 2,
        _ => 11,
    }
}

fn byte(from: usize, to: usize, j: usize) -> u8 {
    ((from * 37 + to * 11 + j) % 127) as u8
}

/// Blocks of `counts` in reverse order with a gap after each; empty ones displaced past the end.
fn layout(counts: &[usize]) -> (Blocks, usize) {
    let mut displs = vec![0; counts.len()];
    let mut at = 0;
    for (i, &c) in counts.iter().enumerate().rev() {
        displs[i] = at;
        at += c + i % 2;
    }
    for (d, &c) in displs.iter_mut().zip(counts) {
        if c == 0 {
            *d = at + 77;
        }
    }
    (Blocks::from_counts(counts, &displs, ES), at * ES)
}

fn fill(blocks: &Blocks, buf: &mut [u8], i: usize, byte_at: impl Fn(usize) -> u8) {
    let (off, len) = blocks.get(i).unwrap();
    if len == 0 {
        return;
    }
    for (j, b) in buf[off..off + len].iter_mut().enumerate() {
        *b = byte_at(j);
    }
}

#[test]
fn every_block_reaches_its_peer() {
    for size in [1, 2, 3, 4, 5, 7, 8, 11] {
        for pattern in 0..2 {
            let sides: Vec<_> = (0..size)
                .map(|r| {
                    let (src, src_len) = layout(&(0..size).map(|j| count(r, j, pattern)).collect::<Vec<_>>());
                    let (dst, dst_len) = layout(&(0..size).map(|j| count(j, r, pattern)).collect::<Vec<_>>());
                    (src, src_len, dst, dst_len)
                })
                .collect();
            for window in [1, 2, 4, usize::MAX] {
                let bufs = sides
                    .iter()
                    .enumerate()
                    .map(|(r, (src, src_len, _, dst_len))| {
                        let mut buf = vec![POISON; src_len + dst_len];
                        for j in 0..size {
                            fill(src, &mut buf, j, |k| byte(r, j, k));
                        }
                        buf
                    })
                    .collect();
                let results = run_ranks(
                    bufs,
                    &P2pConfig::from_config(&ferrocoll_core::Config::new()).unwrap(),
                    |comm, mem: MemRef| {
                        let (src, src_len, dst, dst_len) = &sides[comm.rank()];
                        async move {
                            let (s, d) = (mem.range(0, *src_len)?, mem.range(*src_len, *dst_len)?);
                            exchange_blocks(&comm, s, src, d, dst, window).await
                        }
                    },
                );
                for (r, res) in results.into_iter().enumerate() {
                    let got = res.unwrap_or_else(|e| panic!("rank {r} of {size}, window {window}: {e}"));
                    let (src, src_len, dst, dst_len) = &sides[r];
                    let mut want = vec![POISON; src_len + dst_len];
                    for j in 0..size {
                        fill(src, &mut want, j, |k| byte(r, j, k));
                        // The own block is not exchanged: it stays poisoned.
                        if j != r {
                            fill(dst, &mut want[*src_len..], j, |k| byte(j, r, k));
                        }
                    }
                    assert!(got == want, "rank {r} of {size}, window {window}: wrong result");
                }
            }
        }
    }
}

#[test]
fn disagreeing_counts_are_reported() {
    // Rank 0 sends 4 bytes to rank 1, which expects 8.
    let results = run_ranks(
        vec![vec![0u8; 16]; 2],
        &P2pConfig::from_config(&ferrocoll_core::Config::new()).unwrap(),
        |comm, mem| async move {
            let src = Blocks::from_counts(&[4, 4], &[0, 4], 1);
            let dst = if comm.rank() == 0 { src.clone() } else { Blocks::from_counts(&[8, 0], &[0, 0], 1) };
            exchange_blocks(&comm, mem.range(0, 8)?, &src, mem.range(8, 8)?, &dst, 4).await
        },
    );
    assert!(results[0].is_ok());
    let e = results[1].as_ref().unwrap_err().to_string();
    assert!(e.contains("rank 0"), "{e}");
}
