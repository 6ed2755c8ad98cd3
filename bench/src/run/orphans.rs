//! Processes a rank started and left behind.
//!
//! The launcher makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`):
//! a process whose parent (a rank, or a rank's child) dies is re-parented to
//! the launcher instead of to init. At the end, every child the launcher
//! still has is killed and reaped, so nothing of the job outlives it.

use std::time::{Duration, Instant};

/// Become the subreaper of everything we start.
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only sets a flag on this process.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `(state, parent pid, process group)` of `pid`, from `/proc/<pid>/stat`
/// (the fields after `(comm)`, which may itself hold spaces and parentheses).
fn stat_of(pid: libc::pid_t) -> Option<(char, libc::pid_t, libc::pid_t)> {
    let stat = ferrocoll_transport::liveness::read_stat(u32::try_from(pid).ok()?)?;
    let mut f = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    Some((state, ppid, pgrp))
}

/// Living (not zombie) processes that are our children or members of one
/// of `groups`: what a finished job left behind.
pub fn leftovers(groups: &[libc::pid_t]) -> Vec<libc::pid_t> {
    let me = std::process::id() as libc::pid_t;
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<libc::pid_t>().ok()))
        .filter(|&pid| {
            stat_of(pid).is_some_and(|(state, ppid, pgrp)| state != 'Z' && (ppid == me || groups.contains(&pgrp)))
        })
        .collect()
}

/// Kill what the job left behind (see [`leftovers`]) and reap every child
/// we have, trying for at most `within`. Returns how many processes were killed.
pub fn kill_and_reap_all(groups: &[libc::pid_t], within: Duration) -> usize {
    let deadline = Instant::now() + within;
    let mut killed = std::collections::BTreeSet::new();
    loop {
        reap_any();
        let left = leftovers(groups);
        for &pid in &left {
            // SAFETY: kill has no memory effects. `pid` was just seen alive as
            // our child or in one of the job's groups.
            if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
                killed.insert(pid);
            }
        }
        if left.is_empty() || Instant::now() >= deadline {
            reap_any();
            return killed.len();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reap every child that has ended, without blocking.
pub fn reap_any() {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r <= 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_parents() {
        let me = std::process::id() as libc::pid_t;
        // SAFETY: getppid and getpgrp have no preconditions.
        let (parent, group) = unsafe { (libc::getppid(), libc::getpgrp()) };
        let (state, ppid, pgrp) = stat_of(me).unwrap();
        assert_eq!((ppid, pgrp), (parent, group));
        assert_ne!(state, 'Z');
    }
}
