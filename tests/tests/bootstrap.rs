//! The TCP bootstrap end to end: full contexts (a team, a collective) over
//! `TcpOob` with ranks as threads, and `TcpOob::from_env` in real processes —
//! this test binary started again as each rank, with a launcher's variables.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferrocoll::core::oob::allgather_blocking;
use ferrocoll::{
    Coll, Config, Context, ContextParams, Lib, LibParams, Oob, ReduceOp, Status, TcpOob, TcpOobParams, Team, TeamParams,
};

const T: Duration = Duration::from_secs(60);
/// Set in the environment of a child process: run [`child_rank`]'s body.
const CHILD: &str = "FERROCOLL_BOOTSTRAP_TEST_CHILD";

fn params(rank: usize, size: usize, port: u16) -> TcpOobParams {
    TcpOobParams {
        rank,
        size,
        master_addr: "127.0.0.1".into(),
        master_port: port,
        token: "bootstrap-test".into(),
        connect_timeout: T,
    }
}

/// Every rank's TcpOob: rank 0 on a port of the system's choice, the others told it.
fn oobs(size: usize) -> Vec<TcpOob> {
    let zero = TcpOob::new(params(0, size, 0)).expect("rank 0");
    let port = zero.listen_port().unwrap_or(0);
    let mut all = vec![zero];
    all.extend((1..size).map(|r| TcpOob::new(params(r, size, port)).expect("rank")));
    all
}

#[test]
fn contexts_teams_and_collectives_over_the_tcp_store() {
    for size in [1, 3, 8] {
        let lib = Lib::new().expect("lib");
        let leave = Arc::new(std::sync::Barrier::new(size));
        let ranks: Vec<_> = oobs(size)
            .into_iter()
            .map(|oob| {
                let (lib, leave) = (lib.clone(), leave.clone());
                thread::spawn(move || {
                    let job = oob.job_id();
                    let ctx = Context::new(&lib, ContextParams::with_oob(oob)).expect("context");
                    let team = Team::create(&ctx, TeamParams::default()).expect("team");
                    let src = vec![team.rank() as f64 + 1.0; 1000];
                    let mut dst = vec![0.0; 1000];
                    Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(T).run(&team).expect("allreduce");
                    // Keep every context until all are done: an early leaver looks like a dead peer.
                    leave.wait();
                    (ctx.ep(), ctx.n_eps(), dst, job)
                })
            })
            .collect();
        let want = (size * (size + 1) / 2) as f64;
        let mut jobs = Vec::new();
        for (rank, h) in ranks.into_iter().enumerate() {
            let (ep, n, dst, job) = h.join().expect("rank thread");
            assert_eq!((ep, n), (rank, size));
            assert!(dst.iter().all(|&v| v == want), "size {size} rank {rank}: {}", dst[0]);
            jobs.push(job);
        }
        assert!(jobs.iter().all(|j| j.is_some() && *j == jobs[0]), "{jobs:?}");
    }
}

#[test]
fn context_creation_names_the_rank_that_never_came() {
    let mut config = Config::new();
    config.set("OOB_TIMEOUT", "300ms");
    let lib = Lib::with_params(LibParams { config, ..LibParams::default() }).expect("lib");
    let mut all = oobs(3);
    all.truncate(2); // rank 2 never starts
    // Rank 1 keeps its OOB (so its connection) after its own failure: rank 0
    // must time out on rank 2, not see rank 1 leave.
    let one: Arc<dyn Oob> = Arc::new(all.pop().expect("rank 1"));
    let lib1 = lib.clone();
    let r1 = thread::spawn(move || {
        let e = Context::new(&lib1, ContextParams { oob: Some(one.clone()), ..ContextParams::default() }).err();
        (e, one)
    });
    let zero = all.pop().expect("rank 0");
    let e = Context::new(&lib, ContextParams::with_oob(zero)).err().expect("rank 2 is missing");
    assert_eq!(e.status(), Status::TimedOut);
    let m = e.to_string();
    // "[1, 2]" when rank 1 was slower than the timeout.
    assert!(
        m.contains("context creation (address exchange)") && m.contains("missing ranks [") && m.contains("2]"),
        "{m}"
    );
    let (e, _one) = r1.join().expect("rank 1");
    let e = e.expect("rank 1 fails too");
    assert!(matches!(e.status(), Status::TimedOut | Status::IoError), "{e}");
}

/// The body of one rank when this binary is started by the process tests
/// below; an immediate pass otherwise.
#[test]
fn child_rank() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let oob = TcpOob::from_env().expect("TcpOob::from_env");
    let me = oob.rank();
    let a = allgather_blocking(&oob, format!("rank{me}").as_bytes(), Some(T)).expect("round 1");
    let b = allgather_blocking(&oob, &vec![me as u8; me * 1000], Some(T)).expect("round 2");
    let lens: Vec<String> = b.iter().map(|v| v.len().to_string()).collect();
    let names: Vec<String> = a.iter().map(|v| String::from_utf8_lossy(v).into_owned()).collect();
    println!(
        "RESULT rank={me} size={} local={:?}/{:?} job={} names={} lens={}",
        oob.size(),
        oob.local_rank(),
        oob.local_size(),
        oob.job_id().unwrap_or_default(),
        names.join(","),
        lens.join(",")
    );
}

/// Start this binary as one rank with `vars` (and nothing else of our environment but the basics).
fn spawn_rank(vars: &[(String, String)]) -> Child {
    let exe = std::env::current_exe().expect("test binary");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", "child_rank", "--nocapture", "--test-threads=1"]).env_clear();
    for keep in ["PATH", "HOME", "LD_LIBRARY_PATH", "TMPDIR"] {
        if let Some(v) = std::env::var_os(keep) {
            cmd.env(keep, v);
        }
    }
    cmd.env(CHILD, "1").envs(vars.iter().cloned()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.spawn().expect("spawn rank process")
}

/// Every rank's `RESULT` line, or the failing rank's output.
fn collect(children: Vec<Child>, first_rank: usize) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let mut failed = None;
    for (rank, c) in (first_rank..).zip(children) {
        let out = c.wait_with_output().expect("wait for rank process");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        match result_line(&stdout) {
            Some(l) if out.status.success() => lines.push(l),
            _ => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                failed.get_or_insert(format!("rank {rank} ({}): {stdout}\n{stderr}", out.status));
            }
        }
    }
    failed.map_or(Ok(lines), Err)
}

/// The child's `RESULT …` line (the test harness may print `test child_rank ... ` before it).
fn result_line(stdout: &str) -> Option<String> {
    stdout.lines().find_map(|l| l.find("RESULT ").map(|i| l[i..].to_string()))
}

fn vars(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn check(lines: &[String], size: usize, local: impl Fn(usize) -> String) {
    let names: Vec<String> = (0..size).map(|r| format!("rank{r}")).collect();
    let lens: Vec<String> = (0..size).map(|r| (r * 1000).to_string()).collect();
    let job = lines[0].split(" job=").nth(1).and_then(|s| s.split(' ').next()).unwrap_or("");
    assert_eq!(job.len(), 16, "{}", lines[0]);
    for (rank, l) in lines.iter().enumerate() {
        let want = format!(
            "RESULT rank={rank} size={size} local={} job={job} names={} lens={}",
            local(rank),
            names.join(","),
            lens.join(",")
        );
        assert_eq!(l, &want);
    }
}

#[test]
fn processes_started_like_torchrun() {
    let size = 3;
    // A free port: bind one, then free it for rank 0.
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    let children = (0..size)
        .map(|rank| {
            spawn_rank(&vars(&[
                ("RANK", rank.to_string()),
                ("WORLD_SIZE", size.to_string()),
                ("LOCAL_RANK", rank.to_string()),
                ("LOCAL_WORLD_SIZE", size.to_string()),
                ("MASTER_ADDR", "127.0.0.1".into()),
                ("MASTER_PORT", port.to_string()),
                ("FERROCOLL_JOB_TOKEN", format!("test-{}", std::process::id())),
                ("UCC_OOB_TIMEOUT", "60s".into()),
            ]))
        })
        .collect();
    let lines = collect(children, 0).unwrap_or_else(|e| panic!("{e}"));
    check(&lines, size, |r| format!("Some({r})/Some({size})"));
}

#[test]
fn processes_started_like_mpirun_find_the_store_without_master_variables() {
    let size = 4;
    // The port is derived from the job's namespace; should another program
    // hold it, try another namespace.
    for attempt in 0..3 {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let namespace = format!("prterun-test-{}-{nanos}-{attempt}@1", std::process::id());
        let mut children: Vec<Child> = (0..size)
            .map(|rank| {
                spawn_rank(&vars(&[
                    ("OMPI_COMM_WORLD_RANK", rank.to_string()),
                    ("OMPI_COMM_WORLD_SIZE", size.to_string()),
                    ("OMPI_COMM_WORLD_LOCAL_RANK", rank.to_string()),
                    ("OMPI_COMM_WORLD_LOCAL_SIZE", size.to_string()),
                    ("PMIX_NAMESPACE", namespace.clone()),
                    ("UCC_OOB_TIMEOUT", "30s".into()),
                ]))
            })
            .collect();
        let zero = children.remove(0);
        let out = zero.wait_with_output().expect("rank 0");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() && (stdout + &stderr).contains("could not listen") {
            for mut c in children {
                let _ = c.kill();
                let _ = c.wait();
            }
            continue;
        }
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "rank 0: {stdout}\n{stderr}");
        // A token derived from a job id anyone on the host can read is said to be weak.
        assert!(stderr.contains("job token is derived from PMIX_NAMESPACE"), "rank 0 did not warn: {stderr}");
        let mut lines = vec![result_line(&stdout).unwrap_or_default()];
        lines.extend(collect(children, 1).unwrap_or_else(|e| panic!("{e}")));
        check(&lines, size, |r| format!("Some({r})/Some({size})"));
        return;
    }
    panic!("three derived ports in a row were taken");
}
