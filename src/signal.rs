//! `SIGUSR1` → a flight-recorder dump of every team of the process (see
//! `ferrocoll_core::engine::recorder`). Installed by [`Lib`](crate::Lib)
//! creation when `FERROCOLL_FLIGHT_RECORDER_DIR` is set (`ferrocoll-run`
//! sets it, and signals the ranks when a job fails or is interrupted), and
//! only if the program has no handler of its own for the signal; it then
//! leaves a `ready-<pid>` file there, so the launcher signals only processes
//! that have the handler (the default action of `SIGUSR1` is to terminate).

use std::sync::Once;

use ferrocoll_core::engine::recorder::{DUMP_DIR_VAR, request_dump};

extern "C" fn on_signal(_: libc::c_int) {
    // Async-signal-safe: one atomic store; the next progress does the dump.
    request_dump();
}

/// Install the handler once per process, when asked for (see the module docs).
pub(crate) fn install_dump_signal() {
    static ONCE: Once = Once::new();
    if std::env::var_os(DUMP_DIR_VAR).is_none() {
        return;
    }
    ONCE.call_once(|| {
        // SAFETY: an all-zero sigaction is a valid value of this plain C struct.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: querying (act null) writes only `old`.
        if unsafe { libc::sigaction(libc::SIGUSR1, std::ptr::null(), &mut old) } != 0 {
            return;
        }
        if old.sa_sigaction != libc::SIG_DFL {
            ferrocoll_core::log_debug!("flight recorder: SIGUSR1 already has a handler; not installing ours");
            return;
        }
        // SAFETY: as above.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        act.sa_flags = libc::SA_RESTART;
        // SAFETY: `act` is initialised (empty mask, a handler that only stores an atomic).
        if unsafe { libc::sigaction(libc::SIGUSR1, &act, std::ptr::null_mut()) } != 0 {
            ferrocoll_core::log_debug!("flight recorder: cannot install the SIGUSR1 handler");
            return;
        }
        // Tell the launcher that this process may be sent SIGUSR1 (to a
        // process without the handler, it is fatal).
        if let Some(dir) = std::env::var_os(DUMP_DIR_VAR) {
            let marker = std::path::Path::new(&dir).join(format!("ready-{}", std::process::id()));
            if let Err(e) = std::fs::write(&marker, b"") {
                ferrocoll_core::log_debug!("flight recorder: cannot write {}: {e}", marker.display());
            }
        }
    });
}
