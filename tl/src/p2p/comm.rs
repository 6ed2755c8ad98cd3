//! [`Comm`]: what an algorithm sees of its team while it runs — tagged
//! send/receive to team ranks, reductions and copies through the memory
//! components, and scratch memory.
//!
//! Every message carries the call's [`Signature`] (made once per task), and
//! every receive checks its sender's against it before copying a byte, so
//! ranks whose calls differ fail naming each other (see
//! `ferrocoll_transport::Transport::try_recv`).
//!
//! Ranks whose calls differ may also never meet: they chose algorithms
//! whose step tags differ, or a rank waits only for a rank that failed. So
//! a rank whose collective fails because a peer's call differs sends a
//! notice of it to every member (its own call, as every message carries it,
//! and the rank and call it found differing, under a tag no algorithm
//! uses), and an operation that waits looks ([`Watch`]: at its
//! [`LOOK_EVERY_POLLS`]th fruitless poll, then at most once per
//! [`look_gap`]) for a notice of its collective from any member and for
//! a message of its collective from its peer under another tag whose call
//! differs (`Transport::stray`): either fails it naming the ranks and
//! calls. Ranks whose calls differ may also wait for each other without a
//! message between them (a bcast's receiver waits for the root, which waits
//! in an allreduce for it): a receive still waiting after [`PROBE_AFTER`]
//! sends its peer an empty probe carrying its call, which the peer's own
//! looks take and check like any message — or, when the peer finished that
//! collective without a message to the prober and went on, judge against
//! the calls it ran lately and answer (`past.rs`). A completed operation never
//! looks, so the success path costs nothing more. A notice that no
//! operation reads (its addressee completed its part, or failed already)
//! stays queued: a few bytes per mismatch; so does a probe to a peer that
//! never waits on the team again.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ferrocoll_core::args::Signature;
use ferrocoll_core::backend::{ReduceSpec, Scratch};
use ferrocoll_core::engine::{TaskDiag, try_join_all, try_join2};
use ferrocoll_core::{Error, MemRef, Result, Status};
use ferrocoll_transport::{CallsDiffer, MsgKey, SendHandle};

use super::team::TeamShared;

/// Tags below this belong to one phase; [`Comm::phase`] shifts into a fresh range.
pub const PHASE_TAGS: u32 = 1 << 24;

mod notice;
mod past;

pub(crate) use notice::Notices;
use notice::{NOTICE_LEN, Notice};
pub(crate) use past::{PostLog, Teams};

/// The step tag of a notice (see the module docs): no algorithm's, since
/// phases are few and their tags far below it.
const NOTICE_TAG: u32 = u32::MAX;
/// A waiting operation considers looking for notices and stray messages
/// once in this many fruitless polls.
pub const LOOK_EVERY_POLLS: u32 = 64;
/// The least time between two looks of one operation in a team of up to
/// [`LOOK_RANKS`] ranks; larger teams wait proportionally longer, since a
/// look asks every member's transport.
const LOOK_GAP: Duration = Duration::from_millis(1);
/// See [`LOOK_GAP`].
const LOOK_RANKS: usize = 64;

/// The least time between two looks of one operation in a team of `size`.
pub fn look_gap(size: usize) -> Duration {
    LOOK_GAP.saturating_mul(u32::try_from(size.div_ceil(LOOK_RANKS)).unwrap_or(u32::MAX).max(1))
}

/// The step tag of a probe (see the module docs).
const PROBE_TAG: u32 = u32::MAX - 1;
/// How long a receive waits before it probes its peer (long enough that
/// healthy runs rarely do: an unread probe stays queued).
pub const PROBE_AFTER: Duration = Duration::from_secs(1);
/// How many of its latest failed collectives a team remembers having told.
const TOLD_KEEP: usize = 16;

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
        Ok(SendFuture { comm: self, peer, tag, state, watch: Watch::default() })
    }

    /// The member of the team whose failure this process learned of first
    /// (seen, or reported by a peer that left because of it), named.
    ///
    /// The rule (ARCHITECTURE.md, "Failure"): a collective fails as soon as
    /// any member of its team has failed, not only the peer it waits for
    /// now: some rank needs that member's part and would wait for it until
    /// its timeout, and a rank that finished with it cannot tell which.
    fn dead_member(&self) -> Option<Error> {
        self.team.transport.first_failed(&self.team.eps).map(|(r, err)| {
            err.prefixed(format!(
                "team rank {r} failed, and a collective of its team cannot complete without every member"
            ))
        })
    }

    fn notice_key(&self, src: usize) -> MsgKey {
        MsgKey { team: self.team.id, seq: self.seq, tag: NOTICE_TAG, src: src as u32 }
    }

    /// Send `peer` a probe of this collective (see the module docs).
    fn probe(&self, peer: usize) -> Option<Box<dyn SendHandle>> {
        let key = MsgKey { team: self.team.id, seq: self.seq, tag: PROBE_TAG, src: self.team.rank as u32 };
        let none = MemRef::empty(ferrocoll_core::MemType::Host);
        self.team.transport.send(self.ep(peer).ok()?, key, self.sig, none).ok()
    }

    /// This collective failed because `differ`'s call differs from this
    /// rank's: tell every other member (once per collective), so that ranks
    /// that wait only for this one, or for messages of another algorithm,
    /// fail too rather than wait forever.
    fn tell_all(&self, differ: CallsDiffer) {
        let mut n = self.team.notices.lock().unwrap_or_else(PoisonError::into_inner);
        if n.told.contains(&self.seq) {
            return;
        }
        if n.told.len() >= TOLD_KEEP {
            n.told.pop_front();
        }
        n.told.push_back(self.seq);
        let others = self.team.eps.iter().enumerate().filter(|&(r, _)| r != self.team.rank);
        let notice = Notice { rank: differ.rank, theirs: differ.theirs };
        n.send(&self.team.transport, others, self.notice_key(self.team.rank), self.sig, notice);
    }

    /// Whether this collective can never complete because the ranks' calls
    /// differ, though no message of it matched a receive to say so: a
    /// notice from a member whose collective failed for that reason, or a
    /// message from `peer` under another step tag whose call differs (see
    /// the module docs). Slow (it asks every member's transport): called
    /// when a [`Watch`] says so.
    fn look(&self, peer: usize) -> Option<Error> {
        let t = &self.team.transport;
        for (r, &ep) in self.team.eps.iter().enumerate().filter(|&(r, _)| r != self.team.rank) {
            let mut buf = [0u8; NOTICE_LEN];
            // SAFETY: `buf` lives on this frame through the call, which alone uses it.
            let mem = unsafe { MemRef::from_mut_slice(&mut buf) };
            match t.try_recv(ep, &self.notice_key(r), &self.sig, mem) {
                Poll::Ready(Ok(())) => return Some(self.told_by(r, &Notice::decode(&buf))),
                // Its own call differs from this rank's: the transport names both.
                Poll::Ready(Err(e)) if e.status() == Status::InvalidParam => {
                    return Some(plain(e).prefixed(format!("rank {r} failed this collective and told this rank")));
                }
                // Nothing, or a member gone (`dead_member` speaks for that).
                _ => {}
            }
            let probe = MsgKey { tag: PROBE_TAG, ..self.notice_key(r) };
            if let Poll::Ready(Err(e)) = t.try_recv(ep, &probe, &self.sig, MemRef::empty(ferrocoll_core::MemType::Host))
            {
                if let Some(differ) = CallsDiffer::of(&e) {
                    self.tell_all(differ);
                    return Some(plain(e).prefixed(format!("probe from rank {r}, which waits for this rank")));
                }
            }
        }
        self.answer_late_probe();
        let (k, theirs) = t.stray(self.ep(peer).ok()?, &self.key(0, peer), &self.sig)?;
        let differ = CallsDiffer { rank: peer as u32, theirs };
        if k.tag != NOTICE_TAG {
            self.tell_all(differ);
        }
        let what = match k.tag {
            NOTICE_TAG => "its notice of a failure".to_string(),
            PROBE_TAG => "its probe (it waits for this rank)".to_string(),
            tag => format!("its message of step tag {tag}"),
        };
        Some(Error::invalid_param(format!(
            "the ranks' calls differ: rank {peer} posted {}, this rank posted {} (collective seq {}: \
                 {what} waits here unread, while this rank waits for another)",
            theirs.describe(),
            self.sig.describe(),
            self.seq,
        )))
    }

    /// The error of a notice from rank `by`, whose call agrees with this
    /// rank's, about the rank whose call it found differing.
    fn told_by(&self, by: usize, n: &Notice) -> Error {
        let Notice { rank, theirs } = *n;
        if rank as usize != self.team.rank && !theirs.agrees(&self.sig) {
            return Error::invalid_param(format!(
                "the ranks' calls differ: rank {rank} posted {}, this rank posted {} (collective seq {}; \
                 rank {by}, whose call agrees with this rank's, found it and told this rank)",
                notice::describe(&theirs),
                self.sig.describe(),
                self.seq
            ));
        }
        Error::invalid_param(format!(
            "rank {by} failed collective seq {} because rank {rank} posted {}, which differs from its call; \
             this rank posted {}",
            self.seq,
            notice::describe(&theirs),
            self.sig.describe()
        ))
    }

    /// Send and wait until `data` may be reused.
    pub async fn send(&self, peer: usize, tag: u32, data: MemRef) -> Result<()> {
        self.isend(peer, tag, data)?.await
    }

    /// Receive the message with `tag` from team rank `peer` into `buf` (its
    /// sender's call must agree with this one, and its size must match).
    pub fn recv(&self, peer: usize, tag: u32, buf: MemRef) -> RecvFuture {
        RecvFuture { comm: self.clone(), peer, tag, buf, failed: None, watch: Watch::default(), probe: None }
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

/// `e` without its source: a "calls differ" error's [`CallsDiffer`] served
/// to tell the others, and its text says it all already (a source would be
/// repeated where the error is duplicated for its waiters).
fn plain(e: Error) -> Error {
    Error::new(e.status(), e.context())
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
    /// When it looks (see [`Comm::look`]).
    watch: Watch,
}

/// When a waiting operation looks for signs that its collective cannot
/// complete (see [`Comm::look`]): counting fruitless polls costs nothing;
/// the clock is read once in [`LOOK_EVERY_POLLS`] of them.
#[derive(Default)]
struct Watch {
    polls: u32,
    /// When it first considered looking (it has waited since about then).
    since: Option<Instant>,
    /// When it last looked.
    looked: Option<Instant>,
}

impl Watch {
    /// After a fruitless poll: whether to look now, and how long the
    /// operation has waited.
    fn due(&mut self, size: usize) -> Option<Duration> {
        self.polls = self.polls.wrapping_add(1);
        if !self.polls.is_multiple_of(LOOK_EVERY_POLLS) {
            return None;
        }
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        if self.looked.is_some_and(|t| now.duration_since(t) < look_gap(size)) {
            return None;
        }
        self.looked = Some(now);
        Some(now.duration_since(since))
    }
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
                    if this.watch.due(this.comm.size()).is_none() {
                        return Poll::Pending;
                    }
                    // A member that died (perhaps one this rank never sends
                    // to) means the peer may never take this message: fail
                    // rather than hang — unless it took it meanwhile.
                    if let Some(err) = this.comm.dead_member() {
                        return match handle.test() {
                            Poll::Ready(Ok(())) => {
                                this.comm.diag.sent(this.peer, this.comm.tag_base + this.tag);
                                Poll::Ready(Ok(()))
                            }
                            _ => Poll::Ready(Err(err)),
                        };
                    }
                    this.comm.look(this.peer).map_or(Poll::Pending, |e| Poll::Ready(Err(e)))
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
    /// When it looks (see [`Comm::look`]).
    watch: Watch,
    /// The probe sent to `peer` once it waited [`PROBE_AFTER`].
    probe: Option<Box<dyn SendHandle>>,
}

impl RecvFuture {
    /// Look (see [`Comm::look`]) if it is time, and probe the peer once
    /// after [`PROBE_AFTER`].
    fn look(&mut self) -> Poll<Result<()>> {
        let Some(waited) = self.watch.due(self.comm.size()) else { return Poll::Pending };
        if let Some(e) = self.comm.look(self.peer) {
            return Poll::Ready(Err(e));
        }
        if self.probe.is_some() {
            if let Some(e) = self.comm.answered(self.peer) {
                return Poll::Ready(Err(e));
            }
        } else if waited >= PROBE_AFTER {
            self.probe = self.comm.probe(self.peer);
        }
        Poll::Pending
    }
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
                // A member that died can never take part: fail now rather than
                // hang. But the peer may have sent this message and then died
                // (or left) between the look above and this check: transports
                // learn of a death after draining what came before it, so one
                // more look decides.
                if let Some(err) = this.comm.dead_member() {
                    return match this.comm.team.transport.try_recv(ep, &key, &this.comm.sig, this.buf) {
                        Poll::Ready(Ok(())) => {
                            this.comm.diag.received(this.peer, key.tag);
                            Poll::Ready(Ok(()))
                        }
                        _ => Poll::Ready(Err(err)),
                    };
                }
                this.look()
            }
            // A message of another call is this collective's own failure, not
            // an echo of a death elsewhere: no grace. The others are told.
            Poll::Ready(Err(e)) if e.status() == Status::InvalidParam => {
                if let Some(differ) = CallsDiffer::of(&e) {
                    this.comm.tell_all(differ);
                }
                Poll::Ready(Err(plain(e).prefixed(format!("receive from rank {}", this.peer))))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_come_at_the_poll_mark_then_no_more_often_than_the_gap() {
        assert_eq!(look_gap(0), LOOK_GAP);
        assert_eq!(look_gap(64), LOOK_GAP);
        assert_eq!(look_gap(65), 2 * LOOK_GAP);
        assert!(look_gap(usize::MAX) >= look_gap(1 << 20), "saturates, never panics");
        let mut w = Watch::default();
        let due: Vec<bool> = (0..LOOK_EVERY_POLLS).map(|_| w.due(2).is_some()).collect();
        assert_eq!(due.iter().filter(|&&d| d).count(), 1, "once, at the mark");
        assert!(due[LOOK_EVERY_POLLS as usize - 1]);
        // (Whether the next mark is too soon depends on the clock: not asserted.)
        std::thread::sleep(look_gap(1000));
        assert!((0..LOOK_EVERY_POLLS).any(|_| w.due(1000).is_some()));
    }
}
