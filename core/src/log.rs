//! Minimal levelled logging to stderr, controlled by `UCC_LOG_LEVEL`.
//!
//! A library must not drag a logging framework into its users' programs, and
//! UCC users expect `UCC_LOG_LEVEL`; this is a dozen lines of that.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// Log levels, most severe first.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Failures.
    Error = 1,
    /// Suspicious situations (a slow collective, a component turned off).
    Warn = 2,
    /// High-level events (coll trace on rank 0).
    Info = 3,
    /// Details (why a component is off, coll trace on every rank).
    Debug = 4,
    /// Everything.
    Trace = 5,
}

impl Level {
    /// Parse `error warn info debug trace` (and `n`/`none` for off, as
    /// `None`), and the rest of UCC's (UCS's) level names, which programs
    /// written for UCC set: `fatal` prints nothing of ours (ferrocoll has
    /// no fatal messages: an error is returned, and UCC logs those at
    /// `error`), `diag` is `warn` (nothing of ours between them), and the
    /// `trace_*` levels (`req`, `data`, `async`, `func`, `poll`) and
    /// `print` are `trace`.
    pub fn parse(s: &str) -> Option<Option<Level>> {
        match s.trim().to_ascii_lowercase().as_str() {
            "n" | "no" | "none" | "off" | "0" | "fatal" => Some(None),
            "error" | "err" => Some(Some(Level::Error)),
            "warn" | "warning" | "diag" => Some(Some(Level::Warn)),
            "info" | "y" | "yes" => Some(Some(Level::Info)),
            "debug" => Some(Some(Level::Debug)),
            "trace" | "req" | "data" | "async" | "func" | "poll" | "print" | "trace_req" | "trace_data"
            | "trace_async" | "trace_func" | "trace_poll" => Some(Some(Level::Trace)),
            _ => None,
        }
    }
}

/// The level in effect: a [`Level`]'s value, or [`NONE`] (nothing printed).
static LEVEL: AtomicU8 = AtomicU8::new(Level::Warn as u8);
/// Set once `UCC_LOG_LEVEL` from the environment was read into [`LEVEL`].
static INIT: OnceLock<()> = OnceLock::new();
/// [`LEVEL`] for `UCC_LOG_LEVEL=n`.
const NONE: u8 = 0;

/// The current maximum level (`None`: nothing is printed). Read from the
/// environment's `UCC_LOG_LEVEL` when first asked (default warn); a
/// library created later sets it from its configuration, which may also
/// come from `UCC_CONFIG_FILE` or its parameters ([`set_max_level`]).
pub fn max_level() -> Option<Level> {
    INIT.get_or_init(|| {
        let lvl = match std::env::var("UCC_LOG_LEVEL") {
            Err(_) => Some(Level::Warn),
            Ok(v) => Level::parse(&v).unwrap_or_else(|| {
                // Lib creation refuses it; anything logged before that should not hide the mistake.
                eprintln!(
                    "ferrocoll: UCC_LOG_LEVEL={v:?} is not a level (fatal, error, warn, diag, info, debug, trace, n); using warn"
                );
                Some(Level::Warn)
            }),
        };
        store(lvl);
    });
    match LEVEL.load(Ordering::Relaxed) {
        NONE => None,
        1 => Some(Level::Error),
        2 => Some(Level::Warn),
        3 => Some(Level::Info),
        4 => Some(Level::Debug),
        _ => Some(Level::Trace),
    }
}

/// Set the maximum level for the whole process (`None`: print nothing).
pub fn set_max_level(level: Option<Level>) {
    // The environment is read first, so that it cannot overwrite this later.
    INIT.get_or_init(|| ());
    store(level);
}

fn store(level: Option<Level>) {
    // Relaxed: the level is an independent setting, no other data is published with it.
    LEVEL.store(level.map_or(NONE, |l| l as u8), Ordering::Relaxed);
}

/// Whether messages at `level` are printed.
pub fn enabled(level: Level) -> bool {
    max_level().is_some_and(|max| level <= max)
}

/// Where log lines go instead of stderr (see [`set_sink`]).
pub type Sink = Arc<dyn Fn(Level, &str) + Send + Sync>;

static SINK: RwLock<Option<Sink>> = RwLock::new(None);

/// Send log lines to `sink` instead of stderr (`None`: back to stderr), e.g.
/// to route them into an application's own logging.
pub fn set_sink(sink: Option<Sink>) {
    *SINK.write().unwrap_or_else(|p| p.into_inner()) = sink;
}

/// Print one line at `level` (used by the `log_*!` macros).
pub fn write(level: Level, args: std::fmt::Arguments<'_>) {
    let sink = SINK.read().unwrap_or_else(|p| p.into_inner()).clone();
    match sink {
        Some(s) => s(level, &args.to_string()),
        None => eprintln!("[ferrocoll {}] {:?}: {}", std::process::id(), level, args),
    }
}

/// Log at a level: `log_at!(Level::Info, "x = {}", x)`.
#[macro_export]
macro_rules! log_at {
    ($lvl:expr, $($arg:tt)*) => {
        if $crate::log::enabled($lvl) { $crate::log::write($lvl, format_args!($($arg)*)) }
    };
}

/// Log a warning.
#[macro_export]
macro_rules! log_warn { ($($arg:tt)*) => { $crate::log_at!($crate::log::Level::Warn, $($arg)*) }; }

/// Log at info level.
#[macro_export]
macro_rules! log_info { ($($arg:tt)*) => { $crate::log_at!($crate::log::Level::Info, $($arg)*) }; }

/// Log at debug level.
#[macro_export]
macro_rules! log_debug { ($($arg:tt)*) => { $crate::log_at!($crate::log::Level::Debug, $($arg)*) }; }

#[cfg(test)]
mod tests {
    use super::*;

    /// A program written for UCC may set any of UCS's level names.
    #[test]
    fn ucc_level_names_parse() {
        assert_eq!(Level::parse("fatal"), Some(None));
        assert_eq!(Level::parse("n"), Some(None));
        assert_eq!(Level::parse("ERROR"), Some(Some(Level::Error)));
        assert_eq!(Level::parse("diag"), Some(Some(Level::Warn)));
        assert_eq!(Level::parse(" info "), Some(Some(Level::Info)));
        assert_eq!(Level::parse("debug"), Some(Some(Level::Debug)));
        for trace in ["trace", "req", "trace_data", "poll", "print"] {
            assert_eq!(Level::parse(trace), Some(Some(Level::Trace)), "{trace}");
        }
        assert_eq!(Level::parse("loud"), None);
    }
}
