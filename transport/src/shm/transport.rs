//! [`ShmTransport`]: the [`Transport`] over the segments, rings, slots and
//! queues of the sibling modules.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::task::Poll;

use ferrocoll_core::args::Signature;
use ferrocoll_core::config::Config;
use ferrocoll_core::{Error, MemRef, MemType, ProcInfo, Result};

use super::config::ShmConfig;
use super::health::{Health, ScanClock};
use super::peer::{Peer, lock};
use super::pool::BufPool;
use super::recv::{Inbound, RecvState, deliver};
use super::ring::{Consumer, Producer};
use super::segment::{OwnedSegment, open_peer};
use super::send::{FragSend, FragStream, Outbox, QueuedEager, RndvSend, Sent, Slots};
use super::wire::{self, Address, Kind, RECORD_HEADER, RNDV_DESC, Record, RndvDesc};
use crate::cma;
use crate::liveness::Proc;
use crate::p2p::{MsgKey, SendHandle, Transport, TransportPeer};
use crate::shmem;

/// Rendezvous sends one endpoint may have in flight (more are streamed).
const N_SLOTS: u32 = 4096;

/// State shared by the transport and its send handles.
pub(super) struct Shared {
    ep: usize,
    n_eps: usize,
    cfg: ShmConfig,
    seg: OwnedSegment,
    /// This endpoint's completion slots.
    pub slots: Slots,
    /// Buffers for eager messages.
    pub pool: BufPool,
    /// Per endpoint, set once by connect (`None`: not served by this transport).
    peers: OnceLock<Vec<Option<Arc<Peer>>>>,
    recv: Mutex<RecvState>,
    clock: ScanClock,
    /// Outboxes with something waiting (lets progress skip the others).
    nonempty: AtomicUsize,
    closed: AtomicBool,
    /// The endpoint this one names as it closes (see `crate::cause`).
    cause: OnceLock<usize>,
    /// Causes that departed peers named, not yet taken; `news` says there are some.
    causes: Mutex<Vec<(usize, usize)>>,
    news: AtomicBool,
}

impl Shared {
    fn peer(&self, ep: usize) -> Result<&Arc<Peer>> {
        let peers = self.peers.get().ok_or_else(|| Error::internal("the shm transport is not connected yet"))?;
        match peers.get(ep) {
            Some(Some(p)) => Ok(p),
            Some(None) => Err(Error::not_supported(format!("endpoint {ep} is not served by the shm transport"))),
            None => Err(Error::internal(format!("endpoint {ep} is outside the group of {}", peers.len()))),
        }
    }

    fn peers(&self) -> impl Iterator<Item = &Arc<Peer>> {
        self.peers.get().into_iter().flatten().flatten()
    }

    /// A failed write to `peer`'s ring: the ring is unusable from now on.
    fn broke(&self, peer: &Peer, ob: &mut Outbox, e: &Error) -> Error {
        let e = Error::io(format!("endpoint {}'s ring is corrupt: {}", peer.ep, e.context()));
        peer.health.set_broken(e.context().to_string());
        ob.abandon(&e, &self.pool);
        e
    }

    /// Push what waits for `peer`, or drop it if the peer is gone.
    pub fn flush_peer(&self, peer: &Peer) {
        let mut ob = lock(&peer.outbox);
        if ob.is_empty() {
            ob.sync(&self.nonempty);
            return;
        }
        if let Some(e) = peer.gone() {
            ob.abandon(&e, &self.pool);
        } else if let Err(e) = ob.flush(&self.pool) {
            self.broke(peer, &mut ob, &e);
        }
        ob.sync(&self.nonempty);
    }

    fn flush_all(&self) {
        // Relaxed: a hint; outboxes are read under their locks.
        if self.nonempty.load(Ordering::Relaxed) == 0 {
            return;
        }
        self.peers().for_each(|p| self.flush_peer(p));
    }

    /// Check peers' processes, at most every [`super::health::SCAN_INTERVAL`].
    pub fn maybe_scan(&self) {
        if self.clock.due() {
            for p in self.peers() {
                p.check();
                if !p.health.is_open() && !p.cause_taken.load(Ordering::Relaxed) {
                    if let Some(c) = p.cause() {
                        // Relaxed: scans are serialised by the clock; a duplicate would be harmless.
                        p.cause_taken.store(true, Ordering::Relaxed);
                        lock(&self.causes).push((p.ep, c));
                        // Release: a taker that sees the flag finds the cause in the list (under its lock anyway).
                        self.news.store(true, Ordering::Release);
                    }
                }
            }
        }
    }

    fn post(&self, peer: &Peer, parts: &[&[u8]]) -> Result<Option<Arc<AtomicBool>>> {
        let mut ob = lock(&peer.outbox);
        let r = ob.post(parts, &self.pool).map_err(|e| self.broke(peer, &mut ob, &e));
        ob.sync(&self.nonempty);
        r
    }

    fn post_stream(&self, peer: &Peer, s: Arc<Mutex<FragStream>>) -> Result<()> {
        let mut ob = lock(&peer.outbox);
        let r = ob.post_stream(s, &self.pool).map_err(|e| self.broke(peer, &mut ob, &e));
        ob.sync(&self.nonempty);
        r
    }

    fn closed(&self) -> Result<()> {
        // Relaxed: a flag checked on entry; close() does its own synchronisation.
        if self.closed.load(Ordering::Relaxed) {
            return Err(Error::io(format!("endpoint {}'s shared-memory transport is closed", self.ep)));
        }
        Ok(())
    }
}

/// The shared-memory transport of one endpoint (see the module documentation).
pub struct ShmTransport {
    shared: Arc<Shared>,
}

impl ShmTransport {
    /// A transport for endpoint `ep` of `n_eps` in job `job`: creates this
    /// endpoint's segment. `NotSupported` when shared memory cannot be used
    /// here (no `/dev/shm`, too little space) or is not needed (a group of one).
    pub fn new(job: &str, ep: usize, n_eps: usize, config: &Config) -> Result<ShmTransport> {
        let cfg = ShmConfig::from_config(config)?;
        if n_eps < 2 {
            return Err(Error::not_supported("a group of one endpoint has no peer in another process"));
        }
        if cfg.cma {
            cma::allow_readers();
        }
        // What processes killed during setup left (see `shmem::sweep_stale`).
        shmem::sweep_stale();
        let seg = OwnedSegment::create(job, ep, n_eps, cfg.ring, N_SLOTS)?;
        let slots = Slots::new(seg.map.clone(), seg.header.slots_off as usize, seg.header.n_slots);
        let shared = Shared {
            ep,
            n_eps,
            cfg,
            seg,
            slots,
            pool: BufPool::new(cfg.eager + RECORD_HEADER + 8),
            peers: OnceLock::new(),
            recv: Mutex::new(RecvState::default()),
            clock: ScanClock::default(),
            nonempty: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            cause: OnceLock::new(),
            causes: Mutex::default(),
            news: AtomicBool::new(false),
        };
        Ok(ShmTransport { shared: Arc::new(shared) })
    }

    /// The name of this endpoint's segment (with its leading `/`).
    pub fn segment_name(&self) -> &str {
        self.shared.seg.name()
    }

    fn connect_one(&self, p: &TransportPeer, n_eps: usize) -> Result<(Arc<Peer>, Inbound, Result<(), String>)> {
        let s = &self.shared;
        let addr = Address::parse(&p.addr)?;
        if addr.pid != p.proc.pid {
            return Err(Error::io(format!("address names pid {}, the endpoint runs as pid {}", addr.pid, p.proc.pid)));
        }
        let seg = open_peer(&addr.name, addr.pid, p.ep, n_eps, s.ep)?;
        let cma = if s.cfg.cma {
            cma::probe(addr.pid, addr.probe_addr, seg.header.probe)
        } else {
            Err("CMA is off (UCC_TL_P2P_SHM_CMA=n)".to_string())
        };
        let flag = if cma.is_ok() { wire::CMA_YES } else { wire::CMA_NO };
        // Release: pairs with the sender's Acquire in Peer::reads_us_by_cma.
        s.seg.map.u8_at(wire::H_CMA + p.ep)?.store(flag, Ordering::Release);
        let ring = Producer::new(seg.ring.clone(), 0, seg.header.ring_size as usize)?;
        let peer = Arc::new(Peer {
            ep: p.ep,
            proc: Proc::of(addr.pid),
            seg,
            outbox: Mutex::new(Outbox::new(ring)),
            health: Health::default(),
            cause_taken: AtomicBool::new(false),
        });
        let mine = Consumer::new(s.seg.map.clone(), s.seg.header.ring_off(p.ep)? as usize, s.cfg.ring as usize)?;
        Ok((peer.clone(), Inbound::new(mine, peer), cma))
    }
}

fn host_only(m: &MemRef) -> Result<()> {
    if m.mem_type() == MemType::Host {
        Ok(())
    } else {
        Err(Error::not_supported(format!("the shared-memory transport moves host memory only, not {}", m.mem_type())))
    }
}

impl Transport for ShmTransport {
    fn name(&self) -> &'static str {
        "shm"
    }

    fn reaches(&self, me: &ProcInfo, peer: &ProcInfo) -> bool {
        me.same_host(peer) && !me.same_process(peer)
    }

    fn address(&self) -> Vec<u8> {
        let seg = &self.shared.seg;
        Address { pid: std::process::id(), probe_addr: seg.probe_addr(), name: seg.name().to_string() }.encode()
    }

    /// Map every routed peer's segment, probe CMA from each, and publish the results in our header.
    fn connect(&self, n_eps: usize, peers: &[TransportPeer]) -> Result<()> {
        let s = &self.shared;
        if n_eps != s.n_eps {
            return Err(Error::internal(format!("connect for {n_eps} endpoints, created for {}", s.n_eps)));
        }
        let mut table: Vec<Option<Arc<Peer>>> = vec![None; n_eps];
        let mut inbound = Vec::with_capacity(peers.len());
        let (mut by_cma, mut refused) = (Vec::new(), Vec::new());
        for p in peers {
            let slot = table
                .get_mut(p.ep)
                .ok_or_else(|| Error::internal(format!("endpoint {} is outside the group of {n_eps}", p.ep)))?;
            if slot.is_some() {
                return Err(Error::internal(format!("endpoint {} is listed twice", p.ep)));
            }
            let (peer, inb, cma) = self.connect_one(p, n_eps).map_err(|e| e.prefixed(format!("endpoint {}", p.ep)))?;
            match cma {
                Ok(()) => by_cma.push(p.ep),
                Err(why) => refused.push(format!("endpoint {}: {why}", p.ep)),
            }
            *slot = Some(peer);
            inbound.push(inb);
        }
        s.peers.set(table).map_err(|_| Error::internal("the shm transport was connected twice"))?;
        *lock(&s.recv) = RecvState::new(inbound);
        if !by_cma.is_empty() {
            ferrocoll_core::log_debug!("shm: endpoint {} reads CMA single-copy from endpoints {by_cma:?}", s.ep);
        }
        for why in &refused {
            ferrocoll_core::log_debug!("shm: endpoint {} gets fragmented copies through the ring from {why}", s.ep);
        }
        Ok(())
    }

    /// Every peer has mapped our segment: remove its name. Log which path each peer gets.
    fn connected(&self) -> Result<()> {
        let s = &self.shared;
        s.seg.unlink()?;
        let (cma, frag): (Vec<&Arc<Peer>>, Vec<_>) = s.peers().partition(|p| s.cfg.cma && p.reads_us_by_cma(s.ep));
        let (cma, frag): (Vec<usize>, Vec<usize>) =
            (cma.iter().map(|p| p.ep).collect(), frag.iter().map(|p| p.ep).collect());
        if !cma.is_empty() {
            ferrocoll_core::log_debug!("shm: CMA single-copy to endpoints {cma:?}");
        }
        if !frag.is_empty() {
            let why = if s.cfg.cma { "the receivers cannot CMA-read this process" } else { "CMA is off" };
            ferrocoll_core::log_debug!("shm: fragmented copies through the ring to endpoints {frag:?}: {why}");
        }
        Ok(())
    }

    fn send(&self, dst_ep: usize, key: MsgKey, sig: Signature, data: MemRef) -> Result<Box<dyn SendHandle>> {
        host_only(&data)?;
        let s = &self.shared;
        s.closed()?;
        let peer = s.peer(dst_ep)?.clone();
        if let Some(e) = peer.gone() {
            return Err(e);
        }
        let len = data.len();
        // A quarter of the destination's ring: several records fit at once.
        let quarter = peer.seg.header.ring_size as usize / 4 - RECORD_HEADER;
        if len <= s.cfg.eager.min(quarter) {
            let rec = Record { kind: Kind::Eager, key, sig, chunk_len: len as u32, total_len: len as u64, offset: 0 };
            // SAFETY: the caller keeps `data` valid until the send completes, and
            // this call completes it: the bytes are copied right here.
            let bytes = unsafe { data.as_slice() };
            return Ok(match s.post(&peer, &[&rec.encode(), bytes])? {
                None => Box::new(Sent),
                Some(pushed) => Box::new(QueuedEager { shared: s.clone(), peer, pushed }),
            });
        }
        if s.cfg.cma && peer.reads_us_by_cma(s.ep) {
            if let Some((slot, generation)) = s.slots.alloc() {
                let desc = RndvDesc { pid: std::process::id(), slot, generation, addr: data.addr() as u64 };
                let rec = Record {
                    kind: Kind::RndvCma,
                    key,
                    sig,
                    chunk_len: RNDV_DESC as u32,
                    total_len: len as u64,
                    offset: 0,
                };
                // Made before posting: if posting fails, its drop retracts the slot.
                let handle = RndvSend { shared: s.clone(), peer: peer.clone(), slot, generation, key, outcome: None };
                s.post(&peer, &[&rec.encode(), &desc.encode()])?;
                return Ok(Box::new(handle));
            }
            ferrocoll_core::log_debug!("shm: all {N_SLOTS} completion slots are in use: streaming instead");
        }
        let stream = Arc::new(Mutex::new(FragStream::new(key, sig, data, quarter & !7)));
        let handle = FragSend { shared: s.clone(), peer: peer.clone(), stream: stream.clone() };
        s.post_stream(&peer, stream)?;
        Ok(Box::new(handle))
    }

    fn try_recv(&self, src_ep: usize, key: &MsgKey, sig: &Signature, buf: MemRef) -> Poll<Result<()>> {
        let s = &self.shared;
        if let Err(e) = host_only(&buf).and_then(|_| s.closed()) {
            return Poll::Ready(Err(e));
        }
        let peer = match s.peer(src_ep) {
            Ok(p) => p.clone(),
            Err(e) => return Poll::Ready(Err(e)),
        };
        // Read the sender's state before draining: a sender pushes before it
        // closes or dies, so if it was gone then, all it sent is in the ring now.
        let gone = peer.gone();
        let found = {
            let mut st = lock(&s.recv);
            st.drain(&s.pool);
            st.take(key)
        };
        match found {
            Some(a) => Poll::Ready(deliver(a, key, sig, buf, &s.pool)),
            None => match gone {
                Some(e) => Poll::Ready(Err(e)),
                None => {
                    s.flush_all();
                    s.maybe_scan();
                    Poll::Pending
                }
            },
        }
    }

    /// One table holds every sender's messages (their keys name them).
    fn find_arrived(
        &self,
        _from: Option<usize>,
        pick: &dyn Fn(&MsgKey, &Signature) -> bool,
    ) -> Option<(MsgKey, Signature)> {
        let s = &self.shared;
        let mut st = lock(&s.recv);
        st.drain(&s.pool);
        st.find(pick)
    }

    fn progress(&self) -> Result<()> {
        let s = &self.shared;
        s.flush_all();
        // A thread already draining (a receive, another progress) does this job.
        match s.recv.try_lock() {
            Ok(mut st) => st.drain(&s.pool),
            Err(TryLockError::Poisoned(p)) => p.into_inner().drain(&s.pool),
            Err(TryLockError::WouldBlock) => {}
        }
        s.maybe_scan();
        Ok(())
    }

    fn failed(&self, ep: usize) -> Option<Error> {
        self.shared.peer(ep).ok()?.health.failure()
    }

    fn set_cause(&self, cause: usize) {
        let _ = self.shared.cause.set(cause);
    }

    fn take_causes(&self) -> Vec<(usize, usize)> {
        // Acquire: see maybe_scan. One plain load on the fast path (every
        // progress call comes here; the list is rarely touched): the swap,
        // a locked instruction, only when there is news.
        if !self.shared.news.load(Ordering::Relaxed) || !self.shared.news.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *lock(&self.shared.causes))
    }

    /// Mark our segment closed, reject rendezvous messages we will never take,
    /// and unlink the name. The memory is unmapped when the last send handle
    /// that uses it is gone.
    fn close(&self) {
        let s = &self.shared;
        if s.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        s.flush_all();
        s.seg.mark_closed(s.cause.get().copied());
        lock(&s.recv).reject_all(&s.pool);
        if let Err(e) = s.seg.unlink() {
            ferrocoll_core::log_debug!("shm: {}", e.context());
        }
        shmem::sweep_stale();
    }
}

impl Drop for ShmTransport {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
impl ShmTransport {
    /// Whether sends to `ep` go by CMA.
    pub(super) fn cma_to(&self, ep: usize) -> bool {
        let s = &self.shared;
        s.cfg.cma && s.peer(ep).is_ok_and(|p| p.reads_us_by_cma(s.ep))
    }

    /// This endpoint's completion slot `i`.
    pub(super) fn slot_word(&self, i: u32) -> &std::sync::atomic::AtomicU64 {
        self.shared.slots.word(i).expect("slot in range")
    }
}
