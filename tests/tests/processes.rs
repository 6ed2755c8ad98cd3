//! Ranks that are processes: a slice of the conformance matrix over the
//! shared-memory TL and the p2p transports (shared memory between processes
//! of one host; TCP between emulated hosts), every hierarchical algorithm
//! at every root on emulated hosts and switch groups, a rank killed
//! mid-collective (also inside a node of the hierarchy), a process with the
//! wrong job token, and a rank that never arrives.
//!
//! The test binary starts copies of itself as ranks (`rank_body`, which is
//! a no-op unless started that way), bootstrapping through `TcpOob::from_env`.

use std::time::{Duration, Instant};

use ferrocoll::{Coll, CollType, Context, ContextParams, Lib, ReduceOp, TcpOob, Team, TeamParams};
use ferrocoll_tests::cases::matrix;
use ferrocoll_tests::procs::{Job, ROLE, RankOutput, free_port};
use ferrocoll_tests::runner::run_case;

/// Every collective.
const COLLS: [CollType; 16] = CollType::ALL;

/// One rank of a job started by the tests below (does nothing when run directly).
#[test]
fn rank_body() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let code = match role.as_str() {
        "conformance" => conformance_rank(),
        "loop" => loop_rank(),
        "hello" => hello_rank(),
        "diverge" => diverge_rank(),
        "send_to_idle" => send_to_idle_rank(),
        other => {
            println!("FAIL unknown role {other}");
            1
        }
    };
    std::process::exit(code);
}

fn context() -> ferrocoll::Result<(Lib, Context)> {
    let lib = Lib::new()?;
    let ctx = Context::new(&lib, ContextParams::with_oob(TcpOob::from_env()?))?;
    Ok((lib, ctx))
}

/// Run a slice of the matrix for every collective and every algorithm of
/// the TLs that serve this job (`FERROCOLL_TEST_TLS`).
fn conformance_rank() -> i32 {
    let (_lib, ctx) = match context() {
        Ok(c) => c,
        Err(e) => {
            println!("FAIL context: {e}");
            return 1;
        }
    };
    let tls: Vec<String> =
        std::env::var("FERROCOLL_TEST_TLS").unwrap_or_default().split(',').map(str::to_string).collect();
    let size = ctx.n_eps();
    let every: usize = std::env::var("FERROCOLL_TEST_EVERY").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let lib = Lib::new().expect("lib");
    // FERROCOLL_TEST_COLLS: only these collectives (unset: all); FERROCOLL_TEST_ALGS: only these algorithms.
    let only = std::env::var("FERROCOLL_TEST_COLLS").ok();
    let algs = std::env::var("FERROCOLL_TEST_ALGS").ok();
    // FERROCOLL_TEST_EVERY_ROOT: rooted collectives also at every other root.
    let every_root = std::env::var("FERROCOLL_TEST_EVERY_ROOT").is_ok();
    for coll in COLLS.into_iter().filter(|c| only.as_deref().is_none_or(|o| o.split(',').any(|n| n == c.name()))) {
        for tl in lib.tls().iter().filter(|t| tls.iter().any(|n| n == t.name())) {
            let chosen = |name: &str| algs.as_deref().is_none_or(|a| a.split(',').any(|n| n == name));
            for alg in tl.algorithms().iter().filter(|a| a.coll == coll && chosen(a.name)) {
                let p = TeamParams::default()
                    .set(&format!("TL_{}_TUNE", tl.name().to_ascii_uppercase()), format!("{coll}:@{}:inf", alg.name))
                    .set("TL_SELF_TUNE", "0");
                let team = match Team::create(&ctx, p) {
                    Ok(t) => t,
                    Err(e) => {
                        println!("FAIL {coll} {}/{}: team: {e}", tl.name(), alg.name);
                        return 1;
                    }
                };
                let mut cases = matrix(coll, size, 77 + coll.index() as u64);
                if every_root && coll.is_rooted() {
                    cases.extend(other_roots(&cases, size));
                }
                let mut n = 0;
                for case in cases.iter().step_by(every) {
                    match run_case(&team, case) {
                        Ok(out)
                            if out.selected == format!("{}/{}", tl.name(), alg.name)
                                || out.selected == "none/zero-size" =>
                        {
                            n += 1;
                        }
                        Ok(out) => {
                            println!("FAIL {case}: pinned {}/{} but {} ran", tl.name(), alg.name, out.selected);
                            return 1;
                        }
                        Err(e) => {
                            println!("FAIL {case} via {}/{}: rank {}: {e}", tl.name(), alg.name, team.rank());
                            return 1;
                        }
                    }
                }
                println!("DONE {coll} {}/{} {n}", tl.name(), alg.name);
            }
        }
    }
    0
}

/// The cases at root 0 moved to every root the matrix leaves out (it takes
/// the first, middle and last), so that every rank leads at least once.
fn other_roots(cases: &[ferrocoll_tests::cases::Case], size: usize) -> Vec<ferrocoll_tests::cases::Case> {
    let taken = ferrocoll_tests::cases::roots(size);
    let at_zero: Vec<_> = cases.iter().filter(|c| c.root == 0).collect();
    (0..size)
        .filter(|r| !taken.contains(r))
        .flat_map(|r| at_zero.iter().step_by(3).map(move |c| ferrocoll_tests::cases::Case { root: r, ..(*c).clone() }))
        .collect()
}

/// Allreduce 1 MiB (or, with `FERROCOLL_TEST_LOOP=alltoall`, alltoall of
/// 256 KiB blocks) again and again until a collective fails (a peer was killed).
fn loop_rank() -> i32 {
    let (_lib, ctx) = match context() {
        Ok(c) => c,
        Err(e) => {
            println!("FAIL context: {e}");
            return 1;
        }
    };
    let team = Team::create(&ctx, TeamParams::default()).expect("team");
    let alltoall = std::env::var("FERROCOLL_TEST_LOOP").is_ok_and(|c| c == "alltoall");
    let n = if alltoall { team.size() << 16 } else { 1 << 18 };
    let src = vec![1.0f32; n];
    let mut dst = vec![0.0f32; n];
    let start = Instant::now();
    let mut first = true;
    while start.elapsed() < Duration::from_secs(60) {
        let coll =
            if alltoall { Coll::alltoall(&src, &mut dst) } else { Coll::allreduce(&src, &mut dst, ReduceOp::Sum) };
        let outcome = coll.timeout(Duration::from_secs(10)).init(&team).and_then(|mut req| {
            if std::mem::take(&mut first) {
                println!("VIA {}", req.selected());
            }
            req.run()
        });
        if let Err(e) = outcome {
            println!("ERROR {e}");
            return 0;
        }
    }
    println!("FAIL no error in 60 s");
    1
}

/// Create a context and run a barrier.
fn hello_rank() -> i32 {
    match context().and_then(|(_l, ctx)| {
        let team = Team::create(&ctx, TeamParams::default())?;
        Coll::barrier().timeout(Duration::from_secs(20)).run(&team)?;
        Ok(team.rank())
    }) {
        Ok(r) => {
            println!("HELLO {r}");
            0
        }
        Err(e) => {
            println!("ERROR {e}");
            0
        }
    }
}

/// Allreduce 5 000 elements on rank 0 and 200 000 on the others: calls that
/// differ so that the ranks choose different TLs (shm and p2p).
fn diverge_rank() -> i32 {
    let outcome = context().and_then(|(_l, ctx)| {
        let team = Team::create(&ctx, TeamParams::default())?;
        let n = if team.rank() == 0 { 5_000 } else { 200_000 };
        let (src, mut dst) = (vec![1.0f32; n], vec![0.0f32; n]);
        let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(Duration::from_secs(20)).init(&team)?;
        println!("VIA {}", req.selected());
        req.run()
    });
    match outcome {
        Ok(()) => println!("OK"),
        Err(e) => println!("ERROR {e}"),
    }
    0
}

/// Rank 2 dies without a word once the team exists; rank 1 stays alive
/// but posts nothing for 20 s; rank 0 gathers 1 MiB at root 1 (no
/// timeout), a send that rank 1 never takes, and says how long it took.
fn send_to_idle_rank() -> i32 {
    let outcome = context().and_then(|(_l, ctx)| {
        let team = Team::create(&ctx, TeamParams::default())?;
        match team.rank() {
            2 => std::process::exit(0), // no destructor runs: no goodbye
            1 => {
                std::thread::sleep(Duration::from_secs(20));
                println!("SLEPT");
                Ok(())
            }
            _ => {
                let src = vec![1.0f32; 1 << 18];
                let mut req = Coll::gather(&src, None, 1).init(&team)?;
                println!("VIA {}", req.selected());
                let t = Instant::now();
                let r = req.run();
                println!("TOOK {}", t.elapsed().as_secs());
                r
            }
        }
    });
    match outcome {
        Ok(()) => println!("OK"),
        Err(e) => println!("ERROR {e}"),
    }
    0
}

fn token() -> String {
    format!("test-{:x}-{:x}", std::process::id(), Instant::now().elapsed().as_nanos() ^ free_port() as u128)
}

fn env(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn assert_all_done(outs: &[RankOutput], expect_tls: &[&str]) {
    let cases: usize = outs[0].lines("DONE ").iter().filter_map(|l| l.rsplit(' ').next()?.parse::<usize>().ok()).sum();
    eprintln!("{} ranks: {cases} cases each", outs.len());
    for o in outs {
        let fails = o.lines("FAIL");
        assert!(fails.is_empty() && o.success == Some(true), "rank {}: {fails:?}\n{}\n{}", o.rank, o.stdout, o.stderr);
        let done = o.lines("DONE ");
        for tl in expect_tls {
            for coll in COLLS {
                let c = coll.name();
                assert!(
                    done.iter().any(|l| l.starts_with(&format!("DONE {c} {tl}/"))),
                    "rank {}: no {tl} algorithm ran {c}: {done:?}",
                    o.rank
                );
            }
        }
    }
}

/// The slice of the matrix on `size` processes of one host: shm TL and p2p over the shm transport.
fn one_host(size: usize) {
    let (tok, port) = (token(), free_port());
    let job = Job::start("rank_body", "conformance", size, 0..size, &tok, port, &|_| {
        env(&[("FERROCOLL_TEST_TLS", "shm,p2p".into())])
    });
    assert_all_done(&job.finish(Duration::from_secs(600)), &["shm", "p2p"]);
}

#[test]
fn conformance_two_processes() {
    one_host(2);
}

#[test]
fn conformance_three_processes() {
    one_host(3);
}

#[test]
fn conformance_four_processes() {
    one_host(4);
}

#[test]
fn conformance_two_emulated_hosts_of_two() {
    // Ranks 0,1 on host a, 2,3 on host b: p2p over TCP between hosts and shared memory within.
    let (tok, port) = (token(), free_port());
    let job = Job::start("rank_body", "conformance", 4, 0..4, &tok, port, &|r| {
        env(&[("FERROCOLL_TEST_TLS", "p2p".into()), ("FERROCOLL_HOST_ID", format!("host{}", r / 2))])
    });
    assert_all_done(&job.finish(Duration::from_secs(600)), &["p2p"]);
}

/// Collectives with a hierarchical p2p algorithm.
const HIER_COLLS: [&str; 12] = [
    "allreduce",
    "bcast",
    "reduce",
    "gather",
    "gatherv",
    "scatter",
    "scatterv",
    "allgather",
    "allgatherv",
    "alltoall",
    "alltoallv",
    "barrier",
];

/// Every hierarchical p2p algorithm (and allreduce's split rail) through the conformance matrix, at
/// every root, with rank r on emulated host `places[r].0` under switch
/// group `places[r].1`. Radix 2 everywhere: leaders run knomial steps and
/// proxies.
fn hierarchical_on(places: &[(&str, &str)]) {
    let (tok, port) = (token(), free_port());
    let size = places.len();
    let job = Job::start("rank_body", "conformance", size, 0..size, &tok, port, &|r| {
        env(&[
            ("FERROCOLL_TEST_TLS", "p2p".into()),
            ("FERROCOLL_TEST_COLLS", HIER_COLLS.join(",")),
            ("FERROCOLL_TEST_ALGS", "hier,split_rail".into()),
            ("FERROCOLL_TEST_EVERY_ROOT", "1".into()),
            ("UCC_TL_P2P_ALLREDUCE_KN_RADIX", "2".into()),
            ("UCC_TL_P2P_BCAST_KN_RADIX", "2".into()),
            ("UCC_TL_P2P_REDUCE_KN_RADIX", "2".into()),
            ("FERROCOLL_HOST_ID", places[r].0.to_string()),
            ("FERROCOLL_SWITCH_ID", places[r].1.to_string()),
        ])
    });
    let outs = job.finish(Duration::from_secs(600));
    for o in &outs {
        let fails = o.lines("FAIL");
        assert!(fails.is_empty() && o.success == Some(true), "rank {}: {fails:?}\n{}\n{}", o.rank, o.stdout, o.stderr);
        for (coll, alg) in HIER_COLLS.iter().map(|c| (*c, "hier")).chain([("allreduce", "split_rail")]) {
            let hier = o.lines(&format!("DONE {coll} p2p/{alg} "));
            let n: usize = hier.first().and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or(0);
            assert!(n > 0, "rank {}: the hierarchical {coll} ({alg}) ran no case: {}", o.rank, o.stdout);
        }
    }
}

/// Two emulated hosts of two ranks.
#[test]
fn hierarchical_collectives_on_two_emulated_hosts_of_two() {
    hierarchical_on(&[("a", "s"), ("a", "s"), ("b", "s"), ("b", "s")]);
}

/// Uneven emulated hosts: 1, 3 and 2 ranks, host b's ranks not contiguous
/// (rank 5 sits on it), so node leaders are not every k-th rank, and a root
/// on a host of several ranks leads it.
#[test]
fn hierarchical_collectives_on_three_uneven_emulated_hosts() {
    hierarchical_on(&[("a", "s"), ("b", "s"), ("b", "s"), ("c", "s"), ("c", "s"), ("b", "s")]);
}

/// Two switch groups of two emulated hosts of two ranks: three levels.
/// Group t's ranks are not contiguous (ranks 2 and 3 sit on host c), so
/// group leaders are not every k-th rank either.
#[test]
fn hierarchical_collectives_on_two_switches_of_two_hosts_of_two() {
    let places = [("a", "s"), ("a", "s"), ("c", "t"), ("c", "t"), ("b", "s"), ("b", "s"), ("d", "t"), ("d", "t")];
    hierarchical_on(&places);
}

/// Ten ranks in three switch groups of one to three hosts, nothing
/// contiguous: ranks of a host and hosts of a group interleave, one host
/// holds one rank, one group one host.
#[test]
fn hierarchical_collectives_on_ten_interleaved_ranks_in_three_switches() {
    let places = [
        ("a", "s"),
        ("d", "u"),
        ("b", "s"),
        ("a", "s"),
        ("e", "u"),
        ("c", "t"),
        ("b", "s"),
        ("c", "t"),
        ("d", "u"),
        ("c", "t"),
    ];
    hierarchical_on(&places);
}

/// Kill rank 2 of 4 in the middle of a loop of allreduces: every survivor's
/// collective fails with an error naming it, well within the 10 s timeout.
fn kill_a_rank(hosts: bool) {
    let places: Vec<(String, String)> = (0..4).map(|r| (format!("host{r}"), "s".to_string())).collect();
    kill_in(hosts.then_some(&places[..]), 2, None, &[]);
}

/// Kill rank `victim` of a job of `places.len()` ranks (4 on one host
/// without places) looping over allreduces (through `alg` of the p2p TL
/// when given, `tl/alg`: of that TL), with the environment `extra` too:
/// every survivor names it, well within the 10 s timeout.
fn kill_in(places: Option<&[(String, String)]>, victim: usize, alg: Option<&str>, extra: &[(&str, &str)]) {
    let size = places.map_or(4, <[_]>::len);
    let (tok, port) = (token(), free_port());
    let mut job = Job::start("rank_body", "loop", size, 0..size, &tok, port, &|r| {
        let mut e = Vec::new();
        if let Some(p) = places {
            e.push(("FERROCOLL_HOST_ID".to_string(), p[r].0.clone()));
            e.push(("FERROCOLL_SWITCH_ID".to_string(), p[r].1.clone()));
        }
        if let Some(alg) = alg.filter(|a| !a.contains('/')) {
            e.push(("UCC_TL_P2P_TUNE".to_string(), format!("allreduce:@{alg}:inf")));
        }
        e.extend(extra.iter().map(|&(k, v)| (k.to_string(), v.to_string())));
        e
    });
    std::thread::sleep(Duration::from_millis(2500));
    let killed = Instant::now();
    job.kill(victim);
    let outs = job.finish(Duration::from_secs(25));
    let took = killed.elapsed();
    assert!(took < Duration::from_secs(20), "survivors took {took:?} (twice the timeout is 20 s)");
    let all: Vec<String> = outs.iter().flat_map(|o| o.lines("ERROR ")).collect();
    for o in outs.iter().filter(|o| o.rank != victim) {
        if let Some(alg) = alg {
            let via = o.lines("VIA ");
            let alg = if alg.contains('/') { alg.to_string() } else { format!("p2p/{alg}") };
            assert_eq!(via, vec![format!("VIA {alg}")], "rank {}: {}", o.rank, o.stdout);
        }
        let errors = o.lines("ERROR ");
        assert_eq!(o.success, Some(true), "rank {} did not end by itself: {}\n{}", o.rank, o.stdout, o.stderr);
        let e = errors.first().unwrap_or_else(|| panic!("rank {}: no error: {}", o.rank, o.stdout));
        assert!(
            e.contains(&format!("rank {victim}")) || e.contains(&format!("endpoint {victim}")),
            "rank {}: the error does not name rank {victim}: {e}\nevery error: {all:#?}",
            o.rank
        );
    }
}

#[test]
fn a_killed_rank_is_named_by_the_survivors_on_one_host() {
    kill_a_rank(false);
}

/// The survivors of a rank killed while they read its buffer by single
/// copy (or it theirs) name it too.
#[test]
fn a_rank_killed_during_single_copies_is_named_by_the_survivors() {
    let extra = [("FERROCOLL_TEST_LOOP", "alltoall"), ("UCC_TL_SHM_TUNE", "alltoall:@cma:inf")];
    kill_in(None, 1, Some("shm/cma"), &extra);
}

#[test]
fn a_killed_rank_is_named_by_the_survivors_across_hosts() {
    kill_a_rank(true);
}

/// Two switch groups of two emulated hosts of two ranks, the hierarchical
/// allreduce: rank 5, a node member that is no leader (only its node's
/// leader hears from it), is killed; every survivor, in other nodes and
/// the other switch group too, names it. Then rank 6, a node leader that
/// leads no group.
#[test]
fn a_rank_killed_inside_a_node_of_the_hierarchy_is_named_by_every_survivor() {
    let places: Vec<(String, String)> =
        [("a", "s"), ("a", "s"), ("c", "t"), ("c", "t"), ("b", "s"), ("b", "s"), ("d", "t"), ("d", "t")]
            .iter()
            .map(|(h, s)| (h.to_string(), s.to_string()))
            .collect();
    kill_in(Some(&places), 5, Some("hier"), &[]);
    kill_in(Some(&places), 6, Some("hier"), &[]);
}

#[test]
fn a_process_with_the_wrong_token_is_refused_and_the_job_goes_on() {
    // Rank 0 waits for rank 1; an intruder claiming to be rank 1 comes first.
    let (tok, port) = (token(), free_port());
    let first = Job::start("rank_body", "hello", 2, [0], &tok, port, &|_| Vec::new());
    std::thread::sleep(Duration::from_millis(300));
    let intruder = Job::start("rank_body", "hello", 2, [1], "not-the-token", port, &|_| Vec::new());
    let bad = intruder.finish(Duration::from_secs(60));
    let second = Job::start("rank_body", "hello", 2, [1], &tok, port, &|_| Vec::new());
    let outs: Vec<RankOutput> =
        first.finish(Duration::from_secs(60)).into_iter().chain(second.finish(Duration::from_secs(60))).collect();
    for o in &outs {
        assert_eq!(o.lines("HELLO "), vec![format!("HELLO {}", o.rank)], "{}\n{}", o.stdout, o.stderr);
    }
    let e = bad[0].lines("ERROR ");
    assert!(e.first().is_some_and(|e| e.contains("wrong job token")), "intruder: {}\n{}", bad[0].stdout, bad[0].stderr);
}

/// The shared-memory segments in /dev/shm that process `pid` created (their
/// names end with its owner tag, `-p<pid>[t<start>][n<pid namespace>]`).
fn segments_of(pid: u32) -> Vec<String> {
    let created_by = |name: &str| {
        let Some((_, tag)) = name.rsplit_once("-p") else { return false };
        let digits = tag.find(|c: char| !c.is_ascii_digit()).unwrap_or(tag.len());
        tag[..digits].parse() == Ok(pid) && tag[digits..].chars().all(|c| c.is_ascii_alphanumeric())
    };
    let Ok(dir) = std::fs::read_dir("/dev/shm") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with("ferrocoll-") && created_by(n))
        .collect()
}

#[test]
fn segments_of_a_rank_killed_during_setup_are_removed_by_the_next_job() {
    if std::fs::metadata("/dev/shm").is_err() {
        eprintln!("skipped: no /dev/shm");
        return;
    }
    // Rank 0 sets up shared memory, then waits for a rank 1 that never comes;
    // killed there (no ferrocoll-run to clean up after it), it leaves its
    // segments behind with their names still linked.
    let (tok, port) = (token(), free_port());
    let mut setup = Job::start("rank_body", "hello", 2, [0], &tok, port, &|_| Vec::new());
    let pid = setup.pid(0).expect("rank 0 started");
    let deadline = Instant::now() + Duration::from_secs(30);
    while segments_of(pid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left = segments_of(pid);
    setup.kill(0);
    let killed = setup.finish(Duration::from_secs(10));
    assert!(!left.is_empty(), "rank 0 created no segment in 30 s: {}\n{}", killed[0].stdout, killed[0].stderr);
    // Any later job on this host sweeps what dead processes of this user left.
    let (tok, port) = (token(), free_port());
    let next = Job::start("rank_body", "hello", 2, 0..2, &tok, port, &|_| Vec::new());
    for o in next.finish(Duration::from_secs(60)) {
        assert_eq!(o.lines("HELLO "), vec![format!("HELLO {}", o.rank)], "{}\n{}", o.stdout, o.stderr);
    }
    let still = segments_of(pid);
    assert!(still.is_empty(), "left by killed pid {pid}: {left:?}; still there after the next job: {still:?}");
}

#[test]
fn a_rank_that_never_arrives_is_named() {
    let (tok, port) = (token(), free_port());
    let job = Job::start("rank_body", "hello", 3, 0..2, &tok, port, &|_| env(&[("UCC_OOB_TIMEOUT", "2s".into())]));
    let outs = job.finish(Duration::from_secs(60));
    let e0 = outs[0].lines("ERROR ");
    assert!(e0.first().is_some_and(|e| e.contains("[2]")), "rank 0: {}\n{}", outs[0].stdout, outs[0].stderr);
    assert!(!outs[1].lines("ERROR ").is_empty(), "rank 1 must fail too: {}", outs[1].stdout);
}

/// A send whose peer is alive but idle ends when another member dies, as a
/// receive does (it used to wait for the idle peer forever, without a
/// timeout): rank 0's gather to root 1 names rank 2, which died.
#[test]
fn a_send_to_an_idle_peer_fails_when_another_member_dies() {
    let (tok, port) = (token(), free_port());
    let tune = || env(&[("UCC_TLS", "p2p".into()), ("UCC_TL_P2P_TUNE", "gather:@linear:inf".into())]);
    let job = Job::start("rank_body", "send_to_idle", 3, 0..3, &tok, port, &|_| tune());
    let outs = job.finish(Duration::from_secs(60));
    let o = &outs[0];
    assert_eq!(o.lines("VIA "), vec!["VIA p2p/linear".to_string()], "{}\n{}", o.stdout, o.stderr);
    let e = o.lines("ERROR ");
    assert!(e.first().is_some_and(|e| e.contains("rank 2")), "rank 0: {}\n{}", o.stdout, o.stderr);
    assert!(outs[1].lines("SLEPT").len() == 1, "rank 1 was idle, not gone: {}", outs[1].stdout);
    // While rank 1 still slept.
    let took: Vec<u64> = o.lines("TOOK ").iter().filter_map(|l| l[5..].parse().ok()).collect();
    assert!(took.first().is_some_and(|&s| s < 15), "rank 0's gather took {took:?} s: {}", o.stdout);
}

#[test]
fn processes_whose_calls_select_different_tls_both_fail_naming_the_calls() {
    let (tok, port) = (token(), free_port());
    // The same tune on both ranks sends the larger call to p2p, the smaller stays on shm.
    let tune = || env(&[("UCC_TL_P2P_TUNE", "allreduce:400k-inf:inf:@sra_knomial".into())]);
    let job = Job::start("rank_body", "diverge", 2, 0..2, &tok, port, &|_| tune());
    let outs = job.finish(Duration::from_secs(60));
    let via: Vec<Vec<String>> = outs.iter().map(|o| o.lines("VIA ")).collect();
    assert_ne!(via[0], via[1], "precondition: different TLs chosen");
    for o in &outs {
        let e = o.lines("ERROR ");
        assert!(
            e.first().is_some_and(|e| e.contains("calls differ") && e.contains("5000") && e.contains("200000")),
            "rank {}: {}\n{}",
            o.rank,
            o.stdout,
            o.stderr
        );
    }
}
