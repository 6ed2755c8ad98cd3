//! One peer as the transport sees it: its connection (receive parser and
//! send queue), the messages that arrived from it, and whether it is alive.
//!
//! Locks: `rx`, `tx` and the inbox are separate, so readers, senders and
//! receivers of one peer do not wait on each other's I/O; progress takes
//! `rx`/`tx` with `try_lock` and skips a peer another thread is already
//! serving. The only nesting is `rx` then the pacer (link emulation), the
//! inbox or `tx`, and the pacer then the inbox (never the reverse), so
//! there is no lock-order cycle.

use std::collections::{HashMap, VecDeque};
use std::io::IoSlice;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::task::Poll;
use std::time::{Duration, Instant};

use ferrocoll_core::args::Signature;
use ferrocoll_core::{Error, MemRef, Result};

use super::emulate::{LinkModel, Pacer};
use super::pool::Pool;
use super::rx::{RxConn, RxEnd};
use super::sys;
use super::tx::{EAGER_MAX, SendQueue, SendState};
use super::wire::Header;
use crate::fxhash::FxBuildHasher;
use crate::p2p::{MsgKey, SendHandle};

/// Bytes one `pump` reads at most, so that one busy peer cannot hold a progress call.
const PUMP_BUDGET: usize = 32 << 20;

/// Pumps a failed write makes, at most, looking for the peer's goodbye.
const GOODBYE_SEARCH_BUDGETS: usize = 8;

/// How long a close waits for room in the socket's buffer for its goodbye
/// (the peer must read what fills it): a peer that reads by then sees a
/// clean leave; one that does not, a cut connection.
const CLOSE_LINGER: Duration = Duration::from_secs(2);

const ALIVE: u8 = 0;
const LEFT: u8 = 1;
const DEAD: u8 = 2;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves its data consistent before anything can panic.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// Whether a peer is alive, left cleanly, or died (and why).
#[derive(Default)]
pub(super) struct Health {
    state: AtomicU8,
    why: OnceLock<String>,
}

/// What [`Health`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    Alive,
    Left,
    Dead,
}

impl Health {
    pub(super) fn get(&self) -> State {
        // Acquire: pairs with the Release in set(): who sees Left/Dead sees every
        // message filed before, and `why`.
        match self.state.load(Ordering::Acquire) {
            ALIVE => State::Alive,
            LEFT => State::Left,
            _ => State::Dead,
        }
    }

    /// Move from alive to `to` (only the first change counts); true if this call changed it.
    fn set(&self, to: State, why: String) -> bool {
        let v = if to == State::Left { LEFT } else { DEAD };
        if self.state.load(Ordering::Acquire) != ALIVE {
            return false;
        }
        let _ = self.why.set(why);
        // AcqRel: Release publishes `why` and the inbox; Acquire orders the failure path.
        self.state.compare_exchange(ALIVE, v, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    fn why(&self) -> &str {
        self.why.get().map_or("", String::as_str)
    }
}

/// Messages that arrived, with their senders' calls, FIFO per key, each
/// with when it may be received (`None`: at once; see `emulate.rs`).
type Inbox = HashMap<MsgKey, VecDeque<(Signature, Vec<u8>, Option<Instant>)>, FxBuildHasher>;

/// A live TCP connection.
pub(super) struct Link {
    stream: TcpStream,
    rx: Mutex<RxConn>,
    tx: Mutex<SendQueue>,
    /// A hint that `tx` holds bytes (so progress polls for writability).
    tx_pending: AtomicBool,
}

impl Drop for Link {
    /// The connection closes here: nothing will read what is left in it,
    /// and left unread it would turn the close into a reset that drops what
    /// this endpoint still has unsent (`sys::discard_unread`).
    fn drop(&mut self) {
        sys::discard_unread(self.stream.as_raw_fd());
    }
}

/// One peer endpoint.
pub(super) struct Peer {
    pub(super) ep: usize,
    pub(super) addr: SocketAddr,
    pub(super) health: Health,
    inbox: Mutex<Inbox>,
    /// The emulated link from this peer, if any (testing and benchmarking only).
    pacer: Option<Mutex<Pacer>>,
    /// `None`: this endpoint itself (messages go straight to the inbox).
    link: Option<Link>,
    /// This transport was closed: no more sends.
    closed: AtomicBool,
    /// Receive buffers, shared by the transport's peers.
    pool: Arc<Pool>,
    /// The endpoint its goodbye named as the failure it left because of.
    left_because: OnceLock<u32>,
    /// `left_because` was handed out (by `take_cause`).
    cause_taken: AtomicBool,
}

impl Peer {
    pub(super) fn new(
        ep: usize,
        addr: SocketAddr,
        stream: Option<TcpStream>,
        pool: Arc<Pool>,
        link_model: Option<LinkModel>,
    ) -> Peer {
        let link = stream.map(|stream| Link {
            stream,
            rx: Mutex::new(RxConn::new()),
            tx: Mutex::new(SendQueue::default()),
            tx_pending: AtomicBool::new(false),
        });
        Peer {
            ep,
            addr,
            health: Health::default(),
            inbox: Mutex::default(),
            pacer: link_model.map(|m| Mutex::new(Pacer::new(m))),
            link,
            closed: AtomicBool::new(false),
            pool,
            left_because: OnceLock::new(),
            cause_taken: AtomicBool::new(false),
        }
    }

    fn name(&self) -> String {
        format!("endpoint {} ({})", self.ep, self.addr)
    }

    /// File a message that arrived.
    pub(super) fn deliver(&self, key: MsgKey, sig: Signature, msg: Vec<u8>) {
        let due = self.pacer.as_ref().map(|p| lock(p).admit(Instant::now(), msg.len()));
        lock(&self.inbox).entry(key).or_default().push_back((sig, msg, due));
    }

    /// The oldest message with `key` and its sender's call, if any and if
    /// its emulated link has delivered it (`all`: whether or not, for a peer
    /// that has left, whose messages are all there is).
    pub(super) fn take(&self, key: &MsgKey, all: bool) -> Option<(Signature, Vec<u8>)> {
        let mut inbox = lock(&self.inbox);
        let queue = inbox.get_mut(key)?;
        if let Some((_, _, Some(due))) = queue.front() {
            if !all && Instant::now() < *due {
                return None;
            }
        }
        let msg = queue.pop_front().map(|(sig, msg, _)| (sig, msg));
        if queue.is_empty() {
            inbox.remove(key);
        }
        msg
    }

    /// See [`Transport::find_arrived`](crate::Transport::find_arrived)
    /// (messages held by an emulated link count: they have arrived).
    pub(super) fn find(&self, pick: &dyn Fn(&MsgKey, &Signature) -> bool) -> Option<(MsgKey, Signature)> {
        let inbox = lock(&self.inbox);
        inbox.iter().find_map(|(k, v)| v.iter().find(|m| pick(k, &m.0)).map(|m| (*k, m.0)))
    }

    /// Why nothing more can come from this peer, if so.
    pub(super) fn gone(&self) -> Option<Error> {
        match self.health.get() {
            State::Alive => None,
            State::Left => Some(Error::io(format!("{} left: it closed its transport", self.name()))),
            State::Dead => Some(Error::io(self.health.why().to_string())),
        }
    }

    /// The endpoint this peer's goodbye named as the failure it left
    /// because of: once (later calls say `None`).
    pub(super) fn take_cause(&self) -> Option<usize> {
        let &c = self.left_because.get()?;
        // Relaxed: the OnceLock publishes the value; the flag only makes it once.
        (!self.cause_taken.swap(true, Ordering::Relaxed)).then_some(c as usize)
    }

    /// Why this peer died, if it did.
    pub(super) fn failed(&self) -> Option<Error> {
        (self.health.get() == State::Dead).then(|| Error::io(self.health.why().to_string()))
    }

    /// The socket, for polling.
    pub(super) fn poll_fd(&self) -> Option<libc::pollfd> {
        let link = self.link.as_ref()?;
        let reading = self.health.get() == State::Alive;
        // Relaxed: a hint; a stale value only delays a flush to the next progress.
        let writing = link.tx_pending.load(Ordering::Relaxed);
        let events = if reading { libc::POLLIN } else { 0 } | if writing { libc::POLLOUT } else { 0 };
        (events != 0).then(|| libc::pollfd { fd: link.stream.as_raw_fd(), events, revents: 0 })
    }

    /// Read what the socket holds and file the messages (skipped if another thread is at it).
    pub(super) fn pump(&self) {
        let Some(link) = &self.link else { return };
        if let Some(mut rx) = try_lock(&link.rx) {
            self.pump_locked(link, &mut rx);
        }
    }

    fn pump_locked(&self, link: &Link, rx: &mut RxConn) {
        if rx.is_ended() || self.health.get() != State::Alive {
            return;
        }
        let end = rx.pump(&mut &link.stream, PUMP_BUDGET, &self.pool, &mut |k, g, v| self.deliver(k, g, v));
        let (state, why) = match end {
            None => return,
            Some(RxEnd::Goodbye { cause }) => {
                if let Some(c) = cause {
                    let _ = self.left_because.set(c);
                }
                (State::Left, String::new())
            }
            Some(RxEnd::Eof { mid_frame }) => {
                let mid = if mid_frame { " in the middle of a frame" } else { "" };
                (
                    State::Dead,
                    format!(
                        "{} closed its connection{mid} without saying goodbye: its process probably died",
                        self.name()
                    ),
                )
            }
            Some(RxEnd::Failed(e)) => (
                State::Dead,
                format!("{} broke its connection ({e}) without saying goodbye: its process probably died", self.name()),
            ),
            Some(RxEnd::Corrupt(e)) => (
                State::Dead,
                format!("{} sent a corrupt frame: {}: the connection is closed", self.name(), e.context()),
            ),
        };
        self.end(state, why);
    }

    /// The connection ended (`state` Left or Dead): stop writing to it.
    fn end(&self, state: State, why: String) {
        if !self.health.set(state, why) {
            return;
        }
        if state == State::Dead {
            ferrocoll_core::log_warn!("p2p tcp: {}", self.health.why());
        }
        if let Some(link) = &self.link {
            let _ = link.stream.shutdown(Shutdown::Both);
            let why = match state {
                State::Dead => self.health.why().to_string(),
                _ => format!("{} left before taking the message", self.name()),
            };
            let mut tx = lock(&link.tx);
            tx.fail_all(&why);
            // Relaxed: see poll_fd.
            link.tx_pending.store(false, Ordering::Relaxed);
        }
    }

    /// Write what the send queue holds without blocking (skipped if another thread is at it).
    pub(super) fn flush(&self) {
        let Some(link) = &self.link else { return };
        let Some(tx) = try_lock(&link.tx) else { return };
        self.flush_locked(link, tx);
    }

    /// Flush under the `tx` lock; on a write error, release it and find out
    /// from the receive side whether the peer left or died.
    fn flush_locked(&self, link: &Link, mut tx: MutexGuard<'_, SendQueue>) {
        if tx.is_empty() {
            return;
        }
        let fd = link.stream.as_raw_fd();
        let r = tx.flush(&mut |bufs: &[IoSlice<'_>]| sys::send_vectored(fd, bufs));
        // Relaxed: see poll_fd.
        link.tx_pending.store(!tx.is_empty(), Ordering::Relaxed);
        drop(tx);
        if let Err(e) = r {
            // A goodbye may be waiting in the socket: read it before judging,
            // behind up to a few budgets of data (a receive buffer tuned
            // larger than one budget still holds all a closed peer sent).
            let mut rx = lock(&link.rx);
            for _ in 0..GOODBYE_SEARCH_BUDGETS {
                self.pump_locked(link, &mut rx);
                if rx.is_ended() || self.health.get() != State::Alive {
                    break;
                }
            }
            drop(rx);
            let why = format!(
                "{} broke its connection (sending: {e}) without saying goodbye: its process probably died",
                self.name()
            );
            self.end(State::Dead, why);
            // Already ended (left or dead): the queue may still hold what this call queued.
            let mut tx = lock(&link.tx);
            let why = self.gone().map_or_else(|| "the connection failed".to_string(), |e| e.context().to_string());
            tx.fail_all(&why);
            link.tx_pending.store(false, Ordering::Relaxed);
        }
    }

    fn send_error(&self) -> Option<Error> {
        // Acquire: pairs with the Release in close().
        if self.closed.load(Ordering::Acquire) {
            return Some(Error::io(format!("cannot send to {}: this endpoint's tcp transport is closed", self.name())));
        }
        self.gone().map(|e| e.prefixed(format!("cannot send to endpoint {}", self.ep)))
    }

    /// Queue a message and try to write it at once.
    pub(super) fn send(self: &Arc<Self>, key: MsgKey, sig: Signature, data: MemRef) -> Result<Box<dyn SendHandle>> {
        if let Some(e) = self.send_error() {
            return Err(e);
        }
        let copy = data.len() <= EAGER_MAX || self.link.is_none();
        // SAFETY: the caller keeps `data` (host memory, checked by the
        // transport) valid and unmodified until the handle completes or is
        // dropped; a copied send completes in this call, after the copy.
        let bytes = if copy { unsafe { data.as_slice() } } else { &[] };
        let Some(link) = &self.link else {
            self.deliver(key, sig, bytes.to_vec());
            return Ok(Box::new(Sent));
        };
        let header = Header::data(key, sig, data.len());
        let mut tx = lock(&link.tx);
        // Again under the lock that close() takes: nothing is queued behind a goodbye.
        if let Some(e) = self.send_error() {
            return Err(e);
        }
        if !copy {
            let handle = Box::new(LargeSend { peer: self.clone(), state: tx.push_large(&header, data), key });
            self.flush_locked(link, tx);
            return Ok(handle);
        }
        let mark = tx.push_copy(&header, bytes);
        self.flush_locked(link, tx);
        // Relaxed: a hint, set under the lock by that flush; a stale `true`
        // only costs the look under the lock below.
        if !link.tx_pending.load(Ordering::Relaxed) || lock(&link.tx).left() >= mark {
            return Ok(Box::new(Sent));
        }
        Ok(Box::new(CopySend { peer: self.clone(), mark, key }))
    }

    /// Cut the connection without a goodbye (tests: a process that dies).
    #[cfg(test)]
    pub(super) fn abort(&self) {
        self.closed.store(true, Ordering::Release);
        if let Some(link) = &self.link {
            let _ = link.stream.shutdown(Shutdown::Both);
        }
    }

    /// Say goodbye (best effort, without blocking), naming `cause` (the
    /// endpoint whose failure this one leaves because of, if any), and close
    /// the connection.
    pub(super) fn close(&self, cause: Option<u32>) {
        // Release: a sender that sees "closed" does not queue behind the goodbye.
        self.closed.store(true, Ordering::Release);
        let Some(link) = &self.link else { return };
        let mut tx = lock(&link.tx);
        if self.health.get() == State::Alive {
            tx.push_copy(&Header::goodbye(cause), &[]);
            let fd = link.stream.as_raw_fd();
            let flush = |tx: &mut SendQueue| tx.flush(&mut |bufs: &[IoSlice<'_>]| sys::send_vectored(fd, bufs));
            let mut written = flush(&mut tx).is_ok();
            // The kernel's buffer may still be full of what this endpoint sent
            // (the peer reads slowly): without its goodbye the peer would take
            // this clean leave for a death. Wait a little for room, reading
            // meanwhile (the peer may itself wait for room to write to us).
            let deadline = Instant::now() + CLOSE_LINGER;
            while written && !tx.is_empty() && self.health.get() == State::Alive && Instant::now() < deadline {
                drop(tx);
                self.pump();
                let mut fds = [libc::pollfd { fd, events: libc::POLLOUT | libc::POLLIN, revents: 0 }];
                let _ = sys::poll_for(&mut fds, 10);
                tx = lock(&link.tx);
                written = flush(&mut tx).is_ok();
            }
        }
        // Everything written: a FIN follows the goodbye. Otherwise the peer sees a cut stream.
        let how = if tx.is_empty() { Shutdown::Write } else { Shutdown::Both };
        tx.fail_all("the send was not written before this endpoint's tcp transport closed");
        link.tx_pending.store(false, Ordering::Relaxed);
        drop(tx);
        let _ = link.stream.shutdown(how);
    }
}

/// A copied send whose bytes the kernel took: complete.
pub(super) struct Sent;

impl SendHandle for Sent {
    fn test(&mut self) -> Poll<Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A copied send whose bytes still wait in the queue (the kernel's buffer
/// was full): complete once they are written. Completing it at once would
/// let a sender finish its collectives and close with what they sent still
/// in its own memory, cut off at the close — and the receiver would take a
/// peer that did its part for a dead one.
struct CopySend {
    peer: Arc<Peer>,
    /// Where its frame ends in the queue's byte count (see `SendQueue::left`).
    mark: u64,
    key: MsgKey,
}

impl CopySend {
    fn written(&self) -> bool {
        self.peer.link.as_ref().is_none_or(|link| lock(&link.tx).left() >= self.mark)
    }
}

impl SendHandle for CopySend {
    fn test(&mut self) -> Poll<Result<()>> {
        if self.written() {
            return Poll::Ready(Ok(()));
        }
        self.peer.flush();
        if self.written() {
            return Poll::Ready(Ok(()));
        }
        // The connection ended: the queue forgot what it held.
        match self.peer.send_error() {
            Some(e) => Poll::Ready(Err(e.prefixed(format!(
                "message to endpoint {} (seq {}, step tag {}) not sent",
                self.peer.ep, self.key.seq, self.key.tag
            )))),
            None => Poll::Pending,
        }
    }
}

/// A large send written straight from the sender's buffer.
struct LargeSend {
    peer: Arc<Peer>,
    state: Arc<SendState>,
    key: MsgKey,
}

impl LargeSend {
    fn poll(&self) -> Option<Result<()>> {
        self.state.outcome().map(|r| {
            r.map_err(|why| {
                Error::io(format!(
                    "message to endpoint {} (seq {}, step tag {}) not sent: {why}",
                    self.peer.ep, self.key.seq, self.key.tag
                ))
            })
        })
    }
}

impl SendHandle for LargeSend {
    fn test(&mut self) -> Poll<Result<()>> {
        if let Some(r) = self.poll() {
            return Poll::Ready(r);
        }
        self.peer.flush();
        self.poll().map_or(Poll::Pending, Poll::Ready)
    }
}

impl Drop for LargeSend {
    fn drop(&mut self) {
        if self.state.outcome().is_some() {
            return;
        }
        if let Some(link) = &self.peer.link {
            // Under the lock no write is using the buffer; after it the queue no longer refers to it.
            lock(&link.tx).retract(&self.state);
        }
    }
}
