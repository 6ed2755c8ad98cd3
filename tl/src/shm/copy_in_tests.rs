//! Copies into the segment with each kind of stores (`copy_in.rs`), on
//! teams of threads made directly: the reductions that copy their inputs
//! in, over several rounds, give the same sums whichever kind a rank
//! favours, and `rsag`'s ranks that stream reduce their slice into their
//! own output first.

use std::sync::Arc;

use ferrocoll_core::args::Reducer;
use ferrocoll_core::{DataType, MemRef, MemType, ReduceOp};

use super::alg::reduction::{onestep, rsag};
use super::copy_in::{Stores, TIMED_FROM};
use super::team::ShmTeam;
use super::test_support::poll_to_end;

/// Elements per rank: three rounds of the default 512-KiB data part, the
/// last one short, and each rank's slice of a round past `TIMED_FROM`.
const COUNT: usize = 300_001;

fn teams(test: &str, size: usize) -> Vec<Arc<ShmTeam>> {
    super::test_support::threads(&format!("ci-{test}"), size)
}

fn mem(v: &mut [f32]) -> MemRef {
    // SAFETY: the vector outlives the collective that uses it.
    unsafe { MemRef::new(v.as_mut_ptr().cast(), std::mem::size_of_val(v), MemType::Host) }
}

fn input(rank: usize) -> Vec<f32> {
    (0..COUNT).map(|i| (rank + 1) as f32 + (i % 7) as f32).collect()
}

fn expected(size: usize) -> Vec<f32> {
    (0..COUNT).map(|i| (0..size).map(|r| (r + 1) as f32 + (i % 7) as f32).sum()).collect()
}

/// Run `reduce(team, input, out)` on every rank, each favouring
/// `favour(rank)`, with an output on every rank; each rank's output.
fn run(
    size: usize,
    test: &str,
    favour: impl Fn(usize) -> Stores + Sync,
    reduce: impl Fn(&ShmTeam, MemRef, MemRef, &Reducer) -> ferrocoll_core::Result<()> + Sync,
) -> Vec<Vec<f32>> {
    let teams = teams(test, size);
    let reducer = Reducer { dtype: DataType::Float32, op: ReduceOp::Sum, elem_size: 4, ranks: size };
    assert!(COUNT * 4 / size / 3 > TIMED_FROM, "each slice of a round is copied in with the favoured stores");
    std::thread::scope(|s| {
        let handles: Vec<_> = teams
            .iter()
            .enumerate()
            .map(|(rank, team)| {
                let (favour, reduce, reducer) = (&favour, &reduce, &reducer);
                s.spawn(move || {
                    team.favour_copy_in(favour(rank));
                    let (mut src, mut dst) = (input(rank), vec![0f32; COUNT]);
                    reduce(team, mem(&mut src), mem(&mut dst), reducer).expect("the reduction");
                    dst
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a rank panicked")).collect()
    })
}

#[test]
fn rsag_sums_alike_whichever_stores_each_rank_favours() {
    for size in [2, 3] {
        for (name, favour) in [
            ("plain", (|_| Stores::Plain) as fn(usize) -> Stores),
            ("streaming", |_| Stores::Streaming),
            ("mixed", |r| if r % 2 == 0 { Stores::Streaming } else { Stores::Plain }),
        ] {
            let outs = run(size, &format!("rsag-{name}-{size}"), favour, |team, src, dst, reducer| {
                poll_to_end(rsag(team, src, Some(dst), reducer))
            });
            for (rank, out) in outs.iter().enumerate() {
                assert!(out == &expected(size), "{size} ranks, {name}: rank {rank}'s sums differ");
            }
        }
    }
}

#[test]
fn onestep_sums_alike_whichever_stores_each_rank_favours() {
    for size in [2, 3] {
        for (name, favour) in
            [("plain", (|_| Stores::Plain) as fn(usize) -> Stores), ("streaming", |_| Stores::Streaming)]
        {
            let outs = run(size, &format!("onestep-{name}-{size}"), favour, |team, src, dst, reducer| {
                poll_to_end(onestep(team, src, Some(dst), reducer, true))
            });
            for (rank, out) in outs.iter().enumerate() {
                assert!(out == &expected(size), "{size} ranks, {name}: rank {rank}'s sums differ");
            }
        }
    }
}
