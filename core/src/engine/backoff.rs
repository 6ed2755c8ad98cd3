//! Spin-then-yield waiting, so that more ranks than cores still progress.

/// Spins a few times, then yields the CPU on every call.
///
/// With 16 ranks on 2 cores a pure spin would starve the ranks that hold the
/// data everyone waits for; yielding after a short spin lets them run.
#[derive(Debug, Default)]
pub struct Backoff {
    step: u32,
}

/// Calls that spin before [`Backoff::snooze`] starts yielding.
const SPIN_LIMIT: u32 = 64;

impl Backoff {
    /// A fresh backoff.
    pub fn new() -> Backoff {
        Backoff { step: 0 }
    }

    /// Call when something happened: the next waits spin again.
    pub fn reset(&mut self) {
        self.step = 0;
    }

    /// Wait a little: a CPU spin hint at first, then `yield_now`.
    pub fn snooze(&mut self) {
        if self.step < SPIN_LIMIT {
            for _ in 0..(1u32 << (self.step / 16).min(4)) {
                std::hint::spin_loop();
            }
            self.step += 1;
        } else {
            std::thread::yield_now();
        }
    }
}
