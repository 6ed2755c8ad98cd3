//! Whether peer processes are still there: a per-peer health word that
//! `failed` reads for free, and the checks that update it (at most every
//! [`SCAN_INTERVAL`]): a pidfd that polls readable once its process has
//! terminated, or, where there is no pidfd, `kill(pid, 0) == ESRCH` or a
//! zombie state in `/proc/<pid>/stat` (with the start time there telling a
//! reused pid apart).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferrocoll_core::Error;

/// How often peers' processes are checked.
pub(super) const SCAN_INTERVAL: Duration = Duration::from_millis(50);

/// A process as first seen: its pid, a pidfd when the kernel gives one
/// (which names this very process even if its pid is reused), and its start
/// time (which tells a reused pid apart when there is no pidfd).
#[derive(Debug)]
pub(super) struct Proc {
    /// Process id.
    pub pid: u32,
    pidfd: Option<OwnedFd>,
    /// Start time in clock ticks after boot (`/proc/<pid>/stat` field 22), when readable.
    start: Option<u64>,
}

impl Proc {
    /// Process `pid` as it is now.
    pub fn of(pid: u32) -> Proc {
        Proc { pid, pidfd: pidfd_open(pid), start: stat(pid).and_then(|s| s.1) }
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
        if process_gone(self.pid) {
            return true;
        }
        match (self.start, stat(self.pid).and_then(|s| s.1)) {
            (Some(then), Some(now)) => then != now,
            _ => false,
        }
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
pub(super) fn process_gone(pid: u32) -> bool {
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

/// State letter and start time from `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<(u8, Option<u64>)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    let rest = s.get(s.rfind(')')? + 1..)?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    // Field 22 (starttime) is the 19th after the state (field 3).
    let start = fields.nth(18).and_then(|f| f.parse().ok());
    Some((state, start))
}

/// Health of one peer.
const OPEN: u8 = 0;
const LEFT: u8 = 1;
const DEAD: u8 = 2;
const BROKEN: u8 = 3;

/// What this endpoint knows of a peer's health: open, left cleanly, died, or
/// sent something corrupt.
#[derive(Debug, Default)]
pub(super) struct Health {
    state: AtomicU8,
    reason: OnceLock<String>,
}

impl Health {
    /// The peer closed its transport cleanly.
    pub fn set_left(&self) {
        // Relaxed: a flag with no data published with it; only OPEN is overwritten.
        let _ = self.state.compare_exchange(OPEN, LEFT, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The peer's process is gone without closing.
    pub fn set_dead(&self, why: String) {
        let _ = self.reason.set(why);
        // Release: a reader that sees DEAD also sees the reason set above.
        let _ = self.state.compare_exchange(OPEN, DEAD, Ordering::Release, Ordering::Relaxed);
    }

    /// The peer's ring held something this endpoint cannot parse: no later message can be trusted.
    pub fn set_broken(&self, why: String) {
        let _ = self.reason.set(why);
        // Release: as in set_dead; also overrides LEFT, since messages are lost either way.
        self.state.store(BROKEN, Ordering::Release);
    }

    /// Whether the peer is still open.
    pub fn is_open(&self) -> bool {
        // Relaxed: see set_left.
        self.state.load(Ordering::Relaxed) == OPEN
    }

    /// Why the peer can no longer take part, if it died or broke (not if it left cleanly).
    pub fn failure(&self) -> Option<Error> {
        // Acquire: pairs with the Release in set_dead/set_broken, for the reason.
        match self.state.load(Ordering::Acquire) {
            DEAD | BROKEN => Some(Error::io(self.reason.get().cloned().unwrap_or_default())),
            _ => None,
        }
    }

    /// Why the peer can no longer send, if it cannot (left, died or broke).
    pub fn gone(&self, ep: usize) -> Option<Error> {
        // Acquire: as in failure().
        match self.state.load(Ordering::Acquire) {
            LEFT => Some(Error::io(format!("endpoint {ep} left"))),
            DEAD | BROKEN => self.failure(),
            _ => None,
        }
    }
}

/// Calls of [`ScanClock::due`] between two looks at the clock: progress runs
/// millions of times a second, and reading the clock each time would cost
/// more than the rest of an idle progress.
const CALLS_PER_LOOK: u64 = 256;

/// Rate limit for peer scans, shared by the threads that progress one transport.
#[derive(Debug)]
pub(super) struct ScanClock {
    start: Instant,
    /// Milliseconds after `start` at which the next scan is due.
    next_ms: AtomicU64,
    /// Calls since the clock was last read.
    calls: AtomicU64,
}

impl Default for ScanClock {
    fn default() -> Self {
        ScanClock { start: Instant::now(), next_ms: AtomicU64::new(0), calls: AtomicU64::new(0) }
    }
}

impl ScanClock {
    /// True for exactly one caller once the interval has passed.
    pub fn due(&self) -> bool {
        // Relaxed: a counter for rate limiting only.
        if !self.calls.fetch_add(1, Ordering::Relaxed).is_multiple_of(CALLS_PER_LOOK) {
            return false;
        }
        let now = self.start.elapsed().as_millis() as u64;
        // Relaxed: a timestamp; the CAS alone decides who scans.
        let next = self.next_ms.load(Ordering::Relaxed);
        now >= next
            && self
                .next_ms
                .compare_exchange(next, now + SCAN_INTERVAL.as_millis() as u64, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(process_gone(0) && process_gone(u32::MAX));
        let reused = Proc { pid: std::process::id(), pidfd: None, start: Some(1) };
        assert!(reused.gone(), "a different start time means another process");
    }

    #[test]
    fn health_reports_the_first_failure_and_clock_limits() {
        let h = Health::default();
        assert!(h.is_open() && h.failure().is_none() && h.gone(3).is_none());
        h.set_left();
        assert!(h.failure().is_none());
        assert_eq!(h.gone(3).unwrap().context(), "endpoint 3 left");
        let d = Health::default();
        d.set_dead("endpoint 2 (pid 9) died".into());
        d.set_left();
        assert_eq!(d.failure().unwrap().context(), "endpoint 2 (pid 9) died");
        let c = ScanClock::default();
        assert!(c.due());
        assert!(!c.due());
    }
}
