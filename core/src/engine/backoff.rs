//! Spin-then-yield waiting, so that more ranks than cores still progress.

use std::sync::atomic::{AtomicU32, Ordering};

/// Spins a few times, then yields the CPU on every call.
///
/// With 16 ranks on 2 cores a pure spin would starve the ranks that hold the
/// data everyone waits for; yielding after a short spin lets them run. How
/// long to spin depends on whether the host has a core per rank (see
/// [`Backoff::with_spins`]).
#[derive(Debug)]
pub struct Backoff {
    step: u32,
    spins: u32,
    /// Past `spins`, yield on one call in this many (1: on every call).
    yield_every: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new()
    }
}

/// Calls that spin before [`Backoff::snooze`] starts yielding, when every rank
/// has a core: tens of microseconds of polling, enough for a peer on another
/// core to answer without a system call in between.
pub const SPINS_DEDICATED: u32 = 256;

/// Past its spins, a rank with a core of its own yields on one wait in this
/// many: often enough that a process outside the job (a build on a shared
/// machine) still gets the core now and then, rarely enough that the rank
/// is running when its peer's flag arrives. Yielding on every wait made the
/// rank that waits (in a barrier, always the same one) lose its core to such
/// a process for a time slice, which showed as one rank's latency three
/// times the other's.
pub const YIELD_EVERY_DEDICATED: u32 = 256;

/// The same when ranks outnumber cores: the peer we wait for may not be
/// running, so give the core away almost at once (Open MPI does the same
/// when oversubscribed).
pub const SPINS_OVERSUBSCRIBED: u32 = 2;

impl Backoff {
    /// A fresh backoff for a host with a core per rank.
    pub fn new() -> Backoff {
        Backoff::with_spins(SPINS_DEDICATED)
    }

    /// A fresh backoff that spins `spins` times before yielding.
    pub fn with_spins(spins: u32) -> Backoff {
        Backoff { step: 0, spins, yield_every: 1 }
    }

    /// A fresh backoff for a rank that has a core of its own (`dedicated`):
    /// past `spins` it yields only on one call in [`YIELD_EVERY_DEDICATED`];
    /// else as [`Backoff::with_spins`].
    pub fn for_rank(spins: u32, dedicated: bool) -> Backoff {
        Backoff { step: 0, spins, yield_every: if dedicated { YIELD_EVERY_DEDICATED } else { 1 } }
    }

    /// Whether the next [`Backoff::snooze`] yields the CPU.
    pub fn yields_next(&self) -> bool {
        self.step >= self.spins && (self.step - self.spins).is_multiple_of(self.yield_every.max(1))
    }

    /// Call when something happened: the next waits spin again.
    pub fn reset(&mut self) {
        self.step = 0;
    }

    /// Wait a little: one CPU spin hint at first (a `pause` is already tens
    /// of nanoseconds on recent CPUs, and a longer spin only notices the peer
    /// later), then `yield_now` (on one call in `yield_every`, spinning on the others).
    pub fn snooze(&mut self) {
        if self.step < self.spins {
            std::hint::spin_loop();
            self.step += 1;
        } else {
            let yields = self.yields_next();
            // Past u32::MAX polls the count starts again at the first yield.
            self.step = self.step.checked_add(1).unwrap_or(self.spins);
            if yields {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// Counts the calls in a row of a caller's own waiting loop that found
/// nothing finished while something was in flight — a user's progress
/// calls (`ContextInner::user_progress`), or the tests of one operation
/// (`Context::after_fruitless_test`) — and says when the caller should
/// yield its core: past `spins` of them, as [`Backoff`] does for a rank
/// that waits in the library.
#[derive(Debug, Default)]
pub struct FruitlessProgress {
    in_a_row: AtomicU32,
}

impl FruitlessProgress {
    /// A call finished `finished` tasks, with something still in flight or
    /// not (`in_flight`): whether its caller should yield now.
    pub fn yields_after(&self, finished: usize, in_flight: bool, spins: u32) -> bool {
        // Relaxed, and a load and a store: only how many in a row matters,
        // and threads that progress at once may each miss the other's count.
        if finished > 0 || !in_flight {
            self.in_a_row.store(0, Ordering::Relaxed);
            return false;
        }
        let n = self.in_a_row.load(Ordering::Relaxed).saturating_add(1);
        self.in_a_row.store(n, Ordering::Relaxed);
        n > spins
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fruitless_progress_yields_past_its_spins_until_something_finishes() {
        let f = FruitlessProgress::default();
        let calls = |n: usize, finished: usize, in_flight: bool| -> Vec<bool> {
            (0..n).map(|_| f.yields_after(finished, in_flight, 2)).collect()
        };
        assert_eq!(calls(4, 0, true), [false, false, true, true]);
        assert_eq!(calls(1, 1, true), [false], "a finished task starts the count again");
        assert_eq!(calls(3, 0, true), [false, false, true]);
        assert_eq!(calls(1, 0, false), [false], "nothing in flight: nothing to wait for");
        assert_eq!(calls(3, 0, true), [false, false, true]);
    }

    /// Counts the yields of `n` snoozes (`snooze` yields exactly where `yields_next` says).
    fn yields(b: &mut Backoff, n: u32) -> u32 {
        (0..n)
            .map(|_| {
                let y = b.yields_next();
                b.snooze();
                u32::from(y)
            })
            .sum()
    }

    #[test]
    fn oversubscribed_yields_every_time_past_its_spins() {
        let mut b = Backoff::for_rank(2, false);
        b.snooze();
        b.snooze();
        assert_eq!(yields(&mut b, 10), 10);
    }

    #[test]
    fn dedicated_yields_rarely_past_its_spins() {
        let mut b = Backoff::for_rank(4, true);
        for _ in 0..4 {
            assert!(!b.yields_next());
            b.snooze();
        }
        let mut count = 0;
        for _ in 0..YIELD_EVERY_DEDICATED * 3 {
            count += u32::from(b.yields_next());
            b.snooze();
        }
        assert_eq!(count, 3);
        b.reset();
        assert!(!b.yields_next());
    }
}
