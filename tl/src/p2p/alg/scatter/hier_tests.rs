//! Scatterv over the hierarchy (see [`super::hier`]) when a leader's sizes
//! header disagrees with a rank's own count: the sizes come from a peer,
//! so the rank checks its own against them and fails naming both, rather
//! than take a part of someone else's span or a part of its own.

use ferrocoll_core::Result;
use ferrocoll_core::args::{Blocked, Blocks, Scatter};

use super::hier::run_v;
use crate::p2p::P2pConfig;
use crate::p2p::alg::allgather::harness::run_ranks_on;

/// Two hosts of one rank each: rank 0 (the root) leads, rank 1 takes its
/// span (itself) from it, sizes first.
const TWO: [(&str, &str); 2] = [("a", "s"), ("b", "s")];

/// Rank 0 (the root) scatters `counts[r]` bytes to rank r, whose receive
/// holds `recv[r]` bytes (`recv[0]` is unused). Returns each rank's buffer
/// (the root's: src, then its own block) or its error.
fn scatterv(places: &[(&str, &str)], counts: &[usize], recv: &[usize]) -> Vec<Result<Vec<u8>>> {
    let total: usize = counts.iter().sum();
    let root: Vec<u8> = (0..total as u8).chain(std::iter::repeat_n(0xab, counts[0])).collect();
    let bufs = std::iter::once(root).chain(recv[1..].iter().map(|&n| vec![0xab; n])).collect();
    let config = P2pConfig::from_config(&ferrocoll_core::Config::new()).unwrap();
    run_ranks_on(places, bufs, &config, |comm, mem| async move {
        let o = if comm.rank() == 0 {
            let src = Blocked { mem: mem.range(0, total)?, blocks: Blocks::back_to_back(counts, 1) };
            Scatter { src: Some(src), dst: mem.range(total, counts[0])?, root: 0 }
        } else {
            Scatter { src: None, dst: mem, root: 0 }
        };
        run_v(comm, o).await
    })
}

fn error(r: &Result<Vec<u8>>) -> String {
    r.as_ref().map(|b| format!("no error; received {b:?}")).unwrap_or_else(|e| e.to_string())
}

#[test]
fn counts_that_agree_arrive() {
    let out = scatterv(&TWO, &[8, 12], &[8, 12]);
    assert_eq!(out[1].as_deref().unwrap(), &(8u8..20).collect::<Vec<_>>()[..]);
    assert_eq!(out[0].as_deref().unwrap()[20..], (0u8..8).collect::<Vec<_>>()[..]);
}

#[test]
fn a_span_longer_than_the_receive_is_an_error_not_a_truncation() {
    // The leader's header says 12 bytes; the receive holds 8.
    let out = scatterv(&TWO, &[8, 12], &[8, 8]);
    let e = error(&out[1]);
    assert!(e.contains("rank 0") && e.contains("12 bytes") && e.contains("8 bytes"), "{e}");
    assert!(out[0].is_ok(), "the root sent what it had: {:?}", out[0]);
}

#[test]
fn a_span_shorter_than_the_receive_is_an_error_naming_both_sizes() {
    let out = scatterv(&TWO, &[8, 4], &[8, 8]);
    let e = error(&out[1]);
    assert!(e.contains("rank 0") && e.contains("4 bytes") && e.contains("8 bytes"), "{e}");
    assert!(out[0].is_ok(), "the root sent what it had: {:?}", out[0]);
}

#[test]
fn a_member_below_a_node_leader_checks_its_size_and_the_others_are_served() {
    // Ranks 1 and 2 share host b: rank 1 leads it and passes rank 2 its size and bytes.
    let places = [("a", "s"), ("b", "s"), ("b", "s")];
    let out = scatterv(&places, &[2, 3, 5], &[2, 3, 4]);
    let e = error(&out[2]);
    assert!(e.contains("rank 1") && e.contains("5 bytes") && e.contains("4 bytes"), "{e}");
    assert_eq!(out[1].as_deref().unwrap(), &[2, 3, 4], "the leader's own block");
    assert!(out[0].is_ok(), "{:?}", out[0]);
    // The leader's own size disagrees: it fails, after serving its member.
    let out = scatterv(&places, &[2, 3, 5], &[2, 4, 5]);
    let e = error(&out[1]);
    assert!(e.contains("rank 0") && e.contains("3 bytes") && e.contains("4 bytes"), "{e}");
    assert_eq!(out[2].as_deref().unwrap(), &[5, 6, 7, 8, 9]);
}
