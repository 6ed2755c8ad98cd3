//! Starting one rank: its own process group, a parent-death signal, the
//! job's variables, and pumps for its stdout and stderr.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;

use super::exit::Exit;
use super::pump::{Sink, spawn_pump};

/// A started rank.
#[derive(Debug)]
pub struct RankProc {
    /// Its rank.
    pub rank: usize,
    /// Its process id, which is also its process group id.
    pub pid: libc::pid_t,
    /// How it ended, once reaped.
    pub exit: Option<Exit>,
}

/// How to start one rank.
pub struct RankSpec<'a> {
    /// Its rank.
    pub rank: usize,
    /// Program and arguments.
    pub program: &'a OsString,
    /// Arguments.
    pub args: &'a [OsString],
    /// Variables to set.
    pub vars: &'a [(String, String)],
    /// Variables to remove from the inherited environment.
    pub remove: &'a [&'a str],
    /// Whether its stdout is copied without the `[r] ` prefix.
    pub raw_stdout: bool,
    /// The CPUs to bind it to (`--bind-to`), if any.
    pub cpus: Option<super::bind::CpuSet>,
}

/// Start a rank. Each pump sends one message on `done` when its stream ends.
pub fn spawn_rank(spec: &RankSpec<'_>, done: &mpsc::Sender<()>) -> std::io::Result<(RankProc, Vec<JoinHandle<()>>)> {
    let mut cmd = Command::new(spec.program);
    cmd.args(spec.args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for v in spec.remove {
        cmd.env_remove(v);
    }
    for (k, v) in spec.vars {
        cmd.env(k, v);
    }
    let parent = std::process::id() as libc::pid_t;
    let cpus = spec.cpus;
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: setpgid, prctl, getppid and
    // raise, and sched_setaffinity (CpuSet::apply, on a set made before the
    // fork) are system calls that allocate nothing and take no locks.
    unsafe {
        cmd.pre_exec(move || {
            // Own process group: Ctrl-C at the terminal reaches only the
            // launcher, which forwards it; killpg stops the rank's own children too.
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // If the launcher dies (a second Ctrl-C, SIGKILL), the rank dies too.
            // The signal follows the thread that forks, which is the launcher's
            // supervising thread for the whole job.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
            if libc::getppid() != parent {
                // The launcher died before prctl took effect.
                libc::raise(libc::SIGKILL);
            }
            // Bound before exec, so the program never runs elsewhere.
            if let Some(set) = &cpus {
                set.apply()?;
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let pid = child.id() as libc::pid_t;
    let prefix = format!("[{}] ", spec.rank);
    let mut pumps = Vec::with_capacity(2);
    let mut started = || -> std::io::Result<()> {
        // The streams were requested as pipes above, so both are present.
        if let Some(out) = child.stdout.take() {
            let p = if spec.raw_stdout { String::new() } else { prefix.clone() };
            pumps.push(spawn_pump(out, p, Sink::Stdout, done.clone())?);
        }
        if let Some(err) = child.stderr.take() {
            pumps.push(spawn_pump(err, prefix.clone(), Sink::Stderr, done.clone())?);
        }
        Ok(())
    };
    if let Err(e) = started() {
        // No thread to read its output: stop it rather than let it block on a full pipe.
        super::signals::signal_group(pid, libc::SIGKILL);
        reap_blocking(pid);
        return Err(e);
    }
    // `child` is dropped without waiting: the supervisor reaps `pid` itself
    // with waitpid, so that it can also reap processes it adopts.
    drop(child);
    Ok((RankProc { rank: spec.rank, pid, exit: None }, pumps))
}

/// Wait for `pid` to end and reap it.
pub fn reap_blocking(pid: libc::pid_t) -> Option<Exit> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a valid out-pointer; pid > 0 names one child of ours.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Exit::from_wait_status(status);
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return None;
        }
    }
}

/// Reap `pid` if it has ended (`waitpid` with `WNOHANG`); `None` while it runs.
pub fn try_reap(pid: libc::pid_t) -> Option<Exit> {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a valid out-pointer; pid > 0 names one child of ours.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    if r == pid {
        Exit::from_wait_status(status)
    } else if r < 0 {
        // ECHILD: someone else reaped it; its status is lost.
        Some(Exit::Status(255))
    } else {
        None
    }
}
