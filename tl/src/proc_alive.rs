//! Whether a process still runs (for peers that share memory with us).

/// True when process `pid` is gone: it does not exist, or it is a zombie
/// (exited, not yet reaped by its parent — our siblings' parent may be slow).
pub(crate) fn process_is_dead(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else { return true };
    // SAFETY: kill with signal 0 sends nothing; it only checks that the pid exists.
    if unsafe { libc::kill(p, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return true;
    }
    // /proc/<pid>/stat: "pid (comm) S ..." where S is the state; comm may contain spaces and ')'.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            s.rfind(')').and_then(|i| s[i + 1..].split_whitespace().next()).is_some_and(|st| st == "Z" || st == "X")
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn me_alive_and_a_reaped_child_dead() {
        assert!(!process_is_dead(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id();
        child.wait().expect("wait");
        assert!(process_is_dead(pid));
    }
}
