//! When a wait looks whether the ranks it waits for still live.
//!
//! Whether a rank's process lives is a system call (`/proc`), too dear for
//! every poll of a wait: it is made on one fruitless poll in
//! [`EVERY_POLLS`]. Counted in polls alone, that is quick while polls are
//! quick (a spin), but a rank that yields its core on every poll (the
//! engine's backoff past its spins) on a machine whose cores are busy with
//! other processes waits a time slice per poll: 4 096 polls were 10 s and
//! more there, and a dead rank went unnamed that long (the shm TL's
//! liveness tests failed so under qemu and under CPU hogs). So the polls
//! also look at the clock, on one in [`CLOCK_EVERY_POLLS`] (a wait that
//! ends sooner never reads it), and check liveness once [`PERIOD`] has
//! passed since the clock last asked for a check, or since its first look.

use std::time::{Duration, Instant};

/// Fruitless polls between two liveness checks, however fast they come.
const EVERY_POLLS: u32 = 4096;

/// Fruitless polls between two looks at the clock.
const CLOCK_EVERY_POLLS: u32 = 64;

/// The longest time between two liveness checks (past the first
/// [`CLOCK_EVERY_POLLS`] polls, and give or take that many polls).
const PERIOD: Duration = Duration::from_millis(100);

/// The fruitless polls of one wait for one rank (or one thing), and when
/// liveness was last checked.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LivenessCadence {
    polls: u32,
    /// When the clock was first read, or last asked for a check (a check
    /// asked for by the poll count leaves it: that path reads no clock).
    since: Option<Instant>,
}

impl LivenessCadence {
    /// Count one fruitless poll; whether to check liveness at this one.
    pub(crate) fn due(&mut self) -> bool {
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(EVERY_POLLS) {
            return true;
        }
        if !self.polls.is_multiple_of(CLOCK_EVERY_POLLS) {
            return false;
        }
        let now = Instant::now();
        match self.since {
            Some(since) if now.saturating_duration_since(since) < PERIOD => false,
            Some(_) => {
                self.since = Some(now);
                true
            }
            None => {
                self.since = Some(now);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The polls (1-based) at which `due` said yes, out of `n`, each poll
    /// taking `poll_takes`.
    fn due_at(n: u32, poll_takes: Duration) -> Vec<u32> {
        let mut c = LivenessCadence::default();
        (1..=n)
            .filter(|_| {
                std::thread::sleep(poll_takes);
                c.due()
            })
            .collect()
    }

    #[test]
    fn fast_polls_check_once_in_every_polls() {
        assert_eq!(due_at(3 * EVERY_POLLS, Duration::ZERO), [EVERY_POLLS, 2 * EVERY_POLLS, 3 * EVERY_POLLS]);
    }

    #[test]
    fn slow_polls_check_once_a_period() {
        // 2 ms a poll: the clock is read at poll 64 (128 ms), then a check
        // is due at the first look at it a period later: poll 128 (256 ms).
        let due = due_at(4 * CLOCK_EVERY_POLLS, Duration::from_millis(2));
        assert_eq!(due.first(), Some(&(2 * CLOCK_EVERY_POLLS)), "{due:?}");
        assert!(due.len() >= 2, "a check at least every {PERIOD:?}: {due:?}");
    }

    #[test]
    fn a_short_wait_never_reads_the_clock() {
        let mut c = LivenessCadence::default();
        for _ in 1..CLOCK_EVERY_POLLS {
            assert!(!c.due());
        }
        assert!(c.since.is_none());
    }
}
