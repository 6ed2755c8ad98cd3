//! A port for the bootstrap store that no connection can take meanwhile.
//!
//! A port found free by binding port 0 lies in the kernel's ephemeral
//! range, from which every outgoing connection on the host takes its local
//! port too: between the check and rank 0's bind, a connection (another
//! job's ranks, or this machine's anything) may take it, and the bootstrap
//! fails with "address already in use" (seen in CI: `ferrocoll-run`'s
//! tests, whose jobs run side by side). A port below that range is taken
//! only by a process that binds it by number.

use std::io::Read;
use std::net::{Ipv4Addr, TcpListener};

/// The lowest port chosen: past the well-known and most registered ones.
const FLOOR: u16 = 10_000;

/// Ports tried before falling back to one from the ephemeral range.
const TRIES: u64 = 64;

/// The kernel's default ephemeral range, where its setting cannot be read.
const DEFAULT_EPHEMERAL: (u16, u16) = (32_768, 60_999);

/// The kernel's range of ephemeral ports (Linux's setting).
fn ephemeral_range() -> (u16, u16) {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut bounds = text.split_whitespace().map(str::parse::<u16>);
    match (bounds.next(), bounds.next()) {
        (Some(Ok(low)), Some(Ok(high))) if low <= high => (low, high),
        _ => DEFAULT_EPHEMERAL,
    }
}

/// A starting point that differs between the jobs of one host.
fn seed() -> u64 {
    let mut bytes = [0u8; 8];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    match random {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            nanos as u64 ^ u64::from(std::process::id()).rotate_left(32)
        }
    }
}

/// A TCP port free on 127.0.0.1 a moment ago, below the ephemeral range
/// when there is room there, else one the kernel picks.
pub(crate) fn free_port() -> std::io::Result<u16> {
    let (low, _) = ephemeral_range();
    let span = u64::from(low.saturating_sub(FLOOR));
    if span > 0 {
        let start = seed();
        for i in 0..TRIES {
            // In range: below `low`, which fits a u16.
            let port = FLOOR + (start.wrapping_add(i.wrapping_mul(7_919)) % span) as u16;
            if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_lies_below_the_ephemeral_range_and_can_be_bound() {
        let (low, high) = ephemeral_range();
        assert!(low <= high);
        let port = free_port().expect("a free port");
        if low > FLOOR {
            assert!((FLOOR..low).contains(&port), "{port} not in {FLOOR}..{low}");
        }
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("the port is free");
    }
}
