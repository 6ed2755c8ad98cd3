//! The in-process transport: ranks that are threads (or contexts) of one
//! process exchange messages through each other's inboxes.
//!
//! Every message travels in an envelope with its sender's call signature,
//! which the receive checks before it copies anything.
//!
//! Small messages are copied into the receiver's inbox at send (eager).
//! Large ones are queued by reference and the receiver copies straight from
//! the sender's buffer (rendezvous, one copy); the send completes when the
//! receiver has copied. A send dropped before the receiver took it is
//! retracted; one dropped while the receiver copies waits for the copy.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, RwLock};
use std::task::Poll;

use ferrocoll_core::args::Signature;
use ferrocoll_core::wire::Reader;
use ferrocoll_core::{Error, MemRef, MemType, ProcInfo, Result};

use crate::fxhash::FxBuildHasher;
use crate::p2p::{MsgKey, SendHandle, Transport, TransportPeer};

/// Messages up to this size are copied at send; larger ones are pulled by the receiver.
const EAGER_MAX: usize = 16 * 1024;

const QUEUED: u8 = 0;
const DONE: u8 = 1;
/// The receive had another size, or the receiver's context was destroyed.
const REJECTED: u8 = 2;
/// The receive was posted for another call (its signature did not agree).
const MISMATCHED: u8 = 3;

/// A message waiting in an inbox: the sender's call signature and the bytes.
struct Envelope {
    sig: Signature,
    body: Body,
}

enum Body {
    Eager(Vec<u8>),
    Rendezvous { data: MemRef, state: Arc<AtomicU8> },
}

impl Envelope {
    fn len(&self) -> usize {
        match &self.body {
            Body::Eager(v) => v.len(),
            Body::Rendezvous { data, .. } => data.len(),
        }
    }

    /// Release a rendezvous sender with final state `why` (REJECTED or MISMATCHED).
    fn reject(&self, why: u8) {
        if let Body::Rendezvous { state, .. } = &self.body {
            // Release: the sender's Acquire load sees that we no longer read its buffer.
            state.store(why, Ordering::Release);
        }
    }
}

type Queues = HashMap<MsgKey, VecDeque<Envelope>, FxBuildHasher>;

#[derive(Default)]
struct Inbox {
    queues: Mutex<Queues>,
    /// Set (under the queues lock) when the owning context is destroyed.
    closed: AtomicBool,
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        // A panic while holding the lock cannot leave the map half-updated.
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_closed(&self) -> bool {
        // Acquire: pairs with the Release in close(); a sender that sees "open"
        // pushes under the lock, which close() also takes.
        self.closed.load(Ordering::Acquire)
    }
}

/// Every live inbox of this process, by transport id.
static REGISTRY: LazyLock<Mutex<HashMap<u64, Arc<Inbox>>>> = LazyLock::new(Default::default);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn registry() -> MutexGuard<'static, HashMap<u64, Arc<Inbox>>> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// One endpoint of the in-process transport.
pub struct InProcTransport {
    id: u64,
    inbox: Arc<Inbox>,
    /// Inbox of each endpoint of the OOB group (`None`: another process).
    peers: RwLock<Vec<Option<Arc<Inbox>>>>,
}

impl Default for InProcTransport {
    fn default() -> Self {
        Self::new()
    }
}

impl InProcTransport {
    /// A new endpoint, registered in this process.
    pub fn new() -> InProcTransport {
        // Relaxed: ids only need to be unique.
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let inbox = Arc::new(Inbox::default());
        registry().insert(id, inbox.clone());
        InProcTransport { id, inbox, peers: RwLock::new(Vec::new()) }
    }

    /// Unregister: peers' sends and receives involving this endpoint fail from now on,
    /// and senders whose large messages are still queued here are released with an error.
    fn shut(&self) {
        registry().remove(&self.id);
        let mut q = self.inbox.lock();
        // Release: see Inbox::is_closed.
        self.inbox.closed.store(true, Ordering::Release);
        for env in q.drain().flat_map(|(_, v)| v) {
            env.reject(REJECTED);
        }
    }

    fn peer(&self, ep: usize) -> Result<Arc<Inbox>> {
        let peers = self.peers.read().unwrap_or_else(|p| p.into_inner());
        match peers.get(ep) {
            Some(Some(inbox)) => Ok(inbox.clone()),
            Some(None) => Err(Error::not_supported(format!("endpoint {ep} is not in this process"))),
            None => Err(Error::internal(format!("endpoint {ep} is outside the group of {}", peers.len()))),
        }
    }
}

fn gone(ep: usize) -> Error {
    Error::io(format!("endpoint {ep} is gone: its context was destroyed"))
}

fn host_only(m: &MemRef) -> Result<()> {
    if m.mem_type() == MemType::Host {
        Ok(())
    } else {
        Err(Error::not_supported(format!("the in-process transport moves host memory only, not {}", m.mem_type())))
    }
}

impl Transport for InProcTransport {
    fn name(&self) -> &'static str {
        "inproc"
    }

    fn reaches(&self, me: &ProcInfo, peer: &ProcInfo) -> bool {
        me.same_process(peer)
    }

    /// `[pid u32][id u64]`: enough for a peer of the same process to find this inbox.
    fn address(&self) -> Vec<u8> {
        let mut a = std::process::id().to_le_bytes().to_vec();
        a.extend_from_slice(&self.id.to_le_bytes());
        a
    }

    /// Find the inbox of every peer of this process in the registry.
    fn connect(&self, n_eps: usize, peers: &[TransportPeer]) -> Result<()> {
        let me = std::process::id();
        let reg = registry();
        let mut table = vec![None; n_eps];
        for p in peers {
            let mut r = Reader::new(&p.addr);
            let (pid, id) = (r.u32()?, r.u64()?);
            r.finish().map_err(|e| e.prefixed(format!("in-process address of endpoint {}", p.ep)))?;
            let inbox = reg.get(&id).filter(|_| pid == me).cloned().ok_or_else(|| {
                Error::not_found(format!("endpoint {} (pid {pid}, inbox {id}) is not in this process", p.ep))
            })?;
            if let Some(slot) = table.get_mut(p.ep) {
                *slot = Some(inbox);
            }
        }
        *self.peers.write().unwrap_or_else(|p| p.into_inner()) = table;
        Ok(())
    }

    fn failed(&self, _ep: usize) -> Option<Error> {
        // Threads of one process do not die apart: a context that goes away
        // closes its inbox, which receives from it see (`try_recv`).
        None
    }

    fn close(&self) {
        self.shut();
    }

    fn send(&self, dst_ep: usize, key: MsgKey, sig: Signature, data: MemRef) -> Result<Box<dyn SendHandle>> {
        host_only(&data)?;
        let inbox = self.peer(dst_ep)?;
        let (body, handle): (Body, Box<dyn SendHandle>) = if data.len() <= EAGER_MAX {
            // SAFETY: the caller keeps `data` valid until the send completes,
            // and this call completes it: the bytes are copied right here.
            let bytes = unsafe { data.as_slice() }.to_vec();
            (Body::Eager(bytes), Box::new(Sent))
        } else {
            let state = Arc::new(AtomicU8::new(QUEUED));
            let handle = RendezvousSend { inbox: inbox.clone(), key, state: state.clone(), dst_ep };
            (Body::Rendezvous { data, state }, Box::new(handle))
        };
        let mut q = inbox.lock();
        if inbox.is_closed() {
            return Err(gone(dst_ep));
        }
        q.entry(key).or_default().push_back(Envelope { sig, body });
        Ok(handle)
    }

    fn try_recv(&self, src_ep: usize, key: &MsgKey, sig: &Signature, buf: MemRef) -> Poll<Result<()>> {
        if let Err(e) = host_only(&buf) {
            return Poll::Ready(Err(e));
        }
        // Read the sender's state before our queue: a sender enqueues before it
        // closes, so if it was closed then, every message it sent is queued now.
        let sender_closed = match self.peer(src_ep) {
            Ok(p) => p.is_closed(),
            Err(e) => return Poll::Ready(Err(e)),
        };
        let env = {
            let mut q = self.inbox.lock();
            let Some(queue) = q.get_mut(key) else {
                return if sender_closed { Poll::Ready(Err(gone(src_ep))) } else { Poll::Pending };
            };
            let env = queue.pop_front();
            if queue.is_empty() {
                q.remove(key);
            }
            match env {
                Some(e) => e,
                None => return Poll::Pending,
            }
        };
        // The call first (it says more than a size), and before any byte is copied.
        if !env.sig.agrees(sig) {
            env.reject(MISMATCHED);
            return Poll::Ready(Err(key.calls_differ(&env.sig, sig)));
        }
        if env.len() != buf.len() {
            env.reject(REJECTED);
            return Poll::Ready(Err(key.size_mismatch(env.len(), buf.len())));
        }
        // SAFETY: `buf` is this task's receive buffer (valid and exclusively ours
        // while the task runs); the source is either our own copy or the
        // sender's buffer, which it keeps valid until we store DONE below (its
        // handle's drop waits for that). Both are host memory (checked), of
        // equal length (checked), and distinct allocations.
        unsafe {
            let dst = buf.as_mut_slice();
            match &env.body {
                Body::Eager(v) => dst.copy_from_slice(v),
                Body::Rendezvous { data, .. } => dst.copy_from_slice(data.as_slice()),
            }
        }
        if let Body::Rendezvous { state, .. } = &env.body {
            // Release: the sender's Acquire load of DONE happens after our copy.
            state.store(DONE, Ordering::Release);
        }
        Poll::Ready(Ok(()))
    }

    /// One inbox holds every sender's messages (their keys name them).
    fn find_arrived(
        &self,
        _from: Option<usize>,
        pick: &dyn Fn(&MsgKey, &Signature) -> bool,
    ) -> Option<(MsgKey, Signature)> {
        let q = self.inbox.lock();
        q.iter().find_map(|(k, v)| v.iter().find(|e| pick(k, &e.sig)).map(|e| (*k, e.sig)))
    }

    fn progress(&self) -> Result<()> {
        Ok(())
    }
}

/// An eager send: complete as soon as it is posted.
struct Sent;

impl SendHandle for Sent {
    fn test(&mut self) -> Poll<Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A large send: complete when the receiver has copied the buffer.
struct RendezvousSend {
    inbox: Arc<Inbox>,
    key: MsgKey,
    state: Arc<AtomicU8>,
    dst_ep: usize,
}

impl SendHandle for RendezvousSend {
    fn test(&mut self) -> Poll<Result<()>> {
        // Acquire: pairs with the receiver's Release after its copy.
        match self.state.load(Ordering::Acquire) {
            DONE => Poll::Ready(Ok(())),
            REJECTED => Poll::Ready(Err(Error::io(format!(
                "endpoint {} rejected a message of seq {} step tag {}: its receive had another size, \
                 or its context was destroyed",
                self.dst_ep, self.key.seq, self.key.tag
            )))),
            MISMATCHED => Poll::Ready(Err(Error::invalid_param(format!(
                "endpoint {} rejected a message of seq {} step tag {}: its receive was posted for another call",
                self.dst_ep, self.key.seq, self.key.tag
            )))),
            _ => Poll::Pending,
        }
    }
}

impl Drop for RendezvousSend {
    fn drop(&mut self) {
        // Acquire: see test().
        if self.state.load(Ordering::Acquire) != QUEUED {
            return;
        }
        {
            let mut q = self.inbox.lock();
            if let Some(queue) = q.get_mut(&self.key) {
                let before = queue.len();
                queue.retain(|e| !matches!(&e.body, Body::Rendezvous { state, .. } if Arc::ptr_eq(state, &self.state)));
                let retracted = queue.len() != before;
                if queue.is_empty() {
                    q.remove(&self.key);
                }
                if retracted {
                    return;
                }
            }
        }
        // The receiver took the message and is copying from our buffer: the
        // buffer must outlive the copy, so wait for it (a memcpy, bounded).
        let mut backoff = ferrocoll_core::engine::Backoff::new();
        while self.state.load(Ordering::Acquire) == QUEUED {
            backoff.snooze();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll_core::ReduceOp;

    use crate::testing::{assert_stray_rules, call, key, mem, sig};

    #[test]
    fn a_message_of_another_call_under_another_tag_is_found_and_left() {
        let (a, b) = pair();
        let mut m = vec![3u8; 64];
        let _h = a.send(1, key(5), call(ReduceOp::Max), mem(&mut m)).unwrap();
        assert_stray_rules(&b, b.stray(0, &key(0), &sig()));
        let mut got = vec![0u8; 64];
        assert!(matches!(b.try_recv(0, &key(5), &call(ReduceOp::Max), mem(&mut got)), Poll::Ready(Ok(()))));
        assert!(b.stray(0, &key(0), &sig()).is_none(), "taken");
    }

    fn pair() -> (InProcTransport, InProcTransport) {
        let (a, b) = (InProcTransport::new(), InProcTransport::new());
        let me = ProcInfo::local();
        let peers: Vec<TransportPeer> = [a.address(), b.address()]
            .into_iter()
            .enumerate()
            .map(|(ep, addr)| TransportPeer { ep, proc: me.clone(), addr })
            .collect();
        a.connect(2, &peers).unwrap();
        b.connect(2, &peers).unwrap();
        (a, b)
    }

    #[test]
    fn eager_and_rendezvous_messages_arrive_in_order() {
        let (a, b) = pair();
        let mut small = vec![7u8; 100];
        let mut big = vec![9u8; EAGER_MAX + 1];
        let mut h1 = a.send(1, key(0), sig(), mem(&mut small)).unwrap();
        let mut h2 = a.send(1, key(0), sig(), mem(&mut big)).unwrap();
        assert!(h1.test().is_ready());
        assert!(h2.test().is_pending());
        let mut r1 = vec![0u8; 100];
        let mut r2 = vec![0u8; EAGER_MAX + 1];
        assert!(matches!(b.try_recv(0, &key(0), &sig(), mem(&mut r1)), Poll::Ready(Ok(()))));
        assert!(matches!(b.try_recv(0, &key(0), &sig(), mem(&mut r2)), Poll::Ready(Ok(()))));
        assert!(matches!(h2.test(), Poll::Ready(Ok(()))));
        assert_eq!((r1, r2), (small, big));
        assert!(b.try_recv(0, &key(0), &sig(), mem(&mut [0u8; 1])).is_pending());
    }

    #[test]
    fn size_mismatch_fails_both_sides() {
        let (a, b) = pair();
        let mut big = vec![1u8; EAGER_MAX * 2];
        let mut h = a.send(1, key(3), sig(), mem(&mut big)).unwrap();
        let mut r = vec![0u8; EAGER_MAX];
        let Poll::Ready(Err(e)) = b.try_recv(0, &key(3), &sig(), mem(&mut r)) else { panic!("expected an error") };
        assert!(e.to_string().contains("expects"), "{e}");
        assert!(matches!(h.test(), Poll::Ready(Err(_))));
    }

    #[test]
    fn dropped_send_is_retracted_and_closed_peer_is_gone() {
        let (a, b) = pair();
        let mut big = vec![1u8; EAGER_MAX * 2];
        drop(a.send(1, key(1), sig(), mem(&mut big)).unwrap());
        assert!(b.try_recv(0, &key(1), &sig(), mem(&mut vec![0u8; EAGER_MAX * 2])).is_pending());
        a.close();
        assert!(matches!(b.try_recv(0, &key(1), &sig(), mem(&mut [0u8; 4])), Poll::Ready(Err(_))));
        assert!(b.send(0, key(2), sig(), mem(&mut [0u8; 4])).is_err());
    }

    #[test]
    fn a_message_of_another_call_fails_the_receive_before_any_copy() {
        let (a, b) = pair();
        let mut small = vec![7u8; 64];
        let mut big = vec![9u8; EAGER_MAX * 2];
        let mut h1 = a.send(1, key(4), call(ReduceOp::Max), mem(&mut small)).unwrap();
        let mut h2 = a.send(1, key(4), call(ReduceOp::Max), mem(&mut big)).unwrap();
        assert!(matches!(h1.test(), Poll::Ready(Ok(()))), "an eager send is complete once posted");
        for len in [64, EAGER_MAX * 2] {
            // Same size, another call: refused, and the receive buffer untouched.
            let mut r = vec![0xEEu8; len];
            let Poll::Ready(Err(e)) = b.try_recv(0, &key(4), &sig(), mem(&mut r)) else { panic!("expected an error") };
            assert_eq!(e.status(), ferrocoll_core::Status::InvalidParam, "{e}");
            let text = e.to_string();
            assert!(text.contains("calls differ: rank 0 posted allreduce max float32 of 1024 elements"), "{text}");
            assert!(
                text.contains("this rank posted allreduce sum float32 of 1024 elements (collective seq 1)"),
                "{text}"
            );
            assert!(r.iter().all(|&x| x == 0xEE), "bytes were copied into the receive buffer");
        }
        let Poll::Ready(Err(e)) = h2.test() else { panic!("the rendezvous sender must be released with an error") };
        assert_eq!(e.status(), ferrocoll_core::Status::InvalidParam, "{e}");
        assert!(e.to_string().contains("endpoint 1 rejected") && e.to_string().contains("another call"), "{e}");
        // Both messages were taken; the transport goes on for the next key.
        assert!(b.try_recv(0, &key(4), &sig(), mem(&mut [0u8; 64])).is_pending());
        let mut next = vec![3u8; 10];
        a.send(1, key(5), sig(), mem(&mut next)).unwrap();
        let mut r = vec![0u8; 10];
        assert!(matches!(b.try_recv(0, &key(5), &sig(), mem(&mut r)), Poll::Ready(Ok(()))));
        assert_eq!(r, next);
    }
}
