//! [`Comm`]: what an algorithm sees of its team while it runs — tagged
//! send/receive to team ranks, reductions and copies through the memory
//! components, and scratch memory.
//!
//! Every message carries the call's [`Signature`] (made once per task), and
//! every receive checks its sender's against it before copying a byte, so
//! ranks whose calls differ fail naming each other (see
//! `ferrocoll_transport::Transport::try_recv`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ferrocoll_core::args::Signature;
use ferrocoll_core::backend::{ReduceSpec, Scratch};
use ferrocoll_core::engine::{TaskDiag, try_join_all, try_join2};
use ferrocoll_core::{Error, MemRef, Result, Status};
use ferrocoll_transport::{MsgKey, SendHandle};

use super::team::TeamShared;

/// Tags below this belong to one phase; [`Comm::phase`] shifts into a fresh range.
pub const PHASE_TAGS: u32 = 1 << 24;

/// One execution of a collective on one rank: its team, sequence number,
/// call signature and tag space.
#[derive(Clone)]
pub struct Comm {
    team: Arc<TeamShared>,
    seq: u64,
    sig: Signature,
    tag_base: u32,
    diag: Arc<TaskDiag>,
}

impl Comm {
    pub(crate) fn new(team: Arc<TeamShared>, seq: u64, sig: Signature, diag: Arc<TaskDiag>) -> Comm {
        Comm { team, seq, sig, tag_base: 0, diag }
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.team.rank
    }

    /// Team size.
    pub fn size(&self) -> usize {
        self.team.size
    }

    /// The members' nodes and switch groups, alike on every rank.
    pub fn layout(&self) -> &ferrocoll_core::topo::Layout {
        &self.team.layout
    }

    /// The TL's configuration for this team.
    pub fn config(&self) -> &super::P2pConfig {
        &self.team.config
    }

    /// The same collective with tags shifted into phase `n` (for schedules
    /// that run sub-algorithms one after the other or side by side).
    pub fn phase(&self, n: u32) -> Comm {
        Comm { tag_base: self.tag_base + n * PHASE_TAGS, ..self.clone() }
    }

    fn key(&self, tag: u32, src: usize) -> MsgKey {
        MsgKey { team: self.team.id, seq: self.seq, tag: self.tag_base + tag, src: src as u32 }
    }

    fn ep(&self, peer: usize) -> Result<usize> {
        self.team
            .eps
            .get(peer)
            .copied()
            .ok_or_else(|| Error::internal(format!("peer {peer} is outside the team of {}", self.team.size)))
    }

    /// Start sending `data` to team rank `peer`; the returned future completes
    /// when `data` may be reused. Sending starts now, not when the future is polled.
    pub fn isend(&self, peer: usize, tag: u32, data: MemRef) -> Result<SendFuture<'_>> {
        let ep = self.ep(peer)?;
        let state = match self.team.transport.send(ep, self.key(tag, self.team.rank), self.sig, data) {
            Ok(handle) => SendState::Sending(handle),
            // The peer left, perhaps because another member died: say which, when that is known.
            Err(e) => SendState::Failing(Suspect::new(e.prefixed(format!("send to rank {peer}")))),
        };
        Ok(SendFuture { comm: self, peer, tag, state })
    }

    /// The first member of the team whose transport says it failed (seen,
    /// or reported by a peer that left because of it), named.
    ///
    /// The rule (ARCHITECTURE.md, "Failure"): a collective fails as soon as
    /// any member of its team has failed, not only the peer it waits for
    /// now: some rank needs that member's part and would wait for it until
    /// its timeout, and a rank that finished with it cannot tell which.
    fn dead_member(&self) -> Option<Error> {
        self.team.eps.iter().enumerate().find_map(|(r, &e)| {
            self.team.transport.failed(e).map(|err| {
                err.prefixed(format!(
                    "team rank {r} failed, and a collective of its team cannot complete without every member"
                ))
            })
        })
    }

    /// Send and wait until `data` may be reused.
    pub async fn send(&self, peer: usize, tag: u32, data: MemRef) -> Result<()> {
        self.isend(peer, tag, data)?.await
    }

    /// Receive the message with `tag` from team rank `peer` into `buf` (its
    /// sender's call must agree with this one, and its size must match).
    pub fn recv(&self, peer: usize, tag: u32, buf: MemRef) -> RecvFuture {
        RecvFuture { comm: self.clone(), peer, tag, buf, failed: None }
    }

    /// Send to one peer and receive from another at the same time.
    /// The send is watched while the receive waits: a receiver that refused
    /// it (another call) fails this rank at once, even if its own message
    /// never comes.
    pub async fn sendrecv(&self, to: usize, send: MemRef, from: usize, recv: MemRef, tag: u32) -> Result<()> {
        let s = self.isend(to, tag, send)?;
        try_join2(self.recv(from, tag, recv), s).await
    }

    /// Send `send` to every peer of `recvs` and receive each peer's message
    /// into its buffer, all at once; returns when everything is done (the
    /// first failure, of a receive or a send, ends it).
    pub async fn exchange(&self, tag: u32, send: MemRef, recvs: &[(usize, MemRef)]) -> Result<()> {
        let sends = recvs.iter().map(|&(peer, _)| self.isend(peer, tag, send)).collect::<Result<Vec<_>>>()?;
        try_join2(try_join_all(recvs.iter().map(|&(peer, buf)| self.recv(peer, tag, buf))), try_join_all(sends)).await
    }

    /// Copy `src` to `dst` (same length).
    pub fn copy(&self, dst: MemRef, src: MemRef) -> Result<()> {
        if dst.len() != src.len() {
            return Err(Error::internal(format!("copy of {} bytes into {}", src.len(), dst.len())));
        }
        if dst.is_empty() || dst == src {
            return Ok(());
        }
        self.team.mcs.get(dst.mem_type())?.copy(dst, src)
    }

    /// `dst = op(srcs...)` as `spec` says (its count, and whether it
    /// finishes: see [`Reducer`](ferrocoll_core::args::Reducer)), combined in
    /// the order given (keep it the same on every rank that must produce
    /// identical bits). `dst` may be one of the sources.
    pub fn reduce(&self, dst: MemRef, srcs: &[MemRef], spec: ReduceSpec) -> Result<()> {
        if spec.count == 0 {
            return Ok(());
        }
        let mc = self.team.mcs.get(dst.mem_type())?;
        match srcs.iter().skip(1).position(|s| *s == dst) {
            // The memory component accepts dst only as the first operand; keep
            // the caller's order by reading dst from a copy.
            Some(j) => {
                let tmp = self.scratch(dst.len())?;
                mc.copy(tmp.mem(), dst)?;
                let mut srcs = srcs.to_vec();
                srcs[j + 1] = tmp.mem();
                mc.reduce(dst, &srcs, &spec)
            }
            None => mc.reduce(dst, srcs, &spec),
        }
    }

    /// Scratch memory of `len` bytes, of the memory type of this team's buffers (host for now).
    pub fn scratch(&self, len: usize) -> Result<Scratch> {
        self.team.mcs.get(ferrocoll_core::MemType::Host)?.alloc(len)
    }
}

/// An error about a peer (it left) that may only echo another member's
/// death: held for [`LEFT_GRACE`] while the transports' liveness checks run,
/// and replaced by the death, naming the member that died, if one is found.
/// A survivor that left because of a death elsewhere is not blamed for it.
struct Suspect {
    err: Option<Error>,
    until: Instant,
}

/// How long a peer's leaving is held (a few of the transports' liveness scans).
const LEFT_GRACE: Duration = Duration::from_millis(250);

impl Suspect {
    fn new(err: Error) -> Suspect {
        Suspect { err: Some(err), until: Instant::now() + LEFT_GRACE }
    }

    /// The error to report, once it is known.
    fn poll(&mut self, comm: &Comm) -> Poll<Error> {
        if let Some(dead) = comm.dead_member() {
            return Poll::Ready(dead);
        }
        match self.err.take() {
            Some(e) if Instant::now() >= self.until => Poll::Ready(e),
            Some(e) => {
                self.err = Some(e);
                Poll::Pending
            }
            None => Poll::Ready(Error::internal("a failed p2p operation was polled after it ended")),
        }
    }
}

/// A send in flight (see [`Comm::isend`]). Dropping it retracts the message
/// if the receiver has not taken it yet.
pub struct SendFuture<'c> {
    comm: &'c Comm,
    /// The team rank it sends to, and the step tag.
    peer: usize,
    tag: u32,
    state: SendState,
}

enum SendState {
    /// The transport's handle.
    Sending(Box<dyn SendHandle>),
    Failing(Suspect),
}

impl Future for SendFuture<'_> {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<()>> {
        let this = &mut *self;
        match &mut this.state {
            SendState::Sending(handle) => match handle.test() {
                Poll::Ready(Err(e)) if e.status() != Status::InvalidParam => {
                    // The peer left mid-send, perhaps because another member died (one that
                    // this rank never talks to, as in a hierarchy): held like a failed send's start.
                    let mut s = Suspect::new(e.prefixed(format!("send to rank {}", this.peer)));
                    let verdict = s.poll(this.comm);
                    this.state = SendState::Failing(s);
                    verdict.map(Err)
                }
                Poll::Ready(r) => {
                    this.comm.diag.sent(this.peer, this.comm.tag_base + this.tag);
                    Poll::Ready(r.map_err(|e| e.prefixed(format!("send to rank {}", this.peer))))
                }
                Poll::Pending => {
                    // For timeout and watchdog messages: this task waits for `peer` to take its message.
                    this.comm.diag.sending_to(this.peer, this.comm.tag_base + this.tag);
                    Poll::Pending
                }
            },
            SendState::Failing(suspect) => suspect.poll(this.comm).map(Err),
        }
    }
}

/// A receive (see [`Comm::recv`]): polls the transport for its message.
pub struct RecvFuture {
    comm: Comm,
    peer: usize,
    tag: u32,
    buf: MemRef,
    /// Set once the receive failed (the peer left, or its message did not fit).
    failed: Option<Suspect>,
}

impl Future for RecvFuture {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<()>> {
        let this = &mut *self;
        if let Some(s) = &mut this.failed {
            return s.poll(&this.comm).map(Err);
        }
        let ep = match this.comm.ep(this.peer) {
            Ok(ep) => ep,
            Err(e) => return Poll::Ready(Err(e)),
        };
        let key = this.comm.key(this.tag, this.peer);
        match this.comm.team.transport.try_recv(ep, &key, &this.comm.sig, this.buf) {
            Poll::Ready(Ok(())) => {
                this.comm.diag.received(this.peer, key.tag);
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                this.comm.diag.waiting_for(this.peer, key.tag);
                // A member that died can never take part: fail now rather than hang.
                match this.comm.dead_member() {
                    Some(err) => Poll::Ready(Err(err)),
                    None => Poll::Pending,
                }
            }
            // A message of another call is this collective's own failure, not
            // an echo of a death elsewhere: no grace.
            Poll::Ready(Err(e)) if e.status() == Status::InvalidParam => {
                Poll::Ready(Err(e.prefixed(format!("receive from rank {}", this.peer))))
            }
            Poll::Ready(Err(e)) => {
                let mut s = Suspect::new(e.prefixed(format!("receive from rank {}", this.peer)));
                let verdict = s.poll(&this.comm);
                this.failed = Some(s);
                verdict.map(Err)
            }
        }
    }
}
