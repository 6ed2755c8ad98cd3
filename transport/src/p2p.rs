//! The point-to-point interface every transport implements: how one rank's
//! bytes reach another rank.
//!
//! Every transport works the same way: the sender posts a message (a
//! [`MsgKey`] and bytes) to a destination endpoint, and the receiver *pulls*
//! it when its receive is polled. A message that arrives before its receive
//! is kept (the unexpected queue), so a fast rank may run ahead. Pulling
//! means a receive is never registered anywhere, so cancelling a receive is
//! simply dropping its future.
//!
//! Messages with the same key are matched first in, first out: an algorithm
//! may reuse a step tag for several messages between the same two ranks.
//!
//! Every message carries its sender's call [`Signature`] (the collective,
//! its reduction, root and size). It is not part of matching: a receive
//! takes the first message of its key, checks that the sender's signature
//! agrees with its own before anything else (before the size, and before a
//! byte reaches the receive buffer), and fails naming both calls if not. So
//! ranks whose calls differ get an error, never each other's bytes taken
//! for their own (a sum read as a max, int32 read as float32), even when
//! the sizes happen to match.
//!
//! Large messages are not copied at the sender: the receiver copies straight
//! from the sender's buffer (rendezvous), and the send completes when it has.

#![forbid(unsafe_code)]

use std::task::Poll;

use ferrocoll_core::args::Signature;
use ferrocoll_core::{Error, MemRef, ProcInfo, Result};

/// What matches a message to its receive: the team, the collective's
/// sequence number in that team, the algorithm's step tag and the sender's
/// team rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MsgKey {
    /// Team id.
    pub team: u64,
    /// Collective sequence number within the team.
    pub seq: u64,
    /// Step tag chosen by the algorithm.
    pub tag: u32,
    /// Sender's rank in the team.
    pub src: u32,
}

impl MsgKey {
    /// The error of a receive posted as `mine` matched by a message whose
    /// sender posted `theirs`, which does not agree with it.
    pub(crate) fn calls_differ(&self, theirs: &Signature, mine: &Signature) -> Error {
        Error::invalid_param(format!(
            "the ranks' calls differ: rank {} posted {}, this rank posted {} (collective seq {})",
            self.src,
            theirs.describe(),
            mine.describe(),
            self.seq
        ))
        .with_source(CallsDiffer { rank: self.src, theirs: *theirs })
    }

    /// Whether `other` (a message with the sender's signature `theirs`) is
    /// of the same team, sequence number and sender as this key, whatever
    /// its step tag, and of a call that does not agree with `mine` (see
    /// [`Transport::stray`]).
    pub fn stray_of(&self, other: &MsgKey, theirs: &Signature, mine: &Signature) -> bool {
        other.team == self.team && other.seq == self.seq && other.src == self.src && !theirs.agrees(mine)
    }

    /// The error of a receive of `expect` bytes matched by a message of `len`.
    pub(crate) fn size_mismatch(&self, len: usize, expect: usize) -> Error {
        Error::io(format!(
            "message from rank {} (seq {}, step tag {}) has {len} bytes but the receive expects {expect}: \
             do the ranks' counts and datatypes agree?",
            self.src, self.seq, self.tag
        ))
    }
}

/// What a "calls differ" error knows, kept as its source so that the TL
/// can tell the other ranks (see `ferrocoll_tl::p2p::Comm`): the rank whose
/// call differs from this one's, and its call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallsDiffer {
    /// The sender's team rank.
    pub rank: u32,
    /// What it posted.
    pub theirs: Signature,
}

impl std::fmt::Display for CallsDiffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {} posted {}", self.rank, self.theirs.describe())
    }
}

impl std::error::Error for CallsDiffer {}

impl CallsDiffer {
    /// The structured part of `e`, if it is a "calls differ" error.
    pub fn of(e: &Error) -> Option<CallsDiffer> {
        std::error::Error::source(e)?.downcast_ref::<CallsDiffer>().copied()
    }
}

/// A send in flight.
pub trait SendHandle: Send {
    /// `Ready(Ok)` once the sender's buffer may be reused.
    fn test(&mut self) -> Poll<Result<()>>;
}

/// A peer as a transport learns it at connection time.
#[derive(Clone, Debug)]
pub struct TransportPeer {
    /// The peer's endpoint index in the OOB group.
    pub ep: usize,
    /// Its host and process.
    pub proc: ProcInfo,
    /// Its address for this transport.
    pub addr: Vec<u8>,
}

/// A transport between the endpoints of one context's OOB group.
pub trait Transport: Send + Sync {
    /// Short name (`inproc`, `shm`, `tcp`).
    fn name(&self) -> &'static str;

    /// Whether this transport can carry messages between `me` and `peer`
    /// (e.g. only within one process, or one host).
    fn reaches(&self, me: &ProcInfo, peer: &ProcInfo) -> bool;

    /// This endpoint's address, exchanged through the OOB.
    fn address(&self) -> Vec<u8>;

    /// Where this endpoint runs, told before [`Transport::connect`] (the
    /// TCP transport's link emulation compares it with its peers').
    fn locate(&self, _me: &ProcInfo) {}

    /// Connect to the endpoints this transport will serve (called once, with
    /// `n_eps` the size of the OOB group and `peers` the subset routed here,
    /// possibly this endpoint itself).
    fn connect(&self, n_eps: usize, peers: &[TransportPeer]) -> Result<()>;

    /// Every endpoint of the group has connected: release what only
    /// connecting needed (e.g. unlink shared-memory names).
    fn connected(&self) -> Result<()> {
        Ok(())
    }

    /// Start sending `data` to endpoint `dst_ep`, as part of a call whose
    /// signature is `sig` (carried with the message for the receiver to
    /// check). The memory must stay valid until the returned handle completes
    /// or is dropped (dropping retracts the message if the receiver has not
    /// taken it yet, or waits for a copy in progress).
    fn send(&self, dst_ep: usize, key: MsgKey, sig: Signature, data: MemRef) -> Result<Box<dyn SendHandle>>;

    /// If the message `key` from endpoint `src_ep` has arrived, take it, and
    /// copy it into `buf` and return `Ready(Ok)` if its sender's signature
    /// agrees with `sig` (else an `InvalidParam` error naming the sender's
    /// rank and both calls) and its length is `buf`'s (else an error);
    /// either failure happens before a byte is written into `buf`, and
    /// releases a rendezvous sender with an error. Otherwise `Pending`, or an
    /// error if `src_ep` can no longer send.
    fn try_recv(&self, src_ep: usize, key: &MsgKey, sig: &Signature, buf: MemRef) -> Poll<Result<()>>;

    /// The first message that has arrived from endpoint `from` (`None`:
    /// from any endpoint this transport serves) whose key and sender's
    /// signature `pick` accepts: its key and signature, left where it is.
    /// It scans the unexpected messages: call it rarely. (An I/O transport
    /// reads what its socket holds for `from` first; for `None` it files
    /// only what its progress has read.)
    fn find_arrived(
        &self,
        _from: Option<usize>,
        _pick: &dyn Fn(&MsgKey, &Signature) -> bool,
    ) -> Option<(MsgKey, Signature)> {
        None
    }

    /// A message that has arrived from `src_ep` for the same team and
    /// sequence number as `key`, of any step tag, whose sender's call does
    /// not agree with `sig` ([`MsgKey::stray_of`]): its key and signature,
    /// left where it is. Ranks whose calls differ may choose different
    /// algorithms, whose messages never match a receive, so no receive ever
    /// checks them; a receive that waits long asks this instead (see
    /// [`Transport::find_arrived`]: rarely).
    fn stray(&self, src_ep: usize, key: &MsgKey, sig: &Signature) -> Option<(MsgKey, Signature)> {
        self.find_arrived(Some(src_ep), &|k, theirs| key.stray_of(k, theirs, sig))
    }

    /// Name endpoint `cause` in the goodbye that [`Transport::close`] will
    /// send to every peer: the failure this process learned of first, which
    /// it leaves because of (see `crate::cause`).
    fn set_cause(&self, _cause: usize) {}

    /// The goodbyes heard since the last call that named a failed endpoint,
    /// each once: (the endpoint that left, the endpoint it named).
    fn take_causes(&self) -> Vec<(usize, usize)> {
        Vec::new()
    }

    /// Move bytes and watch peers (I/O transports; checks of peer liveness).
    fn progress(&self) -> Result<()>;

    /// Whether endpoint `ep` died (its process exited or was killed, its
    /// connection broke) rather than left cleanly: a collective that involves
    /// a dead endpoint can never complete, even when it waits for another
    /// one. Cheap: called on fruitless polls of receives. (A receive directly
    /// from an endpoint that left, cleanly or not, fails in `try_recv`.)
    fn failed(&self, ep: usize) -> Option<Error>;

    /// Release resources so that peers see this endpoint gone.
    fn close(&self);
}
