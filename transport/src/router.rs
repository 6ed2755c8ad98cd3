//! [`Router`]: one transport per peer, chosen by where the peer runs
//! (same process → in-process, same host → shared memory, else TCP), behind
//! the one [`Transport`] interface the algorithms use.

#![forbid(unsafe_code)]

use std::sync::OnceLock;
use std::task::Poll;

use ferrocoll_core::args::Signature;
use ferrocoll_core::wire::Reader;
use ferrocoll_core::{Error, MemRef, ProcInfo, Result};

use crate::p2p::{MsgKey, SendHandle, Transport, TransportPeer};

/// Several transports, and which one serves each endpoint.
pub struct Router {
    /// In order of preference.
    transports: Vec<Box<dyn Transport>>,
    /// Index into `transports` per endpoint (`None`: unreachable); set once by `connect`.
    route: OnceLock<Vec<Option<usize>>>,
}

impl Router {
    /// A router over `transports`, most preferred first.
    pub fn new(transports: Vec<Box<dyn Transport>>) -> Router {
        Router { transports, route: OnceLock::new() }
    }

    fn via(&self, ep: usize) -> Result<&dyn Transport> {
        let route = self.route.get().ok_or_else(|| Error::internal("the router is not connected yet"))?;
        match route.get(ep) {
            Some(Some(i)) => self.transports.get(*i).map(|t| t.as_ref()).ok_or_else(|| Error::internal("bad route")),
            Some(None) => Err(Error::not_supported(format!("no transport reaches endpoint {ep}"))),
            None => Err(Error::internal(format!("endpoint {ep} is outside the group of {}", route.len()))),
        }
    }

    /// Whether endpoint `ep` is reachable.
    pub fn reaches_ep(&self, ep: usize) -> bool {
        self.via(ep).is_ok()
    }

    /// The name of the transport serving `ep`.
    pub fn transport_of(&self, ep: usize) -> Option<&'static str> {
        self.via(ep).ok().map(|t| t.name())
    }

    /// `[n u8] then per transport: [name_len u8][name][len u32][address]`.
    pub fn address(&self) -> Vec<u8> {
        let mut out = vec![self.transports.len() as u8];
        for t in &self.transports {
            let (name, addr) = (t.name().as_bytes(), t.address());
            out.push(name.len() as u8);
            out.extend_from_slice(name);
            out.extend_from_slice(&(addr.len() as u32).to_le_bytes());
            out.extend_from_slice(&addr);
        }
        out
    }

    /// Route every endpoint (`peers[ep]` = its process and router address,
    /// empty if it has no p2p TL) and connect each transport to its share.
    pub fn connect(&self, me: &ProcInfo, peers: &[(ProcInfo, Vec<u8>)]) -> Result<()> {
        let n = peers.len();
        let mut route = vec![None; n];
        let mut shares: Vec<Vec<TransportPeer>> = vec![Vec::new(); self.transports.len()];
        for (ep, (proc, blob)) in peers.iter().enumerate() {
            if blob.is_empty() {
                continue;
            }
            let addrs = decode(blob).map_err(|e| e.prefixed(format!("p2p address of endpoint {ep}")))?;
            let choice = self.transports.iter().enumerate().find_map(|(i, t)| {
                let a = addrs.iter().find(|(name, _)| name == t.name())?;
                t.reaches(me, proc).then_some((i, a.1.clone()))
            });
            if let Some((i, addr)) = choice {
                route[ep] = Some(i);
                shares[i].push(TransportPeer { ep, proc: proc.clone(), addr });
            }
        }
        for (t, share) in self.transports.iter().zip(&shares) {
            t.connect(n, share).map_err(|e| e.prefixed(format!("{} transport", t.name())))?;
        }
        self.route.set(route).map_err(|_| Error::internal("the router was connected twice"))
    }

    /// See [`Transport::connected`].
    pub fn connected(&self) -> Result<()> {
        self.transports.iter().try_for_each(|t| t.connected())
    }

    /// Send through the transport serving `dst_ep` (see [`Transport::send`]).
    pub fn send(&self, dst_ep: usize, key: MsgKey, sig: Signature, data: MemRef) -> Result<Box<dyn SendHandle>> {
        self.via(dst_ep)?.send(dst_ep, key, sig, data)
    }

    /// Receive through the transport serving `src_ep` (see [`Transport::try_recv`]).
    pub fn try_recv(&self, src_ep: usize, key: &MsgKey, sig: &Signature, buf: MemRef) -> Poll<Result<()>> {
        match self.via(src_ep) {
            Ok(t) => t.try_recv(src_ep, key, sig, buf),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    /// Progress every transport.
    pub fn progress(&self) -> Result<()> {
        self.transports.iter().try_for_each(|t| t.progress())
    }

    /// Why `ep` can no longer communicate, if so.
    pub fn failed(&self, ep: usize) -> Option<Error> {
        match self.via(ep) {
            Ok(t) => t.failed(ep),
            Err(e) => Some(e),
        }
    }

    /// Close every transport.
    pub fn close(&self) {
        self.transports.iter().for_each(|t| t.close());
    }
}

fn decode(b: &[u8]) -> Result<Vec<(String, Vec<u8>)>> {
    let mut r = Reader::new(b);
    let n = r.u8()?;
    let mut out = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        let len = usize::from(r.u8()?);
        let name = String::from_utf8_lossy(r.bytes(len)?).into_owned();
        let alen = r.u32()? as usize;
        out.push((name, r.bytes(alen)?.to_vec()));
    }
    r.finish()?;
    Ok(out)
}
