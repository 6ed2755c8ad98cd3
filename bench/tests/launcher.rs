//! `ferrocoll-run` end to end, with small shell programs as ranks.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const RUN: &str = env!("CARGO_BIN_EXE_ferrocoll-run");

fn run(args: &[&str]) -> Output {
    Command::new(RUN)
        .args(args)
        .env_remove("FERROCOLL_HOST_ID")
        .env_remove("FERROCOLL_SWITCH_ID")
        .env_remove("FERROCOLL_TOPO_FILE")
        .env_remove("SLURM_TOPOLOGY_ADDR")
        .output()
        .expect("start ferrocoll-run")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(String::from).collect();
    v.sort();
    v
}

/// Whether process `pid` still exists (and is not a zombie).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().and_then(|s| s.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

/// A fresh scratch folder.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ferrocoll-run-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch folder");
    d
}

/// The pids written into `dir` by the ranks (`echo $! > dir/...`).
fn pids_in(dir: &Path) -> Vec<i32> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .filter_map(|s| s.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The pids in `dir`'s files, each with whether its file is a `setsid.*` one.
fn pids_and_escapes(dir: &Path) -> Vec<(i32, bool)> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    rd.flatten()
        .filter_map(|e| {
            let escaped = e.file_name().to_string_lossy().starts_with("setsid");
            std::fs::read_to_string(e.path()).ok()?.trim().parse().ok().map(|pid| (pid, escaped))
        })
        .collect()
}

#[test]
fn ranks_get_their_variables_and_prefixes() {
    let o =
        run(&["-n", "3", "--", "sh", "-c", "echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $FERROCOLL_HOST_ID"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(sorted_lines(&stdout(&o)), vec!["[0] 0 3 0 3", "[1] 1 3 1 3", "[2] 2 3 2 3"]);
}

#[test]
fn emulated_hosts_are_contiguous_blocks() {
    let o = run(&[
        "-n",
        "5",
        "--emulate-hosts",
        "2",
        "--",
        "sh",
        "-c",
        "echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $FERROCOLL_HOST_ID",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // host = rank·2/5: ranks 0-2 on host0, 3-4 on host1
    assert_eq!(
        sorted_lines(&stdout(&o)),
        vec!["[0] 0 5 0 3 host0", "[1] 1 5 1 3 host0", "[2] 2 5 2 3 host0", "[3] 3 5 0 2 host1", "[4] 4 5 1 2 host1"]
    );
}

/// The emulated switches reach ferrocoll: every rank exchanged its switch
/// group, and rank 0's team sees 3 hosts (2, 2, 1 ranks) under 2 switches.
#[test]
fn listed_host_sizes() {
    let o = run(&[
        "-n",
        "4",
        "--emulate-hosts",
        "1,3",
        "--",
        "sh",
        "-c",
        "echo $LOCAL_RANK $LOCAL_WORLD_SIZE $FERROCOLL_HOST_ID",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(sorted_lines(&stdout(&o)), vec!["[0] 0 1 host0", "[1] 0 3 host1", "[2] 1 3 host1", "[3] 2 3 host1"]);
}

#[test]
fn emulated_switches_reach_the_team_topology() {
    let info = env!("CARGO_BIN_EXE_ferrocoll-info");
    let o = run(&["-n", "5", "--emulate-hosts", "3", "--emulate-switches", "2", "--timeout", "60", "--", info, "-T"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for line in [
        "[0] team of 5 ranks: 3 hosts, 2 switch groups, uneven ranks per host",
        "[0] switch group \"switch0\": 2 hosts",
        "[0]   host \"host1\": 2 ranks [2, 3]",
        "[0] switch group \"switch1\": 1 host",
        "[0]   host \"host2\": 1 rank [4]",
    ] {
        assert!(out.contains(line), "{line:?} not in:\n{out}");
    }
}

/// `--help` is an answer, not a mistake: stdout and exit status 0; an unknown option is one.
#[test]
fn info_answers_help_and_refuses_unknown_options() {
    let info = env!("CARGO_BIN_EXE_ferrocoll-info");
    let help = Command::new(info).arg("--help").output().expect("run ferrocoll-info");
    assert!(help.status.success() && stdout(&help).contains("-T"), "{}", stderr(&help));
    let bad = Command::new(info).arg("-x").output().expect("run ferrocoll-info");
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("unknown option \"-x\""), "{}", stderr(&bad));
    // A team size of none, or of more threads than can be started, is a
    // mistake too (0 printed a map "of 0 ranks", the other panicked).
    for n in ["0", "18446744073709551615"] {
        let bad = Command::new(info).args(["-s", n]).output().expect("run ferrocoll-info");
        assert_eq!(bad.status.code(), Some(2), "-s {n}: {}", stderr(&bad));
        assert!(stderr(&bad).contains(&format!("-s {n}: the team size")), "{}", stderr(&bad));
    }
}

/// A bad link emulation fails every rank's context, naming the token.
#[test]
fn a_bad_link_emulation_is_named() {
    let info = env!("CARGO_BIN_EXE_ferrocoll-info");
    let o = Command::new(RUN)
        .args(["-n", "2", "--emulate-hosts", "2", "--timeout", "60", "--", info, "-T"])
        .env("FERROCOLL_EMULATE_LINK", "host:5us,switch:5qs")
        .output()
        .expect("start ferrocoll-run");
    assert!(!o.status.success());
    let err = stderr(&o) + &stdout(&o);
    assert!(err.contains("\"switch:5qs\" has a bad latency"), "{err}");
}

#[test]
fn the_job_shares_a_port_and_a_fresh_token() {
    let job = || {
        let o = run(&["-n", "2", "--", "sh", "-c", "echo $MASTER_ADDR $MASTER_PORT $FERROCOLL_JOB_TOKEN"]);
        assert!(o.status.success());
        let lines: Vec<String> = stdout(&o).lines().map(|l| l[4..].to_string()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], lines[1], "every rank sees the same store and token");
        lines[0].clone()
    };
    let (a, b) = (job(), job());
    assert!(a.starts_with("127.0.0.1 "), "{a}");
    let token = |s: &str| s.split(' ').nth(2).unwrap_or_default().to_string();
    assert_eq!(token(&a).len(), 32);
    assert_ne!(token(&a), token(&b), "each job gets its own token");
}

#[test]
fn stderr_is_prefixed_too_and_lines_never_mix() {
    let o = run(&[
        "-n",
        "4",
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 200 ]; do echo rank$RANK-line$i; echo err$RANK >&2; i=$((i+1)); done",
    ]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 800);
    for line in out.lines() {
        let (prefix, rest) = line.split_once(' ').expect("a prefix");
        assert_eq!(prefix, format!("[{}]", &rest[4..rest.find('-').unwrap()]), "{line}");
    }
    assert_eq!(stderr(&o).lines().filter(|l| l.starts_with("[2] err2")).count(), 200);
}

#[test]
fn a_failing_rank_is_named_and_the_others_are_stopped() {
    let start = Instant::now();
    let o = run(&["-n", "3", "--grace", "1", "--", "sh", "-c", "if [ $RANK = 1 ]; then exit 3; fi; exec sleep 60"]);
    let took = start.elapsed();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("rank 1 exited with status 3"), "{err}");
    assert!(err.contains("rank 1 failed first"), "{err}");
    assert!(err.contains("(stopped by ferrocoll-run)"), "{err}");
    // The sleeping ranks were stopped after the grace, long before their 60 s.
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn the_others_may_finish_within_the_grace() {
    let o = run(&[
        "-n",
        "2",
        "--grace",
        "10",
        "--",
        "sh",
        "-c",
        "if [ $RANK = 0 ]; then exit 4; fi; sleep 0.5; echo finished",
    ]);
    assert_eq!(o.status.code(), Some(4));
    assert!(stdout(&o).contains("[1] finished"), "{}", stdout(&o));
    assert!(!stderr(&o).contains("stopping ranks"), "{}", stderr(&o));
}

#[test]
fn a_rank_killed_by_a_signal() {
    let o = run(&["-n", "2", "--grace", "1", "--", "sh", "-c", "if [ $RANK = 1 ]; then kill -9 $$; fi; exec sleep 60"]);
    let err = stderr(&o);
    assert!(err.contains("rank 1 exited with signal 9 (SIGKILL)"), "{err}");
    assert_eq!(o.status.code(), Some(128 + 9));
}

#[test]
fn a_hanging_job_times_out() {
    let start = Instant::now();
    let o = run(&["-n", "2", "--timeout", "1", "--", "sleep", "60"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(124), "{err}");
    assert!(err.contains("timeout: 1 s elapsed with ranks 0, 1 still running"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(30));
}

#[test]
fn sigint_is_forwarded_and_nothing_is_left() {
    let dir = scratch("sigint");
    let script = format!("sleep 60 & echo $! > {}/bg.$RANK; echo ready; wait", dir.display());
    let mut child = Command::new(RUN)
        .args(["-n", "2", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ferrocoll-run");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    for _ in 0..2 {
        let l = lines.next().expect("a ready line").expect("read");
        assert!(l.ends_with("ready"), "{l}");
    }
    let rank_children = pids_in(&dir);
    assert_eq!(rank_children.len(), 2);
    // SAFETY: kill has no memory effects; the pid is our own child's.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "ferrocoll-run did not end after SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err).expect("read");
    assert!(err.contains("received SIGINT, forwarding it to 2 running ranks"), "{err}");
    assert_eq!(status.code(), Some(128 + 2), "{err}");
    for pid in rank_children {
        assert!(!alive(pid), "the rank's child {pid} outlived the launcher");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn processes_left_behind_are_killed() {
    let dir = scratch("leftover");
    // One background child stays in the rank's group; the other escapes it with setsid.
    let script = format!(
        "sleep 60 & echo $! > {d}/group.$RANK; setsid sleep 60 & echo $! > {d}/setsid.$RANK; exit 0",
        d = dir.display()
    );
    let o = run(&["-n", "2", "--", "sh", "-c", &script]);
    assert!(o.status.success(), "{}", stderr(&o));
    let pids = pids_in(&dir);
    assert_eq!(pids.len(), 4);
    // Where the system refuses a subreaper (qemu-user), the launcher says
    // so and still kills the ranks' groups; the setsid ones are not its to find.
    let no_subreaper = stderr(&o).contains("cannot become the job's subreaper");
    if no_subreaper {
        eprintln!("skipped in part: this system refuses PR_SET_CHILD_SUBREAPER: {}", stderr(&o));
    }
    for (pid, escaped) in pids_and_escapes(&dir) {
        if no_subreaper && escaped {
            // SAFETY: kill with a pid this test's job wrote; at worst ESRCH.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            continue;
        }
        assert!(!alive(pid), "process {pid} outlived the launcher");
    }
    assert!(stderr(&o).contains("processes the ranks left behind"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shared_memory_segments_in_use_are_removed() {
    if !Path::new("/dev/shm").is_dir() {
        eprintln!("skipped: no /dev/shm here");
        return;
    }
    let tag = format!("ferrocoll-launchtest-{}", std::process::id());
    let script = format!("exec 3>/dev/shm/{tag}-$RANK; sleep 1; exit 0");
    let o = run(&["-n", "2", "--", "sh", "-c", &script]);
    assert!(o.status.success(), "{}", stderr(&o));
    for r in 0..2 {
        let p = format!("/dev/shm/{tag}-{r}");
        assert!(!Path::new(&p).exists(), "{p} was left");
    }
    assert!(stderr(&o).contains("removed shared-memory segments the job left"), "{}", stderr(&o));
}

#[test]
fn a_missing_program_and_bad_options() {
    let o = run(&["-n", "2", "--", "/nonexistent/program"]);
    assert_eq!(o.status.code(), Some(127));
    assert!(stderr(&o).contains("cannot start rank 0 (/nonexistent/program)"), "{}", stderr(&o));
    for (args, names) in [
        (&["true"][..], "-n"),
        (&["-n", "two", "true"][..], "-n \"two\""),
        (&["-n", "2", "--emulate-hosts", "3", "true"][..], "--emulate-hosts 3"),
        (&["-n", "4", "--emulate-hosts", "2", "--emulate-switches", "3", "true"][..], "--emulate-switches 3"),
        (&["-n", "4", "--emulate-hosts", "1,2", "true"][..], "must add up to -n (4)"),
        (&["-n", "2", "--frobnicate", "true"][..], "--frobnicate"),
        (&["-n", "2"][..], "program"),
        // Refused by name before any placement is computed or process started
        // (it panicked allocating the placements).
        (&["-n", "18446744073709551615", "true"][..], "-n 18446744073709551615: at most 4096 ranks"),
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(names), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("usage: ferrocoll-run"));
    }
}

#[test]
fn a_hung_job_is_explained_by_the_ranks_flight_records() {
    // Rank 0 stops (SIGSTOP) once it has printed its header, after team
    // creation; rank 1 waits for it forever. (Ranks whose
    // calls differ no longer hang: they fail naming each other.) At the
    // timeout the launcher asks every rank for its flight record and says
    // where each one is; the stopped rank does not answer.
    let perftest = env!("CARGO_BIN_EXE_ferrocoll-perftest");
    let fifo = std::env::temp_dir().join(format!("ferrocoll-hung-{}", std::process::id()));
    let _ = std::fs::remove_file(&fifo);
    assert!(Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    let f = fifo.display();
    // After `exec`, `$$` is the perftest process; the reader keeps the fifo open.
    let script = format!(
        "if [ \"$RANK\" = 0 ]; then (grep -m1 -q Algorithm {f}; kill -STOP $$; cat {f} >/dev/null) & \
         exec {perftest} -c allreduce -b 1 -e 1 -n 1000000 -w 0 >{f}; \
         else exec {perftest} -c allreduce -b 1 -e 1 -n 1000000 -w 0; fi"
    );
    let o = Command::new(RUN)
        .args(["-n", "2", "--timeout", "10", "--", "sh", "-c", &script])
        .env("UCC_TLS", "p2p,self")
        .env_remove("FERROCOLL_HOST_ID")
        .output()
        .expect("start ferrocoll-run");
    let _ = std::fs::remove_file(&fifo);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(124), "{err}");
    assert!(err.contains("flight records of team"), "{err}");
    // (In the sweep's barrier or one of its allreduces, whichever it had reached.)
    assert!(err.contains("rank 1 is in ") && err.contains(", waiting for rank 0"), "{err}");
    assert!(err.contains("no record from rank(s) 0"), "{err}");
}

/// The CPUs this test process may use, from its own status file.
fn allowed_cpus() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).expect("Cpus_allowed_list").trim();
    list.split(',')
        .map(|p| match p.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

#[test]
fn ranks_are_bound_to_a_core_each_when_there_are_enough() {
    if allowed_cpus() < 2 {
        eprintln!("skipped: binding two ranks to cores of their own needs 2 CPUs, this test may use 1");
        return;
    }
    // Each rank reports the CPUs the kernel lets it run on, and what the launcher told it.
    let script = "echo $FERROCOLL_BIND $(grep Cpus_allowed_list /proc/self/status | cut -f2)";
    let o = run(&["-n", "2", "--", "sh", "-c", script]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines = sorted_lines(&stdout(&o));
    assert_eq!(lines.len(), 2, "{lines:?}");
    let cpus: Vec<&str> = lines.iter().map(|l| l.rsplit(' ').next().unwrap()).collect();
    for (r, l) in lines.iter().enumerate() {
        assert_eq!(l, &format!("[{r}] core:{} {}", cpus[r], cpus[r]), "{lines:?}");
        assert!(cpus[r].parse::<usize>().is_ok(), "rank {r} may run on {:?}, not one CPU", cpus[r]);
    }
    assert_ne!(cpus[0], cpus[1], "two ranks bound to the same core");
    // --bind-to none leaves them the launcher's CPUs.
    let o = run(&["-n", "2", "--bind-to", "none", "--", "sh", "-c", script]);
    assert!(o.status.success(), "{}", stderr(&o));
    for l in sorted_lines(&stdout(&o)) {
        assert!(l.contains("none ") && !l.ends_with(&format!(" {}", cpus[0])), "{l}");
    }
}

#[test]
fn binding_more_ranks_than_cores_is_refused_by_name() {
    let n = (allowed_cpus() + 1).to_string();
    let o = run(&["-n", &n, "--bind-to", "core", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--bind-to core") && stderr(&o).contains(&format!("{n} ranks")), "{}", stderr(&o));
    // The default then binds nothing, and the job runs.
    let o = run(&["-n", &n, "--", "sh", "-c", "echo $FERROCOLL_BIND"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(sorted_lines(&stdout(&o)).iter().all(|l| l.ends_with(" none")), "{}", stdout(&o));
}
