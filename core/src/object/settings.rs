//! The core engine's typed settings, parsed once per context from its configuration.

use std::time::Duration;

use crate::config::Config;
use crate::engine::WatchdogConfig;
use crate::error::{Error, Result};
use crate::log::Level;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    /// `UCC_COLL_TRACE`: log selections at this level (info: rank 0, debug: all ranks).
    pub coll_trace: Option<Level>,
    /// `UCC_COLL_TIMEOUT`: default per-collective timeout.
    pub coll_timeout: Option<Duration>,
    /// `UCC_WATCHDOG_TIMEOUT`.
    pub watchdog: WatchdogConfig,
    /// `UCC_OOB_TIMEOUT`.
    pub oob_timeout: Option<Duration>,
    /// `UCC_TEAM_CREATE_TIMEOUT`.
    pub team_create_timeout: Option<Duration>,
    /// `UCC_SPIN_COUNT`: polls before a waiting rank yields its core (`None`: decide from the host).
    pub spin_count: Option<u32>,
}

impl Settings {
    pub(crate) fn from_config(c: &Config) -> Result<Settings> {
        let coll_trace = match c.get("COLL_TRACE") {
            None => None,
            Some(v) => Level::parse(v)
                .ok_or_else(|| Error::invalid_param(format!("UCC_COLL_TRACE={v:?} is not a level (n, info, debug)")))?,
        };
        Ok(Settings {
            coll_trace,
            coll_timeout: c.positive_duration_or("COLL_TIMEOUT", None)?,
            watchdog: WatchdogConfig {
                warn_after: c.positive_duration_or("WATCHDOG_TIMEOUT", Some(Duration::from_secs(30)))?,
            },
            oob_timeout: c.positive_duration_or("OOB_TIMEOUT", Some(Duration::from_secs(120)))?,
            team_create_timeout: c.positive_duration_or("TEAM_CREATE_TIMEOUT", Some(Duration::from_secs(120)))?,
            spin_count: match c.get("SPIN_COUNT") {
                None => None,
                Some(v) if v.eq_ignore_ascii_case("auto") => None,
                Some(_) => Some(c.parse_or("SPIN_COUNT", 0u32)?),
            },
        })
    }
}
