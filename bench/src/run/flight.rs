//! The flight records of a job: `ferrocoll-run` gives the ranks a directory
//! (`FERROCOLL_FLIGHT_RECORDER_DIR`) where every team dumps its last
//! collectives as JSON on a timeout, a watchdog warning or `SIGUSR1`. When a
//! rank fails, the job times out or the launcher is interrupted, it signals
//! the ranks that announced the handler (`ready-<pid>` files), waits briefly
//! for their dumps, and prints one analysis: which collective each rank is
//! in, per team ("rank 3 is in allreduce seq 17, waiting for rank 0; ranks
//! 0–2 are in bcast seq 18").

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

/// The variable the ranks' libraries read.
pub const DIR_VAR: &str = "FERROCOLL_FLIGHT_RECORDER_DIR";

/// How long the launcher waits for the ranks' dumps.
pub const WAIT: Duration = Duration::from_secs(2);

/// A job's dump directory, removed when dropped.
#[derive(Debug)]
pub struct FlightDir {
    path: PathBuf,
}

impl FlightDir {
    /// A fresh private directory under the temporary directory.
    pub fn create(tag: &str) -> std::io::Result<FlightDir> {
        use std::os::unix::fs::DirBuilderExt;
        let path = std::env::temp_dir().join(format!("ferrocoll-flight-{}-{tag}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(FlightDir { path })
    }

    /// The variable to give every rank.
    pub fn var(&self) -> (String, String) {
        (DIR_VAR.to_string(), self.path.to_string_lossy().into_owned())
    }

    /// Processes among `pids` that installed the dump handler.
    fn ready(&self, pids: &[libc::pid_t]) -> Vec<libc::pid_t> {
        pids.iter().copied().filter(|p| self.path.join(format!("ready-{p}")).exists()).collect()
    }

    /// The dumps in the directory written at or after `since`.
    fn dumps(&self, since: Option<SystemTime>) -> Vec<Value> {
        let Ok(entries) = std::fs::read_dir(&self.path) else { return Vec::new() };
        entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter(|e| since.is_none_or(|t| e.metadata().and_then(|m| m.modified()).is_ok_and(|m| m >= t)))
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice(&b).ok())
            .collect()
    }

    /// Ask the ranks `pids` for dumps, wait for them a little ([`WAIT`]),
    /// and return the analysis of every dump in the directory, and which
    /// of them neither answered nor ended.
    pub fn collect(&self, pids: &[libc::pid_t]) -> Collected {
        self.collect_within(pids, WAIT)
    }

    /// [`collect`](FlightDir::collect), waiting at most `wait` for the
    /// dumps. A rank that ends meanwhile is not waited for: the ranks a
    /// failed one leaves behind often fail at once too (it died), before
    /// or instead of answering, and waiting the whole `wait` for them held
    /// the job's end back by two seconds.
    fn collect_within(&self, pids: &[libc::pid_t], wait: Duration) -> Collected {
        let asked = self.ready(pids);
        let since = SystemTime::now() - Duration::from_millis(1);
        for &p in asked.iter().filter(|&&p| p > 0) {
            // SAFETY: kill has no memory effects; p > 0 names one process,
            // which announced a handler for SIGUSR1.
            unsafe { libc::kill(p, libc::SIGUSR1) };
        }
        let deadline = Instant::now() + wait;
        let silent = loop {
            let answered: Vec<i64> = self.dumps(Some(since)).iter().filter_map(|d| d["pid"].as_i64()).collect();
            let silent: Vec<libc::pid_t> =
                asked.iter().copied().filter(|&p| !answered.contains(&i64::from(p)) && running(p)).collect();
            if silent.is_empty() || Instant::now() >= deadline {
                break silent;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let all = self.dumps(None);
        Collected { report: (!all.is_empty()).then(|| analyze(&all)), silent }
    }
}

/// What [`FlightDir::collect`] found.
#[derive(Debug)]
pub struct Collected {
    /// The analysis of every dump (`None`: there is none).
    pub report: Option<String>,
    /// The ranks' processes that neither answered nor ended by the deadline.
    pub silent: Vec<libc::pid_t>,
}

/// Whether process `pid` (a child of this one: the ranks are) has not
/// ended. An ended child stays waitable until the supervisor reaps it,
/// and `WNOWAIT` leaves it so; a process that is not a child is asked
/// with signal 0 (a zombie still answers that, so children are not).
fn running(pid: libc::pid_t) -> bool {
    let Some(id) = libc::id_t::try_from(pid).ok().filter(|&id| id > 0) else { return false };
    // SAFETY: an all-zero siginfo_t is a valid value of that plain C struct.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid writes only into `info`, which outlives the call;
    // WNOWAIT leaves the child to be reaped by the supervisor.
    let r = unsafe { libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
    if r != 0 {
        // SAFETY: kill with signal 0 sends nothing; pid > 0 (checked above).
        return unsafe { libc::kill(pid, 0) } == 0;
    }
    // SAFETY: waitid filled `info` (or left it zeroed: no child changed
    // state), and si_pid is the field it sets for a child's exit.
    unsafe { info.si_pid() == 0 }
}

impl Drop for FlightDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Where one rank is on one team, in words.
fn position(doc: &Value) -> String {
    let colls = doc["collectives"].as_array().cloned().unwrap_or_default();
    let name = |c: &Value| format!("{} seq {}", c["coll"].as_str().unwrap_or("?"), c["seq"]);
    if let Some(c) = colls.iter().find(|c| c["state"] == "in_progress") {
        let waiting = match (c["waiting_for"].as_u64(), c["sending_to"].as_u64()) {
            (Some(r), _) => format!(", waiting for rank {r}"),
            (None, Some(r)) => format!(", waiting for rank {r} to take its message"),
            (None, None) => String::new(),
        };
        return format!("in {}{waiting}", name(c));
    }
    match colls.last() {
        Some(c) if c["state"] == "error" => format!("stopped: {} failed", name(c)),
        Some(c) => format!("idle after {}", name(c)),
        None => "idle (no collective yet)".into(),
    }
}

/// `0–2, 5` for [0, 1, 2, 5].
fn ranges(ranks: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        out.push(if j > i + 1 {
            format!("{}–{}", ranks[i], ranks[j])
        } else if j == i + 1 {
            format!("{}, {}", ranks[i], ranks[j])
        } else {
            ranks[i].to_string()
        });
        i = j + 1;
    }
    out.join(", ")
}

/// One paragraph per team: the ranks grouped by where they are.
pub fn analyze(dumps: &[Value]) -> String {
    let mut teams: BTreeMap<String, BTreeMap<u64, &Value>> = BTreeMap::new();
    for d in dumps {
        let team = d["team"].as_str().unwrap_or("?").to_string();
        if let Some(rank) = d["rank"].as_u64() {
            teams.entry(team).or_default().insert(rank, d);
        }
    }
    let mut out = String::new();
    for (team, ranks) in &teams {
        let size = ranks.values().next().and_then(|d| d["size"].as_u64()).unwrap_or(0);
        out.push_str(&format!("flight records of team {team} ({} of {size} ranks answered):\n", ranks.len()));
        let mut groups: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for (&r, d) in ranks {
            groups.entry(position(d)).or_default().push(r);
        }
        let missing: Vec<u64> = (0..size).filter(|r| !ranks.contains_key(r)).collect();
        for (pos, rs) in &groups {
            let who = if rs.len() == 1 { format!("rank {}", rs[0]) } else { format!("ranks {}", ranges(rs)) };
            let verb = if rs.len() == 1 { "is" } else { "are" };
            out.push_str(&format!("  {who} {verb} {pos}\n"));
        }
        if !missing.is_empty() {
            out.push_str(&format!("  no record from rank(s) {} (ended, or not progressing)\n", ranges(&missing)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(rank: u64, colls: &str) -> Value {
        serde_json::from_str(&format!(
            "{{\"team\":\"0x1\",\"rank\":{rank},\"size\":5,\"ep\":{rank},\"pid\":1,\"host\":\"h\",\"reason\":\"r\",\"collectives\":[{colls}]}}"
        ))
        .unwrap()
    }

    #[test]
    fn ranks_are_grouped_by_where_they_are() {
        let done = r#"{"seq":16,"coll":"barrier","call":"","via":"shm/flags","state":"ok"}"#;
        let stuck = r#"{"seq":17,"coll":"allreduce","call":"","via":"shm/onestep","state":"in_progress","waiting_for":0,"tag":0}"#;
        let bcast = r#"{"seq":18,"coll":"bcast","call":"","via":"shm/staged","state":"in_progress"}"#;
        let dumps = vec![
            doc(0, &format!("{done},{bcast}")),
            doc(1, &format!("{done},{bcast}")),
            doc(2, &format!("{done},{bcast}")),
            doc(3, &format!("{done},{stuck}")),
        ];
        let a = analyze(&dumps);
        assert!(a.contains("team 0x1 (4 of 5 ranks answered)"), "{a}");
        assert!(a.contains("ranks 0–2 are in bcast seq 18"), "{a}");
        assert!(a.contains("rank 3 is in allreduce seq 17, waiting for rank 0"), "{a}");
        assert!(a.contains("no record from rank(s) 4"), "{a}");
        assert_eq!(ranges(&[0, 1, 3, 5, 6, 7]), "0, 1, 3, 5–7");
    }

    /// A rank asked for its record that ends instead of answering is not
    /// waited for; one that neither answers nor ends is, until the deadline.
    #[test]
    fn ranks_that_end_are_not_waited_for() {
        use std::os::unix::process::CommandExt;
        let dir = FlightDir::create(&format!("test-{}", line!())).unwrap();
        let ask = |child: &std::process::Child| {
            let pid = libc::pid_t::try_from(child.id()).unwrap();
            std::fs::write(dir.path.join(format!("ready-{pid}")), b"").unwrap();
            pid
        };
        let mut ended = std::process::Command::new("true").spawn().unwrap();
        // Ignores the SIGUSR1 that asks for its record (from before its
        // exec, so from its first instruction), and never answers.
        let mut sleep = std::process::Command::new("sleep");
        sleep.arg("60");
        // SAFETY: the closure only calls signal(), which is async-signal-safe.
        unsafe {
            sleep.pre_exec(|| {
                libc::signal(libc::SIGUSR1, libc::SIG_IGN);
                Ok(())
            });
        }
        let mut silent = sleep.spawn().unwrap();
        let (ended_pid, silent_pid) = (ask(&ended), ask(&silent));
        let started = Instant::now();
        let c = dir.collect_within(&[ended_pid], Duration::from_secs(60));
        assert!(c.silent.is_empty(), "an ended rank was waited for until the deadline ({:?})", started.elapsed());
        assert!(c.report.is_none(), "no rank dumped anything");
        assert!(running(silent_pid) && !running(ended_pid));
        let c = dir.collect_within(&[ended_pid, silent_pid], Duration::from_millis(300));
        assert_eq!(c.silent, [silent_pid], "a rank that neither answered nor ended");
        silent.kill().unwrap();
        silent.wait().unwrap();
        ended.wait().unwrap();
    }

    #[test]
    fn a_rank_blocked_on_a_send_says_so() {
        let sending = r#"{"seq":4,"coll":"bcast","call":"","via":"p2p/knomial","state":"in_progress","sending_to":2,"send_tag":1}"#;
        let a = analyze(&[doc(0, sending)]);
        assert!(a.contains("rank 0 is in bcast seq 4, waiting for rank 2 to take its message"), "{a}");
    }
}
