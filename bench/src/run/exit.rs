//! How a rank ended, decoded from `waitpid`'s status, and the words used to
//! say so (`exited with status 2`, `exited with signal 9 (SIGKILL)`).

use std::fmt;

/// How a child process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// `exit(code)`.
    Status(i32),
    /// Killed by a signal.
    Signal(i32),
}

impl Exit {
    /// Decode a `waitpid` status of a process that has terminated (`None`
    /// for a stopped or continued one).
    pub fn from_wait_status(status: libc::c_int) -> Option<Exit> {
        if libc::WIFEXITED(status) {
            Some(Exit::Status(libc::WEXITSTATUS(status)))
        } else if libc::WIFSIGNALED(status) {
            Some(Exit::Signal(libc::WTERMSIG(status)))
        } else {
            None
        }
    }

    /// Whether the rank succeeded.
    pub fn success(self) -> bool {
        self == Exit::Status(0)
    }

    /// The shell's convention for our own exit code: the status itself, or
    /// 128 + the signal number.
    pub fn shell_code(self) -> i32 {
        match self {
            Exit::Status(c) => c,
            Exit::Signal(s) => 128 + s,
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Exit::Status(c) => write!(f, "exited with status {c}"),
            Exit::Signal(s) => write!(f, "exited with signal {s} ({})", signal_name(s)),
        }
    }
}

/// The conventional name of a signal (`SIGKILL`), or `signal N`.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert_eq!(Exit::Status(2).to_string(), "exited with status 2");
        assert_eq!(Exit::Signal(9).to_string(), "exited with signal 9 (SIGKILL)");
        assert_eq!(Exit::Signal(9).shell_code(), 137);
        assert!(Exit::Status(0).success() && !Exit::Signal(15).success());
        assert_eq!(signal_name(64), "signal 64");
    }
}
