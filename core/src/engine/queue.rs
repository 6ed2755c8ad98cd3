//! The progress queue: the tasks in flight on one context, polled by
//! every `Context::progress` (see `task.rs` for the slots it holds).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use super::slot_lock::{SlotGuard, SlotLock};
use super::task::{TaskDesc, TaskSlot, WatchdogConfig};
use crate::error::Error;

/// The tasks in flight on one context.
#[derive(Default)]
pub struct ProgressQueue {
    /// Taken twice by every progress and once by every push of a task
    /// still running after its post: a lock of one atomic operation.
    tasks: SlotLock<Vec<Arc<TaskSlot>>>,
    /// What `tasks` holds (a [`Holds`] as a byte), written under its lock
    /// whenever it changes, read without it as a hint.
    holds: AtomicU8,
}

/// What a progress queue holds, which decides what a context's progress
/// must do besides polling it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Holds {
    /// No task.
    Nothing = 0,
    /// Tasks that all [progress themselves](TaskSlot::self_driven): the
    /// context's transports carry none of them.
    SelfDriven = 1,
    /// At least one task that moves through the context's transports.
    Transported = 2,
}

impl Holds {
    /// What a queue of `tasks` holds.
    fn of(tasks: &[Arc<TaskSlot>]) -> Holds {
        if tasks.is_empty() {
            Holds::Nothing
        } else if tasks.iter().all(|t| t.self_driven()) {
            Holds::SelfDriven
        } else {
            Holds::Transported
        }
    }

    fn from_byte(b: u8) -> Holds {
        match b {
            0 => Holds::Nothing,
            1 => Holds::SelfDriven,
            _ => Holds::Transported,
        }
    }
}

impl ProgressQueue {
    /// Add a posted task, unless the queue holds it already (see [`TaskSlot::enqueue`]).
    pub fn push(&self, slot: Arc<TaskSlot>) {
        if slot.enqueue() {
            self.append(slot);
        }
    }

    /// Add a task whose poll at post marked it queued (`Polled::Pending { push: true }`).
    pub fn push_polled(&self, slot: Arc<TaskSlot>) {
        self.append(slot);
    }

    fn append(&self, slot: Arc<TaskSlot>) {
        let mut tasks = self.lock();
        let now = if slot.self_driven() { Holds::SelfDriven } else { Holds::Transported };
        // Relaxed, and a load and a store: only written under the lock; read
        // as a hint (see `holds`).
        if self.holds.load(Ordering::Relaxed) < now as u8 {
            self.holds.store(now as u8, Ordering::Relaxed);
        }
        tasks.push(slot);
    }

    /// What the queue holds, as of the last push or progress: a hint, read
    /// without the lock (a task that another thread is pushing at the same
    /// time may be missed by this look, and seen by the next).
    pub fn holds(&self) -> Holds {
        Holds::from_byte(self.holds.load(Ordering::Relaxed))
    }

    /// Number of tasks in flight.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no task is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> SlotGuard<'_, Vec<Arc<TaskSlot>>> {
        self.tasks.lock()
    }

    /// Poll every task once; finished tasks leave the queue. Returns how many finished.
    ///
    /// The queue lock is not held while polling, so tasks may be posted (and
    /// other threads may progress other tasks) meanwhile. An empty queue
    /// (as [`ProgressQueue::holds`] last said) is not even locked: an idle
    /// context's progress, which some callers make all the time, costs no
    /// locked instruction here.
    pub fn progress(&self, watchdog: &WatchdogConfig) -> usize {
        if self.holds() == Holds::Nothing {
            return 0;
        }
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
        // Usually none: then not even an empty extend (~40 instructions,
        // at every progress of a C caller's spin).
        if !posted_meanwhile.is_empty() {
            tasks.extend(posted_meanwhile);
        }
        // Relaxed: under the lock (see `holds`).
        self.holds.store(Holds::of(&tasks) as u8, Ordering::Relaxed);
        finished
    }

    /// Cancel every task (context destruction).
    pub fn cancel_all(&self, reason: &dyn Fn(&TaskDesc) -> Error) {
        let tasks = {
            let mut queued = self.lock();
            self.holds.store(Holds::Nothing as u8, Ordering::Relaxed);
            std::mem::take(&mut *queued)
        };
        for t in tasks {
            t.cancel(reason);
            t.leave_queue();
        }
    }
}
