//! The queue of events an engine produces for the user (`CollectivePost`,
//! `CollectiveComplete`): UCC's `get_event` / `ack_event` / `wait`.

#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ferrocoll_core::{Error, Event, EventType, Result};

/// Events a queue holds before it reports an overflow.
pub(crate) const CAPACITY: usize = 4096;

#[derive(Default)]
struct State {
    events: VecDeque<Event>,
    /// Events handed out by `get`/`wait` and not yet acknowledged.
    unacked: usize,
    /// An `Overflow` event is queued and not yet taken.
    overflowed: bool,
}

/// Events for the user, bounded: on overflow one `Overflow` event takes the
/// place of the excess until the user takes it.
#[derive(Default)]
pub(crate) struct Outbound {
    state: Mutex<State>,
    ready: Condvar,
}

impl Outbound {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Poisoned only if a thread panicked while holding it; the queue stays whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue an event and wake a waiter.
    pub(crate) fn post(&self, ev: Event) {
        let mut q = self.lock();
        if q.events.len() >= CAPACITY {
            if !q.overflowed {
                q.overflowed = true;
                q.events.push_back(Event::new(EventType::Overflow));
            }
        } else {
            q.events.push_back(ev);
        }
        drop(q);
        self.ready.notify_all();
    }

    fn take(q: &mut State) -> Option<Event> {
        let ev = q.events.pop_front()?;
        q.unacked += 1;
        if ev.ev_type == EventType::Overflow {
            q.overflowed = false;
        }
        Some(ev)
    }

    /// The next event, if any.
    pub(crate) fn get(&self) -> Option<Event> {
        Self::take(&mut self.lock())
    }

    /// Acknowledge an event from `get` or `wait`; `engine` names the engine in the error.
    pub(crate) fn ack(&self, ev: &Event, engine: &dyn Fn() -> String) -> Result<()> {
        let mut q = self.lock();
        if q.unacked == 0 {
            return Err(Error::invalid_param(format!(
                "ack of {ev} on {}, but no event from get_event or wait is waiting for an ack",
                engine()
            )));
        }
        q.unacked -= 1;
        Ok(())
    }

    /// Block until an event arrives and return it; `TimedOut` after `timeout`.
    pub(crate) fn wait(&self, timeout: Duration, engine: &dyn Fn() -> String) -> Result<Event> {
        let deadline = Instant::now().checked_add(timeout);
        let mut q = self.lock();
        loop {
            if let Some(ev) = Self::take(&mut q) {
                return Ok(ev);
            }
            let now = Instant::now();
            let left = match deadline {
                Some(d) if now >= d => {
                    return Err(Error::timed_out(format!(
                        "no event on {} within {:.3} s",
                        engine(),
                        timeout.as_secs_f64()
                    )));
                }
                Some(d) => d - now,
                // A timeout too large for the clock: wait in long slices.
                None => Duration::from_secs(3600),
            };
            q = self.ready.wait_timeout(q, left).map(|(g, _)| g).unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn name() -> String {
        "test EE".into()
    }

    #[test]
    fn get_then_ack_once() {
        let q = Outbound::default();
        assert!(q.get().is_none());
        q.post(Event::with_request(EventType::CollectivePost, 7));
        let ev = q.get().unwrap();
        assert_eq!(ev, Event::with_request(EventType::CollectivePost, 7));
        q.ack(&ev, &name).unwrap();
        let e = q.ack(&ev, &name).unwrap_err();
        assert!(e.context().contains("CollectivePost (request 7)") && e.context().contains("test EE"), "{e}");
    }

    #[test]
    fn wait_returns_the_event_or_times_out() {
        let q = Arc::new(Outbound::default());
        let q2 = q.clone();
        let t = std::thread::spawn(move || q2.wait(Duration::from_secs(5), &name));
        std::thread::sleep(Duration::from_millis(20));
        q.post(Event::with_request(EventType::CollectiveComplete, 3));
        assert_eq!(t.join().unwrap().unwrap().request, 3);
        let e = q.wait(Duration::from_millis(10), &name).unwrap_err();
        assert_eq!(e.status(), ferrocoll_core::Status::TimedOut);
        assert!(e.context().contains("test EE"), "{e}");
        // A timeout beyond the clock's range does not panic.
        q.post(Event::new(EventType::CollectivePost));
        assert!(q.wait(Duration::MAX, &name).is_ok());
    }

    #[test]
    fn overflow_is_reported_once_until_taken() {
        let q = Outbound::default();
        for i in 0..CAPACITY as u64 + 10 {
            q.post(Event::with_request(EventType::CollectiveComplete, i));
        }
        let mut overflows = 0;
        let mut n = 0;
        while let Some(e) = q.get() {
            overflows += usize::from(e.ev_type == EventType::Overflow);
            n += 1;
        }
        assert_eq!((overflows, n), (1, CAPACITY + 1));
        q.post(Event::new(EventType::CollectivePost));
        assert_eq!(q.get().map(|e| e.ev_type), Some(EventType::CollectivePost));
    }
}
