//! Spin-then-yield waiting, so that more ranks than cores still progress.

/// Spins a few times, then yields the CPU on every call.
///
/// With 16 ranks on 2 cores a pure spin would starve the ranks that hold the
/// data everyone waits for; yielding after a short spin lets them run.
#[derive(Debug, Default)]
pub struct Backoff {
    step: u32,
}

/// Calls that spin before [`Backoff::snooze`] starts yielding: a few
/// microseconds of polling, enough for a peer on another core to answer.
const SPIN_LIMIT: u32 = 256;

impl Backoff {
    /// A fresh backoff.
    pub fn new() -> Backoff {
        Backoff { step: 0 }
    }

    /// Call when something happened: the next waits spin again.
    pub fn reset(&mut self) {
        self.step = 0;
    }

    /// Wait a little: one CPU spin hint at first (a `pause` is already tens
    /// of nanoseconds on recent CPUs, and a longer spin only notices the peer
    /// later), then `yield_now`.
    pub fn snooze(&mut self) {
        if self.step < SPIN_LIMIT {
            std::hint::spin_loop();
            self.step += 1;
        } else {
            std::thread::yield_now();
        }
    }
}
