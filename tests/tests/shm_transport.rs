//! The p2p TL's shared-memory transport end to end: ranks that are
//! processes of this host (this test binary started again as each rank, like
//! torchrun would), so the p2p TL (the only one allowed besides self) routes
//! every peer through shared memory. Collectives of
//! small (eager) and large (CMA or fragmented) messages, a clean exit that
//! leaves nothing in /dev/shm, and a rank killed mid-job that its peers
//! report as dead instead of hanging.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ferrocoll::{Coll, Context, ContextParams, Lib, Oob, ReduceOp, TcpOob, Team, TeamParams};

const T: Duration = Duration::from_secs(60);
/// Set in the environment of a child process: run [`shm_child_rank`]'s body, in this mode.
const CHILD: &str = "FERROCOLL_SHM_TEST_CHILD";

/// The body of one rank when started by the tests below; an immediate pass otherwise.
#[test]
fn shm_child_rank() {
    let Some(mode) = std::env::var_os(CHILD) else { return };
    let die = mode == "die";
    let oob = TcpOob::from_env().expect("TcpOob::from_env");
    let (me, size) = (oob.rank(), oob.size());
    let ctx = Context::new(&Lib::new().expect("lib"), ContextParams::with_oob(oob)).expect("context");
    let team = Team::create(&ctx, TeamParams::default()).expect("team");
    let mut sums = Vec::new();
    // 1000 doubles go eager; 2 Mi doubles (16 MiB) go by rendezvous or fragments.
    for count in [1000usize, 1 << 21] {
        let src: Vec<f64> = (0..count).map(|i| ((i + me) % 5) as f64).collect();
        let mut dst = vec![-1.0; count];
        Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(T).run(&team).expect("allreduce");
        let ok = dst.iter().enumerate().all(|(i, &v)| v == (0..size).map(|r| ((i + r) % 5) as f64).sum::<f64>());
        sums.push(if ok { "ok" } else { "WRONG" });
    }
    if die && me == size - 1 {
        println!("RESULT rank={me} exits");
        // Gone without closing anything, as a crash would be.
        std::process::exit(0);
    }
    let last = if die {
        // Every rank needs the dead one's contribution: each must fail, naming it.
        let src = vec![1.0f64; 1000];
        let mut dst = vec![0.0f64; 1000];
        let r = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(T).run(&team);
        // Linger, so that the other survivor sees the death itself rather than
        // this rank leaving (its failure is checked, not its timing: a
        // survivor's scan runs every 50 ms while it waits).
        std::thread::sleep(Duration::from_secs(2));
        match r {
            Ok(()) => "after=completed-without-the-dead-rank".to_string(),
            Err(e) => format!("after-error={e}"),
        }
    } else {
        let mut buf = vec![me as u32; 1 << 16];
        match Coll::bcast(&mut buf, 0).timeout(T).run(&team) {
            Ok(()) if buf.iter().all(|&v| v == 0) => "bcast=ok".to_string(),
            r => format!("bcast=WRONG {r:?}"),
        }
    };
    if !die {
        // Leave together: an early leaver would look gone to the others.
        Coll::barrier().timeout(T).run(&team).expect("barrier");
    }
    println!("RESULT rank={me} allreduce={} {last}", sums.join(","));
}

/// Start this binary as rank `rank` of `size` on a store at `port`.
fn spawn_rank(rank: usize, size: usize, port: u16, token: &str, mode: &str, cma: &str) -> Child {
    let exe = std::env::current_exe().expect("test binary");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", "shm_child_rank", "--nocapture", "--test-threads=1"]).env_clear();
    for keep in ["PATH", "HOME", "LD_LIBRARY_PATH", "TMPDIR"] {
        if let Some(v) = std::env::var_os(keep) {
            cmd.env(keep, v);
        }
    }
    let vars = [
        ("RANK", rank.to_string()),
        ("WORLD_SIZE", size.to_string()),
        ("LOCAL_RANK", rank.to_string()),
        ("LOCAL_WORLD_SIZE", size.to_string()),
        ("MASTER_ADDR", "127.0.0.1".to_string()),
        ("MASTER_PORT", port.to_string()),
        ("FERROCOLL_JOB_TOKEN", token.to_string()),
        ("UCC_OOB_TIMEOUT", "60s".to_string()),
        ("UCC_LOG_LEVEL", "debug".to_string()),
        ("UCC_TL_P2P_SHM_CMA", cma.to_string()),
        // The p2p TL (whose transport this is), not the shared-memory collectives TL.
        ("UCC_TLS", "self,p2p".to_string()),
        (CHILD, mode.to_string()),
    ];
    cmd.envs(vars).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.spawn().expect("spawn rank process")
}

/// Each rank's RESULT line and stderr.
fn run_job(size: usize, mode: &str, cma: &str) -> (Vec<String>, Vec<String>, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    let token = format!("shm-test-{}-{mode}-{cma}", std::process::id());
    let children: Vec<Child> = (0..size).map(|r| spawn_rank(r, size, port, &token, mode, cma)).collect();
    let (mut results, mut errs) = (Vec::new(), Vec::new());
    for (rank, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().expect("wait for rank process");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let line = stdout.lines().find_map(|l| l.find("RESULT ").map(|i| l[i..].to_string()));
        let Some(line) = line.filter(|_| out.status.success()) else {
            panic!("rank {rank} ({}): {stdout}\n{stderr}", out.status);
        };
        results.push(line);
        errs.push(stderr);
    }
    (results, errs, TcpOob::job_id_for(&token, "127.0.0.1", port))
}

fn leftovers(job: &str) -> Vec<String> {
    let prefix = format!("ferrocoll-{job}-");
    std::fs::read_dir("/dev/shm")
        .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| n.starts_with(&prefix)).collect())
        .unwrap_or_default()
}

fn collectives_between_processes(cma: &str) {
    let size = 3;
    let (results, errs, job) = run_job(size, "clean", cma);
    for (rank, l) in results.iter().enumerate() {
        assert_eq!(l, &format!("RESULT rank={rank} allreduce=ok,ok bcast=ok"));
    }
    // Every rank reached every other through shared memory, by the path asked for.
    let path = if cma == "y" { "shm: CMA single-copy to endpoints" } else { "shm: fragmented copies through the ring" };
    for (rank, e) in errs.iter().enumerate() {
        if cma == "y" && !e.contains(path) && e.contains("CMA refused") {
            eprintln!("note: this host refuses CMA between processes; rank {rank} streamed instead");
            continue;
        }
        assert!(e.contains(path), "rank {rank} never logged {path:?}:\n{e}");
    }
    assert!(leftovers(&job).is_empty(), "{:?}", leftovers(&job));
}

#[test]
fn collectives_between_processes_by_cma() {
    collectives_between_processes("y");
}

#[test]
fn collectives_between_processes_by_fragments() {
    collectives_between_processes("n");
}

#[test]
fn a_rank_that_dies_is_reported_by_the_others() {
    let size = 3;
    let (results, _, job) = run_job(size, "die", "y");
    assert_eq!(results[size - 1], format!("RESULT rank={} exits", size - 1));
    for (rank, l) in results.iter().enumerate().take(size - 1) {
        assert!(l.starts_with(&format!("RESULT rank={rank} allreduce=ok,ok after-error=")), "{l}");
        assert!(l.contains(&format!("endpoint {} (pid", size - 1)) && l.contains("died"), "{l}");
    }
    assert!(leftovers(&job).is_empty(), "{:?}", leftovers(&job));
}
