//! Jobs of real processes for tests: the test binary starts copies of
//! itself as ranks (running one named helper test), with the launchers'
//! variables, and collects what each rank printed. Outputs are read when a
//! rank ends, so ranks must print little (a pipe holds 64 KiB).

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The variable that tells a copy of the test binary it is a rank, and which role it plays.
pub const ROLE: &str = "FERROCOLL_TEST_ROLE";

/// What one rank process printed and how it ended.
#[derive(Debug)]
pub struct RankOutput {
    /// Rank.
    pub rank: usize,
    /// Exit status (None: killed by the test or still running at the deadline).
    pub success: Option<bool>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl RankOutput {
    /// Lines of stdout that start with `tag` (the harness may print before them).
    pub fn lines(&self, tag: &str) -> Vec<String> {
        self.stdout.lines().filter_map(|l| l.find(tag).map(|i| l[i..].to_string())).collect()
    }
}

/// A free TCP port on 127.0.0.1 for the bootstrap store, which no
/// connection takes meanwhile (`TcpOob::free_port`).
pub fn free_port() -> u16 {
    ferrocoll::TcpOob::free_port().unwrap_or(29_500)
}

/// A job of `size` ranks on one machine; rank r gets `per_rank(r)` extra variables.
pub struct Job {
    children: Vec<(usize, Child)>,
}

impl Job {
    /// Start ranks `ranks` (a subset of `0..size` to leave some missing) running
    /// helper test `helper` in role `role`.
    pub fn start(
        helper: &str,
        role: &str,
        size: usize,
        ranks: impl IntoIterator<Item = usize>,
        token: &str,
        port: u16,
        per_rank: &dyn Fn(usize) -> Vec<(String, String)>,
    ) -> Job {
        let exe = std::env::current_exe().expect("test binary");
        let children = ranks
            .into_iter()
            .map(|r| {
                let mut cmd = Command::new(&exe);
                cmd.args(["--exact", helper, "--nocapture", "--test-threads=1"]).env_clear();
                for keep in ["PATH", "HOME", "LD_LIBRARY_PATH", "TMPDIR"] {
                    if let Some(v) = std::env::var_os(keep) {
                        cmd.env(keep, v);
                    }
                }
                cmd.env(ROLE, role)
                    .env("RANK", r.to_string())
                    .env("WORLD_SIZE", size.to_string())
                    .env("MASTER_ADDR", "127.0.0.1")
                    .env("MASTER_PORT", port.to_string())
                    .env("FERROCOLL_JOB_TOKEN", token)
                    .env("UCC_OOB_TIMEOUT", "30s")
                    .envs(per_rank(r))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                (r, cmd.spawn().expect("spawn rank"))
            })
            .collect();
        Job { children }
    }

    /// The process id of rank `r`, if this job started it.
    pub fn pid(&self, r: usize) -> Option<u32> {
        self.children.iter().find(|(rank, _)| *rank == r).map(|(_, c)| c.id())
    }

    /// Kill rank `r` with SIGKILL.
    pub fn kill(&mut self, r: usize) {
        if let Some((_, c)) = self.children.iter_mut().find(|(rank, _)| *rank == r) {
            let _ = c.kill();
        }
    }

    /// Wait for every rank (killing what is left at `deadline`) and collect outputs.
    pub fn finish(self, deadline: Duration) -> Vec<RankOutput> {
        let end = Instant::now() + deadline;
        self.children
            .into_iter()
            .map(|(rank, mut c)| {
                let status = loop {
                    match c.try_wait() {
                        Ok(Some(s)) => break Some(s.success()),
                        Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
                        _ => {
                            let _ = c.kill();
                            let _ = c.wait();
                            break None;
                        }
                    }
                };
                let mut stdout = String::new();
                let mut stderr = String::new();
                if let Some(mut o) = c.stdout.take() {
                    let _ = o.read_to_string(&mut stdout);
                }
                if let Some(mut e) = c.stderr.take() {
                    let _ = e.read_to_string(&mut stderr);
                }
                RankOutput { rank, success: status, stdout, stderr }
            })
            .collect()
    }
}
