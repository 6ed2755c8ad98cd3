//! [`Notice`]: what a rank tells another about a call that differs — in a
//! notice to every member when its collective failed for it, or in its
//! answer to a probe of a collective it finished (see the `comm` module's
//! docs).

use ferrocoll_core::MemRef;
use ferrocoll_core::args::Signature;
use ferrocoll_transport::{MsgKey, Router, SendHandle};

/// A notice's bytes: the rank whose call differs (u32) and its signature
/// (word and size, u64), little-endian.
pub(super) const NOTICE_LEN: usize = 20;

/// The signature word of "no call of this TL": the post ran on another
/// TL, or failed before it ran (zero-size posts are kept with their
/// calls: `TlTeam::posted_without_task`). No
/// real call has it ([`Signature::TAG_BITS`] are zero in every real word).
const NOT_HERE: u64 = u64::MAX;

/// A call that differs: `rank` posted `theirs` (at the collective whose
/// sequence number the message carries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Notice {
    pub rank: u32,
    pub theirs: Signature,
}

impl Notice {
    pub fn encode(&self) -> [u8; NOTICE_LEN] {
        let mut b = [0u8; NOTICE_LEN];
        b[..4].copy_from_slice(&self.rank.to_le_bytes());
        b[4..12].copy_from_slice(&self.theirs.word.to_le_bytes());
        b[12..].copy_from_slice(&self.theirs.size.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; NOTICE_LEN]) -> Notice {
        let word = |i: usize| u64::from_le_bytes(std::array::from_fn(|j| b[i + j]));
        let rank = u32::from_le_bytes(std::array::from_fn(|j| b[j]));
        Notice { rank, theirs: Signature { word: word(4), size: word(12) } }
    }
}

/// One notice's sends and the bytes they send (the handles first: a tuple
/// drops its fields in order, so they are dropped before the bytes).
type NoticeSends = (Vec<Box<dyn SendHandle>>, Box<[u8; NOTICE_LEN]>);

/// The notices a team's rank sent (see the `comm` module's docs).
#[derive(Default)]
pub(crate) struct Notices {
    /// Sequence numbers told about, the latest few (each is told once).
    pub(super) told: std::collections::VecDeque<u64>,
    /// Sends in flight.
    sending: Vec<NoticeSends>,
}

impl Notices {
    /// Send `notice` under `key`, as a message of the call `sig`, to each
    /// `(team rank, endpoint)` of `to`; its bytes are kept until the sends
    /// complete (checked at the next send: a notice's receiver may never
    /// read it, see the `comm` module's docs).
    pub(super) fn send<'a>(
        &mut self,
        transport: &Router,
        to: impl Iterator<Item = (usize, &'a usize)>,
        key: MsgKey,
        sig: Signature,
        notice: Notice,
    ) {
        self.sending.retain_mut(|(hs, _)| {
            hs.retain_mut(|h| h.test().is_pending());
            !hs.is_empty()
        });
        let bytes = Box::new(notice.encode());
        let mut handles = Vec::new();
        for (r, &ep) in to {
            // SAFETY: the bytes are boxed and kept in `sending` beside the
            // handle, which is dropped first, so they outlive the send.
            let mem = unsafe { MemRef::from_slice(&bytes[..]) };
            match transport.send(ep, key, sig, mem) {
                Ok(h) => handles.push(h),
                Err(e) => ferrocoll_core::log_debug!("p2p: no mismatch notice to rank {r}: {e}"),
            }
        }
        self.sending.push((handles, bytes));
    }
}

/// The signature that stands for "no call of this TL" (see [`NOT_HERE`]).
pub(super) fn not_here() -> Signature {
    Signature { word: NOT_HERE, size: 0 }
}

/// A call in words, "no call of this TL" included.
pub(super) fn describe(sig: &Signature) -> String {
    if sig.word == NOT_HERE {
        return "no p2p collective (its call ran on another TL, or failed to post)".to_string();
    }
    sig.describe()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll_core::CollType;

    #[test]
    fn a_notice_reads_back_as_written() {
        let theirs = Signature::new(CollType::Bcast, None, 3, 510);
        let n = Notice { rank: 7, theirs };
        assert_eq!(Notice::decode(&n.encode()), n);
        assert_eq!(describe(&theirs), theirs.describe());
        assert!(describe(&not_here()).starts_with("no p2p collective"));
        assert!(not_here().word & Signature::TAG_BITS != 0, "no real call's word");
    }
}
