//! The CPU engine's side of one triggered post: ready once a matching
//! event was set; nothing to release at completion but its place in line.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use ferrocoll_core::{EeTrigger, Event, Result};

use super::Shared;
use super::inbound::Filter;

pub(super) struct CpuTrigger {
    shared: Arc<Shared>,
    id: u64,
    filter: Filter,
    /// Set (by `set_event` or at arming) when an event was given to this trigger.
    fired: Arc<AtomicBool>,
}

impl CpuTrigger {
    pub(super) fn new(shared: Arc<Shared>, id: u64, filter: Filter, fired: Arc<AtomicBool>) -> Self {
        CpuTrigger { shared, id, filter, fired }
    }
}

impl EeTrigger for CpuTrigger {
    fn poll_ready(&mut self) -> Poll<Result<()>> {
        // Acquire: pairs with the Release store in `Inbound::set` (lock-free poll).
        if self.fired.load(Ordering::Acquire) { Poll::Ready(Ok(())) } else { Poll::Pending }
    }

    fn waiting_for(&self) -> Arc<str> {
        format!("{} set on {} (set_event)", self.filter, self.shared.describe()).into()
    }

    fn emit(&self, ev: Event) {
        self.shared.outbound.post(ev);
    }

    fn complete(&mut self, _succeeded: bool) {
        // Acquire: see poll_ready. A trigger that never fired gives up its
        // place, so that a later event goes to a later post.
        if !self.fired.load(Ordering::Acquire) {
            self.shared.inbound().disarm(self.id);
        }
    }
}
