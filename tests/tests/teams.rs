//! Teams: subsets of the context's endpoints (endpoint maps), several teams
//! and many collectives in flight at once, active-set bcast, completion
//! callbacks, non-blocking team creation, and contexts shared by threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrocoll::{ActiveSet, Coll, Config, EpMap, ReduceOp, Request, Status, Team, TeamParams};
use ferrocoll_tests::world;

const T: Duration = Duration::from_secs(30);

#[test]
fn subset_teams_from_endpoint_maps() {
    world::run(6, &Config::new(), |_all, ctx| {
        let ep = ctx.ep();
        // Evens in order, odds in reverse order, and a strided team of the first three.
        let (map, members): (EpMap, Vec<usize>) = if ep % 2 == 0 {
            (EpMap::Strided { start: 0, stride: 2, size: 3 }, vec![0, 2, 4])
        } else {
            (EpMap::Array(vec![5, 3, 1]), vec![5, 3, 1])
        };
        let team = Team::create(ctx, TeamParams::with_ep_map(map)).expect("team");
        assert_eq!(team.size(), 3);
        assert_eq!(members[team.rank()], ep);
        let src = vec![ep as u64; 10];
        let mut dst = vec![0u64; 10];
        Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(T).run(&team).expect("allreduce");
        assert_eq!(dst, vec![members.iter().sum::<usize>() as u64; 10]);
        // Rank order of the team is the map's order: allgather shows it.
        let mut all = vec![0u64; 3];
        Coll::allgather(&[ep as u64], &mut all).timeout(T).run(&team).expect("allgather");
        assert_eq!(all, members.iter().map(|&m| m as u64).collect::<Vec<_>>());
        if ep < 3 {
            let small =
                Team::create(ctx, TeamParams::with_ep_map(EpMap::Strided { start: 0, stride: 1, size: 3 })).expect("t");
            let mut b = vec![if ep == 2 { 42u8 } else { 0 }; 3];
            Coll::bcast(&mut b, 2).timeout(T).run(&small).expect("bcast");
            assert_eq!(b, vec![42; 3]);
        }
    });
}

#[test]
fn several_teams_and_collectives_in_flight() {
    world::run(4, &Config::new(), |world_team, ctx| {
        let ep = ctx.ep();
        let pair =
            Team::create(ctx, TeamParams::with_ep_map(EpMap::Array(if ep < 2 { vec![0, 1] } else { vec![2, 3] })))
                .expect("pair");
        let src: Vec<i32> = (0..1000).map(|i| i * (ep as i32 + 1)).collect();
        let mut sum = vec![0i32; 1000];
        let mut bc = vec![if ep == 3 { 7u16 } else { 0 }; 5000];
        let a2a_src: Vec<u8> = (0..4 * 100).map(|i| (i / 100 + 10 * ep) as u8).collect();
        let mut a2a_dst = vec![0u8; 400];
        let mut pair_dst = vec![0i32; 1000];
        // Post everything first, on two teams, then wait in reverse order.
        let mut reqs: Vec<Request<'_>> = vec![
            Coll::allreduce(&src, &mut sum, ReduceOp::Sum).timeout(T).init_and_post(world_team).expect("allreduce"),
            Coll::bcast(&mut bc, 3).timeout(T).init_and_post(world_team).expect("bcast"),
            Coll::allreduce(&src, &mut pair_dst, ReduceOp::Max).timeout(T).init_and_post(&pair).expect("pair"),
            Coll::alltoall(&a2a_src, &mut a2a_dst).timeout(T).init_and_post(world_team).expect("alltoall"),
        ];
        for r in reqs.iter_mut().rev() {
            r.wait().expect("wait");
        }
        drop(reqs);
        assert_eq!(sum, (0..1000).map(|i| i * 10).collect::<Vec<i32>>());
        assert!(bc.iter().all(|&v| v == 7));
        let partner_max = if ep < 2 { 2 } else { 4 };
        assert_eq!(pair_dst, (0..1000).map(|i| i * partner_max).collect::<Vec<i32>>());
        assert_eq!(a2a_dst, (0..400).map(|i| (ep + 10 * (i / 100)) as u8).collect::<Vec<_>>());
    });
}

#[test]
fn many_outstanding_collectives_on_one_team() {
    world::run(5, &Config::new(), |team, _| {
        let inputs: Vec<Vec<u32>> = (0..16).map(|k| vec![(k * 10 + team.rank()) as u32; 33]).collect();
        let mut outputs = vec![vec![0u32; 33]; 16];
        let mut reqs = Vec::new();
        for (src, dst) in inputs.iter().zip(outputs.iter_mut()) {
            reqs.push(Coll::allreduce(src, dst, ReduceOp::Sum).timeout(T).init_and_post(team).expect("post"));
        }
        for r in &mut reqs {
            r.wait().expect("wait");
        }
        drop(reqs);
        for (k, out) in outputs.iter().enumerate() {
            assert_eq!(out[0], (k * 10 * 5 + 10) as u32);
        }
    });
}

#[test]
fn active_set_bcast() {
    world::run(6, &Config::new(), |team, _| {
        // Ranks 1, 3, 5 bcast from 5; the others do not take part.
        let set = ActiveSet { start: 1, stride: 2, size: 3 };
        if team.rank() % 2 == 1 {
            let mut b = vec![if team.rank() == 5 { 9u8 } else { 0 }; 100];
            Coll::bcast(&mut b, 5).active_set(set, 3).timeout(T).run(team).expect("bcast");
            assert_eq!(b, vec![9; 100]);
        }
        // The active-set bcast took no sequence number: the full team still agrees.
        Coll::barrier().timeout(T).run(team).expect("barrier");
    });
}

#[test]
fn completion_callbacks_and_status_transitions() {
    world::run(3, &Config::new(), |team, ctx| {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let src = vec![1.5f32; 8];
        let mut dst = vec![0f32; 8];
        let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum)
            .persistent()
            .on_complete(Arc::new(move |s| {
                assert_eq!(s, Status::Ok);
                c.fetch_add(1, Ordering::SeqCst);
            }))
            .init(team)
            .expect("init");
        assert_eq!(req.test().expect("test"), Status::OperationInitialized);
        for round in 1..=3 {
            req.post().expect("post");
            while req.test().expect("test") == Status::InProgress {
                ctx.progress().expect("progress");
            }
            assert_eq!(calls.load(Ordering::SeqCst), round);
        }
        req.finalize().expect("finalize");
        drop(req);
        assert_eq!(dst, vec![4.5; 8]);
    });
}

#[test]
fn one_context_shared_by_a_posting_and_a_progressing_thread() {
    world::run(3, &Config::new(), |team, ctx| {
        let src = vec![team.rank() as u64 + 1; 4096];
        let mut dst = vec![0u64; 4096];
        let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(T).init_and_post(team).expect("post");
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..1000 {
                    let _ = ctx.progress();
                    std::thread::yield_now();
                }
            });
            req.wait().expect("wait");
        });
        drop(req);
        assert!(dst.iter().all(|&v| v == 6));
    });
}

#[test]
fn non_blocking_team_creation() {
    world::run(4, &Config::new(), |_team, ctx| {
        let t = Team::create_post(ctx, TeamParams::default()).expect("post");
        let mut polls = 0;
        while t.create_test().expect("test") == Status::InProgress {
            polls += 1;
            std::thread::yield_now();
        }
        assert_eq!(t.create_test().expect("again"), Status::Ok);
        assert!(t.score_map().expect("map").contains("allreduce host"));
        let _ = polls;
    });
}
