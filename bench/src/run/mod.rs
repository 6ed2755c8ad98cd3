//! The single-host launcher behind `ferrocoll-run` (and `ferrocoll-perftest --np`).
//!
//! [`launch`] starts N copies of a program with the variables that
//! torchrun-style bootstraps read (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
//! `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`) plus the job's secret
//! `FERROCOLL_JOB_TOKEN`, with emulated hosts `FERROCOLL_HOST_ID` and with
//! emulated switches `FERROCOLL_SWITCH_ID` (see [`env::placements`]). It
//! copies every rank's output with a `[r] ` prefix, and supervises the job:
//!
//! - a rank that fails (non-zero status or a signal) is reported
//!   (`rank 3 exited with signal 9 (SIGKILL)`); the others get
//!   [`LaunchConfig::grace`] to finish or fail on their own, then SIGTERM,
//!   then SIGKILL ([`supervise::KILL_AFTER`] later);
//! - SIGINT and SIGTERM sent to the launcher are forwarded to every rank
//!   (each rank leads its own process group, so the rank's own children get
//!   them too); a second Ctrl-C kills the launcher, and with it the ranks
//!   (they carry a parent-death signal);
//! - `timeout` stops everything and makes the exit code 124;
//! - when a rank fails, the job times out or the launcher is interrupted,
//!   the ranks' flight recorders are dumped and analysed first ([`flight`]:
//!   which collective each rank is in);
//! - at the end nothing is left: every rank is reaped, processes the ranks
//!   left behind are killed and reaped (the launcher is their subreaper),
//!   and the job's `/dev/shm/ferrocoll-*` segments are removed (see [`shm`]).
//!
//! The exit code is 0 iff every rank exited 0; otherwise 124 for a timeout,
//! else the first failed rank's status (or 128 + its signal).
//!
//! Limits: one host; ranks' stdin is `/dev/null`; `launch` reaps every
//! child of the calling process when [`LaunchConfig::adopt_orphans`] is set,
//! so a program that has children of its own besides the ranks should
//! leave it off.

pub mod bind;
mod child;
pub mod cli;
pub mod env;
pub mod exit;
pub mod flight;
mod orphans;
pub mod pump;
pub mod shm;
mod signals;
pub mod supervise;

use std::ffi::OsString;
use std::time::{Duration, Instant};

pub use exit::Exit;
pub use supervise::Outcome;

use child::{RankSpec, spawn_rank};
use signals::{SignalGuard, signal_group};

/// Default time the other ranks get after a failure.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// The most ranks one job may have. Every rank is a process of this host
/// with two pipes and two pump threads in the launcher, and the placements
/// are computed before the first is started: without a bound, `-n
/// 18446744073709551615` panicked allocating them, and `-n 100000` spent
/// minutes on them and then started processes until the host ran out.
/// 4096 is far above any one host's cores (binding needs a core per rank)
/// and still cheap to plan.
pub const MAX_RANKS: usize = 4096;

/// What to launch and how.
#[derive(Clone, Debug)]
pub struct LaunchConfig {
    /// Number of ranks (1 to [`MAX_RANKS`]).
    pub ranks: usize,
    /// Spread the ranks over this many emulated hosts (contiguous blocks).
    pub emulate_hosts: Option<usize>,
    /// Ranks per emulated host, in host order (`--emulate-hosts 1,3,2`):
    /// replaces the even split of `emulate_hosts`; must add up to `ranks`.
    pub host_sizes: Option<Vec<usize>>,
    /// Put the emulated hosts under this many emulated leaf switches (contiguous blocks of hosts).
    pub emulate_switches: Option<usize>,
    /// Stop everything after this long.
    pub timeout: Option<Duration>,
    /// Time the other ranks get after a failure or an interrupt.
    pub grace: Duration,
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// A rank whose stdout is copied without the `[r] ` prefix (the perftest's table).
    pub unprefixed_stdout: Option<usize>,
    /// Become the subreaper of the job and kill and reap everything left at the end.
    pub adopt_orphans: bool,
    /// Prefix of the launcher's own messages.
    pub label: String,
    /// `--bind-to`; `None`: core when ranks ≤ the launcher's CPUs, else none (see [`bind`]).
    pub bind_to: Option<bind::BindTo>,
}

impl LaunchConfig {
    /// `ranks` copies of `program args…` with the defaults.
    pub fn new(ranks: usize, program: impl Into<OsString>, args: Vec<OsString>) -> LaunchConfig {
        LaunchConfig {
            ranks,
            emulate_hosts: None,
            host_sizes: None,
            emulate_switches: None,
            timeout: None,
            grace: DEFAULT_GRACE,
            program: program.into(),
            args,
            unprefixed_stdout: None,
            adopt_orphans: true,
            label: "ferrocoll-run".into(),
            bind_to: None,
        }
    }
}

/// Why a job could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The configuration is wrong (the message names the value).
    #[error("{0}")]
    Config(String),
    /// Setting up the job failed (port, token, signal handlers).
    #[error("{what}: {source}")]
    Setup {
        /// What was being set up.
        what: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// A rank could not be started.
    #[error("cannot start rank {rank} ({program}): {source}")]
    Spawn {
        /// The rank.
        rank: usize,
        /// The program, as given.
        program: String,
        /// The cause.
        source: std::io::Error,
    },
}

impl LaunchError {
    /// The exit code for this error: 127 for a program not found, 126 for
    /// one that cannot be run, 2 for a bad configuration, 1 otherwise.
    pub fn code(&self) -> i32 {
        match self {
            LaunchError::Config(_) => 2,
            LaunchError::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound => 127,
            LaunchError::Spawn { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => 126,
            _ => 1,
        }
    }
}

fn setup<T>(what: &'static str, r: std::io::Result<T>) -> Result<T, LaunchError> {
    r.map_err(|source| LaunchError::Setup { what, source })
}

/// Start the job, supervise it to the end and clean up after it.
pub fn launch(cfg: &LaunchConfig) -> Result<Outcome, LaunchError> {
    if cfg.ranks == 0 || cfg.ranks > MAX_RANKS {
        return Err(LaunchError::Config(format!(
            "{} ranks: the number of ranks must be between 1 and {MAX_RANKS}",
            cfg.ranks
        )));
    }
    if let Some(k) = cfg.emulate_hosts {
        if k == 0 || k > cfg.ranks {
            return Err(LaunchError::Config(format!(
                "--emulate-hosts {k} must be between 1 and the number of ranks ({})",
                cfg.ranks
            )));
        }
    }
    if let Some(sizes) = &cfg.host_sizes {
        if sizes.contains(&0) || sizes.iter().sum::<usize>() != cfg.ranks {
            return Err(LaunchError::Config(format!(
                "--emulate-hosts {sizes:?}: every host needs a rank and the sizes must add up to the number of ranks ({})",
                cfg.ranks
            )));
        }
    }
    let host_sizes = cfg.host_sizes.clone().or_else(|| cfg.emulate_hosts.map(|k| env::even_blocks(cfg.ranks, k)));
    if let Some(j) = cfg.emulate_switches {
        let k = host_sizes.as_ref().map_or(0, Vec::len);
        if j == 0 || j > k {
            return Err(LaunchError::Config(format!(
                "--emulate-switches {j} must be between 1 and the number of emulated hosts ({k})"
            )));
        }
    }
    let (bind_to, bindings) = bind::plan_here(cfg.bind_to, cfg.ranks).map_err(LaunchError::Config)?;
    let job = env::JobEnv {
        master_addr: "127.0.0.1".into(),
        master_port: setup("picking a free port for MASTER_PORT", env::free_port())?,
        token: setup("reading /dev/urandom for the job token", env::fresh_token())?,
    };
    if cfg.adopt_orphans {
        if let Err(e) = orphans::become_subreaper() {
            // Some emulators and sandboxes refuse it (qemu-user: EINVAL). The
            // ranks' process groups are still killed at the end; only what
            // left its group (setsid) may outlive the job.
            crate::errln!(
                "{}: cannot become the job's subreaper ({e}): processes the ranks start in new sessions may \
                 outlive the job",
                cfg.label
            );
        }
    }
    let signals = setup("installing the SIGINT/SIGTERM handlers", SignalGuard::install())?;
    // Best effort: without it, a failure is reported without the ranks' flight records.
    let flight = flight::FlightDir::create(job.token.get(..8).unwrap_or("job")).ok();
    let start = Instant::now();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let mut ranks = Vec::with_capacity(cfg.ranks);
    let mut pumps = Vec::new();
    for p in env::placements(cfg.ranks, host_sizes.as_deref(), cfg.emulate_switches) {
        let mut vars = job.vars(&p);
        vars.extend(flight.as_ref().map(flight::FlightDir::var));
        let cpus = bindings.get(p.rank).cloned().flatten();
        // What the rank was bound to, for the programs that print it (the perftest).
        let bound = match &cpus {
            Some(c) => format!("{bind_to}:{}", bind::cpu_list(c)),
            None => "none".to_string(),
        };
        vars.push((bind::BIND_VAR.to_string(), bound));
        let spec = RankSpec {
            rank: p.rank,
            program: &cfg.program,
            args: &cfg.args,
            vars: &vars,
            remove: env::FOREIGN_RANK_VARS,
            raw_stdout: cfg.unprefixed_stdout == Some(p.rank),
            cpus: cpus.as_deref().map(bind::CpuSet::of),
        };
        match spawn_rank(&spec, &done_tx) {
            Ok((proc_, handles)) => {
                ranks.push(proc_);
                pumps.extend(handles);
            }
            Err(source) => {
                for r in &ranks {
                    signal_group(r.pid, libc::SIGKILL);
                    child::reap_blocking(r.pid);
                }
                return Err(LaunchError::Spawn {
                    rank: p.rank,
                    program: cfg.program.to_string_lossy().into_owned(),
                    source,
                });
            }
        }
    }
    drop(done_tx);
    let mut shm = shm::ShmWatch::default();
    shm.job_ids.push(shm::tcp_job_id(&job.token, &job.master_addr, job.master_port));
    let sup = supervise::Supervisor {
        ranks,
        grace: cfg.grace,
        timeout: cfg.timeout,
        label: &cfg.label,
        signals: &signals,
        shm: &mut shm,
        flight: flight.as_ref(),
    };
    let pgids: Vec<libc::pid_t> = sup.ranks.iter().map(|r| r.pid).collect();
    let outcome = sup.run(start);
    finish(cfg, &pgids, pumps, done_rx, &shm);
    drop(signals);
    Ok(outcome)
}

/// Stop what the ranks left running, let the output drain, and clean up.
fn finish(
    cfg: &LaunchConfig,
    pgids: &[libc::pid_t],
    pumps: Vec<std::thread::JoinHandle<()>>,
    done: std::sync::mpsc::Receiver<()>,
    shm: &shm::ShmWatch,
) {
    // The ranks are gone; whatever is still in their groups goes too, and
    // with the subreaper on, whatever they left that changed its group.
    if cfg.adopt_orphans {
        let n = orphans::kill_and_reap_all(pgids, Duration::from_secs(2));
        if n > 0 {
            crate::errln!("{}: killed {n} processes the ranks left behind", cfg.label);
        }
    } else {
        // Without /proc scanning of our own children, signal the groups; their
        // ids were reaped moments ago, so they cannot have been reused yet
        // short of pid wrap-around.
        for &g in pgids {
            signal_group(g, libc::SIGKILL);
        }
    }
    // Output still in the pipes is copied; a pipe held open by something we
    // could not kill is not waited for past the deadline.
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut ended = 0;
    while ended < pumps.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if done.recv_timeout(left).is_err() {
            break;
        }
        ended += 1;
    }
    if ended == pumps.len() {
        for p in pumps {
            // A pump thread that panicked lost some output; nothing else to do.
            let _ = p.join();
        }
    }
    let removed = shm.cleanup();
    if !removed.is_empty() {
        let names: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
        crate::errln!("{}: removed shared-memory segments the job left: {}", cfg.label, names.join(", "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_rank_counts_are_refused_before_anything_starts() {
        for ranks in [0, MAX_RANKS + 1, usize::MAX] {
            let e = launch(&LaunchConfig::new(ranks, "/nonexistent/program", Vec::new())).unwrap_err();
            assert!(matches!(e, LaunchError::Config(_)), "{ranks}: {e}");
            assert!(e.to_string().contains(&format!("{ranks} ranks")), "{e}");
            assert_eq!(e.code(), 2);
        }
    }
}
