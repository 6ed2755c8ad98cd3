//! The CPU-thread execution engine (`UCC_EE_CPU_THREAD`): events the user
//! sets trigger collectives; the engine reports their post and completion.
//!
//! A triggered post on this engine waits until the user sets a matching
//! event ([`CpuEe::set_event`], e.g. `ComputeComplete` once the input is
//! computed): an event of the type given to `triggered_post`, with its tag
//! (`Event::request`) unless that is 0. Events and triggers are matched
//! first come, first served: an event goes to the oldest trigger waiting
//! for it; an event nobody waits for yet is kept (up to 4096) for the next
//! trigger that wants it. Each event triggers one collective; an event
//! given to a triggered post that is then cancelled before it starts is
//! consumed with it.

#![forbid(unsafe_code)]

mod inbound;
mod trigger;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ferrocoll_core::{Ee, EeTrigger, EeType, Event, Result};

use crate::queue::Outbound;
use inbound::{Filter, Inbound};
use trigger::CpuTrigger;

/// Numbers engines for messages ("CPU EE #3").
static NEXT_NUMBER: AtomicU64 = AtomicU64::new(1);

struct Shared {
    number: u64,
    inbound: Mutex<Inbound>,
    outbound: Outbound,
}

impl Shared {
    fn inbound(&self) -> MutexGuard<'_, Inbound> {
        // Poisoned only if a thread panicked while holding it; the queues stay whole.
        self.inbound.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn describe(&self) -> String {
        format!("CPU EE #{}", self.number)
    }
}

/// A CPU-thread execution engine (`ucc_ee_create` with `UCC_EE_CPU_THREAD`).
///
/// Cheap to share: every method takes `&self` and may be called from any thread.
pub struct CpuEe {
    shared: Arc<Shared>,
}

impl Default for CpuEe {
    fn default() -> Self {
        CpuEe::new()
    }
}

impl std::fmt::Debug for CpuEe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shared.describe())
    }
}

impl CpuEe {
    /// A new engine with empty queues.
    pub fn new() -> CpuEe {
        // Relaxed: numbers only need to be unique.
        let number = NEXT_NUMBER.fetch_add(1, Ordering::Relaxed);
        CpuEe { shared: Arc::new(Shared { number, inbound: Mutex::default(), outbound: Outbound::default() }) }
    }

    /// The user signals an event (`ucc_ee_set_event`), e.g. `ComputeComplete`:
    /// it starts the oldest triggered post waiting for it, or is kept for the
    /// next one. `Overflow` cannot be set; more than 4096 events kept is `NoResource`.
    pub fn set_event(&self, ev: Event) -> Result<()> {
        self.shared.inbound().set(ev).map_err(|e| e.prefixed(self.shared.describe()))
    }

    /// The next event for the user, if any (`ucc_ee_get_event`); acknowledge
    /// it with [`CpuEe::ack_event`].
    pub fn get_event(&self) -> Option<Event> {
        self.shared.outbound.get()
    }

    /// Acknowledge an event from `get_event` or `wait` (`ucc_ee_ack_event`).
    pub fn ack_event(&self, ev: &Event) -> Result<()> {
        self.shared.outbound.ack(ev, &|| self.shared.describe())
    }

    /// Block until an event arrives and return it (`ucc_ee_wait`, which
    /// returns the event rather than dropping it as UCC's does); `TimedOut`
    /// after `timeout`. Acknowledge it like one from `get_event`.
    pub fn wait(&self, timeout: Duration) -> Result<Event> {
        self.shared.outbound.wait(timeout, &|| self.shared.describe())
    }

    /// Events set by the user that no triggered post has taken yet.
    pub fn pending_events(&self) -> usize {
        self.shared.inbound().pending()
    }
}

impl Ee for CpuEe {
    fn ee_type(&self) -> EeType {
        EeType::CpuThread
    }

    fn describe(&self) -> String {
        self.shared.describe()
    }

    fn trigger(&self, ev: &Event, _request: u64) -> Result<Box<dyn EeTrigger>> {
        let filter = Filter(*ev);
        let (id, fired) = self.shared.inbound().arm(filter)?;
        Ok(Box::new(CpuTrigger::new(self.shared.clone(), id, filter, fired)))
    }

    fn set_event(&self, ev: Event) -> Result<()> {
        CpuEe::set_event(self, ev)
    }

    fn get_event(&self) -> Option<Event> {
        CpuEe::get_event(self)
    }

    fn ack_event(&self, ev: &Event) -> Result<()> {
        CpuEe::ack_event(self, ev)
    }

    fn wait(&self, timeout: Duration) -> Result<Event> {
        CpuEe::wait(self, timeout)
    }
}
