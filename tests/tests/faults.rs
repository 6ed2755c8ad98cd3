//! Faults: a rank that never posts, a rank whose context goes away, a
//! request dropped in flight. Every survivor gets an error that says what
//! happened, within its timeout; nothing hangs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrocoll::{Coll, Config, Context, ContextParams, Lib, LibParams, ReduceOp, Status, Team, TeamParams, ThreadOob};
use ferrocoll_tests::world;

#[test]
fn a_rank_that_never_posts_makes_the_others_time_out() {
    let results = world::run(4, &Config::new(), |team, _| {
        if team.rank() == 3 {
            return None;
        }
        let src = vec![1.0f64; 1000];
        let mut dst = vec![0.0f64; 1000];
        let start = Instant::now();
        let err = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(Duration::from_millis(300)).run(team).err();
        Some((err.map(|e| (e.status(), e.to_string())), start.elapsed()))
    });
    for (rank, r) in results.iter().enumerate().take(3) {
        let Some((Some((status, msg)), elapsed)) = r else { panic!("rank {rank}: expected a timeout, got {r:?}") };
        assert_eq!(*status, Status::TimedOut, "rank {rank}: {msg}");
        assert!(msg.contains("timed out after 0.300 s") && msg.contains("waiting for a message from rank"), "{msg}");
        assert!(*elapsed < Duration::from_secs(5), "rank {rank} took {elapsed:?}");
    }
}

#[test]
fn a_root_whose_send_is_never_taken_names_the_rank_it_waits_for() {
    // p2p, 1 MiB: the bcast's send waits until the receiver copies it
    // (rendezvous); the root receives nothing, so only its send says where it is.
    let mut c = Config::new();
    c.set("TLS", "p2p,self");
    let results = world::run(2, &c, |team, _| {
        if team.rank() == 1 {
            return None;
        }
        let mut buf = vec![7u8; 1 << 20];
        Coll::bcast(&mut buf, 0)
            .timeout(Duration::from_millis(300))
            .run(team)
            .err()
            .map(|e| (e.status(), e.to_string()))
    });
    let Some((status, msg)) = &results[0] else { panic!("the root must time out") };
    assert_eq!(*status, Status::TimedOut, "{msg}");
    assert!(msg.contains("waiting for rank 1 to take a message"), "{msg}");
}

#[test]
fn the_default_timeout_comes_from_the_configuration() {
    let mut c = Config::new();
    c.set("COLL_TIMEOUT", "200ms");
    let results = world::run(2, &c, |team, _| {
        if team.rank() == 1 {
            return None;
        }
        Coll::barrier().run(team).err().map(|e| e.status())
    });
    assert_eq!(results[0], Some(Status::TimedOut));
}

#[test]
fn a_rank_whose_context_is_destroyed_fails_its_peers() {
    // Rank 1 leaves (drops its context) instead of joining the bcast: rank 0
    // must fail with an I/O error naming it, long before its timeout.
    let lib = Lib::new().expect("lib");
    let mut oobs = ThreadOob::group(2);
    let (o1, o0) = (oobs.pop().expect("oob"), oobs.pop().expect("oob"));
    let l1 = lib.clone();
    let leaver = std::thread::spawn(move || {
        let ctx = Context::new(&l1, ContextParams::with_oob(o1)).expect("ctx");
        let team = Team::create(&ctx, TeamParams::default()).expect("team");
        drop(team);
        drop(ctx);
    });
    let ctx = Context::new(&lib, ContextParams::with_oob(o0)).expect("ctx");
    let team = Team::create(&ctx, TeamParams::default()).expect("team");
    leaver.join().expect("join");
    let mut buf = vec![0u8; 64];
    let start = Instant::now();
    let e = Coll::bcast(&mut buf, 1).timeout(Duration::from_secs(30)).run(&team).expect_err("peer is gone");
    assert_eq!(e.status(), Status::IoError, "{e}");
    // The shm TL says the rank left its team; the p2p TL, that its endpoint is gone.
    let msg = e.to_string();
    assert!(msg.contains("rank 1") && (msg.contains("left the team") || msg.contains("endpoint 1 is gone")), "{e}");
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
}

/// Small shm collectives on two ranks, after which rank 1 runs `leave`
/// with its team (its context stays, unprogressed, until rank 0 is done):
/// rank 0's next collective must fail at once, naming rank 1 as gone,
/// not at its timeout. `leave` runs rank 1's share of 50 allreduces of 2
/// floats, then lets its team go.
fn rank_1_is_seen_to_leave(leave: impl FnOnce(Team) + Send + 'static) {
    let mut c = Config::new();
    c.set("TLS", "shm,self");
    let lib = Lib::with_params(LibParams { config: c, ..LibParams::default() }).expect("lib");
    let mut oobs = ThreadOob::group(2);
    let (o1, o0) = (oobs.pop().expect("oob"), oobs.pop().expect("oob"));
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let l1 = lib.clone();
    let leaver = std::thread::spawn(move || {
        let ctx = Context::new(&l1, ContextParams::with_oob(o1)).expect("ctx");
        let team = Team::create(&ctx, TeamParams::default()).expect("team");
        leave(team);
        let _ = done_rx.recv();
        drop(ctx);
    });
    let ctx = Context::new(&lib, ContextParams::with_oob(o0)).expect("ctx");
    let team = Team::create(&ctx, TeamParams::default()).expect("team");
    for _ in 0..50 {
        allreduce_2(&team);
    }
    let start = Instant::now();
    let e = Coll::barrier().timeout(Duration::from_secs(20)).run(&team).expect_err("rank 1 left");
    let _ = done_tx.send(());
    leaver.join().expect("join");
    assert_eq!(e.status(), Status::IoError, "{e}");
    assert!(e.to_string().contains("rank 1 left the team"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
}

fn allreduce_2(team: &Team) {
    let (src, mut dst) = ([1.0f32; 2], [0.0f32; 2]);
    Coll::allreduce(&src, &mut dst, ReduceOp::Sum).run(team).expect("allreduce");
}

/// A rank that destroys its team after small shm collectives (whose
/// finished futures their queue slots may keep for the next post, see
/// `CollTask::recycles_futures`; whose requests left their team reference
/// to the thread, see `spare_team.rs`) is seen to have left at once, even
/// while its context lives on and is never progressed again: nothing it
/// leaves behind keeps the team's segment claimed.
#[test]
fn a_rank_that_destroys_its_team_after_small_collectives_is_seen_to_leave() {
    rank_1_is_seen_to_leave(|team| {
        for _ in 0..50 {
            allreduce_2(&team);
        }
        drop(team);
    });
}

/// The same when the rank's last request outlives its team's handle: the
/// team goes with that request.
#[test]
fn a_team_whose_last_request_outlives_its_handle_goes_with_that_request() {
    rank_1_is_seen_to_leave(|team| {
        for _ in 0..49 {
            allreduce_2(&team);
        }
        let (src, mut dst) = ([1.0f32; 2], [0.0f32; 2]);
        let mut last = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).init(&team).expect("init");
        last.post().expect("post");
        last.wait().expect("wait");
        drop(team);
        drop(last);
    });
}

/// The same when the rank's collectives ran on another thread, which
/// outlives the team's handle: the team goes when that thread ends.
#[test]
fn a_team_whose_requests_ran_on_another_thread_goes_when_that_thread_ends() {
    rank_1_is_seen_to_leave(|team| {
        let team = Arc::new(team);
        let (ran_tx, ran_rx) = std::sync::mpsc::channel::<()>();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let on_thread = team.clone();
        let worker = std::thread::spawn(move || {
            for _ in 0..50 {
                allreduce_2(&on_thread);
            }
            drop(on_thread);
            let _ = ran_tx.send(());
            // Outlives the handle, dropped below meanwhile.
            let _ = go_rx.recv();
        });
        let _ = ran_rx.recv();
        drop(team);
        let _ = go_tx.send(());
        worker.join().expect("worker");
    });
}

#[test]
fn dropping_a_request_in_flight_releases_its_buffers() {
    // Point-to-point: the dropped send is retracted and the ranks carry on.
    let mut c = Config::new();
    c.set("TLS", "p2p,self");
    world::run(2, &c, |team, _| {
        if team.rank() == 0 {
            // A large send (rendezvous): dropping the request must retract it,
            // or wait for a copy in progress, before the buffer is freed.
            let mut big = vec![1u8; 1 << 20];
            let mut req = Coll::bcast(&mut big, 0).init(team).expect("init");
            req.post().expect("post");
            drop(req);
            big.fill(0);
            drop(big);
        } else {
            let mut got = vec![0u8; 1 << 20];
            let r = Coll::bcast(&mut got, 0).timeout(Duration::from_millis(500)).run(team);
            match r {
                Ok(()) => assert!(got.iter().all(|&b| b == 1), "a bcast that completed must hold the root's data"),
                Err(e) => assert_eq!(e.status(), Status::TimedOut, "{e}"),
            }
        }
        // Both ranks still work together afterwards.
        Coll::barrier().timeout(Duration::from_secs(20)).run(team).expect("barrier");
        let src = vec![team.rank() as u32; 4];
        let mut dst = vec![0u32; 4];
        Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(Duration::from_secs(20)).run(team).expect("allreduce");
        assert_eq!(dst, vec![1; 4]);
    });
}

#[test]
fn a_collective_cancelled_halfway_breaks_an_shm_team_and_later_ones_say_so() {
    // Through the shared segment, ranks walk the same epochs: one that
    // abandons a collective halfway would leave the others stuck in it and
    // everyone out of step, so it marks itself failed in its control line:
    // the others stop at their next wait for it, naming it, and the team
    // refuses to go on rather than mix up data — on every rank, saying why. The shm TL
    // is forced for bcast: at 2 ranks its defaults leave 1 MiB to p2p.
    let mut config = Config::new();
    config.set("TL_SHM_TUNE", "bcast:@staged:inf");
    // Rank 0 abandons its bcast before the root starts, so the root cannot
    // finish by racing through every round inside rank 0's first poll.
    let abandoned = Arc::new(std::sync::Barrier::new(2));
    world::run(2, &config, move |team, _| {
        // 1 MiB: several rounds of the segment, so the root needs rank 0 past the first.
        let mut b = vec![0u8; 1 << 20];
        if team.rank() == 0 {
            let mut req = Coll::bcast(&mut b, 1).init(team).expect("init");
            assert_eq!(req.selected(), "shm/staged");
            req.post().expect("post");
            drop(req);
            abandoned.wait();
        } else {
            abandoned.wait();
            // Rank 0 marked itself failed when it dropped its part: the root
            // stops at its first wait for rank 0, naming it, long before the timeout.
            let e = Coll::bcast(&mut b, 1).timeout(Duration::from_secs(20)).run(team).expect_err("stuck");
            assert_eq!(e.status(), Status::IoError, "{e}");
            assert!(e.to_string().contains("rank 0 stopped taking part"), "{e}");
        }
        let e = Coll::barrier().timeout(Duration::from_secs(2)).run(team).expect_err("the team is broken");
        assert!(e.to_string().contains("the shm team is broken"), "{e}");
        // The calls after the failure repeat why: the first failure's error,
        // or that a collective was cancelled.
        let why =
            if team.rank() == 0 { "was cancelled halfway" } else { "failed: shm team rank 0 stopped taking part" };
        assert!(e.to_string().contains(why), "rank {}: {e}", team.rank());
    });
}

#[test]
fn a_small_collective_cancelled_while_it_waits_breaks_an_shm_team() {
    // A one-epoch collective (`tl/src/shm/one_epoch.rs`) dropped after it
    // published, while it waits for its peer: its rank is out of step now,
    // so the team is broken there, and its peer learns it at its next wait
    // for that rank (naming it), not by its timeout.
    let dropped = Arc::new(std::sync::Barrier::new(2));
    world::run(2, &Config::new(), move |team, _| {
        let src = [team.rank() as f32 + 1.0; 2];
        let mut dst = [0f32; 2];
        if team.rank() == 0 {
            let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).init(team).expect("init");
            assert_eq!(req.selected(), "shm/onestep");
            req.post().expect("post");
            drop(req);
            dropped.wait();
            let e = Coll::barrier().timeout(Duration::from_secs(20)).run(team).expect_err("the team is broken");
            assert!(e.to_string().contains("the shm team is broken"), "{e}");
        } else {
            dropped.wait();
            // Rank 0 published its input before it dropped the request: this
            // allreduce may complete, and then with the right sum.
            if Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(Duration::from_secs(20)).run(team).is_ok() {
                assert_eq!(dst, [3.0; 2]);
            }
            let e = Coll::barrier().timeout(Duration::from_secs(20)).run(team).expect_err("rank 0 broke the team");
            assert_eq!(e.status(), Status::IoError, "{e}");
            assert!(e.to_string().contains("rank 0 stopped taking part"), "{e}");
        }
    });
}

#[test]
fn a_rank_that_waits_only_on_a_failed_one_names_the_cause() {
    // Rank 2 reduces 3 elements to rank 0 where the others reduce 2: rank 2,
    // not the root, reads nothing and finishes; the root, reading rank 2's
    // input, finds its call differs and fails because of rank 2, which it
    // says in its control line. Rank 1, whose reduce needed nobody either,
    // then waits in a bcast for the root alone: its error must name rank 2,
    // the cause, not only the root.
    let reduced = Arc::new(std::sync::Barrier::new(3));
    let out = world::run(3, &Config::new(), move |team, _| {
        let src = [1.0f32; 3];
        let n = if team.rank() == 2 { 3 } else { 2 };
        let mut dst = [0f32; 3];
        let root_dst = (team.rank() == 0).then_some(&mut dst[..n]);
        let first = Coll::reduce(&src[..n], root_dst, ReduceOp::Sum, 0).timeout(Duration::from_secs(20)).run(team);
        reduced.wait();
        let mut buf = [0f32; 2];
        let then = (team.rank() == 1).then(|| Coll::bcast(&mut buf, 0).timeout(Duration::from_secs(20)).run(team));
        (first, then)
    });
    let root = out[0].0.as_ref().expect_err("the root's reduce has rank 2's call wrong").to_string();
    assert!(root.contains("calls differ: rank 2 posted"), "rank 0: {root}");
    assert!(out[1].0.is_ok() && out[2].0.is_ok(), "ranks 1 and 2 read nobody: {:?}", &out[1..]);
    let e = out[1].1.as_ref().expect("rank 1 ran a bcast").as_ref().expect_err("the root is out");
    assert_eq!(e.status(), Status::IoError, "{e}");
    let text = e.to_string();
    assert!(text.contains("rank 0 stopped taking part because of rank 2"), "rank 1: {text}");
}
