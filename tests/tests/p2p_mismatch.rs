//! The p2p TL: ranks whose calls differ get an error naming each other's
//! call instead of wrong data returned as success, even when their messages
//! have the same sizes (a sum against a max, float32 against int32 of the
//! same count, counts that cut into equal ring blocks). Every p2p message
//! carries its sender's call signature and the receiver checks it before it
//! copies a byte (issue 9). Thread ranks (the in-process transport), and
//! process ranks over the shared-memory and TCP transports.
//!
//! What each rank sees depends on the algorithm: a rank that receives from
//! a rank whose call differs fails at once, naming it; a rank whose large
//! (rendezvous) message was refused fails when it next looks at that send;
//! a rank that only waits for a rank that failed, or for messages that a
//! rank of another call sends under other step tags, fails when it looks
//! for the notice the failed rank sends every member, or for the stray
//! message; ranks that wait for each other with no message between them
//! meet through the probe a receive sends after waiting a second. Every
//! rank errors, except one whose part reads nothing from a rank of another
//! call (a bcast root): none returns Ok with data a correct run would
//! not give, none waits until a timeout (the collectives' timeout, long,
//! only keeps a regression from hanging the test), and the team works again
//! for the next collective that every rank posts alike.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ferrocoll::{Coll, Config, Context, ContextParams, Lib, ReduceOp, Status, TcpOob, Team, TeamParams};
use ferrocoll_tests::procs::{Job, ROLE, RankOutput, free_port};
use ferrocoll_tests::world;

/// The timeout of every collective here: long enough never to fire in a
/// healthy run; one that fires fails the test (see [`seen`]).
const T: Duration = Duration::from_secs(30);

/// Configuration that leaves the p2p TL alone to serve teams of several ranks.
fn p2p_only() -> Config {
    let mut c = Config::new();
    c.set("TLS", "p2p,self");
    c
}

/// `size` thread ranks whose collectives run on the p2p TL (with
/// `TL_P2P_TUNE` = `tune` if given); `f` gets the team and returns what to check.
fn on_p2p<R: Send + 'static>(
    size: usize,
    tune: Option<&str>,
    f: impl Fn(&Team) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let mut c = p2p_only();
    if let Some(t) = tune {
        c.set("TL_P2P_TUNE", t);
    }
    world::run(size, &c, move |team, _| f(team))
}

/// Run `coll` on `team`, checking that the p2p TL runs it; `Ok` with the algorithm's name.
fn run(team: &Team, coll: Coll<'_>) -> ferrocoll::Result<String> {
    let mut req = coll.init(team)?;
    let alg = req.selected().to_string();
    assert!(alg.starts_with("p2p/"), "rank {}: {alg} ran, not p2p", team.rank());
    req.run().map(|()| alg)
}

/// What one rank's mismatched collective returned.
#[derive(Debug)]
enum Seen {
    /// It received a message of another call and failed naming both (the error's text).
    Differ(String),
    /// A rank whose call differs refused its large (rendezvous) message.
    Refused(String),
}

/// Sort one rank's result; `Ok` or any other error fails the test.
fn seen(rank: usize, r: ferrocoll::Result<String>) -> Seen {
    match r {
        Ok(alg) => panic!("rank {rank}: mismatched calls returned Ok ({alg})"),
        Err(e) if e.status() == Status::InvalidParam && e.to_string().contains("calls differ") => {
            Seen::Differ(e.to_string())
        }
        Err(e) if e.status() == Status::InvalidParam && e.to_string().contains("posted for another call") => {
            Seen::Refused(e.to_string())
        }
        Err(e) => panic!("rank {rank}: an error that does not name the calls: {e}"),
    }
}

/// One letter per rank: D(iffer), R(efused).
fn letters(out: &[Seen]) -> String {
    out.iter()
        .map(|s| match s {
            Seen::Differ(_) => 'D',
            Seen::Refused(_) => 'R',
        })
        .collect()
}

/// Every error that names the calls names the call of this rank and of another
/// rank whose call differs, by rank; at least `min_differ` ranks saw one.
fn check(out: &[Seen], call_of: impl Fn(usize) -> String, min_differ: usize) {
    let mut differ = 0;
    for (rank, s) in out.iter().enumerate() {
        if let Seen::Refused(text) = s {
            assert!(text.contains("send to rank") && text.contains("rejected"), "rank {rank}: {text}");
        }
        let Seen::Differ(text) = s else { continue };
        differ += 1;
        let mine = call_of(rank);
        assert!(text.contains(&format!("this rank posted {mine}")), "rank {rank}: {text}");
        assert_eq!(text.matches(" posted ").count(), 2, "rank {rank}: two calls, each said once: {text}");
        let named = (0..out.len()).any(|other| {
            let theirs = call_of(other);
            theirs != mine && text.contains(&format!("rank {other} posted {theirs}"))
        });
        assert!(named, "rank {rank} does not name a rank whose call differs: {text}");
    }
    assert!(differ >= min_differ, "{differ} ranks named the calls, expected {min_differ} at least: {out:?}");
}

/// An allreduce every rank posts alike, after a mismatch: the team still works.
fn allreduce_sum_ok(team: &Team) -> ferrocoll::Result<()> {
    let p = team.size() as f32;
    let src = vec![1.5f32; 3000];
    let mut dst = vec![0.0f32; 3000];
    run(team, Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(T))?;
    assert!(dst.iter().all(|&x| x == 1.5 * p), "rank {}: wrong sum after a mismatch", team.rank());
    Ok(())
}

const ALLREDUCE_ALGS: [&str; 3] = ["knomial", "sra_knomial", "ring"];

/// Rank `odd` posts allreduce max, the others sum, float32 of `n` elements, with `alg`.
fn sum_against_max(size: usize, odd: usize, alg: &str, n: usize) -> Vec<Seen> {
    let tune = format!("allreduce:@{alg}:inf");
    let out = on_p2p(size, Some(&tune), move |team| {
        let me = team.rank();
        let op = if me == odd { ReduceOp::Max } else { ReduceOp::Sum };
        let src: Vec<f32> = (0..n).map(|i| (i % 7) as f32 + me as f32).collect();
        let mut dst = vec![f32::NAN; n];
        let r = run(team, Coll::allreduce(&src, &mut dst, op).timeout(T));
        let seen = seen(me, r);
        allreduce_sum_ok(team).unwrap_or_else(|e| panic!("rank {me}: the next allreduce failed: {e}"));
        seen
    });
    let call = |r: usize| format!("allreduce {} float32 of {n} elements", if r == odd { "max" } else { "sum" });
    check(&out, call, 1);
    eprintln!("{size} ranks, allreduce {alg} of {n}, max on rank {odd}: {}", letters(&out));
    out
}

/// Assert that `out`'s letters are one of `allowed`.
fn one_of(out: &[Seen], allowed: &[&str], what: &str) {
    let l = letters(out);
    assert!(allowed.contains(&l.as_str()), "{what}: {l}, expected one of {allowed:?}: {out:?}");
}

#[test]
fn sum_against_max_on_two_ranks_fails_naming_both_calls() {
    // 64 elements: eager messages; 100 000: rendezvous (larger than the eager limit).
    // knomial (radix 4) on two ranks: rank 1 hands its vector to rank 0 and waits
    // for the result; rank 0 refuses it and tells rank 1. A large message's
    // sender may learn it from its refused send first.
    one_of(&sum_against_max(2, 1, "knomial", 64), &["DD"], "knomial, eager");
    one_of(&sum_against_max(2, 1, "knomial", 100_000), &["DR", "DD"], "knomial, rendezvous");
    // Exchanges of eager messages: each rank receives the other's.
    one_of(&sum_against_max(2, 1, "sra_knomial", 64), &["DD"], "sra_knomial, eager");
    one_of(&sum_against_max(2, 1, "ring", 64), &["DD"], "ring, eager");
    // Rendezvous: the first rank to take the other's message fails and retracts
    // its own. sra_knomial's reduce-scatter waits for its receives before its
    // sends, so the other rank may wait for it, until the notice comes.
    one_of(&sum_against_max(2, 1, "sra_knomial", 100_000), &["DD", "DR", "RD"], "sra_knomial, rendezvous");
    one_of(&sum_against_max(2, 1, "ring", 100_000), &["DD", "DR", "RD"], "ring, rendezvous");
}

#[test]
fn sum_against_max_on_three_ranks_never_returns_ok() {
    for alg in ALLREDUCE_ALGS {
        for n in [64, 100_000] {
            // No Ok, and at least one rank names the odd call (checked inside).
            sum_against_max(3, 2, alg, n);
        }
    }
}

/// Rank `odd` allreduces int32, the others float32, `n` elements (equal bytes).
fn float_against_int(size: usize, odd: usize, n: usize) -> Vec<Seen> {
    let out = on_p2p(size, None, move |team| {
        let me = team.rank();
        let r = if me == odd {
            let mut dst = vec![-1i32; n];
            run(team, Coll::allreduce(&vec![1i32; n], &mut dst, ReduceOp::Sum).timeout(T))
        } else {
            let mut dst = vec![f32::NAN; n];
            run(team, Coll::allreduce(&vec![1.0f32; n], &mut dst, ReduceOp::Sum).timeout(T))
        };
        let seen = seen(me, r);
        allreduce_sum_ok(team).unwrap_or_else(|e| panic!("rank {me}: the next allreduce failed: {e}"));
        seen
    });
    let call = |r: usize| format!("allreduce sum {} of {n} elements", if r == odd { "int32" } else { "float32" });
    check(&out, call, 1);
    eprintln!("{size} ranks, allreduce of {n}, int32 on rank {odd}: {}", letters(&out));
    out
}

#[test]
fn float32_against_int32_of_the_same_count_fails() {
    // Default selection: knomial below 4 KiB, sra_knomial above (see the cases above).
    one_of(&float_against_int(2, 0, 16), &["DD"], "knomial, eager");
    one_of(&float_against_int(2, 0, 50_000), &["DD", "DR", "RD"], "sra_knomial, rendezvous");
    for n in [16, 50_000] {
        float_against_int(3, 1, n);
    }
}

#[test]
fn counts_that_cut_into_equal_ring_blocks_fail_naming_both_counts() {
    // Ring blocks of 7 and 8 elements over 3 ranks are 3,2,2 and 3,3,2: some
    // steps move blocks of equal size, which a size check alone lets through.
    for (size, counts) in [(2usize, [6usize, 7, 0]), (3, [7, 8, 8])] {
        let out = on_p2p(size, Some("allreduce:@ring:inf"), move |team| {
            let me = team.rank();
            let n = counts[me];
            let mut dst = vec![f32::NAN; n];
            let seen = seen(me, run(team, Coll::allreduce(&vec![1.0f32; n], &mut dst, ReduceOp::Sum).timeout(T)));
            allreduce_sum_ok(team).unwrap_or_else(|e| panic!("rank {me}: the next allreduce failed: {e}"));
            seen
        });
        check(&out, |r| format!("allreduce sum float32 of {} elements", counts[r]), 1);
        // Two ranks: each receives the other's first block. Three: rank 1
        // receives rank 0's, rank 0 rank 2's; rank 2 waits for rank 1, which
        // tells it, or finds rank 1's message of the next step.
        let allowed: &[&str] = &[&"DDD"[..size]];
        one_of(&out, allowed, &format!("ring, {size} ranks"));
    }
}

#[test]
fn bcast_against_allreduce_of_equal_bytes() {
    // Ring allreduce: each rank's first receive is from its left neighbour with
    // tag 0, the tag of the bcast's messages; rank 1's left neighbour is the root.
    for size in [2, 3] {
        let out = on_p2p(size, Some("allreduce:@ring:inf"), move |team| {
            let me = team.rank();
            let r = if me == 0 {
                // The root of a bcast reads nothing: its part may complete.
                let mut buf: Vec<u8> = (0..4096).map(|i| i as u8).collect();
                let r = run(team, Coll::bcast(&mut buf, 0).timeout(T));
                assert!(buf.iter().enumerate().all(|(i, &b)| b == i as u8), "the root's buffer changed");
                r
            } else {
                let mut dst = vec![f32::NAN; 1024];
                run(team, Coll::allreduce(&[1.0f32; 1024], &mut dst, ReduceOp::Sum).timeout(T))
            };
            // None: the root's bcast completed.
            let out = match r {
                Ok(_) if me == 0 => None,
                r => Some(seen(me, r)),
            };
            allreduce_sum_ok(team).unwrap_or_else(|e| panic!("rank {me}: the next allreduce failed: {e}"));
            out
        });
        // The root sent its data and returns Ok, its buffer untouched (checked
        // above): what a correct bcast gives it.
        assert!(out[0].is_none(), "the root: {:?}", out[0]);
        let Some(Seen::Differ(text)) = &out[1] else { panic!("rank 1 must fail naming the root's call: {out:?}") };
        assert!(text.contains("rank 0 posted bcast root 0 of 4096 bytes"), "{text}");
        assert!(text.contains("this rank posted allreduce sum float32 of 1024 elements"), "{text}");
        // Rank 2 waits for rank 1, which failed and told it whose call differs.
        if size == 3 {
            let Some(Seen::Differ(text)) = &out[2] else { panic!("rank 2 must fail naming the root's call: {out:?}") };
            assert!(text.contains("rank 0 posted bcast root 0 of 4096 bytes"), "{text}");
            assert!(text.contains("this rank posted allreduce sum float32 of 1024 elements"), "{text}");
        }
    }
}

#[test]
fn a_rank_that_finished_its_call_without_a_message_answers_the_probe() {
    // The root posts a zero-size bcast (no TL runs it: done at once, no
    // message) and goes on to an allreduce, where it waits for rank 1; the
    // others post a bcast of 16 bytes and wait for the root (or for a rank
    // that waits for it). No message of one collective meets the other's:
    // the receivers' probe (after a second) reaches the root in a later
    // collective, which answers what it posted there. The receivers fail
    // naming it; the root's allreduce meets the receivers' next one.
    for size in [2, 3] {
        let started = Instant::now();
        let out = on_p2p(size, None, move |team| {
            let me = team.rank();
            let r = if me == 0 {
                let mut none: [u8; 0] = [];
                let mut req = Coll::bcast(&mut none, 0).timeout(T).init(team).expect("a zero-size bcast's init");
                assert_eq!(req.selected(), "none/zero-size");
                req.run().expect("a zero-size bcast");
                None
            } else {
                let mut buf = [7u8; 16];
                Some(run(team, Coll::bcast(&mut buf, 0).timeout(T)))
            };
            allreduce_sum_ok(team).unwrap_or_else(|e| panic!("rank {me}: the next allreduce failed: {e}"));
            r.map(|r| seen(me, r))
        });
        for (rank, s) in out.iter().enumerate().skip(1) {
            let Some(Seen::Differ(text)) = s else { panic!("rank {rank} must fail naming the root's call: {out:?}") };
            // The TLs keep a zero-size post's call: the answer names it.
            assert!(text.contains("rank 0 posted bcast root 0 of 0 bytes"), "rank {rank}: {text}");
            assert!(text.contains("this rank posted bcast root 0 of 16 bytes"), "rank {rank}: {text}");
        }
        let took = started.elapsed();
        assert!(took < T, "{size} ranks waited {took:?}: until a timeout, not an answer");
        eprintln!("{size} ranks: the receivers failed naming the root's zero-size call ({took:.1?}): {out:?}");
    }
}

#[test]
fn a_rank_waiting_on_another_team_answers_the_probe() {
    // As above, but the root goes on to an allreduce of a second team,
    // where it waits for rank 1: its look there judges the probe of the
    // first team's bcast.
    let out = world::run(2, &p2p_only(), |team, ctx| {
        let me = team.rank();
        let other = Team::create(ctx, TeamParams::default()).expect("a second team");
        let r = if me == 0 {
            let mut none: [u8; 0] = [];
            Coll::bcast(&mut none, 0).timeout(T).run(team).expect("a zero-size bcast");
            None
        } else {
            let mut buf = [7u8; 16];
            Some(run(team, Coll::bcast(&mut buf, 0).timeout(T)))
        };
        allreduce_sum_ok(&other).unwrap_or_else(|e| panic!("rank {me}: the second team's allreduce failed: {e}"));
        allreduce_sum_ok(team).unwrap_or_else(|e| panic!("rank {me}: the first team's next allreduce failed: {e}"));
        r.map(|r| seen(me, r))
    });
    let Some(Seen::Differ(text)) = &out[1] else { panic!("rank 1 must fail naming the root's call: {out:?}") };
    assert!(text.contains("rank 0 posted bcast root 0 of 0 bytes"), "{text}");
    assert!(text.contains("this rank posted bcast root 0 of 16 bytes"), "{text}");
}

#[test]
fn a_rank_that_only_progresses_answers_the_probe() {
    // The root posts a zero-size bcast and then waits on nothing, calling
    // the context's progress (as a program polling its own work does)
    // until rank 1's bcast ended: its progress judges the probe.
    let ended = Arc::new(AtomicBool::new(false));
    let seen_by = ended.clone();
    let out = world::run(2, &p2p_only(), move |team, ctx| {
        let me = team.rank();
        let r = if me == 0 {
            let mut none: [u8; 0] = [];
            Coll::bcast(&mut none, 0).timeout(T).run(team).expect("a zero-size bcast");
            let start = Instant::now();
            while !seen_by.load(Ordering::Acquire) {
                // Rank 1 waits for this rank's answer, and nothing else ends its wait.
                assert!(start.elapsed() < T, "rank 1's bcast still waits after {T:?}");
                ctx.progress().expect("progress");
            }
            None
        } else {
            let mut buf = [7u8; 16];
            let r = run(team, Coll::bcast(&mut buf, 0).timeout(T));
            seen_by.store(true, Ordering::Release);
            Some(r)
        };
        allreduce_sum_ok(team).unwrap_or_else(|e| panic!("rank {me}: the next allreduce failed: {e}"));
        r.map(|r| seen(me, r))
    });
    assert!(ended.load(Ordering::Acquire));
    let Some(Seen::Differ(text)) = &out[1] else { panic!("rank 1 must fail naming the root's call: {out:?}") };
    assert!(text.contains("rank 0 posted bcast root 0 of 0 bytes"), "{text}");
}

#[test]
fn matching_calls_are_unaffected() {
    for size in [2, 3] {
        let out = world::run(size, &p2p_only(), |team, ctx| -> ferrocoll::Result<()> {
            let (me, p) = (team.rank(), team.size());
            for alg in ALLREDUCE_ALGS {
                let pinned =
                    Team::create(ctx, TeamParams::default().set("TL_P2P_TUNE", format!("allreduce:@{alg}:inf")))?;
                // Eager and rendezvous sizes, a count that cuts into unequal blocks.
                for n in [5usize, 40_000] {
                    let src: Vec<f32> = (0..n).map(|i| ((i % 5) * (me + 1)) as f32).collect();
                    let mut dst = vec![f32::NAN; n];
                    let ran = run(&pinned, Coll::allreduce(&src, &mut dst, ReduceOp::Max).timeout(T))?;
                    assert_eq!(ran, format!("p2p/{alg}"));
                    let expect = |i: usize| ((i % 5) * p) as f32;
                    assert!(dst.iter().enumerate().all(|(i, &d)| d == expect(i)), "{alg}, {n}: rank {me}");
                }
            }
            // alltoallv: rank i sends i + j + 1 bytes of value 10i + j to rank j.
            let counts = |i: usize| (0..p).map(|j| (i + j + 1) as u32).collect::<Vec<u32>>();
            let displs =
                |c: &[u32]| c.iter().scan(0u32, |a, &x| Some(std::mem::replace(a, *a + x))).collect::<Vec<u32>>();
            let scount = counts(me);
            let sdispl = displs(&scount);
            let src: Vec<u8> = (0..p).flat_map(|j| vec![(10 * me + j) as u8; me + j + 1]).collect();
            let rcount: Vec<u32> = (0..p).map(|i| (i + me + 1) as u32).collect();
            let rdispl = displs(&rcount);
            let mut dst = vec![0xEEu8; rcount.iter().sum::<u32>() as usize];
            run(team, Coll::alltoallv(&src, &scount, &sdispl, &mut dst, &rcount, &rdispl).timeout(T))?;
            let expect: Vec<u8> = (0..p).flat_map(|i| vec![(10 * i + me) as u8; i + me + 1]).collect();
            assert_eq!(dst, expect, "alltoallv on rank {me}");
            // gatherv to the last rank: rank r gives r + 2 elements of value r.
            let root = p - 1;
            let src = vec![me as u16; me + 2];
            let gcounts: Vec<u32> = (0..p).map(|r| (r + 2) as u32).collect();
            let gdispls = displs(&gcounts);
            if me == root {
                let mut dst = vec![0xFFFFu16; gcounts.iter().sum::<u32>() as usize];
                run(team, Coll::gatherv(&src, Some((&mut dst[..], &gcounts[..], &gdispls[..])), root).timeout(T))?;
                let expect: Vec<u16> = (0..p).flat_map(|r| vec![r as u16; r + 2]).collect();
                assert_eq!(dst, expect, "gatherv at the root");
            } else {
                run(team, Coll::gatherv::<u16, u32>(&src, None, root).timeout(T))?;
            }
            // allgatherv with the same counts: every rank knows every size.
            let mut dst = vec![0xFFFFu16; gcounts.iter().sum::<u32>() as usize];
            run(team, Coll::allgatherv(&src, &mut dst, &gcounts, &gdispls).timeout(T))?;
            let expect: Vec<u16> = (0..p).flat_map(|r| vec![r as u16; r + 2]).collect();
            assert_eq!(dst, expect, "allgatherv on rank {me}");
            // bcast of a rendezvous-size message.
            let mut buf: Vec<u8> =
                if me == 0 { (0..200_000).map(|i| (i % 251) as u8).collect() } else { vec![0; 200_000] };
            run(team, Coll::bcast(&mut buf, 0).timeout(T))?;
            assert!(buf.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8), "bcast on rank {me}");
            run(team, Coll::barrier().timeout(T)).map(|_| ())
        });
        for (rank, r) in out.iter().enumerate() {
            assert!(r.is_ok(), "{size} ranks, rank {rank}: {r:?}");
        }
    }
}

// ---- Ranks that are processes: the shared-memory and TCP transports ----

/// One rank of a job started by the tests below (does nothing when run directly).
#[test]
fn rank_body() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let code = match role.as_str() {
        "sum_max" => sum_max_rank(),
        "kinds" => kinds_rank(),
        other => {
            println!("FAIL unknown role {other}");
            1
        }
    };
    std::process::exit(code);
}

/// Allreduce max on rank 1, sum elsewhere, of `FERROCOLL_TEST_COUNT` float32
/// on the p2p TL (ring, from the environment); print what happened, then run
/// a matching allreduce.
fn sum_max_rank() -> i32 {
    let n: usize = std::env::var("FERROCOLL_TEST_COUNT").ok().and_then(|v| v.parse().ok()).unwrap_or(64);
    let body = || -> ferrocoll::Result<()> {
        let lib = Lib::new()?;
        let ctx = Context::new(&lib, ContextParams::with_oob(TcpOob::from_env()?))?;
        let team = Team::create(&ctx, TeamParams::default())?;
        let me = team.rank();
        let op = if me == 1 { ReduceOp::Max } else { ReduceOp::Sum };
        let src = vec![me as f32 + 1.0; n];
        let mut dst = vec![f32::NAN; n];
        match Coll::allreduce(&src, &mut dst, op).timeout(T).init(&team).and_then(|mut r| {
            let alg = r.selected().to_string();
            r.run().map(|()| alg)
        }) {
            Ok(alg) => println!("MISMATCH Ok via {alg}"),
            Err(e) => println!("MISMATCH {:?} {e}", e.status()),
        }
        let src = vec![1.0f32; n];
        let mut dst = vec![0.0f32; n];
        Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(T).run(&team)?;
        let p = team.size() as f32;
        println!("NEXT {}", if dst.iter().all(|&x| x == p) { "ok" } else { "wrong" });
        Ok(())
    };
    match body() {
        Ok(()) => 0,
        Err(e) => {
            println!("FAIL {e}");
            1
        }
    }
}

/// Allreduce on rank 0, a bcast from rank 0 on the others (default
/// algorithms): they wait for each other with no message between them until
/// a probe tells them; print what happened, then run a matching allreduce.
fn kinds_rank() -> i32 {
    let body = || -> ferrocoll::Result<()> {
        let lib = Lib::new()?;
        let ctx = Context::new(&lib, ContextParams::with_oob(TcpOob::from_env()?))?;
        let team = Team::create(&ctx, TeamParams::default())?;
        let (src, mut dst, mut buf) = ([1.0f32; 4], [0.0f32; 4], [7u8; 16]);
        let coll =
            if team.rank() == 0 { Coll::allreduce(&src, &mut dst, ReduceOp::Sum) } else { Coll::bcast(&mut buf, 0) };
        match coll.timeout(T).run(&team) {
            Ok(()) => println!("MISMATCH Ok"),
            Err(e) => println!("MISMATCH {:?} {e}", e.status()),
        }
        let mut dst = vec![0.0f32; 64];
        Coll::allreduce(&[1.0f32; 64], &mut dst, ReduceOp::Sum).timeout(T).run(&team)?;
        let p = team.size() as f32;
        println!("NEXT {}", if dst.iter().all(|&x| x == p) { "ok" } else { "wrong" });
        Ok(())
    };
    match body() {
        Ok(()) => 0,
        Err(e) => {
            println!("FAIL {e}");
            1
        }
    }
}

fn token() -> String {
    format!("p2pmm-{:x}-{:x}", std::process::id(), Instant::now().elapsed().as_nanos() ^ free_port() as u128)
}

/// Two process ranks (on emulated hosts of their own when `hosts`: TCP;
/// else shared memory) ring-allreduce sum against max of `n` elements;
/// what each saw, as a letter (see [`letters`]), after checking each rank's
/// output: no Ok, errors that name both calls, and a next allreduce that works.
fn two_processes(hosts: bool, n: usize) -> String {
    let (tok, port) = (token(), free_port());
    let job = Job::start("rank_body", "sum_max", 2, 0..2, &tok, port, &|r| {
        let mut v = vec![
            ("UCC_TLS".to_string(), "p2p,self".to_string()),
            ("UCC_TL_P2P_TUNE".into(), "allreduce:@ring:inf".into()),
            ("FERROCOLL_TEST_COUNT".into(), n.to_string()),
        ];
        if hosts {
            v.push(("FERROCOLL_HOST_ID".into(), format!("host{r}")));
        }
        v
    });
    let how = if hosts { "tcp" } else { "shm" };
    let outs: Vec<RankOutput> = job.finish(Duration::from_secs(120));
    outs.iter().map(|o| seen_in(o, n, how)).collect()
}

fn seen_in(o: &RankOutput, n: usize, how: &str) -> char {
    let what = format!("{how}, {n} elements, rank {}", o.rank);
    assert_eq!(o.success, Some(true), "{what}: {}\n{}", o.stdout, o.stderr);
    assert_eq!(o.lines("NEXT "), ["NEXT ok"], "{what}: {}", o.stdout);
    let line = o.lines("MISMATCH ").into_iter().next().unwrap_or_else(|| panic!("{what}: {}", o.stdout));
    let (mine, theirs, other) = if o.rank == 1 { ("max", "sum", 0) } else { ("sum", "max", 1) };
    if line.starts_with("MISMATCH InvalidParam") && line.contains("calls differ") {
        assert!(line.contains("via p2p/ring"), "{what}: {line}");
        assert!(
            line.contains(&format!("rank {other} posted allreduce {theirs} float32 of {n} elements"))
                && line.contains(&format!("this rank posted allreduce {mine} float32 of {n} elements")),
            "{what}: {line}"
        );
        'D'
    } else if line.starts_with("MISMATCH InvalidParam") && line.contains("posted for another call") {
        'R'
    } else {
        panic!("{what}: {line}")
    }
}

#[test]
fn processes_over_shared_memory_fail_naming_each_other() {
    // Eager: each rank receives the other's first block.
    assert_eq!(two_processes(false, 64), "DD");
    // Larger than the eager limit: CMA rendezvous (the first rank to take the
    // other's message refuses it and retracts its own), or streamed through
    // the ring where CMA is refused (both arrive whole).
    let l = two_processes(false, 200_000);
    assert!(["DD", "DR", "RD"].contains(&l.as_str()), "{l}");
}

#[test]
fn processes_over_tcp_fail_naming_each_other() {
    assert_eq!(two_processes(true, 64), "DD");
    // A large send is written from the sender's buffer as soon as it is
    // posted, and a failed rank finishes what it began from a copy: both
    // messages arrive. (One never begun is retracted: its receiver waits for
    // the notice of the rank that failed.)
    let l = two_processes(true, 200_000);
    assert!(["DD", "DR", "RD"].contains(&l.as_str()), "{l}");
}

/// The collectives [`differ_in_kind`] mixes, each of 4 float32 (16 bytes for bcast).
const KINDS: [&str; 6] = ["allreduce", "bcast", "barrier", "allgather", "reduce", "gather"];

/// Whether `kind` on `rank` reads nothing from the others (root 0): it may
/// complete when the others posted another call, having done its part.
fn reads_nothing(kind: &str, rank: usize) -> bool {
    matches!((kind, rank), ("bcast", 0) | ("reduce" | "gather", 1..))
}

/// Rank `odd` posts collective `kinds[0]`, the others `kinds[1]` (default
/// algorithms); one letter per rank: D (failed naming the calls) or O (Ok,
/// allowed only where a correct run gives the same: a rank that reads
/// nothing, or a bcast receiver that got the root's bytes).
fn differ_in_kind(size: usize, odd: usize, kinds: [&'static str; 2]) -> String {
    on_p2p(size, None, move |team| {
        let me = team.rank();
        let kind = if me == odd { kinds[0] } else { kinds[1] };
        let src = [1.0f32; 4];
        let mut dst = vec![f32::NAN; 4 * team.size()];
        let mut buf = [if me == 0 { 9u8 } else { 7 }; 16];
        let c = match kind {
            "allreduce" => Coll::allreduce(&src, &mut dst[..4], ReduceOp::Sum),
            "bcast" => Coll::bcast(&mut buf, 0),
            "barrier" => Coll::barrier(),
            "allgather" => Coll::allgather(&src, &mut dst),
            "reduce" => Coll::reduce(&src, if me == 0 { Some(&mut dst[..4]) } else { None }, ReduceOp::Sum, 0),
            _ => Coll::gather(&src, if me == 0 { Some(&mut dst[..]) } else { None }, 0),
        };
        let letter = match run(team, c.timeout(T)) {
            Ok(_) if reads_nothing(kind, me) => 'O',
            Ok(_) if kind == "bcast" && kinds[usize::from(odd != 0)] == "bcast" => {
                assert_eq!(buf, [9; 16], "rank {me}: a bcast returned Ok without the root's bytes");
                'O'
            }
            Ok(alg) => panic!("rank {me}: {kind} returned Ok ({alg}) while rank {odd} posted {}", kinds[0]),
            Err(e) if e.status() == Status::InvalidParam && e.to_string().contains("calls differ") => 'D',
            Err(e) => panic!("rank {me}: {kind} failed without naming the calls: {e}"),
        };
        allreduce_sum_ok(team).unwrap_or_else(|e| panic!("rank {me}: the next allreduce failed: {e}"));
        letter
    })
    .into_iter()
    .collect()
}

#[test]
fn ranks_that_post_different_collectives_never_wait_forever() {
    // Different collectives choose different algorithms and step tags: their
    // messages never match a receive, and some wait for each other with no
    // message between them (a bcast receiver for the root, the root in an
    // allreduce for it). They meet through stray messages, notices and probes.
    for size in [2, 3] {
        for a in KINDS {
            for b in KINDS.into_iter().filter(|&b| b != a) {
                let l = differ_in_kind(size, size - 1, [a, b]);
                eprintln!("{size} ranks, {a} on rank {}, {b} elsewhere: {l}", size - 1);
            }
        }
    }
}

#[test]
fn processes_whose_collectives_differ_fail_naming_each_other() {
    // Over shared memory, and over TCP between emulated hosts.
    for hosts in [false, true] {
        let (tok, port) = (token(), free_port());
        let job = Job::start("rank_body", "kinds", 2, 0..2, &tok, port, &|r| {
            let mut v = vec![("UCC_TLS".to_string(), "p2p,self".to_string())];
            if hosts {
                v.push(("FERROCOLL_HOST_ID".into(), format!("host{r}")));
            }
            v
        });
        for o in job.finish(Duration::from_secs(120)) {
            let what = format!("hosts {hosts}, rank {}", o.rank);
            assert_eq!(o.success, Some(true), "{what}: {}\n{}", o.stdout, o.stderr);
            assert_eq!(o.lines("NEXT "), ["NEXT ok"], "{what}: {}", o.stdout);
            let line = o.lines("MISMATCH ").into_iter().next().unwrap_or_else(|| panic!("{what}: {}", o.stdout));
            assert!(line.starts_with("MISMATCH InvalidParam") && line.contains("calls differ"), "{what}: {line}");
            let (mine, theirs, other) = if o.rank == 0 {
                ("allreduce sum float32 of 4 elements", "bcast root 0 of 16 bytes", 1)
            } else {
                ("bcast root 0 of 16 bytes", "allreduce sum float32 of 4 elements", 0)
            };
            assert!(line.contains(&format!("rank {other} posted {theirs}")), "{what}: {line}");
            assert!(line.contains(&format!("this rank posted {mine}")), "{what}: {line}");
        }
    }
}
