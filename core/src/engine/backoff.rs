//! Spin-then-yield waiting, so that more ranks than cores still progress.

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
        Backoff { step: 0, spins }
    }

    /// Call when something happened: the next waits spin again.
    pub fn reset(&mut self) {
        self.step = 0;
    }

    /// Wait a little: one CPU spin hint at first (a `pause` is already tens
    /// of nanoseconds on recent CPUs, and a longer spin only notices the peer
    /// later), then `yield_now`.
    pub fn snooze(&mut self) {
        if self.step < self.spins {
            std::hint::spin_loop();
            self.step += 1;
        } else {
            std::thread::yield_now();
        }
    }
}
