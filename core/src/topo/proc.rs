//! [`ProcInfo`]: the host, process, switch group and NUMA node of one
//! endpoint, and its wire form in the context's address exchange.
//!
//! Wire format (little endian), version 2:
//! `['T'][version u8][pid u32][host_len u16][host][switch_len u8][switch][numa u16]`,
//! `numa` = `0xFFFF` when unknown. Names are at most [`NAME_MAX`] bytes
//! both ways: a peer's record is untrusted, and a record of another
//! version (another build of ferrocoll) is refused by name rather than
//! misread.

use crate::error::{Error, Result};
use crate::wire::Reader;

use super::HOST_ID_VAR;

/// The version of the record [`ProcInfo::encode`] writes.
pub const WIRE_VERSION: u8 = 2;
const MAGIC: u8 = b'T';
const NUMA_UNKNOWN: u16 = u16::MAX;

/// The longest host or switch name accepted (bytes).
pub const NAME_MAX: usize = 255;

/// Where one endpoint runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProcInfo {
    /// Host identity: `FERROCOLL_HOST_ID`, else hostname and boot id.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Switch group (the leaf switch of its host); empty: the one default group.
    pub switch: String,
    /// NUMA node of the CPU the process ran on when the context was created, if known.
    pub numa: Option<u16>,
}

impl ProcInfo {
    /// This process's host and pid, in the default switch group, NUMA node
    /// unknown. Contexts use [`super::detect_with`], which reads the switch
    /// group's sources and may fail; this is for tests and tools that only
    /// need the host.
    pub fn local() -> ProcInfo {
        let host = std::env::var(HOST_ID_VAR).ok().filter(|h| !h.trim().is_empty()).unwrap_or_else(default_host);
        ProcInfo { host, pid: std::process::id(), switch: String::new(), numa: None }
    }

    /// Whether `other` runs on the same host.
    pub fn same_host(&self, other: &ProcInfo) -> bool {
        self.host == other.host
    }

    /// Whether `other` runs under the same leaf switch.
    pub fn same_switch(&self, other: &ProcInfo) -> bool {
        self.switch == other.switch
    }

    /// Whether `other` is this very process.
    pub fn same_process(&self, other: &ProcInfo) -> bool {
        self.same_host(other) && self.pid == other.pid
    }

    /// Append the wire record (see the module documentation); a name over
    /// [`NAME_MAX`] bytes is an error naming it.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<()> {
        let host = checked_name("host identity", &self.host)?;
        let switch = checked_name("switch group", &self.switch)?;
        out.extend_from_slice(&[MAGIC, WIRE_VERSION]);
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&(host.len() as u16).to_le_bytes());
        out.extend_from_slice(host);
        out.push(switch.len() as u8);
        out.extend_from_slice(switch);
        out.extend_from_slice(&self.numa.unwrap_or(NUMA_UNKNOWN).to_le_bytes());
        Ok(())
    }

    /// Read what [`ProcInfo::encode`] wrote (another process's bytes: checked).
    pub fn decode(r: &mut Reader<'_>) -> Result<ProcInfo> {
        let (magic, version) = (r.u8()?, r.u8()?);
        if magic != MAGIC || version != WIRE_VERSION {
            return Err(Error::io(format!(
                "an endpoint's topology record starts with {magic:#04x} {version}, not {MAGIC:#04x} {WIRE_VERSION}: \
                 do all ranks run the same build of ferrocoll?"
            )));
        }
        let pid = r.u32()?;
        let len = usize::from(r.u16()?);
        let host = read_name(r, len, "host identity")?;
        let len = usize::from(r.u8()?);
        let switch = read_name(r, len, "switch group")?;
        let numa = Some(r.u16()?).filter(|n| *n != NUMA_UNKNOWN);
        Ok(ProcInfo { host, pid, switch, numa })
    }
}

fn checked_name<'a>(what: &str, s: &'a str) -> Result<&'a [u8]> {
    if s.len() > NAME_MAX {
        return Err(Error::invalid_param(format!("{what} {s:?} is {} bytes, over the limit of {NAME_MAX}", s.len())));
    }
    Ok(s.as_bytes())
}

fn read_name(r: &mut Reader<'_>, len: usize, what: &str) -> Result<String> {
    if len > NAME_MAX {
        return Err(Error::io(format!("{what} in a peer's topology record is {len} bytes, over {NAME_MAX}")));
    }
    String::from_utf8(r.bytes(len)?.to_vec()).map_err(|_| Error::io(format!("{what} in a peer's address is not UTF-8")))
}

/// Hostname and boot id: hosts (containers, clones) may share a name; the boot id tells them apart.
fn default_host() -> String {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
    let name = read("/proc/sys/kernel/hostname");
    let boot = read("/proc/sys/kernel/random/boot_id");
    format!("{name}:{}", boot.get(..8).unwrap_or(&boot))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ProcInfo {
        ProcInfo { host: "node7:abcd".into(), pid: 42, switch: "s1".into(), numa: Some(1) }
    }

    #[test]
    fn round_trip_and_truncation() {
        for p in [sample(), ProcInfo { numa: None, switch: String::new(), ..sample() }] {
            let mut b = Vec::new();
            p.encode(&mut b).unwrap();
            let mut r = Reader::new(&b);
            assert_eq!(ProcInfo::decode(&mut r).unwrap(), p);
            assert!(r.finish().is_ok());
            for cut in 0..b.len() {
                assert!(ProcInfo::decode(&mut Reader::new(&b[..cut])).is_err(), "{cut}");
            }
        }
        let me = ProcInfo::local();
        assert!(me.same_process(&me) && !me.host.is_empty());
    }

    #[test]
    fn other_versions_and_long_names_are_refused() {
        let mut b = Vec::new();
        sample().encode(&mut b).unwrap();
        b[1] = 1;
        let e = ProcInfo::decode(&mut Reader::new(&b)).unwrap_err().to_string();
        assert!(e.contains("same build"), "{e}");
        let long = ProcInfo { switch: "x".repeat(NAME_MAX + 1), ..sample() };
        let e = long.encode(&mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("switch group") && e.contains("256 bytes"), "{e}");
        // A hostile peer's host length over the bound, with the bytes present.
        let mut b = vec![MAGIC, WIRE_VERSION, 0, 0, 0, 0];
        b.extend_from_slice(&1000u16.to_le_bytes());
        b.extend(std::iter::repeat_n(b'a', 1000));
        let e = ProcInfo::decode(&mut Reader::new(&b)).unwrap_err().to_string();
        assert!(e.contains("1000 bytes"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn decoding_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80)) {
            let _ = ProcInfo::decode(&mut Reader::new(&bytes));
        }
    }
}
