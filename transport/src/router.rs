//! [`Router`]: one transport per peer, chosen by where the peer runs
//! (same process → in-process, same host → shared memory, else TCP), behind
//! the one [`Transport`] interface the algorithms use.

#![forbid(unsafe_code)]

use std::sync::OnceLock;
use std::task::Poll;

use ferrocoll_core::args::Signature;
use ferrocoll_core::wire::Reader;
use ferrocoll_core::{Error, MemRef, ProcInfo, Result};

use crate::cause::{self, FailureMark};
use crate::p2p::{MsgKey, SendHandle, Transport, TransportPeer};

/// Several transports, and which one serves each endpoint.
pub struct Router {
    /// In order of preference.
    transports: Vec<Box<dyn Transport>>,
    /// Index into `transports` per endpoint (`None`: unreachable); set once by `connect`.
    route: OnceLock<Vec<Option<usize>>>,
    /// This endpoint, and what it knows of each endpoint's failure, seen or
    /// reported by a goodbye, whichever transport serves it (see `crate::cause`).
    book: OnceLock<(usize, Vec<FailureMark>)>,
}

impl Router {
    /// A router over `transports`, most preferred first.
    pub fn new(transports: Vec<Box<dyn Transport>>) -> Router {
        Router { transports, route: OnceLock::new(), book: OnceLock::new() }
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
    /// empty if it has no p2p TL; this one is `me`) and connect each
    /// transport to its share.
    pub fn connect(&self, me: usize, peers: &[(ProcInfo, Vec<u8>)]) -> Result<()> {
        let n = peers.len();
        let me_proc = &peers.get(me).ok_or_else(|| Error::internal(format!("endpoint {me} is not among {n}")))?.0;
        let mut route = vec![None; n];
        let mut shares: Vec<Vec<TransportPeer>> = vec![Vec::new(); self.transports.len()];
        for (ep, (proc, blob)) in peers.iter().enumerate() {
            if blob.is_empty() {
                continue;
            }
            let addrs = decode(blob).map_err(|e| e.prefixed(format!("p2p address of endpoint {ep}")))?;
            let choice = self.transports.iter().enumerate().find_map(|(i, t)| {
                let a = addrs.iter().find(|(name, _)| name == t.name())?;
                t.reaches(me_proc, proc).then_some((i, a.1.clone()))
            });
            if let Some((i, addr)) = choice {
                route[ep] = Some(i);
                shares[i].push(TransportPeer { ep, proc: proc.clone(), addr });
            }
        }
        for (t, share) in self.transports.iter().zip(&shares) {
            t.locate(me_proc);
            t.connect(n, share).map_err(|e| e.prefixed(format!("{} transport", t.name())))?;
        }
        let _ = self.book.set((me, (0..n).map(|_| FailureMark::default()).collect()));
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

    /// See [`Transport::stray`].
    pub fn stray(&self, src_ep: usize, key: &MsgKey, sig: &Signature) -> Option<(MsgKey, Signature)> {
        self.via(src_ep).ok()?.stray(src_ep, key, sig)
    }

    /// A message that has arrived from any endpoint, through any transport,
    /// that `pick` accepts (see [`Transport::find_arrived`]: rarely).
    pub fn find_arrived(&self, pick: &dyn Fn(&MsgKey, &Signature) -> bool) -> Option<(MsgKey, Signature)> {
        self.transports.iter().find_map(|t| t.find_arrived(None, pick))
    }

    /// Progress every transport.
    pub fn progress(&self) -> Result<()> {
        self.transports.iter().try_for_each(|t| t.progress())?;
        self.hear_causes();
        Ok(())
    }

    /// Record the failures that departing peers named in their goodbyes.
    fn hear_causes(&self) {
        let Some((me, book)) = self.book.get() else { return };
        for t in &self.transports {
            for (by, failed) in t.take_causes() {
                match book.get(failed) {
                    Some(mark) if cause::plausible(failed, by, *me, book.len()) => {
                        if mark.reported(by) {
                            ferrocoll_core::log_info!("p2p: endpoint {by} left because endpoint {failed} failed");
                        }
                    }
                    _ => ferrocoll_core::log_debug!("p2p: endpoint {by} left naming endpoint {failed}: ignored"),
                }
            }
        }
    }

    /// Why `ep` can no longer take part, if so: its transport saw it fail,
    /// or a peer that left said it had.
    pub fn failed(&self, ep: usize) -> Option<Error> {
        let t = match self.via(ep) {
            Ok(t) => t,
            Err(e) => return Some(e),
        };
        let mark = self.book.get().and_then(|(_, book)| book.get(ep));
        match t.failed(ep) {
            Some(e) => {
                // When this process learned of it, for the goodbye of `close`.
                mark.inspect(|m| m.saw());
                Some(e)
            }
            None => mark?.report(ep),
        }
    }

    /// Of `eps`, the endpoint whose failure this process learned of first
    /// (seen or reported: the order of `crate::cause`), as its index in
    /// `eps` and why it failed ([`Router::failed`]). Survivors name the
    /// failure that started it, not the lowest-ranked of its echoes.
    pub fn first_failed(&self, eps: &[usize]) -> Option<(usize, Error)> {
        let book = self.book.get().map(|(_, b)| b);
        let mut first: Option<(u64, usize, Error)> = None;
        for (i, &ep) in eps.iter().enumerate() {
            let Some(e) = self.failed(ep) else { continue };
            // Unordered (no mark: not routed) comes last.
            let order = book.and_then(|b| b.get(ep)).and_then(FailureMark::order).unwrap_or(u64::MAX);
            if first.as_ref().is_none_or(|(o, _, _)| order < *o) {
                first = Some((order, i, e));
            }
        }
        first.map(|(_, i, e)| (i, e))
    }

    /// Close every transport; their goodbyes name the failure this process
    /// learned of first, if any (see `crate::cause`).
    pub fn close(&self) {
        if let Some((_, book)) = self.book.get() {
            // A death on the wire but not yet read is the likeliest cause: look once more.
            self.transports.iter().for_each(|t| {
                let _ = t.progress();
            });
            (0..book.len()).for_each(|ep| {
                let _ = self.failed(ep);
            });
            if let Some(first) = cause::first_failed(book.iter().enumerate()) {
                self.transports.iter().for_each(|t| t.set_cause(first));
            }
        }
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use ferrocoll_core::config::Config;

    use super::*;
    use crate::tcp::TcpTransport;

    /// `n` routers over TCP alone, connected (each from its own thread).
    fn tcp_group(n: usize) -> Vec<Router> {
        let mut c = Config::new();
        c.set("TL_P2P_TCP_ADDR", "127.0.0.1");
        let job = format!("router-test-{}", std::process::id());
        let rs: Vec<Router> = (0..n)
            .map(|ep| Router::new(vec![Box::new(TcpTransport::new(&job, ep, n, &c).unwrap()) as Box<dyn Transport>]))
            .collect();
        let table: Vec<(ProcInfo, Vec<u8>)> = rs.iter().map(|r| (ProcInfo::local(), r.address())).collect();
        std::thread::scope(|s| {
            for (ep, r) in rs.iter().enumerate() {
                let table = &table;
                s.spawn(move || r.connect(ep, table).unwrap());
            }
        });
        rs
    }

    /// Progress `r` until `failed(ep)` says something (or fail the test after 30 s).
    fn failure_of(r: &Router, ep: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            r.progress().unwrap();
            if let Some(e) = r.failed(ep) {
                return e.to_string();
            }
            assert!(Instant::now() < deadline, "no failure of endpoint {ep} was ever reported");
        }
    }

    #[test]
    fn a_failure_named_in_a_goodbye_is_reported_and_passed_on() {
        let rs = tcp_group(4);
        // Endpoint 3 leaves because endpoint 1 failed (as if it had seen it die).
        rs[3].transports[0].set_cause(1);
        rs[3].close();
        let e = failure_of(&rs[0], 1);
        assert!(e.contains("endpoint 1 failed, as endpoint 3 reported"), "{e}");
        // Endpoint 0 leaves in turn: its goodbye names the failure it learned of first.
        rs[0].close();
        let e = failure_of(&rs[2], 1);
        assert!(e.contains("endpoint 1 failed, as endpoint 0 reported"), "{e}");
        // Endpoint 1 hears itself blamed, and ignores it; leaving is not failing.
        let deadline = Instant::now() + Duration::from_millis(300);
        while Instant::now() < deadline {
            rs[1].progress().unwrap();
        }
        assert!((0..4).all(|ep| rs[1].failed(ep).is_none()));
    }

    #[test]
    fn the_failure_learned_first_is_named_first_whatever_its_rank() {
        let rs = tcp_group(4);
        // Endpoint 0 learns that 2 failed, then that 1 did.
        rs[3].transports[0].set_cause(2);
        rs[3].close();
        failure_of(&rs[0], 2);
        rs[2].transports[0].set_cause(1);
        rs[2].close();
        failure_of(&rs[0], 1);
        let (i, e) = rs[0].first_failed(&[0, 1, 2, 3]).expect("failures are known");
        assert_eq!(i, 2, "{e}");
        assert!(e.to_string().contains("endpoint 2 failed"), "{e}");
        // Among a subset, its own first.
        assert_eq!(rs[0].first_failed(&[1, 3]).map(|f| f.0), Some(0));
        assert!(rs[0].first_failed(&[0, 3]).is_none());
    }
}

/// Never-panic property of the address decoder (bytes from peers).
#[cfg(test)]
mod decode_props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn addresses_never_panic_and_round_trip(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
            parts in proptest::collection::vec(("[a-z]{0,8}", proptest::collection::vec(any::<u8>(), 0..16)), 0..4),
        ) {
            let _ = decode(&bytes);
            let mut blob = vec![parts.len() as u8];
            for (name, addr) in &parts {
                blob.push(name.len() as u8);
                blob.extend_from_slice(name.as_bytes());
                blob.extend_from_slice(&(addr.len() as u32).to_le_bytes());
                blob.extend_from_slice(addr);
            }
            let back = decode(&blob).expect("a well-formed address");
            prop_assert_eq!(back, parts.clone());
            // Every truncation is refused, never read past.
            for cut in 0..blob.len() {
                prop_assert!(decode(&blob[..cut]).is_err());
            }
        }
    }
}
