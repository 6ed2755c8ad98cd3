//! Configuration: UCC's `UCC_*` environment variables, typed and documented.
//!
//! A [`Config`] is a snapshot of every `UCC_*` variable taken when a
//! [`Lib`](crate::Lib) is created, plus programmatic overrides (UCC's
//! `ucc_lib_config_modify`). Components declare the variables they read as
//! [`ConfigField`]s so that `ferrocoll-info -c` can print them with their
//! defaults and meaning. Values are parsed where they are used, and a value
//! that does not parse is an error naming the variable and the value.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};

/// One documented configuration variable.
#[derive(Clone, Copy, Debug)]
pub struct ConfigField {
    /// Full variable name, e.g. `UCC_COLL_TRACE`.
    pub name: &'static str,
    /// Default value as the user would write it.
    pub default: &'static str,
    /// What it does.
    pub doc: &'static str,
}

/// The variables read by the core engine.
pub const CORE_FIELDS: &[ConfigField] = &[
    ConfigField {
        name: "UCC_CONFIG_FILE",
        default: "auto",
        doc: "Configuration file of NAME=value lines (ferrocoll-tune writes one); auto: $HOME/ucc.conf if it exists; empty: none. Environment variables win over it.",
    },
    ConfigField {
        name: "UCC_LOG_LEVEL",
        default: "warn",
        doc: "Log level: error, warn, info, debug, trace, or n for none (messages go to stderr); UCC's fatal (none of ferrocoll's), diag (warn) and trace_* (trace) too.",
    },
    ConfigField {
        name: "UCC_COLL_TRACE",
        default: "n",
        doc: "Log the TL and algorithm chosen for each collective init: info (team rank 0) or debug (every rank); n to disable.",
    },
    ConfigField {
        name: "UCC_TLS",
        default: "all",
        doc: "Comma-separated TLs to use (e.g. p2p,self), or ^list to exclude some, or all.",
    },
    ConfigField {
        name: "UCC_COLL_TIMEOUT",
        default: "inf",
        doc: "Default timeout of every collective (seconds, or with a unit: 500ms, 2s, 1m); inf for none. CollArgs' timeout overrides it.",
    },
    ConfigField {
        name: "UCC_WATCHDOG_TIMEOUT",
        default: "30s",
        doc: "A collective in progress longer than this logs a warning naming its team, sequence number and the rank it waits for; inf to disable.",
    },
    ConfigField {
        name: "UCC_SPIN_COUNT",
        default: "auto",
        doc: "Polls a waiting rank makes before it yields its core: auto = 256 when this host has a core per rank (past them it yields on one wait in 256), 2 when ranks outnumber cores (past them it yields on every wait).",
    },
    ConfigField {
        name: "UCC_OOB_TIMEOUT",
        default: "120s",
        doc: "How long context creation waits for every rank's OOB allgather before failing with the missing ranks.",
    },
    ConfigField {
        name: "UCC_TEAM_CREATE_TIMEOUT",
        default: "120s",
        doc: "How long a team creation may stay in progress before create_test fails naming the ranks that did not join.",
    },
    ConfigField {
        name: "UCC_FLIGHT_RECORDER_SIZE",
        default: "32",
        doc: "Collectives each team remembers for hang diagnosis (dumped as JSON on a timeout, a watchdog warning or SIGUSR1, to FERROCOLL_FLIGHT_RECORDER_DIR or the log); 0 disables it.",
    },
    ConfigField {
        name: "UCC_CALL_BOARD",
        default: "y",
        doc: "Show every post on the team's call board, so that ranks whose calls differ enough to select different TLs or algorithms fail naming each other's calls instead of waiting until their timeout (costs tens of ns per collective; n turns it off).",
    },
    ConfigField {
        name: "UCC_TL_<NAME>_TUNE",
        default: "",
        doc: "Score-map overrides for one TL: tokens coll:msg_range:mem_type:[team_size]:score:@alg joined by '#'.",
    },
];

/// A snapshot of `UCC_*` variables plus overrides.
#[derive(Clone, Debug, Default)]
pub struct Config {
    values: BTreeMap<String, String>,
}

impl Config {
    /// An empty configuration: every variable at its default.
    pub fn new() -> Config {
        Config::default()
    }

    /// Every `UCC_*` variable of this process's environment.
    pub fn from_env() -> Config {
        let values = std::env::vars().filter(|(k, _)| k.starts_with("UCC_")).collect();
        Config { values }
    }

    /// What a library reads, as UCC does: the configuration file's values
    /// (`UCC_CONFIG_FILE`, see [`config_file`](crate::config_file)), then
    /// every `UCC_*` variable of the environment over them. A named file that
    /// does not exist is a warning; one that cannot be read or parsed, an error.
    pub fn from_file_and_env() -> Result<Config> {
        let env = Config::from_env();
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let named = env.values.get(crate::config_file::CONFIG_FILE_VAR).map(String::as_str);
        let mut config = Config::new();
        if let Some(path) = crate::config_file::config_file_path(named, home.as_deref()) {
            match crate::config_file::read_config_file(&path)? {
                Some(pairs) => {
                    for (name, value) in pairs {
                        config.set(&name, value);
                    }
                }
                None => crate::log_warn!("{}={}: no such file", crate::config_file::CONFIG_FILE_VAR, path.display()),
            }
        }
        Ok(config.merged(&env))
    }

    /// Set a variable (the `UCC_` prefix is added when missing).
    pub fn set(&mut self, name: &str, value: impl Into<String>) -> &mut Config {
        self.values.insert(full_name(name), value.into());
        self
    }

    /// The same configuration with `other`'s values laid over it.
    pub fn merged(&self, other: &Config) -> Config {
        let mut values = self.values.clone();
        values.extend(other.values.iter().map(|(k, v)| (k.clone(), v.clone())));
        Config { values }
    }

    /// The raw value of a variable, if set and not empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(&full_name(name)).map(String::as_str).filter(|v| !v.trim().is_empty())
    }

    /// Every variable set, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Parse a variable with `FromStr`, or return `default` when unset.
    pub fn parse_or<T: FromStr>(&self, name: &str, default: T) -> Result<T>
    where
        T::Err: std::fmt::Display,
    {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<T>()
                .map_err(|e| Error::invalid_param(format!("{}={v:?} does not parse: {e}", full_name(name)))),
        }
    }

    /// A duration variable (`500ms`, `2s`, `1.5`, `1m`, `inf`); `None` for
    /// `inf`; `default` when unset.
    pub fn duration_or(&self, name: &str, default: Option<Duration>) -> Result<Option<Duration>> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => parse_duration(v).map_err(|e| e.prefixed(full_name(name))),
        }
    }

    /// A duration variable that must be positive when set (`0` would fire at
    /// once, which nobody means: `inf` is how to switch it off).
    pub fn positive_duration_or(&self, name: &str, default: Option<Duration>) -> Result<Option<Duration>> {
        match self.duration_or(name, default)? {
            Some(d) if d.is_zero() => Err(Error::invalid_param(format!(
                "{}={:?} is not a positive duration (inf switches it off)",
                full_name(name),
                self.get(name).unwrap_or_default()
            ))),
            d => Ok(d),
        }
    }

    /// A boolean variable (`y/n`, `yes/no`, `1/0`, `true/false`, `on/off`).
    pub fn bool_or(&self, name: &str, default: bool) -> Result<bool> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => parse_bool(v).map_err(|e| e.prefixed(full_name(name))),
        }
    }
}

fn full_name(name: &str) -> String {
    if name.starts_with("UCC_") { name.to_string() } else { format!("UCC_{name}") }
}

/// Parse `y/n/yes/no/1/0/true/false/on/off`.
pub fn parse_bool(v: &str) -> Result<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "1" | "true" | "on" => Ok(true),
        "n" | "no" | "0" | "false" | "off" => Ok(false),
        _ => Err(Error::invalid_param(format!("{v:?} is not a boolean (y/n)"))),
    }
}

/// Parse a duration: a number with an optional unit (`us`, `ms`, `s`, `m`,
/// `h`; seconds when none), or `inf` for none.
pub fn parse_duration(v: &str) -> Result<Option<Duration>> {
    let s = v.trim().to_ascii_lowercase();
    if s == "inf" || s == "infinity" {
        return Ok(None);
    }
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| Error::invalid_param(format!("{v:?} is not a duration (e.g. 500ms, 2s, inf)")))?;
    let scale = match unit.trim() {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "us" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        u => return Err(Error::invalid_param(format!("{v:?}: unknown duration unit {u:?} (us, ms, s, m, h)"))),
    };
    let secs = n * scale;
    if secs.is_nan() || secs < 0.0 {
        return Err(Error::invalid_param(format!("{v:?} is not a non-negative duration")));
    }
    // Longer than a Duration holds (centuries): as long as it holds, like `inf` in effect.
    Ok(Some(Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)))
}

/// Parse a size with an optional binary unit: `4k` = 4096, `1M`, `2G`, `inf` = `u64::MAX`.
pub fn parse_size(v: &str) -> Result<u64> {
    let s = v.trim();
    if s.eq_ignore_ascii_case("inf") {
        return Ok(u64::MAX);
    }
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 =
        num.parse().map_err(|_| Error::invalid_param(format!("{v:?} is not a size (e.g. 4096, 4k, 1M, inf)")))?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" => 10,
        "m" | "mb" => 20,
        "g" | "gb" => 30,
        "t" | "tb" => 40,
        u => return Err(Error::invalid_param(format!("{v:?}: unknown size unit {u:?} (k, M, G, T)"))),
    };
    n.checked_mul(1u64 << shift).ok_or_else(|| Error::invalid_param(format!("size {v:?} overflows 64 bits")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2").unwrap(), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m").unwrap(), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("inf").unwrap(), None);
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("3 weeks").is_err());
        assert_eq!(parse_duration("100000000000000000000").unwrap(), Some(Duration::MAX));
        assert_eq!(parse_duration("99999999999999999999999h").unwrap(), Some(Duration::MAX));
        assert!(parse_duration("nan").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("inf").unwrap(), u64::MAX);
        assert!(parse_size("12q").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn overrides_and_errors_name_the_variable() {
        let mut c = Config::new();
        c.set("TL_P2P_ALLREDUCE_KN_RADIX", "x4");
        let e = c.parse_or::<u32>("TL_P2P_ALLREDUCE_KN_RADIX", 4).unwrap_err().to_string();
        assert!(e.contains("UCC_TL_P2P_ALLREDUCE_KN_RADIX") && e.contains("x4"), "{e}");
        c.set("UCC_COLL_TIMEOUT", "0ms");
        let e = c.positive_duration_or("COLL_TIMEOUT", None).unwrap_err().to_string();
        assert!(e.contains("UCC_COLL_TIMEOUT=\"0ms\" is not a positive duration"), "{e}");
        c.set("UCC_COLL_TRACE", "info");
        assert_eq!(c.get("COLL_TRACE"), Some("info"));
        assert_eq!(c.parse_or::<u32>("UNSET", 7).unwrap(), 7);
    }
}

/// Never-panic properties of the parsers of environment values (outside input).
#[cfg(test)]
mod parser_props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn value_parsers_never_panic_and_keep_their_promises(
            any in "\\PC{0,24}",
            numberish in "[ +-]{0,2}[0-9]{0,25}(\\.[0-9]{0,4})?(e[+-]?[0-9]{1,3})?[ a-zA-Z]{0,4}",
        ) {
            for v in [any.as_str(), numberish.as_str()] {
                if let Ok(b) = parse_bool(v) {
                    prop_assert_eq!(parse_bool(&v.to_ascii_uppercase()).ok(), Some(b));
                }
                // A duration is never negative (Duration cannot be) and parses alike twice.
                prop_assert_eq!(parse_duration(v).ok(), parse_duration(v).ok());
                if let Ok(n) = parse_size(v) {
                    // Only "inf" means u64::MAX without overflow checks.
                    prop_assert!(n < u64::MAX || v.trim().eq_ignore_ascii_case("inf") || v.trim().starts_with(|c: char| c.is_ascii_digit()));
                }
            }
        }

        #[test]
        fn sizes_with_units_are_exact_or_refused(n in any::<u64>(), unit in 0usize..5) {
            let (suffix, shift) = [("", 0u32), ("k", 10), ("M", 20), ("G", 30), ("T", 40)][unit];
            let r = parse_size(&format!("{n}{suffix}"));
            match n.checked_mul(1u64 << shift) {
                Some(v) => prop_assert_eq!(r.ok(), Some(v)),
                None => prop_assert!(r.is_err()),
            }
        }
    }
}
