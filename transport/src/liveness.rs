//! Whether a peer process still runs: the one check that every user of
//! shared memory (the shm transport, the shm TL's epoch waits, the
//! replacement of a stale segment) asks.
//!
//! A [`Proc`] is a process as first seen: a pidfd that polls readable once
//! its process has terminated, or, where the kernel has no pidfd (before
//! Linux 5.3, or seccomp), `kill(pid, 0) == ESRCH` or a zombie state in
//! `/proc/<pid>/stat`, with the start time there telling a reused pid apart.
//! [`process_gone`] is the check without history, for a pid read once.
//!
//! Limits: a `Proc` taken after its pid was already reused describes the new
//! process; only the first look can be wrong that way, which is why callers
//! take it as early as they learn the pid.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A process as first seen: its pid, a pidfd when the kernel gives one
/// (which names this very process even if its pid is reused), and its start
/// time (which tells a reused pid apart when there is no pidfd).
#[derive(Debug)]
pub struct Proc {
    /// Process id.
    pub pid: u32,
    pidfd: Option<OwnedFd>,
    /// Start time in clock ticks after boot (`/proc/<pid>/stat` field 22), when readable.
    start: Option<u64>,
}

impl Proc {
    /// Process `pid` as it is now.
    pub fn of(pid: u32) -> Proc {
        Proc { pid, pidfd: pidfd_open(pid), start: start_time(pid) }
    }

    /// Whether the process exited, was killed, is a zombie or was replaced by another with the same pid.
    pub fn gone(&self) -> bool {
        if let Some(fd) = &self.pidfd {
            let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd, zero timeout; poll only writes `revents`.
            let n = unsafe { libc::poll(&mut p, 1, 0) };
            if n >= 0 {
                // A pidfd polls readable once its process has terminated (zombie included).
                return n > 0;
            }
        }
        gone_since(self.pid, self.start)
    }
}

fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).ok().filter(|&p| p > 0)?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = libc::c_int::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: a fresh descriptor that nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether process `pid` no longer runs: it does not exist (`kill(pid, 0)`
/// fails with ESRCH) or is a zombie.
pub fn process_gone(pid: u32) -> bool {
    // 0 and negative pids address process groups in kill(): never a peer.
    let Ok(p) = libc::pid_t::try_from(pid) else { return true };
    if p <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    if unsafe { libc::kill(p, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return true;
    }
    matches!(stat(pid), Some((b'Z' | b'X', _)))
}

/// Process `pid`'s start time in clock ticks after boot, when readable.
pub fn start_time(pid: u32) -> Option<u64> {
    stat(pid).and_then(|s| s.1)
}

/// Whether the process that was `pid`, started at `start` (ticks after
/// boot, when known), no longer runs: gone, a zombie, or its pid now names a
/// process started at another time.
pub fn gone_since(pid: u32, start: Option<u64>) -> bool {
    if process_gone(pid) {
        return true;
    }
    match (start, start_time(pid)) {
        (Some(then), Some(now)) => then != now,
        _ => false,
    }
}

/// `/proc/<pid>/stat`, read as the main thread's `/proc/<pid>/task/<pid>/stat`
/// (the same fields): qemu-user (an arm64 container on an x86 host, say)
/// answers a process's reads of its own `/proc/<pid>/stat` itself, with a
/// start time of its own clock that other processes never read, so a
/// process would not be recognised as itself. Falls back to the plain path.
pub fn read_stat(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/stat"))
        .or_else(|_| std::fs::read_to_string(format!("/proc/{pid}/stat")))
        .ok()
}

/// State letter and start time from `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<(u8, Option<u64>)> {
    let s = read_stat(pid)?;
    // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    let rest = s.get(s.rfind(')')? + 1..)?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    // Field 22 (starttime) is the 19th after the state (field 3).
    let start = fields.nth(18).and_then(|f| f.parse().ok());
    Some((state, start))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn a_process_reads_its_own_stat_as_others_read_it() {
        let me = std::process::id();
        let mine = read_stat(me).expect("this process's stat");
        assert!(mine.starts_with(&format!("{me} (")), "{mine}");
        // What a child reads of this process: the same start time.
        let child = std::process::Command::new("cat").arg(format!("/proc/{me}/stat")).output().expect("cat");
        let theirs = String::from_utf8_lossy(&child.stdout).to_string();
        let start = |s: &str| s[s.rfind(')').unwrap() + 1..].split_ascii_whitespace().nth(19).map(str::to_owned);
        assert_eq!(start(&mine), start(&theirs), "ours: {mine}\ntheirs: {theirs}");
    }

    #[test]
    fn a_killed_child_is_gone_and_we_are_not() {
        let me = Proc::of(std::process::id());
        assert!(!me.gone() && me.start.is_some());
        let no_pidfd = Proc { pid: std::process::id(), pidfd: None, start: me.start };
        assert!(!no_pidfd.gone());
        let Ok(mut child) = std::process::Command::new("sleep").arg("30").spawn() else {
            eprintln!("skipped: cannot spawn `sleep`");
            return;
        };
        let p = Proc::of(child.id());
        // The same check without a pidfd: kill(pid, 0) and /proc/<pid>/stat.
        let q = Proc { pid: p.pid, pidfd: None, start: p.start };
        assert!(!p.gone() && !q.gone());
        child.kill().unwrap();
        // Until waited for, the child is a zombie: gone all the same.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(p.gone() && q.gone()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(p.gone() && q.gone());
        child.wait().unwrap();
        assert!(p.gone() && q.gone());
        assert!(process_gone(p.pid), "a reaped child is gone");
        assert!(process_gone(0) && process_gone(u32::MAX));
        let reused = Proc { pid: std::process::id(), pidfd: None, start: Some(1) };
        assert!(reused.gone(), "a different start time means another process");
    }
}
