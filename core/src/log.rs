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
///
/// On stderr, the line goes out in one `write`: ranks of one job usually
/// share the terminal or file, and a line written in pieces (as
/// `eprintln!` writes its arguments) was interleaved with other ranks'
/// (`[ferrocoll [ferrocoll 12841] Error: …`). A line the same as the one
/// before is printed three times in a row, then only at the 10th, 100th,
/// 1 000th… time, with the count (a program that makes the same refused
/// call in a loop, and falls back each time, printed it thousands of
/// times).
pub fn write(level: Level, args: std::fmt::Arguments<'_>) {
    let sink = SINK.read().unwrap_or_else(|p| p.into_inner()).clone();
    let text = args.to_string();
    if let Some(s) = sink {
        return s(level, &text);
    }
    let Some(times) = REPEATS.lock().unwrap_or_else(|p| p.into_inner()).admit(level, &text) else { return };
    let count = if times > 1 { format!(" (the same line {times} times in a row)") } else { String::new() };
    let line = format!("[ferrocoll {}] {level:?}: {text}{count}\n", std::process::id());
    use std::io::Write;
    // Nothing to do if stderr is gone.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// The last line printed to stderr and how many times in a row it came.
static REPEATS: std::sync::Mutex<Repeats> = std::sync::Mutex::new(Repeats { last: None, times: 0 });

/// See [`write`]: which of a run of identical lines are printed.
struct Repeats {
    last: Option<(Level, String)>,
    times: u64,
}

impl Repeats {
    /// Lines printed in full before a run is thinned out.
    const IN_FULL: u64 = 3;

    /// Note one more line; its count in the current run if it is to be
    /// printed, `None` if not.
    fn admit(&mut self, level: Level, text: &str) -> Option<u64> {
        if self.last.as_ref().is_some_and(|(l, t)| *l == level && t == text) {
            self.times = self.times.saturating_add(1);
        } else {
            self.last = Some((level, text.to_string()));
            self.times = 1;
        }
        let t = self.times;
        (t <= Self::IN_FULL || is_power_of_ten(t)).then_some(t)
    }
}

fn is_power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n.is_multiple_of(10) {
        n /= 10;
    }
    n == 1
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

    /// A run of identical lines is printed three times, then at the 10th,
    /// 100th and 1 000th; another line starts a new run.
    #[test]
    fn repeated_lines_are_thinned_out() {
        let mut r = Repeats { last: None, times: 0 };
        let printed: Vec<u64> = (0..2000).filter_map(|_| r.admit(Level::Error, "refused")).collect();
        assert_eq!(printed, [1, 2, 3, 10, 100, 1000]);
        assert_eq!(r.admit(Level::Warn, "refused"), Some(1), "another level is another line");
        assert_eq!(r.admit(Level::Warn, "other"), Some(1));
        assert_eq!(r.admit(Level::Warn, "refused"), Some(1));
    }
}
