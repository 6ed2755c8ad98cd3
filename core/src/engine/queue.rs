//! The progress queue: the tasks in flight on one context, polled by
//! every `Context::progress` (see `task.rs` for the slots it holds).

use std::sync::{Arc, Mutex, MutexGuard};

use super::task::{TaskDesc, TaskSlot, WatchdogConfig};
use crate::error::Error;

/// The tasks in flight on one context.
#[derive(Default)]
pub struct ProgressQueue {
    tasks: Mutex<Vec<Arc<TaskSlot>>>,
}

impl ProgressQueue {
    /// Add a posted task, unless the queue holds it already (see [`TaskSlot::enqueue`]).
    pub fn push(&self, slot: Arc<TaskSlot>) {
        if slot.enqueue() {
            self.lock().push(slot);
        }
    }

    /// Add a task whose poll at post marked it queued (`Polled::Pending { push: true }`).
    pub fn push_polled(&self, slot: Arc<TaskSlot>) {
        self.lock().push(slot);
    }

    /// Number of tasks in flight.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no task is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Arc<TaskSlot>>> {
        // Poisoned only if a push panicked; a Vec of Arcs stays consistent.
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Poll every task once; finished tasks leave the queue. Returns how many finished.
    ///
    /// The queue lock is not held while polling, so tasks may be posted (and
    /// other threads may progress other tasks) meanwhile.
    pub fn progress(&self, watchdog: &WatchdogConfig) -> usize {
        let mut taken = std::mem::take(&mut *self.lock());
        if taken.is_empty() {
            return 0;
        }
        let before = taken.len();
        taken.retain(|slot| !slot.poll_in_queue(watchdog));
        let finished = before - taken.len();
        let mut tasks = self.lock();
        // Tasks posted while we polled go after the ones already running.
        let posted_meanwhile = std::mem::replace(&mut *tasks, taken);
        tasks.extend(posted_meanwhile);
        finished
    }

    /// Cancel every task (context destruction).
    pub fn cancel_all(&self, reason: &dyn Fn(&TaskDesc) -> Error) {
        let tasks = std::mem::take(&mut *self.lock());
        for t in tasks {
            t.cancel(reason);
            t.leave_queue();
        }
    }
}
