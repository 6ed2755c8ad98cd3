//! Which TL each of a team's latest posts went to, by sequence number.
//!
//! The core writes one word per post (the post's sequence number and the
//! tag of the TL that runs it); a TL reads it when it judges a late probe:
//! a member waits for this rank in collective `seq`, and this rank's TL
//! kept no call of its own there. Was `seq` another TL's collective (the
//! calls differ), or not posted yet (the prober is only early)? Without
//! this the p2p TL could not tell the two apart for this rank's newest
//! post, and a rank waiting in another TL's collective (TL/NCCL's, say)
//! left the prober waiting until a timeout.

use std::sync::atomic::{AtomicU64, Ordering};

/// How many posts it remembers (older ones are overwritten).
const KEPT: usize = 64;

/// The tag of a post that no TL runs (a zero-size collective).
pub const NO_TL: u8 = u8::MAX;

/// See the module docs.
pub struct PostedVia {
    /// `seq << 9 | 1 << 8 | tag` of post `seq` at `seq % KEPT`; 0: none yet.
    words: [AtomicU64; KEPT],
}

impl PostedVia {
    /// A team's, before its first post.
    pub fn new() -> PostedVia {
        PostedVia { words: std::array::from_fn(|_| AtomicU64::new(0)) }
    }

    /// Post `seq` went to the TL tagged `tag` (one store; posts outside
    /// the team's order, from `ACTIVE_SET_SEQ` up, are not kept).
    pub fn note(&self, seq: u64, tag: u8) {
        if seq >> 55 != 0 {
            return;
        }
        // Relaxed: the word is read on its own, and a reader that misses
        // it judges the probe at a later look.
        self.word(seq).store(seq << 9 | 1 << 8 | u64::from(tag), Ordering::Relaxed);
    }

    /// The tag of the TL post `seq` went to, if this rank posted it and
    /// remembers it.
    pub fn tag(&self, seq: u64) -> Option<u8> {
        let w = self.word(seq).load(Ordering::Relaxed);
        (w & 1 << 8 != 0 && w >> 9 == seq).then_some((w & 0xff) as u8)
    }

    fn word(&self, seq: u64) -> &AtomicU64 {
        &self.words[(seq % KEPT as u64) as usize]
    }
}

impl Default for PostedVia {
    fn default() -> Self {
        PostedVia::new()
    }
}

impl std::fmt::Debug for PostedVia {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PostedVia")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_remembers_the_latest_posts_and_nothing_else() {
        let v = PostedVia::new();
        assert_eq!(v.tag(0), None, "nothing posted yet");
        v.note(0, 0);
        v.note(1, 3);
        v.note(2, NO_TL);
        assert_eq!((v.tag(0), v.tag(1), v.tag(2), v.tag(3)), (Some(0), Some(3), Some(NO_TL), None));
        v.note(64, 5);
        assert_eq!((v.tag(0), v.tag(64)), (None, Some(5)), "overwritten by the post 64 later");
        v.note(crate::backend::ACTIVE_SET_SEQ | 7, 1);
        assert_eq!(v.tag(7), None, "active-set posts are outside the team's order");
    }
}
