//! The lock of a task's queue slot: one compare-exchange to take it, one
//! plain store to give it back.
//!
//! Every post of a small collective takes its slot's lock once at post and
//! once per poll of its `wait`, almost always uncontended (only another
//! thread's `Context::progress`, a cancel or a dump can meet it there). A
//! `std::sync::Mutex` gives it back with an atomic swap (it must learn
//! whether to wake a sleeper): a second read-modify-write, each of which
//! waits for the core's pending stores. Here a contender spins, then
//! yields its core (`Backoff`), and never sleeps, so there is nobody to
//! wake: the release is a store.
//!
//! The progress queue (`queue.rs`) and the C interface's request handles
//! and kept handles (`capi/src/request.rs`, `capi/src/spares.rs`) take it
//! on every collective too, for the same reason.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

use super::backoff::Backoff;

/// A value behind a lock taken with one atomic operation (see the module docs).
pub struct SlotLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and one guard exists at
// a time (the compare-exchange in `lock`); the value moves between threads
// with it, hence `T: Send`.
unsafe impl<T: Send> Sync for SlotLock<T> {}

/// The lock held: the value, until dropped.
pub struct SlotGuard<'a, T> {
    lock: &'a SlotLock<T>,
    /// What the guard lends, for the auto traits: shared between threads
    /// only if `T: Sync` (as a `&mut T` is), not whenever the lock is.
    _lends: PhantomData<&'a mut T>,
}

impl<T> SlotLock<T> {
    /// A lock around `value`.
    pub fn new(value: T) -> Self {
        SlotLock { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    /// Take the lock, waiting for its holder if there is one.
    pub fn lock(&self) -> SlotGuard<'_, T> {
        // Acquire: pairs with the Release in the guard's drop, so that what
        // the last holder wrote is seen here.
        if self.locked.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.wait_and_take();
        }
        SlotGuard { lock: self, _lends: PhantomData }
    }

    #[cold]
    fn wait_and_take(&self) {
        let mut backoff = Backoff::new();
        loop {
            // Look without writing until it looks free (no line ping-pong).
            while self.locked.load(Ordering::Relaxed) {
                backoff.snooze();
            }
            if self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return;
            }
        }
    }
}

impl<T: Default> Default for SlotLock<T> {
    fn default() -> Self {
        SlotLock::new(T::default())
    }
}

impl<T> Deref for SlotGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see `SlotLock::lock`).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SlotGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard is the only one (see `SlotLock::lock`), and it is borrowed mutably.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SlotGuard<'_, T> {
    fn drop(&mut self) {
        // Release: what the holder wrote is seen by the next one (also when
        // it unwinds from a panic: the value stays whole, as a poisoned
        // mutex's would, and the slot's code never relied on poisoning).
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_that_take_the_lock_never_overlap() {
        let lock = SlotLock::new((0u64, 0u64));
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..20_000 {
                        let mut g = lock.lock();
                        // Torn if two held it at once: both halves move together.
                        g.0 += 1;
                        std::hint::black_box(&mut *g);
                        g.1 += 1;
                        assert_eq!(g.0, g.1);
                    }
                });
            }
        });
        assert_eq!(*lock.lock(), (80_000, 80_000));
    }
}
