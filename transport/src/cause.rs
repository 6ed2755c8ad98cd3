//! The cause an endpoint passes on when it leaves.
//!
//! When a rank dies, the ranks that notice it first fail their collectives,
//! and their programs often destroy their contexts and exit. A rank that
//! only talks to those survivors then sees them leave, and without more
//! would blame one of them. So an endpoint that closes its transport after
//! it learned that a peer failed names that peer in its goodbye (TCP: the
//! goodbye frame; shared memory: its segment header), and endpoints that
//! hear the goodbye record the failure as reported: [`Transport::failed`]
//! then names the rank that failed first, wherever the news came from.
//!
//! "First" is the order in which this process learned of the failures
//! (its own observations and reports alike), which is what it can know.
//!
//! [`Transport::failed`]: crate::Transport::failed

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use ferrocoll_core::Error;

/// When this process learned of a failure, in order (shared by every
/// transport of the process, so that "first" is one order).
fn next_order() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    // Relaxed: only the order of the values matters, not what they publish.
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// What one endpoint knows of one peer's failure: when it learned of it,
/// and, if it only heard of it, from whom.
#[derive(Debug, Default)]
pub(crate) struct FailureMark {
    /// 0 while no failure is known; else the order in which it became known.
    order: AtomicU64,
    /// The endpoint whose goodbye reported it (set only for reports).
    reported_by: OnceLock<usize>,
}

impl FailureMark {
    /// This endpoint saw the peer fail itself (no-op if it knew already).
    pub(crate) fn saw(&self) {
        // Relaxed: an ordinal for choosing the first failure, nothing published with it.
        let _ = self.order.compare_exchange(0, next_order(), Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Endpoint `by` said, as it left, that the peer failed. True if this
    /// is news (the first this endpoint learns of that failure).
    pub(crate) fn reported(&self, by: usize) -> bool {
        if self.order().is_some() {
            return false;
        }
        // Before the order, so that a reader that finds the order mostly finds
        // the reporter too (one that does not just sees no report yet, and
        // looks again at its next poll). A race with `saw` may leave both
        // set; the failure is then named as reported, which is still true.
        let _ = self.reported_by.set(by);
        self.order.compare_exchange(0, next_order(), Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// When the failure became known, if it is.
    pub(crate) fn order(&self) -> Option<u64> {
        Some(self.order.load(Ordering::Relaxed)).filter(|&o| o != 0)
    }

    /// The failure of endpoint `ep` as reported by another, if that is how it is known.
    pub(crate) fn report(&self, ep: usize) -> Option<Error> {
        self.order()?;
        let by = self.reported_by.get()?;
        Some(Error::io(format!("endpoint {ep} failed, as endpoint {by} reported when it left because of it")))
    }
}

/// The peer to name in a goodbye: of `marks` (endpoint, its mark), the one
/// whose failure this endpoint learned of first.
pub(crate) fn first_failed<'a>(marks: impl Iterator<Item = (usize, &'a FailureMark)>) -> Option<usize> {
    marks.filter_map(|(ep, m)| Some((m.order()?, ep))).min().map(|(_, ep)| ep)
}

/// Whether a cause named by endpoint `by` in its goodbye is one to record
/// here, at endpoint `me` of `n_eps`: a real endpoint, neither the sender
/// nor this one (a peer that says this endpoint failed is wrong about it).
pub(crate) fn plausible(cause: usize, by: usize, me: usize, n_eps: usize) -> bool {
    cause < n_eps && cause != by && cause != me
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_learned_is_named_and_reports_say_who_reported() {
        let marks: Vec<FailureMark> = (0..4).map(|_| FailureMark::default()).collect();
        assert_eq!(first_failed(marks.iter().enumerate()), None);
        marks[3].saw();
        assert!(marks[1].reported(2), "news");
        marks[1].saw();
        assert!(!marks[1].reported(0), "known already");
        assert_eq!(first_failed(marks.iter().enumerate()), Some(3));
        assert!(marks[3].report(3).is_none(), "seen, not reported");
        let e = marks[1].report(1).expect("reported").to_string();
        assert!(e.contains("endpoint 1 failed, as endpoint 2 reported"), "{e}");
        assert!(marks[0].report(0).is_none());
    }

    #[test]
    fn implausible_causes_are_ignored() {
        assert!(plausible(2, 1, 0, 3));
        assert!(!plausible(3, 1, 0, 3), "no such endpoint");
        assert!(!plausible(1, 1, 0, 3), "the sender itself");
        assert!(!plausible(0, 1, 0, 3), "this endpoint, which runs");
    }
}
