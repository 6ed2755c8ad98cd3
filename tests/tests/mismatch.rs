//! Ranks whose calls on one team differ get an error naming each other's
//! call, never wrong data returned as success, and the team then fails
//! fast on every rank instead of hanging (the shm TL: one shared segment
//! per team, where mismatched calls used to return Ok with mixed data).

use std::time::Duration;

use ferrocoll::{Coll, Config, Error, ReduceOp, Status, Team};
use ferrocoll_tests::world;

/// Long enough never to fire in a healthy run; a regression fails instead of hanging.
const T: Duration = Duration::from_secs(30);

/// Two thread ranks whose every collective runs on the shm TL.
fn on_shm<R: Send + 'static>(f: impl Fn(&Team) -> R + Send + Sync + 'static) -> Vec<R> {
    let mut c = Config::new();
    c.set("TLS", "shm,self");
    world::run(2, &c, move |team, _| f(team))
}

fn says(r: &ferrocoll::Result<()>, words: &[&str]) -> bool {
    match r {
        Ok(()) => false,
        Err(e) => words.iter().all(|w| e.to_string().contains(w)),
    }
}

fn allreduce_f32(team: &Team, n: usize) -> ferrocoll::Result<()> {
    let src = vec![1.0f32; n];
    let mut dst = vec![0.0f32; n];
    Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(T).run(team)
}

#[test]
fn different_counts_fail_on_both_ranks_naming_both_calls() {
    let out = on_shm(|team| allreduce_f32(team, if team.rank() == 0 { 5 } else { 7 }));
    for (rank, r) in out.iter().enumerate() {
        let e = r.as_ref().expect_err("mismatched counts must not succeed");
        assert_eq!(e.status(), Status::InvalidParam, "rank {rank}: {e}");
        let text = e.to_string();
        assert!(text.contains("calls differ"), "rank {rank}: {text}");
        assert!(text.contains("of 5 elements") && text.contains("of 7 elements"), "rank {rank}: {text}");
    }
}

#[test]
fn different_datatypes_and_operations_fail() {
    let out = on_shm(|team| {
        let mut dst32 = vec![0.0f32; 4];
        let mut dst64 = vec![0.0f64; 4];
        if team.rank() == 0 {
            Coll::allreduce(&[1.0f32; 4], &mut dst32, ReduceOp::Sum).timeout(T).run(team)
        } else {
            Coll::allreduce(&[1.0f64; 4], &mut dst64, ReduceOp::Sum).timeout(T).run(team)
        }
    });
    assert!(out.iter().all(|r| says(r, &["float32", "float64"])), "{out:?}");
    let out = on_shm(|team| {
        let op = if team.rank() == 0 { ReduceOp::Sum } else { ReduceOp::Max };
        let mut dst = vec![0i32; 3];
        Coll::allreduce(&[2i32; 3], &mut dst, op).timeout(T).run(team)
    });
    assert!(out.iter().all(|r| says(r, &["allreduce sum int32", "allreduce max int32"])), "{out:?}");
}

#[test]
fn barrier_against_allreduce_fails_on_both_ranks() {
    let out =
        on_shm(|team| if team.rank() == 0 { Coll::barrier().timeout(T).run(team) } else { allreduce_f32(team, 1) });
    assert!(out.iter().all(|r| says(r, &["barrier", "allreduce sum float32 of 1 elements"])), "{out:?}");
}

/// Rank `lone` runs `part`, which reads nothing from the other rank (so it
/// completes: what a correct run gives it), then a barrier; the other rank
/// posts an allreduce. The other rank fails naming `lone`'s call (`call`),
/// and `lone` learns at its barrier that the other stopped taking part.
fn a_part_that_reads_nothing_learns_at_the_next_call(
    lone: usize,
    part: fn(&Team) -> ferrocoll::Result<()>,
    call: &'static str,
) {
    let out: Vec<(ferrocoll::Result<()>, Option<Error>)> = on_shm(move |team| {
        if team.rank() == lone {
            let first = part(team);
            let next = Coll::barrier().timeout(T).run(team).err();
            (first, next)
        } else {
            (allreduce_f32(team, 1), None)
        }
    });
    let other = 1 - lone;
    assert!(says(&out[other].0, &["calls differ", call]), "{:?}", out[other].0);
    assert!(out[lone].0.is_ok(), "rank {lone} did its part: {:?}", out[lone].0);
    let next = out[lone].1.as_ref().unwrap_or_else(|| panic!("rank {lone}'s next collective must fail"));
    assert!(next.to_string().contains(&format!("rank {other} stopped taking part")), "{next}");
}

#[test]
fn a_bcast_root_learns_at_its_next_call_that_its_peer_posted_something_else() {
    // The root reads nothing in a bcast: its part completes.
    a_part_that_reads_nothing_learns_at_the_next_call(
        0,
        |team| Coll::bcast(&mut [7u8; 4], 0).timeout(T).run(team),
        "bcast root 0 of 4 bytes",
    );
}

#[test]
fn a_gatherv_giver_on_two_ranks_learns_at_its_next_call_that_the_root_posted_something_else() {
    // Its short block carried, the giver reads nothing (as a gather's).
    a_part_that_reads_nothing_learns_at_the_next_call(
        1,
        |team| Coll::gatherv::<u8, u32>(&[5u8; 3], None, 0).timeout(T).run(team),
        "gatherv root 0",
    );
}

#[test]
fn a_gatherv_root_that_takes_another_count_fails_naming_both() {
    let out = on_shm(|team| {
        if team.rank() == 0 {
            let mut dst = [0u8; 8];
            Coll::gatherv(&[1u8; 2], Some((&mut dst[..], &[2u32, 6][..], &[0u32, 2][..])), 0).timeout(T).run(team)
        } else {
            Coll::gatherv::<u8, u32>(&[5u8; 3], None, 0).timeout(T).run(team)
        }
    });
    assert!(says(&out[0], &["rank 1 gives 3 bytes to rank 0, which takes 6"]), "{:?}", out[0]);
    // The giver's short block was carried: it waited for nobody (as a gather's giver).
    assert!(out[1].is_ok(), "{:?}", out[1]);
}

#[test]
fn matching_calls_still_succeed_and_v_variants_compare_what_ranks_know() {
    let out = on_shm(|team| {
        allreduce_f32(team, 1000)?;
        // gatherv: only the root knows every count; the others' sizes are theirs to give.
        let me = team.rank();
        let src = vec![me as u8; me + 1];
        let mut dst = vec![0u8; 3];
        let (counts, displs) = ([1u32, 2], [0u32, 1]);
        if me == 0 {
            Coll::gatherv(&src, Some((&mut dst[..], &counts[..], &displs[..])), 0).timeout(T).run(team)?;
            assert_eq!(dst, vec![0, 1, 1]);
        } else {
            Coll::gatherv::<u8, u32>(&src, None, 0).timeout(T).run(team)?;
        }
        Ok::<(), Error>(())
    });
    assert!(out.iter().all(Result::is_ok), "{out:?}");
}
