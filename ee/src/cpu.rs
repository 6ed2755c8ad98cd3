//! The CPU-thread execution engine: two bounded event queues, one from the
//! user to ferrocoll (`set_event`) and one from ferrocoll to the user
//! (`get_event` / `ack_event` / `wait`).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ferrocoll_core::{Error, Result};

use crate::event::{Event, EventType};

/// Events a queue holds before it reports an overflow.
const CAPACITY: usize = 4096;

#[derive(Default)]
struct Queues {
    /// Events set by the user, waiting to trigger collectives.
    inbound: VecDeque<Event>,
    /// Events produced for the user.
    outbound: VecDeque<Event>,
    /// Events handed out by `get_event` and not yet acknowledged.
    unacked: usize,
    overflowed: bool,
}

/// A CPU-thread execution engine.
#[derive(Default)]
pub struct CpuEe {
    q: Mutex<Queues>,
    ready: Condvar,
}

impl CpuEe {
    /// A new engine with empty queues.
    pub fn new() -> CpuEe {
        CpuEe::default()
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.q.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The user signals an event (`ucc_ee_set_event`), e.g. `ComputeComplete`.
    pub fn set_event(&self, ev: Event) -> Result<()> {
        let mut q = self.lock();
        if q.inbound.len() >= CAPACITY {
            return Err(Error::no_resource(format!("CPU EE inbound queue is full ({CAPACITY} events)")));
        }
        q.inbound.push_back(ev);
        Ok(())
    }

    /// ferrocoll takes the next user event (used by triggered post).
    pub fn take_inbound(&self) -> Option<Event> {
        self.lock().inbound.pop_front()
    }

    /// ferrocoll produces an event for the user; on overflow an `Overflow` event replaces the excess.
    pub fn post_event(&self, ev: Event) {
        let mut q = self.lock();
        if q.outbound.len() >= CAPACITY {
            if !q.overflowed {
                q.overflowed = true;
                q.outbound.push_back(Event { ev_type: EventType::Overflow, request: 0 });
            }
        } else {
            q.outbound.push_back(ev);
        }
        drop(q);
        self.ready.notify_all();
    }

    /// The next event for the user, if any (`ucc_ee_get_event`); acknowledge it with [`CpuEe::ack_event`].
    pub fn get_event(&self) -> Option<Event> {
        let mut q = self.lock();
        let ev = q.outbound.pop_front()?;
        q.unacked += 1;
        if ev.ev_type == EventType::Overflow {
            q.overflowed = false;
        }
        Some(ev)
    }

    /// Acknowledge an event from `get_event` (`ucc_ee_ack_event`).
    pub fn ack_event(&self, ev: &Event) -> Result<()> {
        let mut q = self.lock();
        if q.unacked == 0 {
            return Err(Error::invalid_param(format!("ack of {ev:?}, but no event is waiting for an ack")));
        }
        q.unacked -= 1;
        Ok(())
    }

    /// Block until an event arrives and return it (`ucc_ee_wait`, which
    /// returns the event rather than dropping it as UCC's does); `TimedOut` after `timeout`.
    pub fn wait(&self, timeout: Duration) -> Result<Event> {
        let deadline = Instant::now() + timeout;
        let mut q = self.lock();
        loop {
            if let Some(ev) = q.outbound.pop_front() {
                q.unacked += 1;
                return Ok(ev);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::timed_out(format!("no event on the CPU EE within {:.3} s", timeout.as_secs_f64())));
            }
            q = self.ready.wait_timeout(q, deadline - now).map(|(g, _)| g).unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_flow_both_ways() {
        let ee = CpuEe::new();
        ee.set_event(Event { ev_type: EventType::ComputeComplete, request: 7 }).unwrap();
        assert_eq!(ee.take_inbound().map(|e| e.request), Some(7));
        assert!(ee.get_event().is_none());
        ee.post_event(Event { ev_type: EventType::CollectivePost, request: 7 });
        let ev = ee.get_event().unwrap();
        assert_eq!(ev.ev_type, EventType::CollectivePost);
        ee.ack_event(&ev).unwrap();
        assert!(ee.ack_event(&ev).is_err());
    }

    #[test]
    fn wait_returns_the_event_or_times_out() {
        let ee = std::sync::Arc::new(CpuEe::new());
        let e2 = ee.clone();
        let t = std::thread::spawn(move || e2.wait(Duration::from_secs(5)));
        std::thread::sleep(Duration::from_millis(20));
        ee.post_event(Event { ev_type: EventType::CollectiveComplete, request: 3 });
        assert_eq!(t.join().unwrap().unwrap().request, 3);
        assert_eq!(ee.wait(Duration::from_millis(10)).unwrap_err().status(), ferrocoll_core::Status::TimedOut);
    }

    #[test]
    fn overflow_is_reported_once() {
        let ee = CpuEe::new();
        for i in 0..CAPACITY as u64 + 10 {
            ee.post_event(Event { ev_type: EventType::CollectiveComplete, request: i });
        }
        let mut overflows = 0;
        while let Some(e) = ee.get_event() {
            overflows += usize::from(e.ev_type == EventType::Overflow);
        }
        assert_eq!(overflows, 1);
    }
}
