//! [`TcpTransport`]: the [`Transport`] over one TCP connection per peer.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::task::Poll;
use std::time::Duration;

use ferrocoll_core::args::Signature;
use ferrocoll_core::config::Config;
use ferrocoll_core::{Error, MemRef, MemType, ProcInfo, Result};

use super::config::TcpConfig;
use super::connect::{self, Me, Wanted};
use super::emulate::LinkEmulation;
use super::listen::{MASTER_ADDR_VAR, listen};
use super::peer::Peer;
use super::pool::Pool;
use super::{sys, wire};
use crate::p2p::{MsgKey, SendHandle, Transport, TransportPeer};

/// One endpoint of the TCP transport; see the [module documentation](super).
pub struct TcpTransport {
    ep: usize,
    job: u64,
    /// The address peers connect to.
    advertised: SocketAddr,
    /// Until `connect` has run.
    listener: Mutex<Option<TcpListener>>,
    connect_timeout: Option<Duration>,
    /// Per endpoint of the group (`None`: not served here); set by `connect`.
    peers: OnceLock<Vec<Option<Arc<Peer>>>>,
    /// Set by `connect` when no peer is served here (all on this host): progress has nothing to do.
    no_peers: AtomicBool,
    closed: AtomicBool,
    /// `poll` array and the peer of each entry, reused by `progress`.
    polling: Mutex<(Vec<libc::pollfd>, Vec<usize>)>,
    /// Large receive buffers, given back after their message is copied out.
    pool: Arc<Pool>,
    /// The endpoint the goodbyes name as the failure this one leaves because of.
    cause: OnceLock<u32>,
    /// Emulated links (`FERROCOLL_EMULATE_LINK`; testing and benchmarking only).
    emulation: LinkEmulation,
    /// Where this endpoint runs (set by the router before `connect`), for the emulated links.
    me: OnceLock<ProcInfo>,
}

impl TcpTransport {
    /// A transport for endpoint `ep` of `n_eps` in job `job`: binds its
    /// listener now (see [`CONFIG_FIELDS`](super::CONFIG_FIELDS) for where).
    /// Link emulation is read from `FERROCOLL_EMULATE_LINK` (see `emulate.rs`).
    pub fn new(job: &str, ep: usize, n_eps: usize, config: &Config) -> Result<TcpTransport> {
        TcpTransport::with_emulation(job, ep, n_eps, config, LinkEmulation::from_env()?)
    }

    /// [`TcpTransport::new`] with the given link emulation.
    pub fn with_emulation(
        job: &str,
        ep: usize,
        n_eps: usize,
        config: &Config,
        emulation: LinkEmulation,
    ) -> Result<TcpTransport> {
        if n_eps > u32::MAX as usize {
            return Err(Error::not_supported(format!("{n_eps} endpoints do not fit the tcp handshake's 32 bits")));
        }
        let cfg = TcpConfig::from_config(config)?;
        let master = std::env::var(MASTER_ADDR_VAR).ok();
        let configured = cfg.addr.is_some() || cfg.ports != (0, 0);
        let (listener, advertised) = listen(&cfg, master.as_deref()).map_err(|e| {
            // Not asked for and not possible here: leave TCP out rather than fail the context.
            if configured { e } else { Error::not_supported(e.context()) }
        })?;
        ferrocoll_core::log_debug!("p2p tcp: endpoint {ep} listens at {advertised}");
        Ok(TcpTransport {
            ep,
            job: wire::job_hash(job),
            advertised,
            listener: Mutex::new(Some(listener)),
            connect_timeout: cfg.connect_timeout,
            peers: OnceLock::new(),
            no_peers: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            polling: Mutex::default(),
            pool: Arc::default(),
            cause: OnceLock::new(),
            emulation,
            me: OnceLock::new(),
        })
    }

    fn peer(&self, ep: usize) -> Result<&Arc<Peer>> {
        let peers = self.peers.get().ok_or_else(|| Error::internal("the tcp transport is not connected yet"))?;
        match peers.get(ep) {
            Some(Some(p)) => Ok(p),
            Some(None) => Err(Error::not_supported(format!("endpoint {ep} is not served by the tcp transport"))),
            None => Err(Error::internal(format!("endpoint {ep} is outside the group of {}", peers.len()))),
        }
    }

    fn check_open(&self) -> Result<()> {
        // Acquire: pairs with the AcqRel swap in close().
        if self.closed.load(Ordering::Acquire) {
            Err(Error::io(format!("the tcp transport of endpoint {} is closed", self.ep)))
        } else {
            Ok(())
        }
    }

    /// A peer that left cleanly often left because another one died: name
    /// the dead one too, so the error points at the cause.
    fn with_cause(&self, ep: usize, e: Error) -> Error {
        if self.failed(ep).is_some() {
            return e;
        }
        // An error path: read every socket once, so a death already on the wire is seen.
        let _ = self.progress();
        match self.connected_peers().find_map(|p| p.failed()) {
            Some(dead) => Error::io(format!("{}; meanwhile, {}", e.context(), dead.context())),
            None => e,
        }
    }

    /// Drop every connection without a goodbye, as a process that dies does.
    #[cfg(test)]
    pub(super) fn abort(&self) {
        self.closed.store(true, Ordering::Release);
        self.connected_peers().for_each(|p| p.abort());
    }

    fn connected_peers(&self) -> impl Iterator<Item = &Arc<Peer>> {
        self.peers.get().into_iter().flatten().flatten()
    }
}

fn host_only(m: &MemRef) -> Result<()> {
    if m.mem_type() == MemType::Host {
        Ok(())
    } else {
        Err(Error::not_supported(format!("the tcp transport moves host memory only, not {}", m.mem_type())))
    }
}

/// Copy a received message into the receive buffer, if its sender's call
/// agrees with `sig` and the sizes agree, and give its buffer back to `pool`.
/// (The sender is not told of a refusal: its send completed when the kernel
/// took the bytes.)
fn deliver(
    key: &MsgKey,
    sig: &Signature,
    (theirs, msg): (Signature, Vec<u8>),
    buf: MemRef,
    pool: &Pool,
) -> Poll<Result<()>> {
    let r = copy_out(key, sig, &theirs, &msg, buf);
    pool.give(msg);
    Poll::Ready(r)
}

fn copy_out(key: &MsgKey, sig: &Signature, theirs: &Signature, msg: &[u8], buf: MemRef) -> Result<()> {
    if !theirs.agrees(sig) {
        return Err(key.calls_differ(theirs, sig));
    }
    if msg.len() != buf.len() {
        return Err(key.size_mismatch(msg.len(), buf.len()));
    }
    // SAFETY: `buf` is the receiving task's buffer, host memory (checked by
    // the caller), valid and exclusively the task's while it polls; `msg` is
    // our own allocation of the same length (checked above).
    unsafe { buf.as_mut_slice() }.copy_from_slice(msg);
    Ok(())
}

impl Transport for TcpTransport {
    fn name(&self) -> &'static str {
        "tcp"
    }

    /// TCP reaches every endpoint; the router prefers in-process and shared memory when they reach.
    fn reaches(&self, _me: &ProcInfo, _peer: &ProcInfo) -> bool {
        true
    }

    fn address(&self) -> Vec<u8> {
        wire::encode_addr(self.advertised, self.job)
    }

    fn locate(&self, me: &ProcInfo) {
        let _ = self.me.set(me.clone());
    }

    fn connect(&self, n_eps: usize, peers: &[TransportPeer]) -> Result<()> {
        let listener = self
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| Error::internal("the tcp transport was connected twice, or after close"))?;
        let mut wanted = Vec::with_capacity(peers.len());
        let mut links = Vec::with_capacity(peers.len());
        for p in peers {
            let (addr, job) =
                wire::decode_addr(&p.addr).map_err(|e| e.prefixed(format!("tcp address of endpoint {}", p.ep)))?;
            if job != self.job {
                return Err(Error::invalid_param(format!(
                    "endpoint {}'s tcp address belongs to another job (hash {job:#x}, not {:#x})",
                    p.ep, self.job
                )));
            }
            if p.ep >= n_eps {
                return Err(Error::internal(format!("endpoint {} is outside the group of {n_eps}", p.ep)));
            }
            wanted.push(Wanted { ep: p.ep, addr });
            links.push(self.me.get().and_then(|me| self.emulation.between(me, &p.proc)));
        }
        let me = Me { ep: self.ep, job: self.job };
        let streams = connect::establish(&listener, me, &wanted, self.connect_timeout)?;
        drop(listener);
        let mut table: Vec<Option<Arc<Peer>>> = vec![None; n_eps];
        let mut streams: std::collections::BTreeMap<usize, _> = streams.into_iter().collect();
        for (w, link) in wanted.iter().zip(links) {
            if let Some(l) = link {
                ferrocoll_core::log_debug!("p2p tcp: emulating a link to endpoint {} ({l:?})", w.ep);
            }
            let stream = streams.remove(&w.ep);
            if w.ep != self.ep && stream.is_none() {
                return Err(Error::internal(format!("no connection to endpoint {}", w.ep)));
            }
            if let Some(slot) = table.get_mut(w.ep) {
                *slot = Some(Arc::new(Peer::new(w.ep, w.addr, stream, self.pool.clone(), link)));
            }
        }
        // Relaxed: read by this endpoint's progress after connect returned.
        self.no_peers.store(table.iter().all(Option::is_none), Ordering::Relaxed);
        self.peers.set(table).map_err(|_| Error::internal("the tcp transport was connected twice"))
    }

    fn send(&self, dst_ep: usize, key: MsgKey, sig: Signature, data: MemRef) -> Result<Box<dyn SendHandle>> {
        host_only(&data)?;
        self.check_open()?;
        self.peer(dst_ep)?.send(key, sig, data)
    }

    fn try_recv(&self, src_ep: usize, key: &MsgKey, sig: &Signature, buf: MemRef) -> Poll<Result<()>> {
        let peer = match host_only(&buf).and_then(|()| self.check_open()).and_then(|()| self.peer(src_ep)) {
            Ok(p) => p,
            Err(e) => return Poll::Ready(Err(e)),
        };
        if let Some(msg) = peer.take(key, false) {
            return deliver(key, sig, msg, buf, &self.pool);
        }
        peer.pump();
        // Read the peer's state before looking again: once it has left or died,
        // every message it sent before is filed.
        let gone = peer.gone();
        match (peer.take(key, gone.is_some()), gone) {
            (Some(msg), _) => deliver(key, sig, msg, buf, &self.pool),
            (None, None) => Poll::Pending,
            (None, Some(e)) => Poll::Ready(Err(self.with_cause(src_ep, e))),
        }
    }

    fn find_arrived(
        &self,
        from: Option<usize>,
        pick: &dyn Fn(&MsgKey, &Signature) -> bool,
    ) -> Option<(MsgKey, Signature)> {
        match from {
            Some(ep) => {
                let peer = self.peer(ep).ok()?;
                peer.pump();
                peer.find(pick)
            }
            None => self.peers.get()?.iter().flatten().find_map(|p| p.find(pick)),
        }
    }

    fn progress(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        // No TCP peer (every peer on this host): nothing to do, cheaply.
        if self.no_peers.load(Ordering::Relaxed) {
            return Ok(());
        }
        let Some(peers) = self.peers.get() else { return Ok(()) };
        // Another thread is progressing: it reads and writes every socket.
        let mut polling = match self.polling.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Ok(()),
        };
        let (fds, who) = &mut *polling;
        fds.clear();
        who.clear();
        for (ep, p) in peers.iter().enumerate() {
            if let Some(fd) = p.as_ref().and_then(|p| p.poll_fd()) {
                fds.push(fd);
                who.push(ep);
            }
        }
        if fds.is_empty() {
            return Ok(());
        }
        if let Err(e) = sys::poll_now(fds) {
            // Unexpected (EINTR, ENOMEM): serve every peer this time.
            ferrocoll_core::log_debug!("p2p tcp: poll failed ({e}); reading every connection");
            fds.iter_mut().for_each(|f| f.revents = f.events);
        }
        for (f, &ep) in fds.iter().zip(who.iter()) {
            let Some(Some(p)) = peers.get(ep) else { continue };
            if f.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                p.pump();
            }
            if f.revents & (libc::POLLOUT | libc::POLLHUP | libc::POLLERR) != 0 {
                p.flush();
            }
        }
        Ok(())
    }

    fn failed(&self, ep: usize) -> Option<Error> {
        self.peers.get()?.get(ep)?.as_ref()?.failed()
    }

    fn set_cause(&self, cause: usize) {
        if let Ok(c) = u32::try_from(cause) {
            let _ = self.cause.set(c);
        }
    }

    fn take_causes(&self) -> Vec<(usize, usize)> {
        if self.no_peers.load(Ordering::Relaxed) {
            return Vec::new();
        }
        self.connected_peers().filter_map(|p| Some((p.ep, p.take_cause()?))).collect()
    }

    fn close(&self) {
        // AcqRel: closes once; see check_open.
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.listener.lock().unwrap_or_else(|p| p.into_inner()).take();
        let cause = self.cause.get().copied();
        self.connected_peers().for_each(|p| p.close(cause));
    }
}

impl Drop for TcpTransport {
    /// A transport dropped without `close` still says goodbye.
    fn drop(&mut self) {
        self.close();
    }
}
