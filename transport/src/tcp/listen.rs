//! Where this endpoint listens, and the address it tells its peers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs, UdpSocket};

use ferrocoll_core::{Error, Result};

use super::config::TcpConfig;

/// The launcher's variable naming the rank-0 host (as in torchrun and most MPI-less launchers).
pub(super) const MASTER_ADDR_VAR: &str = "MASTER_ADDR";

/// Bind a non-blocking listener as `cfg` says and return it with the
/// address to advertise (`master`: the value of `MASTER_ADDR`, if set).
/// Without `UCC_TL_P2P_TCP_ADDR` it listens on every interface, or on the
/// loopback interface alone when that is what it advertises.
pub(super) fn listen(cfg: &TcpConfig, master: Option<&str>) -> Result<(TcpListener, SocketAddr)> {
    let ip = advertised_ip(cfg.addr, master);
    // Unconfigured: every interface, unless peers are told a loopback address
    // (then nothing from outside this host could use a wider listener).
    let bind_ip = match cfg.addr {
        Some(addr) => addr,
        None if ip.is_loopback() => ip,
        None if ip.is_ipv4() => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        None => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let (lo, hi) = cfg.ports;
    let mut last = None;
    for port in lo..=hi {
        match TcpListener::bind((bind_ip, port)) {
            Ok(l) => {
                l.set_nonblocking(true).map_err(|e| Error::from(e).prefixed("tcp listener"))?;
                let port = l.local_addr().map_err(|e| Error::from(e).prefixed("tcp listener"))?.port();
                return Ok((l, SocketAddr::new(ip, port)));
            }
            Err(e) => last = Some(e),
        }
    }
    let what = if lo == hi { format!("port {lo}") } else { format!("any port of {lo}-{hi}") };
    let why = last.map_or_else(|| "no port to try".to_string(), |e| e.to_string());
    Err(Error::no_resource(format!(
        "cannot listen on {bind_ip} {what} (UCC_TL_P2P_TCP_ADDR / UCC_TL_P2P_TCP_PORT): {why}"
    )))
}

/// The IP peers should connect to: `addr` if configured; else the local
/// address that routes to `master` when it is set and not loopback; else 127.0.0.1.
pub(super) fn advertised_ip(addr: Option<IpAddr>, master: Option<&str>) -> IpAddr {
    if let Some(ip) = addr.filter(|ip| !ip.is_unspecified()) {
        return ip;
    }
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let Some(master) = master.map(str::trim).filter(|m| !m.is_empty()) else { return loopback };
    let Some(target) = resolve(master) else {
        ferrocoll_core::log_warn!("p2p tcp: {MASTER_ADDR_VAR}={master:?} does not resolve; advertising {loopback}");
        return loopback;
    };
    if target.is_loopback() {
        return target;
    }
    match route_to(target) {
        Some(ip) => ip,
        None => {
            ferrocoll_core::log_warn!(
                "p2p tcp: no local address routes to {MASTER_ADDR_VAR}={master:?} ({target}); advertising {loopback} \
                 (set UCC_TL_P2P_TCP_ADDR)"
            );
            loopback
        }
    }
}

fn resolve(host: &str) -> Option<IpAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(ip);
    }
    let addrs: Vec<SocketAddr> = (host, 0u16).to_socket_addrs().ok()?.collect();
    // Prefer IPv4, the family the default listener serves.
    addrs.iter().find(|a| a.is_ipv4()).or(addrs.first()).map(|a| a.ip())
}

/// The local address the kernel would send from to reach `target`: a UDP
/// socket's `connect` picks the route and sends nothing.
fn route_to(target: IpAddr) -> Option<IpAddr> {
    let any = match target {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let sock = UdpSocket::bind((any, 0)).ok()?;
    sock.connect((target, 9)).ok()?;
    Some(sock.local_addr().ok()?.ip()).filter(|ip| !ip.is_unspecified())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_address_follows_config_then_master_then_loopback() {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let set: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(advertised_ip(Some(set), Some("192.168.0.1")), set);
        assert_eq!(advertised_ip(None, None), lo);
        assert_eq!(advertised_ip(None, Some("127.0.0.1")), lo);
        assert_eq!(advertised_ip(None, Some("localhost")), lo);
        assert_eq!(advertised_ip(None, Some("::1")), IpAddr::V6(Ipv6Addr::LOCALHOST));
        // A routable master gives a local, non-loopback address when this host has a route.
        if let Some(ip) = route_to("192.0.2.1".parse().unwrap()) {
            assert_eq!(advertised_ip(None, Some("192.0.2.1")), ip);
            assert!(!ip.is_unspecified());
        } else {
            eprintln!("skipped the routed case: this host has no route to 192.0.2.1");
        }
    }

    #[test]
    fn listens_on_a_free_port_or_names_the_busy_one() {
        let cfg = TcpConfig { addr: Some("127.0.0.1".parse().unwrap()), ports: (0, 0), connect_timeout: None };
        let (l, adv) = listen(&cfg, None).unwrap();
        assert_eq!(adv, l.local_addr().unwrap());
        let busy = TcpConfig { ports: (adv.port(), adv.port()), ..cfg.clone() };
        let e = listen(&busy, None).unwrap_err().to_string();
        assert!(e.contains(&format!("port {}", adv.port())), "{e}");
        // A range skips the busy port.
        let range = TcpConfig { ports: (adv.port(), adv.port().saturating_add(20)), ..cfg };
        if let Ok((_, a)) = listen(&range, None) {
            assert_ne!(a.port(), adv.port());
        }
    }
}
