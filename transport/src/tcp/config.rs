//! The transport's configuration variables, parsed once at creation.

use std::net::IpAddr;
use std::time::Duration;

use ferrocoll_core::config::{Config, ConfigField};
use ferrocoll_core::{Error, Result};

const ADDR: ConfigField = ConfigField {
    name: "UCC_TL_P2P_TCP_ADDR",
    default: "",
    doc: "IP address (v4 or v6) of the interface the TCP transport listens on and advertises to peers. \
          Unset: listen on every interface and advertise the address that routes to MASTER_ADDR \
          (127.0.0.1 without MASTER_ADDR, or when it is a loopback address).",
};

const PORT: ConfigField = ConfigField {
    name: "UCC_TL_P2P_TCP_PORT",
    default: "0",
    doc: "Port the TCP transport listens on: 0 for any free port, a port, or a range lo-hi \
          (the first free one is used; give a range when several ranks share a host).",
};

const CONNECT_TIMEOUT: ConfigField = ConfigField {
    name: "UCC_TL_P2P_TCP_CONNECT_TIMEOUT",
    default: "30s",
    doc: "How long context creation waits for every TCP connection to its peers (retrying refused \
          connections) before failing with the endpoints not connected; inf to wait forever.",
};

/// Configuration variables of this transport.
pub const CONFIG_FIELDS: &[ConfigField] = &[ADDR, PORT, CONNECT_TIMEOUT];

/// The values of [`CONFIG_FIELDS`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct TcpConfig {
    /// Interface to listen on and advertise; `None`: every interface, advertised by route.
    pub addr: Option<IpAddr>,
    /// First and last port to try (both 0: any port).
    pub ports: (u16, u16),
    /// Deadline of `connect`; `None`: no deadline.
    pub connect_timeout: Option<Duration>,
}

impl TcpConfig {
    pub(super) fn from_config(config: &Config) -> Result<TcpConfig> {
        let addr = match config.get(ADDR.name) {
            None => None,
            Some(v) => Some(v.trim().parse::<IpAddr>().map_err(|_| {
                Error::invalid_param(format!("{}={v:?} is not an IP address (e.g. 10.0.0.3 or fd00::3)", ADDR.name))
            })?),
        };
        let ports = match config.get(PORT.name) {
            None => (0, 0),
            Some(v) => parse_ports(v).ok_or_else(|| {
                Error::invalid_param(format!(
                    "{}={v:?} is not a port or a port range lo-hi (e.g. 0, 5000, 5000-5063)",
                    PORT.name
                ))
            })?,
        };
        let connect_timeout = config.positive_duration_or(CONNECT_TIMEOUT.name, Some(Duration::from_secs(30)))?;
        Ok(TcpConfig { addr, ports, connect_timeout })
    }
}

fn parse_ports(v: &str) -> Option<(u16, u16)> {
    let (lo, hi) = match v.split_once('-') {
        Some((lo, hi)) => (lo.trim().parse().ok()?, hi.trim().parse().ok()?),
        None => {
            let p = v.trim().parse().ok()?;
            (p, p)
        }
    };
    (lo <= hi && (lo > 0 || hi == 0)).then_some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let d = TcpConfig::from_config(&Config::new()).unwrap();
        assert_eq!(d, TcpConfig { addr: None, ports: (0, 0), connect_timeout: Some(Duration::from_secs(30)) });
        let mut c = Config::new();
        c.set("TL_P2P_TCP_ADDR", "::1").set("TL_P2P_TCP_PORT", "5000-5007").set("TL_P2P_TCP_CONNECT_TIMEOUT", "inf");
        let t = TcpConfig::from_config(&c).unwrap();
        assert_eq!(t.addr, Some("::1".parse().unwrap()));
        assert_eq!((t.ports, t.connect_timeout), ((5000, 5007), None));
        c.set("TL_P2P_TCP_CONNECT_TIMEOUT", "100000000000000000000");
        assert_eq!(TcpConfig::from_config(&c).unwrap().connect_timeout, Some(Duration::MAX));
        assert_eq!(parse_ports("4711"), Some((4711, 4711)));
    }

    #[test]
    fn bad_values_name_the_variable_and_value() {
        for (var, val) in [
            ("TL_P2P_TCP_ADDR", "eth0"),
            ("TL_P2P_TCP_PORT", "70000"),
            ("TL_P2P_TCP_PORT", "9-3"),
            ("TL_P2P_TCP_PORT", "0-5"),
            ("TL_P2P_TCP_CONNECT_TIMEOUT", "soon"),
            ("TL_P2P_TCP_CONNECT_TIMEOUT", "0"),
        ] {
            let mut c = Config::new();
            c.set(var, val);
            let e = TcpConfig::from_config(&c).unwrap_err().to_string();
            assert!(e.contains(&format!("UCC_{var}")) && e.contains(val), "{e}");
        }
    }
}
