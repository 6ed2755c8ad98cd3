//! Ranks whose calls differ in a way that makes them choose different TLs
//! or algorithms (counts of 5 000 and 200 000 elements under a tune that
//! sends allreduces from 400 kB to p2p: shm on one rank, p2p on the other)
//! never meet in any TL's checks. They meet on the team's
//! call board (`core/src/engine/board.rs`): both fail, naming each other's
//! call, instead of waiting forever.

use std::time::Duration;

use ferrocoll::{Coll, Config, ReduceOp, Status, Team};
use ferrocoll_tests::world;

/// Long enough never to fire in a healthy run: a regression shows as a
/// timeout (and fails the assertions) instead of hanging the suite.
const T: Duration = Duration::from_secs(30);

/// What each rank's allreduce of `count` float32 elements chose, and how it ended.
fn allreduce(team: &Team, count: usize) -> (String, ferrocoll::Result<()>) {
    let src = vec![1.0f32; count];
    let mut dst = vec![0.0f32; count];
    match Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(T).init(team) {
        Ok(mut req) => (req.selected().to_string(), req.run()),
        Err(e) => ("none".into(), Err(e)),
    }
}

/// The same tune on every rank: allreduces from 400 kB go to p2p, smaller ones stay on shm.
fn split_tls_at_400k() -> Config {
    let mut c = Config::new();
    c.set("TL_P2P_TUNE", "allreduce:400k-inf:inf:@sra_knomial");
    c
}

fn counts(a: usize, b: usize) -> impl Fn(&Team) -> (String, ferrocoll::Result<()>) {
    move |team: &Team| allreduce(team, if team.rank() == 0 { a } else { b })
}

fn assert_both_name_both_calls(out: &[(String, ferrocoll::Result<()>)], words: &[&str]) {
    for (rank, (via, r)) in out.iter().enumerate() {
        let e = r.as_ref().expect_err("ranks whose calls differ must not succeed");
        assert_eq!(e.status(), Status::InvalidParam, "rank {rank} (via {via}): {e}");
        let text = e.to_string();
        assert!(words.iter().all(|w| text.contains(w)), "rank {rank} (via {via}) should say {words:?}: {text}");
    }
}

#[test]
fn counts_that_select_different_tls_fail_on_both_ranks() {
    let out = world::run(2, &split_tls_at_400k(), move |team, _| counts(5_000, 200_000)(team));
    let tl = |via: &str| via.split('/').next().unwrap_or_default().to_string();
    assert_ne!(tl(&out[0].0), tl(&out[1].0), "precondition: the two counts select different TLs: {out:?}");
    assert_both_name_both_calls(&out, &["calls differ", "of 5000 elements", "of 200000 elements"]);
}

#[test]
fn counts_that_select_different_p2p_algorithms_fail_on_both_ranks() {
    // shm off for allreduce (its board stays), p2p split at 64 KiB between two algorithms.
    let mut c = Config::new();
    c.set("TL_SHM_TUNE", "allreduce:0");
    c.set("TL_P2P_TUNE", "allreduce:0-65536:@knomial:inf#allreduce:65537-inf:@ring:inf");
    let out = world::run(2, &c, move |team, _| counts(100, 100_000)(team));
    assert_ne!(out[0].0, out[1].0, "precondition: the two counts select different algorithms: {out:?}");
    assert_both_name_both_calls(&out, &["calls differ", "of 100 elements", "of 100000 elements"]);
}

#[test]
fn with_the_board_off_such_ranks_wait_until_their_timeout() {
    // UCC_CALL_BOARD=n saves the board's cost per post and gives this up.
    let mut c = split_tls_at_400k();
    c.set("CALL_BOARD", "n");
    let out = world::run(2, &c, move |team, _| {
        let count = if team.rank() == 0 { 5_000 } else { 200_000 };
        let (src, mut dst) = (vec![1.0f32; count], vec![0.0f32; count]);
        Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(Duration::from_millis(500)).run(team)
    });
    for (rank, r) in out.iter().enumerate() {
        let e = r.as_ref().expect_err("ranks whose calls differ must not succeed");
        assert_eq!(e.status(), Status::TimedOut, "rank {rank}: {e}");
    }
}

#[test]
fn a_zero_count_against_a_real_one_fails_the_rank_that_waits() {
    // The rank with nothing to do completes at once (there is nothing it
    // could get wrong); the other would wait for it forever.
    let out = world::run(2, &Config::new(), move |team, _| counts(0, 1000)(team));
    assert!(out[0].1.is_ok(), "{out:?}");
    let e = out[1].1.as_ref().expect_err("rank 1 waits for a rank that posted nothing to do");
    assert!(e.to_string().contains("rank 0 posted allreduce sum float32 of 0 elements"), "{e}");
}

#[test]
fn the_same_call_on_every_rank_is_unaffected_however_long_it_waits() {
    // The last rank posts late, so the others wait long enough to look at
    // the board several times (after 10 ms, then every 100 ms): they see
    // each other's agreeing posts, and the late rank's older ones.
    for count in [5_000, 200_000] {
        let out = world::run(3, &Config::new(), move |team, _| {
            let mut results = Vec::new();
            for _ in 0..2 {
                if team.rank() == 2 {
                    std::thread::sleep(Duration::from_millis(250));
                }
                results.push(allreduce(team, count));
            }
            results
        });
        assert!(out.iter().flatten().all(|(_, r)| r.is_ok()), "count {count}: {out:?}");
    }
}

/// Ranks whose allgatherv or reduce_scatterv counts differ while their
/// totals agree (every rank holds every count, so each could tell) fail on
/// both ranks, on every TL, naming both layouts, instead of copying blocks
/// of lengths the other did not give: the layout is part of the call's
/// signature.
#[test]
fn v_counts_that_differ_with_equal_totals_fail_on_both_ranks() {
    for tls in ["shm,self", "p2p,self"] {
        for coll in ["allgatherv", "reduce_scatterv"] {
            let mut c = Config::new();
            c.set("TLS", tls);
            let out = world::run(2, &c, move |team, _| {
                let me = team.rank();
                // 4 elements in all; rank 0 thinks they split 1 + 3, rank 1 2 + 2.
                let counts: [u32; 2] = if me == 0 { [1, 3] } else { [2, 2] };
                let displs = [0u32, counts[0]];
                let mine = counts[me] as usize;
                let (src, mut dst) = (vec![me as f32 + 1.0; 4], [0.0f32; 4]);
                if coll == "allgatherv" {
                    Coll::allgatherv(&src[..mine], &mut dst, &counts, &displs).timeout(T).run(team)
                } else {
                    Coll::reduce_scatterv(&src, &mut dst[..mine], &counts, ReduceOp::Sum).timeout(T).run(team)
                }
            });
            for (rank, r) in out.iter().enumerate() {
                let e = r.as_ref().expect_err("ranks whose counts differ must not succeed");
                assert_eq!(e.status(), Status::InvalidParam, "{tls}, rank {rank}, {coll}: {e}");
                let text = e.to_string();
                assert!(text.contains("calls differ"), "{tls}, rank {rank}, {coll}: {e}");
                assert_eq!(text.matches(" in blocks #").count(), 2, "{tls}, rank {rank}, {coll}: {e}");
            }
        }
    }
}
