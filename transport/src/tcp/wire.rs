//! The bytes on the wire: the address blob exchanged through the OOB, the
//! handshake that opens a connection, and the header of every frame.
//! Everything is little-endian; everything read is length-checked and
//! validated, so that a corrupt or foreign byte stream is an error, never a panic.
//!
//! ```text
//! address   [family u8: 4|6][ip 4|16][port u16][job hash u64]
//! hello     [magic u64 "FCOLTCP\0"][version u16][job hash u64][from ep u32][to ep u32]
//! frame     [magic u16][kind u8][0 u8][src u32][tag u32][team u64][seq u64][len u64]
//!           [signature word u64][signature size u64] + len bytes
//! ```
//!
//! A data frame carries its sender's call signature, which the receive
//! checks before it copies anything (a goodbye's is zero). A goodbye may
//! name the endpoint whose failure made its sender leave (`src`, with `tag`
//! 1: see `crate::cause`).

use std::hash::BuildHasher;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ferrocoll_core::args::Signature;
use ferrocoll_core::wire::Reader;
use ferrocoll_core::{Error, Result};

use crate::fxhash::FxBuildHasher;
use crate::p2p::MsgKey;

/// Protocol version; peers of another version are refused at the handshake
/// (2: frames carry the sender's call signature).
pub(super) const VERSION: u16 = 2;
const HELLO_MAGIC: u64 = u64::from_le_bytes(*b"FCOLTCP\0");
/// Bytes of a handshake.
pub(super) const HELLO_LEN: usize = 8 + 2 + 8 + 4 + 4;

const FRAME_MAGIC: u16 = 0xFC0C;
/// Bytes of a frame header.
pub(super) const HEADER_LEN: usize = 2 + 1 + 1 + 4 + 4 + 8 + 8 + 8 + 16;
const DATA: u8 = 1;
const GOODBYE: u8 = 2;

/// A stable hash of the job's name, so that connections of another job are told apart.
pub(super) fn job_hash(job: &str) -> u64 {
    FxBuildHasher.hash_one(job)
}

/// The address blob of an endpoint.
pub(super) fn encode_addr(addr: SocketAddr, job: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + 16 + 2 + 8);
    match addr.ip() {
        IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&addr.port().to_le_bytes());
    out.extend_from_slice(&job.to_le_bytes());
    out
}

/// Read what [`encode_addr`] wrote: the address and the job hash.
pub(super) fn decode_addr(blob: &[u8]) -> Result<(SocketAddr, u64)> {
    let mut r = Reader::new(blob);
    let ip = match r.u8()? {
        4 => {
            let mut o = [0u8; 4];
            o.copy_from_slice(r.bytes(4)?);
            IpAddr::V4(Ipv4Addr::from(o))
        }
        6 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(r.bytes(16)?);
            IpAddr::V6(Ipv6Addr::from(o))
        }
        f => return Err(Error::io(format!("address family {f} is neither 4 nor 6"))),
    };
    let port = r.u16()?;
    let job = r.u64()?;
    r.finish()?;
    Ok((SocketAddr::new(ip, port), job))
}

/// The first bytes each side of a new connection sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hello {
    pub version: u16,
    pub job: u64,
    /// The sender's endpoint.
    pub from: u32,
    /// The endpoint the sender means to reach.
    pub to: u32,
}

impl Hello {
    pub(super) fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..8].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
        b[8..10].copy_from_slice(&self.version.to_le_bytes());
        b[10..18].copy_from_slice(&self.job.to_le_bytes());
        b[18..22].copy_from_slice(&self.from.to_le_bytes());
        b[22..26].copy_from_slice(&self.to.to_le_bytes());
        b
    }

    /// Parse a handshake; the caller checks version, job and endpoints (to say which was wrong).
    pub(super) fn decode(b: &[u8]) -> Result<Hello> {
        let mut r = Reader::new(b);
        let magic = r.u64()?;
        if magic != HELLO_MAGIC {
            return Err(Error::io(format!("handshake starts with {magic:#018x}, not a ferrocoll TCP magic")));
        }
        let h = Hello { version: r.u16()?, job: r.u64()?, from: r.u32()?, to: r.u32()? };
        r.finish()?;
        Ok(h)
    }
}

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A message: `len` payload bytes follow.
    Data,
    /// The sender closes its transport cleanly; nothing follows.
    Goodbye,
}

/// A frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Header {
    pub kind: Kind,
    pub key: MsgKey,
    /// The sender's call.
    pub sig: Signature,
    /// Payload bytes.
    pub len: u64,
}

impl Header {
    pub(super) fn data(key: MsgKey, sig: Signature, len: usize) -> Header {
        Header { kind: Kind::Data, key, sig, len: len as u64 }
    }

    /// A goodbye; `cause` is the endpoint whose failure made this one leave,
    /// if it knows of one (in `src`, with `tag` 1; see `crate::cause`).
    pub(super) fn goodbye(cause: Option<u32>) -> Header {
        let key = MsgKey { team: 0, seq: 0, tag: u32::from(cause.is_some()), src: cause.unwrap_or(0) };
        Header { kind: Kind::Goodbye, key, sig: Signature { word: 0, size: 0 }, len: 0 }
    }

    /// The cause a goodbye names, if it names one.
    pub(super) fn cause(&self) -> Option<u32> {
        (self.kind == Kind::Goodbye && self.key.tag == 1).then_some(self.key.src)
    }

    pub(super) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..2].copy_from_slice(&FRAME_MAGIC.to_le_bytes());
        b[2] = match self.kind {
            Kind::Data => DATA,
            Kind::Goodbye => GOODBYE,
        };
        b[4..8].copy_from_slice(&self.key.src.to_le_bytes());
        b[8..12].copy_from_slice(&self.key.tag.to_le_bytes());
        b[12..20].copy_from_slice(&self.key.team.to_le_bytes());
        b[20..28].copy_from_slice(&self.key.seq.to_le_bytes());
        b[28..36].copy_from_slice(&self.len.to_le_bytes());
        b[36..44].copy_from_slice(&self.sig.word.to_le_bytes());
        b[44..52].copy_from_slice(&self.sig.size.to_le_bytes());
        b
    }

    /// Parse and validate a header (magic, kind, reserved byte, an empty goodbye).
    pub(super) fn decode(b: &[u8]) -> Result<Header> {
        let mut r = Reader::new(b);
        let magic = r.u16()?;
        if magic != FRAME_MAGIC {
            return Err(Error::io(format!("frame starts with {magic:#06x}, not {FRAME_MAGIC:#06x}")));
        }
        let kind = match r.u8()? {
            DATA => Kind::Data,
            GOODBYE => Kind::Goodbye,
            k => return Err(Error::io(format!("frame kind {k} is unknown"))),
        };
        let reserved = r.u8()?;
        if reserved != 0 {
            return Err(Error::io(format!("frame reserved byte is {reserved}, not 0")));
        }
        let (src, tag, team, seq, len) = (r.u32()?, r.u32()?, r.u64()?, r.u64()?, r.u64()?);
        let sig = Signature { word: r.u64()?, size: r.u64()? };
        r.finish()?;
        if kind == Kind::Goodbye && len != 0 {
            return Err(Error::io(format!("goodbye frame announces {len} payload bytes")));
        }
        if kind == Kind::Goodbye && tag > 1 {
            return Err(Error::io(format!("goodbye frame has cause flag {tag}, not 0 or 1")));
        }
        Ok(Header { kind, key: MsgKey { team, seq, tag, src }, sig, len })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn addresses_round_trip_and_bad_ones_fail() {
        for a in ["10.0.0.3:4711", "[fd00::3]:5000"] {
            let a: SocketAddr = a.parse().unwrap();
            assert_eq!(decode_addr(&encode_addr(a, 99)).unwrap(), (a, 99));
        }
        let good = encode_addr("1.2.3.4:5".parse().unwrap(), 1);
        assert!(decode_addr(&good[..good.len() - 1]).is_err());
        let mut bad = good.clone();
        bad[0] = 5;
        assert!(decode_addr(&bad).unwrap_err().to_string().contains("family 5"));
        assert_eq!(job_hash("job-a"), job_hash("job-a"));
        assert_ne!(job_hash("job-a"), job_hash("job-b"));
    }

    #[test]
    fn hello_round_trips_and_checks_magic() {
        let h = Hello { version: VERSION, job: 7, from: 1, to: 3 };
        assert_eq!(Hello::decode(&h.encode()).unwrap(), h);
        assert!(Hello::decode(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").is_err());
    }

    #[test]
    fn goodbye_round_trips_and_must_be_empty() {
        for cause in [None, Some(0), Some(7)] {
            let g = Header::goodbye(cause);
            assert_eq!(Header::decode(&g.encode()).unwrap().cause(), cause);
        }
        let mut flag = Header::goodbye(Some(3)).encode();
        flag[8] = 2;
        assert!(Header::decode(&flag).unwrap_err().to_string().contains("cause flag 2"));
        let g = Header::goodbye(None);
        assert_eq!(Header::decode(&g.encode()).unwrap(), g);
        assert_eq!(g.encode().len(), 52);
        let mut b = g.encode();
        b[28] = 1;
        assert!(Header::decode(&b).unwrap_err().to_string().contains("goodbye"));
    }

    proptest! {
        #[test]
        fn headers_round_trip(team: u64, seq: u64, tag: u32, src: u32, len: u64, word: u64, size: u64) {
            let h = Header { kind: Kind::Data, key: MsgKey { team, seq, tag, src }, sig: Signature { word, size }, len };
            let b = h.encode();
            prop_assert_eq!(Header::decode(&b).unwrap(), h);
            // Cut anywhere (a version-1 header is 36 bytes), it is an error, not a guess.
            for cut in [0, 36, HEADER_LEN - 1] {
                prop_assert!(Header::decode(&b[..cut]).is_err());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..96)) {
            let _ = Header::decode(&b);
            let _ = Hello::decode(&b);
            let _ = decode_addr(&b);
        }

        #[test]
        fn a_flipped_magic_or_kind_byte_is_rejected(i in 0usize..4, bit in 0u8..8) {
            let sig = Signature { word: 6, size: 7 };
            let mut b = Header::data(MsgKey { team: 1, seq: 2, tag: 3, src: 4 }, sig, 5).encode();
            b[i] ^= 1 << bit;
            prop_assert!(Header::decode(&b).is_err());
        }
    }
}
