//! Where a context runs: the host and process of every endpoint, exchanged
//! at context creation (the start of topology awareness).

use crate::error::{Error, Result};
use crate::wire::Reader;

/// The environment variable that overrides the host identity, so that one
/// machine can emulate several hosts (ranks with different values talk as
/// if over a network).
pub const HOST_ID_VAR: &str = "FERROCOLL_HOST_ID";

/// The host and process of one endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProcInfo {
    /// Host identity: `FERROCOLL_HOST_ID`, else hostname and boot id.
    pub host: String,
    /// Process id.
    pub pid: u32,
}

impl ProcInfo {
    /// This process.
    pub fn local() -> ProcInfo {
        let host = std::env::var(HOST_ID_VAR).ok().filter(|h| !h.trim().is_empty()).unwrap_or_else(|| {
            let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
            let name = read("/proc/sys/kernel/hostname");
            // Hosts (containers, clones) may share a name; the boot id tells them apart.
            let boot = read("/proc/sys/kernel/random/boot_id");
            format!("{name}:{}", boot.get(..8).unwrap_or(&boot))
        });
        ProcInfo { host, pid: std::process::id() }
    }

    /// Whether `other` runs on the same host.
    pub fn same_host(&self, other: &ProcInfo) -> bool {
        self.host == other.host
    }

    /// Whether `other` is this very process.
    pub fn same_process(&self, other: &ProcInfo) -> bool {
        self.same_host(other) && self.pid == other.pid
    }

    /// `[pid u32][host len u16][host]`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.pid.to_le_bytes());
        let host = self.host.as_bytes();
        let len = host.len().min(u16::MAX as usize);
        out.extend_from_slice(&(len as u16).to_le_bytes());
        out.extend_from_slice(&host[..len]);
    }

    /// Read what [`ProcInfo::encode`] wrote.
    pub fn decode(r: &mut Reader<'_>) -> Result<ProcInfo> {
        let pid = r.u32()?;
        let len = usize::from(r.u16()?);
        let host = String::from_utf8(r.bytes(len)?.to_vec())
            .map_err(|_| Error::io("host identity in a peer's address is not UTF-8"))?;
        Ok(ProcInfo { host, pid })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let p = ProcInfo { host: "node7:abcd".into(), pid: 42 };
        let mut b = Vec::new();
        p.encode(&mut b);
        let mut r = Reader::new(&b);
        assert_eq!(ProcInfo::decode(&mut r).unwrap(), p);
        assert!(r.finish().is_ok());
        assert!(ProcInfo::decode(&mut Reader::new(&b[..5])).is_err());
        let me = ProcInfo::local();
        assert!(me.same_process(&me) && !me.host.is_empty());
    }
}
