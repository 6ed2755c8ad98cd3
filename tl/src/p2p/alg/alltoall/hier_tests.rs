//! Alltoallv over the hierarchy (see [`super::hier`]) when the ranks'
//! counts disagree: a leader cuts the message from another leader by its
//! own ranks' receive counts, so counts that differ from the senders' but
//! add up alike must fail naming both, not hand a rank another's bytes.

use ferrocoll_core::Result;
use ferrocoll_core::args::{Alltoall, Blocked, Blocks};

use super::hier::run_v;
use crate::p2p::P2pConfig;
use crate::p2p::alg::allgather::harness::run_ranks_on;

/// Byte `t` of what rank `i` sends rank `j`.
fn byte(i: usize, j: usize, t: usize) -> u8 {
    (i * 50 + j * 10 + t) as u8
}

/// Alltoallv where rank i sends `sc[i][j]` bytes to rank j and counts on
/// `rc[j][i]` from it. Returns each rank's dst or its error.
fn alltoallv(places: &[(&str, &str)], sc: &[Vec<usize>], rc: &[Vec<usize>]) -> Vec<Result<Vec<u8>>> {
    let bufs: Vec<Vec<u8>> = (0..sc.len())
        .map(|i| {
            let mut b: Vec<u8> = (0..sc.len()).flat_map(|j| (0..sc[i][j]).map(move |t| byte(i, j, t))).collect();
            b.extend(std::iter::repeat_n(0xab, rc[i].iter().sum()));
            b
        })
        .collect();
    let config = P2pConfig::from_config(&ferrocoll_core::Config::new()).unwrap();
    let out = run_ranks_on(places, bufs, &config, |comm, mem| async move {
        let r = comm.rank();
        let (s, d): (usize, usize) = (sc[r].iter().sum(), rc[r].iter().sum());
        let src = Blocked { mem: mem.range(0, s)?, blocks: Blocks::back_to_back(&sc[r], 1) };
        let dst = Blocked { mem: mem.range(s, d)?, blocks: Blocks::back_to_back(&rc[r], 1) };
        run_v(comm, Alltoall { src, dst, in_place: false }).await
    });
    out.into_iter().enumerate().map(|(r, b)| b.map(|b| b[sc[r].iter().sum()..].to_vec())).collect()
}

fn expected(sc: &[Vec<usize>], j: usize) -> Vec<u8> {
    (0..sc.len()).flat_map(|i| (0..sc[i][j]).map(move |t| byte(i, j, t))).collect()
}

/// The receive counts that agree with `sc`.
fn transposed(sc: &[Vec<usize>]) -> Vec<Vec<usize>> {
    (0..sc.len()).map(|j| (0..sc.len()).map(|i| sc[i][j]).collect()).collect()
}

/// Ranks 0 and 2 on host a, rank 1 alone on host b (two levels).
const TWO_LEVELS: [(&str, &str); 3] = [("a", "s"), ("b", "s"), ("a", "s")];
/// Hosts a and b under switch s0, host c (ranks 2 and 3) under s1: three levels.
const THREE_LEVELS: [(&str, &str); 4] = [("a", "s0"), ("b", "s0"), ("c", "s1"), ("c", "s1")];

fn error(r: &Result<Vec<u8>>) -> String {
    r.as_ref().map(|b| format!("no error; received {b:?}")).unwrap_or_else(|e| e.to_string())
}

#[test]
fn counts_that_agree_arrive_on_two_and_three_levels() {
    for (places, sc) in [
        (&TWO_LEVELS[..], vec![vec![1, 4, 2], vec![2, 0, 2], vec![3, 4, 1]]),
        (&THREE_LEVELS[..], vec![vec![1, 2, 3, 0], vec![4, 1, 2, 5], vec![2, 3, 1, 1], vec![0, 6, 2, 3]]),
    ] {
        let out = alltoallv(places, &sc, &transposed(&sc));
        for (j, got) in out.iter().enumerate() {
            assert_eq!(got.as_deref().unwrap(), expected(&sc, j), "rank {j} on {places:?}");
        }
    }
}

#[test]
fn counts_that_disagree_but_add_up_fail_instead_of_misplacing_bytes() {
    // Rank 1 counts 3 bytes from rank 0 and 5 from rank 2, which send it 4 each.
    let sc = vec![vec![1, 4, 2], vec![2, 2, 2], vec![3, 4, 1]];
    let mut rc = transposed(&sc);
    rc[1] = vec![3, 2, 5];
    let out = alltoallv(&TWO_LEVELS, &sc, &rc);
    let e = error(&out[1]);
    assert!(e.contains("rank 0 sends rank 1 4 bytes") && e.contains("3 bytes"), "{e}");
    assert_eq!(out[0].as_deref().unwrap(), expected(&sc, 0));
    assert_eq!(out[2].as_deref().unwrap(), expected(&sc, 2));
}

#[test]
fn counts_that_disagree_across_switch_groups_fail_too() {
    // Rank 2 (alone on host c, under s1) counts 3 bytes from rank 0 and 5
    // from rank 1 (hosts a and b, under s0), which send it 4 each: the
    // message between the group leaders (0 and 2) carries them.
    let places = [("a", "s0"), ("b", "s0"), ("c", "s1")];
    let sc = vec![vec![1, 2, 4], vec![3, 1, 4], vec![2, 5, 1]];
    let mut rc = transposed(&sc);
    rc[2] = vec![3, 5, 1];
    let out = alltoallv(&places, &sc, &rc);
    let e = error(&out[2]);
    assert!(e.contains("rank 0 sends rank 2 4 bytes (as rank 0 reports)") && e.contains("3 bytes"), "{e}");
    assert_eq!(out[0].as_deref().unwrap(), expected(&sc, 0));
    assert_eq!(out[1].as_deref().unwrap(), expected(&sc, 1));
}
