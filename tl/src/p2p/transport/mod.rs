//! Point-to-point transports: how one rank's bytes reach another rank.
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
//! Large messages are not copied at the sender: the receiver copies straight
//! from the sender's buffer (rendezvous), and the send completes when it has.

mod fxhash;
mod inproc;

use std::task::Poll;

use ferrocoll_core::{MemRef, Result};

pub(crate) use fxhash::FxBuildHasher;
pub use inproc::InProcTransport;

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

/// A send in flight.
pub trait SendHandle: Send {
    /// `Ready(Ok)` once the sender's buffer may be reused.
    fn test(&mut self) -> Poll<Result<()>>;
}

/// A transport between the endpoints of one context's OOB group.
pub trait Transport: Send + Sync {
    /// Start sending `data` to endpoint `dst_ep`. The memory must stay valid
    /// until the returned handle completes or is dropped (dropping retracts
    /// the message if the receiver has not taken it yet).
    fn send(&self, dst_ep: usize, key: MsgKey, data: MemRef) -> Result<Box<dyn SendHandle>>;

    /// If the message `key` from endpoint `src_ep` has arrived, copy it into
    /// `buf` (its length must match) and return `Ready`. Otherwise `Pending`,
    /// or an error if `src_ep` can no longer send.
    fn try_recv(&self, src_ep: usize, key: &MsgKey, buf: MemRef) -> Poll<Result<()>>;

    /// Move bytes (I/O transports); in-process transports have nothing to do.
    fn progress(&self) -> Result<()>;

    /// Whether endpoint `ep` can be reached by this transport.
    fn reaches(&self, ep: usize) -> bool;
}
