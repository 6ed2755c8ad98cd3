//! SIGINT and SIGTERM sent to the launcher: caught once, recorded, and
//! forwarded by the supervision loop to every rank.
//!
//! The handlers are installed with `SA_RESETHAND`: the first signal is
//! caught and forwarded, and the disposition goes back to the default at
//! once, so a second Ctrl-C kills the launcher hard (its children then get
//! `SIGKILL` through their parent-death signal).

use std::sync::atomic::{AtomicU64, Ordering};

/// Signals received and not yet taken, one bit per signal number.
static PENDING: AtomicU64 = AtomicU64::new(0);

/// The signals we catch.
const CAUGHT: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic fetch_or here: the one thing a handler may safely do.
    // Relaxed: the loop that reads it needs no other memory to be visible.
    if (0..64).contains(&sig) {
        PENDING.fetch_or(1 << sig, Ordering::Relaxed);
    }
}

/// Installed handlers; dropping it restores the previous dispositions.
pub struct SignalGuard {
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

impl SignalGuard {
    /// Catch SIGINT and SIGTERM (once each) until the guard is dropped.
    pub fn install() -> std::io::Result<SignalGuard> {
        PENDING.store(0, Ordering::Relaxed);
        let mut previous = Vec::new();
        for sig in CAUGHT {
            // SAFETY: sigaction is plain old data; all-zero is a valid empty value.
            let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
            act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            act.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
            // SAFETY: `act.sa_mask` is a valid sigset_t owned by this frame.
            unsafe { libc::sigemptyset(&mut act.sa_mask) };
            // SAFETY: as above.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: `act` and `old` are valid for the call; `on_signal` only
            // touches an atomic, which is async-signal-safe.
            if unsafe { libc::sigaction(sig, &act, &mut old) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            previous.push((sig, old));
        }
        Ok(SignalGuard { previous })
    }

    /// The signals received since the last call (each reported once).
    pub fn take(&self) -> Vec<libc::c_int> {
        let bits = PENDING.swap(0, Ordering::Relaxed);
        (0..64).filter(|s| bits & (1u64 << s) != 0).collect()
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            // SAFETY: restores a disposition that sigaction itself returned.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
    }
}

/// Send `sig` to the process group `pgid` (each rank leads its own group,
/// so this reaches what the rank started too). Errors (the group is gone)
/// are ignored: the caller only wants the group stopped.
pub fn signal_group(pgid: libc::pid_t, sig: libc::c_int) {
    if pgid > 0 {
        // SAFETY: killpg has no memory effects; pgid > 0 names one group
        // (never 0, our own group, or -1, every process we may signal).
        unsafe { libc::killpg(pgid, sig) };
    }
}
