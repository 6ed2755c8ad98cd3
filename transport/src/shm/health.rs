//! What the shm transport knows of each peer's health: a per-peer word
//! that `failed` reads for free, set by progress's scans of the peers'
//! segments and processes (at most every [`SCAN_INTERVAL`], see
//! [`ScanClock`]) or by a corrupt ring. Whether a process runs is
//! [`crate::liveness`]'s business.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferrocoll_core::Error;

/// How often peers' processes are checked.
pub(super) const SCAN_INTERVAL: Duration = Duration::from_millis(50);

/// Health of one peer.
const OPEN: u8 = 0;
const LEFT: u8 = 1;
const DEAD: u8 = 2;
const BROKEN: u8 = 3;

/// What this endpoint knows of a peer's health: open, left cleanly, died, or
/// sent something corrupt.
#[derive(Debug, Default)]
pub(super) struct Health {
    state: AtomicU8,
    reason: OnceLock<String>,
}

impl Health {
    /// The peer closed its transport cleanly.
    pub fn set_left(&self) {
        // Release: the scanner set this after an Acquire load of the peer's
        // CLOSED state; a receiver that Acquire-loads LEFT (gone()) and
        // skips its own look at the segment must still see every record the
        // peer pushed before closing (a chain through this thread).
        let _ = self.state.compare_exchange(OPEN, LEFT, Ordering::Release, Ordering::Relaxed);
    }

    /// The peer's process is gone without closing.
    pub fn set_dead(&self, why: String) {
        let _ = self.reason.set(why);
        // Release: a reader that sees DEAD also sees the reason set above.
        let _ = self.state.compare_exchange(OPEN, DEAD, Ordering::Release, Ordering::Relaxed);
    }

    /// The peer's ring held something this endpoint cannot parse: no later message can be trusted.
    pub fn set_broken(&self, why: String) {
        let _ = self.reason.set(why);
        // Release: as in set_dead; also overrides LEFT, since messages are lost either way.
        self.state.store(BROKEN, Ordering::Release);
    }

    /// Whether the peer is still open.
    pub fn is_open(&self) -> bool {
        // Relaxed: see set_left.
        self.state.load(Ordering::Relaxed) == OPEN
    }

    /// Why the peer can no longer take part, if it died or broke (not if it left cleanly).
    pub fn failure(&self) -> Option<Error> {
        // Acquire: pairs with the Release in set_dead/set_broken, for the reason.
        match self.state.load(Ordering::Acquire) {
            DEAD | BROKEN => Some(Error::io(self.reason.get().cloned().unwrap_or_default())),
            _ => None,
        }
    }

    /// Why the peer can no longer send, if it cannot (left, died or broke).
    pub fn gone(&self, ep: usize) -> Option<Error> {
        // Acquire: as in failure().
        match self.state.load(Ordering::Acquire) {
            LEFT => Some(Error::io(format!("endpoint {ep} left"))),
            DEAD | BROKEN => self.failure(),
            _ => None,
        }
    }
}

/// Calls of [`ScanClock::due`] between two looks at the clock: progress runs
/// millions of times a second, and reading the clock each time would cost
/// more than the rest of an idle progress.
const CALLS_PER_LOOK: u64 = 256;

/// Rate limit for peer scans, shared by the threads that progress one transport.
#[derive(Debug)]
pub(super) struct ScanClock {
    start: Instant,
    /// Milliseconds after `start` at which the next scan is due.
    next_ms: AtomicU64,
    /// Calls since the clock was last read.
    calls: AtomicU64,
}

impl Default for ScanClock {
    fn default() -> Self {
        ScanClock { start: Instant::now(), next_ms: AtomicU64::new(0), calls: AtomicU64::new(0) }
    }
}

impl ScanClock {
    /// True for exactly one caller once the interval has passed.
    pub fn due(&self) -> bool {
        // Relaxed: a counter for rate limiting only.
        if !self.calls.fetch_add(1, Ordering::Relaxed).is_multiple_of(CALLS_PER_LOOK) {
            return false;
        }
        let now = self.start.elapsed().as_millis() as u64;
        // Relaxed: a timestamp; the CAS alone decides who scans.
        let next = self.next_ms.load(Ordering::Relaxed);
        now >= next
            && self
                .next_ms
                .compare_exchange(next, now + SCAN_INTERVAL.as_millis() as u64, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_reports_the_first_failure_and_clock_limits() {
        let h = Health::default();
        assert!(h.is_open() && h.failure().is_none() && h.gone(3).is_none());
        h.set_left();
        assert!(h.failure().is_none());
        assert_eq!(h.gone(3).unwrap().context(), "endpoint 3 left");
        let d = Health::default();
        d.set_dead("endpoint 2 (pid 9) died".into());
        d.set_left();
        assert_eq!(d.failure().unwrap().context(), "endpoint 2 (pid 9) died");
        let c = ScanClock::default();
        assert!(c.due());
        assert!(!c.due());
    }
}
