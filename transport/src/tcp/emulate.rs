//! Link emulation, **for testing and benchmarking only**: on one machine,
//! make TCP messages between emulated hosts (and between emulated switch
//! groups) arrive as if over a slower network, so hierarchical algorithms
//! can be developed and measured without a cluster.
//!
//! `FERROCOLL_EMULATE_LINK=host:5us:10GB/s,switch:20us:2GB/s` — a
//! comma-separated list of `level:latency[:bandwidth]`:
//! - `level` is `host` (peers on other hosts under the same switch) or
//!   `switch` (peers under another switch; without a `switch` entry they
//!   get the `host` figures). Peers on this host get nothing added.
//! - `latency`: a number and `ns`, `us`, `ms` or `s` (`0us` is allowed).
//! - `bandwidth` (optional: no cap): a number and `B/s`, `KB/s`, `MB/s`,
//!   `GB/s` (powers of 1000) or `KiB/s`, `MiB/s`, `GiB/s`.
//!
//! Hosts and switch groups are those of the topology (`FERROCOLL_HOST_ID`,
//! `FERROCOLL_SWITCH_ID`, ... — `ferrocoll-run --emulate-hosts K
//! --emulate-switches J` sets them).
//!
//! The model lives on the **receiving** side, per peer: a message that has
//! arrived is held back until `max(arrival, link free) + len / bandwidth +
//! latency`, and the link is busy until `... + len / bandwidth`. Messages
//! of one peer stay in order. It adds to the real cost of the loopback
//! transfer, so the emulated link is a little slower than its figures
//! (never faster); a peer that has left has its held messages released at
//! once, so departures are not reported early. The sender is not slowed:
//! its send completes as without emulation.
//!
//! Limit: the bandwidth is per pair of ranks (each connection has its own
//! pacer), not per host: ranks of one emulated host that all talk to
//! another host at once each get the full figure, where a real NIC would
//! be shared. Emulation thus understates the contention that hierarchical
//! algorithms avoid; a per-host model would need a pacer shared by the
//! host's processes (in shared memory).

use std::time::{Duration, Instant};

use ferrocoll_core::{Error, ProcInfo, Result};

/// The variable that turns link emulation on.
pub const EMULATE_LINK_VAR: &str = "FERROCOLL_EMULATE_LINK";

/// One emulated link: latency added per message and an optional bandwidth cap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkModel {
    /// Added to every message.
    pub latency: Duration,
    /// Bytes per second; `None`: no cap.
    pub bandwidth: Option<f64>,
}

/// The figures of each level; both `None`: emulation off.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkEmulation {
    /// Between hosts under one switch.
    pub host: Option<LinkModel>,
    /// Between switch groups.
    pub switch: Option<LinkModel>,
}

impl LinkEmulation {
    /// From [`EMULATE_LINK_VAR`] (unset or blank: off).
    pub fn from_env() -> Result<LinkEmulation> {
        match std::env::var(EMULATE_LINK_VAR) {
            Ok(v) if !v.trim().is_empty() => LinkEmulation::parse(&v),
            _ => Ok(LinkEmulation::default()),
        }
    }

    /// Parse a specification (see the module documentation); an error names the bad token.
    pub fn parse(spec: &str) -> Result<LinkEmulation> {
        let mut out = LinkEmulation::default();
        for token in spec.split(',').map(str::trim) {
            let bad = |why: &str| {
                Error::invalid_param(format!(
                    "{EMULATE_LINK_VAR}={spec:?}: {token:?} {why} (expected e.g. host:5us:10GB/s,switch:20us:2GB/s)"
                ))
            };
            let mut parts = token.split(':');
            let level = parts.next().unwrap_or("");
            let latency = parts.next().ok_or_else(|| bad("has no latency"))?;
            let bandwidth = parts.next();
            if parts.next().is_some() {
                return Err(bad("has more than level:latency:bandwidth"));
            }
            let model = LinkModel {
                latency: parse_latency(latency)
                    .ok_or_else(|| bad("has a bad latency (a number and ns, us, ms or s)"))?,
                bandwidth: match bandwidth {
                    None => None,
                    Some(b) => Some(parse_bandwidth(b).ok_or_else(|| {
                        bad("has a bad bandwidth (a positive number and B/s, KB/s, MB/s, GB/s, KiB/s, MiB/s or GiB/s)")
                    })?),
                },
            };
            let slot = match level {
                "host" => &mut out.host,
                "switch" => &mut out.switch,
                _ => return Err(bad("does not start with host or switch")),
            };
            if slot.replace(model).is_some() {
                return Err(bad("repeats its level"));
            }
        }
        Ok(out)
    }

    /// The link between `me` and `peer`, if one is emulated.
    pub fn between(&self, me: &ProcInfo, peer: &ProcInfo) -> Option<LinkModel> {
        if me.same_host(peer) && me.same_switch(peer) {
            None
        } else if !me.same_switch(peer) {
            self.switch.or(self.host)
        } else {
            self.host
        }
    }
}

/// Split `s` into its number and its unit (the first character that is
/// not part of a decimal number starts the unit).
fn number_unit(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let at = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let x: f64 = s[..at].parse().ok()?;
    x.is_finite().then_some((x, &s[at..]))
}

fn parse_latency(s: &str) -> Option<Duration> {
    let (x, unit) = number_unit(s)?;
    let scale = match unit {
        "ns" => 1e-9,
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => return None,
    };
    // An hour is more than any test or benchmark means; beyond it is a typo.
    Duration::try_from_secs_f64(x * scale).ok().filter(|d| *d <= Duration::from_secs(3600))
}

fn parse_bandwidth(s: &str) -> Option<f64> {
    let (x, unit) = number_unit(s)?;
    let scale = match unit {
        "B/s" => 1.0,
        "KB/s" => 1e3,
        "MB/s" => 1e6,
        "GB/s" => 1e9,
        "KiB/s" => 1024.0,
        "MiB/s" => 1024.0 * 1024.0,
        "GiB/s" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    // At least a byte per second: below that a message's hold time overflows any clock.
    Some(x * scale).filter(|b| b.is_finite() && *b >= 1.0)
}

/// One peer's emulated link: when each message it sent may be received.
#[derive(Debug)]
pub(super) struct Pacer {
    model: LinkModel,
    /// The end of the last message's transmission on the emulated link.
    free_at: Option<Instant>,
}

impl Pacer {
    pub(super) fn new(model: LinkModel) -> Pacer {
        Pacer { model, free_at: None }
    }

    /// A message of `len` bytes arrived at `now`: when it may be received.
    pub(super) fn admit(&mut self, now: Instant, len: usize) -> Instant {
        let start = self.free_at.map_or(now, |f| f.max(now));
        let transmit = match self.model.bandwidth {
            Some(b) => Duration::try_from_secs_f64(len as f64 / b).unwrap_or(Duration::MAX),
            None => Duration::ZERO,
        };
        let done = start.checked_add(transmit).unwrap_or(start);
        self.free_at = Some(done);
        done.checked_add(self.model.latency).unwrap_or(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_syntax() {
        let e = LinkEmulation::parse("host:5us:10GB/s, switch:20us:2GiB/s").unwrap();
        assert_eq!(e.host, Some(LinkModel { latency: Duration::from_micros(5), bandwidth: Some(10e9) }));
        assert_eq!(e.switch.unwrap().bandwidth, Some(2.0 * 1024.0 * 1024.0 * 1024.0));
        let e = LinkEmulation::parse("host:1.5ms").unwrap();
        assert_eq!(e.host, Some(LinkModel { latency: Duration::from_micros(1500), bandwidth: None }));
        assert_eq!(e.switch, None);
    }

    #[test]
    fn bad_tokens_are_named() {
        for (spec, token) in [
            ("host:5us,rack:1us", "rack:1us"),
            ("host", "host"),
            ("host:5", "host:5"),
            ("host:5us:10Gb/s", "host:5us:10Gb/s"),
            ("host:5us:0GB/s", "host:5us:0GB/s"),
            ("host:-5us", "host:-5us"),
            ("host:5us:1GB/s:x", "host:5us:1GB/s:x"),
            ("host:1us,host:2us", "host:2us"),
            ("host:2h", "host:2h"),
            ("host:99999s", "host:99999s"),
            ("host:1us,", "\"\""),
        ] {
            let e = LinkEmulation::parse(spec).unwrap_err().to_string();
            assert!(e.contains(&format!("{token:?}")) || e.contains(token), "{spec}: {e}");
            assert!(e.contains(EMULATE_LINK_VAR), "{e}");
        }
    }

    #[test]
    fn which_link_a_pair_uses() {
        let p = |host: &str, switch: &str| ProcInfo { host: host.into(), pid: 1, switch: switch.into(), numa: None };
        let host = LinkModel { latency: Duration::from_micros(5), bandwidth: None };
        let switch = LinkModel { latency: Duration::from_micros(20), bandwidth: None };
        let both = LinkEmulation { host: Some(host), switch: Some(switch) };
        assert_eq!(both.between(&p("a", "s0"), &p("a", "s0")), None);
        assert_eq!(both.between(&p("a", "s0"), &p("b", "s0")), Some(host));
        assert_eq!(both.between(&p("a", "s0"), &p("b", "s1")), Some(switch));
        let hosts_only = LinkEmulation { host: Some(host), switch: None };
        assert_eq!(hosts_only.between(&p("a", "s0"), &p("b", "s1")), Some(host));
        assert_eq!(LinkEmulation::default().between(&p("a", "s0"), &p("b", "s1")), None);
    }

    #[test]
    fn the_pacer_holds_back_and_serialises() {
        let mut pacer = Pacer::new(LinkModel { latency: Duration::from_millis(1), bandwidth: Some(1e6) });
        let t0 = Instant::now();
        // 1000 bytes at 1 MB/s take 1 ms, then 1 ms of latency.
        assert_eq!(pacer.admit(t0, 1000), t0 + Duration::from_millis(2));
        // A second message arriving at once waits for the link: 2 ms on the wire.
        assert_eq!(pacer.admit(t0, 1000), t0 + Duration::from_millis(3));
        // One arriving after the link is free starts at its arrival.
        let later = t0 + Duration::from_secs(1);
        assert_eq!(pacer.admit(later, 0), later + Duration::from_millis(1));
        let mut slow = Pacer::new(LinkModel { latency: Duration::ZERO, bandwidth: Some(1.0) });
        let _ = slow.admit(t0, usize::MAX); // no overflow panic
    }

    proptest::proptest! {
        #[test]
        fn parsing_never_panics(spec in ".{0,40}") {
            let _ = LinkEmulation::parse(&spec);
        }
    }
}
