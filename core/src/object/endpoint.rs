//! What each endpoint tells the others when a context is created
//! ([`EndpointInfo`]): where it runs, the address of each of its TLs, and
//! the settings every member of a team must share with it — so that team
//! creation can use only the TLs every member has, and refuse members whose
//! settings would make them choose different algorithms for one collective
//! (which would hang, or mix data).
//!
//! Wire format (little endian; every length checked when read):
//! `[proc info (versioned: `topo/proc.rs`)] [n_tls u16] { [name_len u8][name][addr_len u32][addr] }
//!  [n_agreed u16] { [tl_len u8][tl][var_len u8][var][value_len u32][value] }`.

use crate::error::{Error, Result};
use crate::topo::ProcInfo;
use crate::wire::Reader;

/// One endpoint as every endpoint of the context's group knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EndpointInfo {
    /// Its host and process.
    pub proc: ProcInfo,
    /// Each of its TLs: name and address blob.
    pub tls: Vec<(String, Vec<u8>)>,
    /// Settings members must share: (TL, variable, value; empty when unset).
    pub agreed: Vec<(String, String, String)>,
}

fn put_str(out: &mut Vec<u8>, s: &str, what: &str) -> Result<()> {
    let len = u8::try_from(s.len()).map_err(|_| Error::invalid_param(format!("{what} {s:?} is over 255 bytes")))?;
    out.push(len);
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn put_blob(out: &mut Vec<u8>, b: &[u8], what: &str) -> Result<()> {
    let len = u32::try_from(b.len()).map_err(|_| Error::invalid_param(format!("{what} of {} bytes", b.len())))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(b);
    Ok(())
}

fn count(n: usize, what: &str) -> Result<[u8; 2]> {
    u16::try_from(n).map(u16::to_le_bytes).map_err(|_| Error::invalid_param(format!("{n} {what}")))
}

fn get_str(r: &mut Reader<'_>) -> Result<String> {
    let len = usize::from(r.u8()?);
    String::from_utf8(r.bytes(len)?.to_vec()).map_err(|_| Error::io("a name in an endpoint's address is not UTF-8"))
}

impl EndpointInfo {
    /// The bytes exchanged through the OOB.
    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.proc.encode(&mut out)?;
        out.extend_from_slice(&count(self.tls.len(), "TLs")?);
        for (name, addr) in &self.tls {
            put_str(&mut out, name, "TL name")?;
            put_blob(&mut out, addr, "TL address")?;
        }
        out.extend_from_slice(&count(self.agreed.len(), "settings")?);
        for (tl, var, value) in &self.agreed {
            put_str(&mut out, tl, "TL name")?;
            put_str(&mut out, var, "variable name")?;
            put_blob(&mut out, value.as_bytes(), "setting")?;
        }
        Ok(out)
    }

    /// Read what [`EndpointInfo::encode`] wrote (another process's bytes: checked).
    pub(crate) fn decode(b: &[u8]) -> Result<EndpointInfo> {
        let mut r = Reader::new(b);
        let proc = ProcInfo::decode(&mut r)?;
        let n = r.u16()?;
        let mut tls = Vec::with_capacity(usize::from(n));
        for _ in 0..n {
            let name = get_str(&mut r)?;
            let len = r.u32()? as usize;
            tls.push((name, r.bytes(len)?.to_vec()));
        }
        let n = r.u16()?;
        let mut agreed = Vec::with_capacity(usize::from(n));
        for _ in 0..n {
            let (tl, var) = (get_str(&mut r)?, get_str(&mut r)?);
            let len = r.u32()? as usize;
            let value = String::from_utf8(r.bytes(len)?.to_vec())
                .map_err(|_| Error::io(format!("the value of {var} in an endpoint's address is not UTF-8")))?;
            agreed.push((tl, var, value));
        }
        r.finish()?;
        Ok(EndpointInfo { proc, tls, agreed })
    }

    /// Whether it has TL `name`.
    pub(crate) fn has_tl(&self, name: &str) -> bool {
        self.tls.iter().any(|(n, _)| n == name)
    }

    /// Its address for TL `name` (empty when it does not have it).
    pub(crate) fn address(&self, name: &str) -> Vec<u8> {
        self.tls.iter().find(|(n, _)| n == name).map(|(_, a)| a.clone()).unwrap_or_default()
    }

    /// Its settings of TL `tl`.
    pub(crate) fn agreed_of<'a>(&'a self, tl: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.agreed.iter().filter(move |(t, ..)| t == tl).map(|(_, var, value)| (var.as_str(), value.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let e = EndpointInfo {
            proc: ProcInfo { host: "h:1".into(), pid: 7, switch: "s0".into(), numa: Some(0) },
            tls: vec![("p2p".into(), vec![1, 2, 3]), ("self".into(), vec![])],
            agreed: vec![("p2p".into(), "UCC_TL_P2P_TUNE".into(), "allreduce:@ring".into())],
        };
        let b = e.encode().unwrap();
        assert_eq!(EndpointInfo::decode(&b).unwrap(), e);
        for cut in 0..b.len() {
            assert!(EndpointInfo::decode(&b[..cut]).is_err(), "{cut} bytes of {}", b.len());
        }
        assert!(e.has_tl("self") && !e.has_tl("shm"));
        assert_eq!(e.agreed_of("p2p").collect::<Vec<_>>(), vec![("UCC_TL_P2P_TUNE", "allreduce:@ring")]);
    }

    proptest::proptest! {
        /// Another endpoint's bytes: decoding never panics, and any value round-trips.
        #[test]
        fn decoding_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = EndpointInfo::decode(&bytes);
        }

        #[test]
        fn any_endpoint_round_trips(
            pid in proptest::prelude::any::<u32>(),
            host in "[a-z0-9:]{0,20}",
            tls in proptest::collection::vec(("[a-z_]{1,8}", proptest::collection::vec(proptest::prelude::any::<u8>(), 0..16)), 0..4),
            agreed in proptest::collection::vec(("[a-z]{1,6}", "UCC_[A-Z_]{1,20}", ".{0,30}"), 0..4),
        ) {
            let e = EndpointInfo { proc: ProcInfo { host, pid, switch: String::new(), numa: None }, tls, agreed };
            proptest::prop_assert_eq!(EndpointInfo::decode(&e.encode().unwrap()).unwrap(), e);
        }
    }
}
