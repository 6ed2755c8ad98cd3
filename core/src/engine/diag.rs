//! What a task is blocked on, for timeout, watchdog and flight-record
//! messages.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// An empty [`Wait`] slot.
const NONE: u64 = u64::MAX;

/// One wait of a task, packed into one word so that readers never see the
/// peer of one wait with the tag of another: team rank (high 32 bits) and
/// step tag (low 32 bits), or [`NONE`].
#[derive(Debug)]
struct Wait(AtomicU64);

impl Wait {
    fn pack(peer: usize, tag: u32) -> u64 {
        // Team ranks are below u32::MAX (checked at team creation); a larger one
        // is shown as u32::MAX - 1, so that no wait packs to NONE.
        let peer = u32::try_from(peer).unwrap_or(u32::MAX).min(u32::MAX - 1);
        (u64::from(peer) << 32) | u64::from(tag)
    }

    fn set(&self, peer: usize, tag: u32) {
        self.0.store(Self::pack(peer, tag), Ordering::Relaxed);
    }

    /// Clear the slot if it still records this wait (another may have replaced it).
    fn clear(&self, peer: usize, tag: u32) {
        let _ = self.0.compare_exchange(Self::pack(peer, tag), NONE, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// (team rank, step tag), if set.
    fn get(&self) -> Option<(u64, u64)> {
        match self.0.load(Ordering::Relaxed) {
            NONE => None,
            w => Some((w >> 32, w & 0xffff_ffff)),
        }
    }
}

/// What a task is blocked on, written by the transport layer: each time a
/// receive finds no message (and cleared when it completes), and each time
/// a send is found not yet taken by its receiver (cleared when it is). Read
/// when the task times out, the watchdog reports it, or the flight record
/// is dumped. Relaxed atomics: it is a diagnostic hint, not synchronisation.
#[derive(Debug)]
pub struct TaskDiag {
    recv: Wait,
    send: Wait,
    /// What a triggered task waits for before it starts (set and cleared by core).
    trigger: Mutex<Option<Arc<str>>>,
    /// Device work the task waits for (e.g. staging copies), set by its TL.
    device: Mutex<Option<&'static str>>,
    /// What a task waits for that is neither a message nor its trigger
    /// (TL/NCCL: its communicator's creation, the stream work it enqueued).
    work: Mutex<Option<Arc<str>>>,
}

impl Default for TaskDiag {
    fn default() -> Self {
        TaskDiag {
            recv: Wait(AtomicU64::new(NONE)),
            send: Wait(AtomicU64::new(NONE)),
            trigger: Mutex::new(None),
            device: Mutex::new(None),
            work: Mutex::new(None),
        }
    }
}

impl TaskDiag {
    /// Record that the task waits for a message from team rank `peer` with step tag `tag`.
    pub fn waiting_for(&self, peer: usize, tag: u32) {
        self.recv.set(peer, tag);
    }

    /// The message from `peer` with `tag` arrived: forget that wait (if it is still the one recorded).
    pub fn received(&self, peer: usize, tag: u32) {
        self.recv.clear(peer, tag);
    }

    /// Record that the task waits for team rank `peer` to take a message of
    /// its own with step tag `tag` (a send not complete yet).
    pub fn sending_to(&self, peer: usize, tag: u32) {
        self.send.set(peer, tag);
    }

    /// `peer` took the message with `tag`: forget that wait (if it is still the one recorded).
    pub fn sent(&self, peer: usize, tag: u32) {
        self.send.clear(peer, tag);
    }

    /// Forget every wait (a persistent request's next post reuses its diag).
    pub fn clear(&self) {
        self.recv.0.store(NONE, Ordering::Relaxed);
        self.send.0.store(NONE, Ordering::Relaxed);
    }

    /// Record that a triggered task waits for its trigger (`what`), or no longer does (`None`).
    pub fn waiting_for_trigger(&self, what: Option<Arc<str>>) {
        *self.trigger.lock().unwrap_or_else(|p| p.into_inner()) = what;
    }

    /// Record that the task waits for device work (`what`: "the GPU to
    /// finish staging copies"), or no longer does (`None`).
    pub fn waiting_for_device(&self, what: Option<&'static str>) {
        *self.device.lock().unwrap_or_else(|p| p.into_inner()) = what;
    }

    /// Record that the task waits for `what` (neither a message nor its
    /// trigger: a device's work, a library's set-up), or no longer does.
    pub fn waiting_for_work(&self, what: Option<Arc<str>>) {
        *self.work.lock().unwrap_or_else(|p| p.into_inner()) = what;
    }

    /// A phrase for messages: ", waiting for a message from rank 3 (step tag 2)",
    /// ", waiting for rank 3 to take a message (step tag 2)" (both, joined by
    /// "and", when both are recorded), ", waiting for its trigger: …",
    /// ", waiting for the GPU to …" or "".
    pub fn describe(&self) -> String {
        if let Some(what) = &*self.trigger.lock().unwrap_or_else(|p| p.into_inner()) {
            return format!(", waiting for its trigger: {what}");
        }
        if let Some(what) = *self.device.lock().unwrap_or_else(|p| p.into_inner()) {
            return format!(", waiting for {what}");
        }
        if let Some(what) = &*self.work.lock().unwrap_or_else(|p| p.into_inner()) {
            return format!(", waiting for {what}");
        }
        let recv = self.recv.get().map(|(p, t)| format!("a message from rank {p} (step tag {t})"));
        let send = self.send.get().map(|(p, t)| format!("rank {p} to take a message (step tag {t})"));
        match (recv, send) {
            (Some(r), Some(s)) => format!(", waiting for {r} and for {s}"),
            (Some(w), None) | (None, Some(w)) => format!(", waiting for {w}"),
            (None, None) => String::new(),
        }
    }

    /// The rank and step tag of the message last waited for, if that wait is not over.
    pub fn receiving(&self) -> Option<(u64, u64)> {
        self.recv.get()
    }

    /// The rank and step tag of a message of this task not yet taken, if any.
    pub fn sending(&self) -> Option<(u64, u64)> {
        self.send.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_says_which_sends_and_receives_it_waits_for() {
        let diag = TaskDiag::default();
        assert_eq!(diag.describe(), "");
        diag.sending_to(2, 5);
        assert_eq!(diag.describe(), ", waiting for rank 2 to take a message (step tag 5)");
        diag.waiting_for(1, 4);
        assert_eq!(
            diag.describe(),
            ", waiting for a message from rank 1 (step tag 4) and for rank 2 to take a message (step tag 5)"
        );
        // Completing another wait leaves the recorded one; completing it clears it.
        diag.sent(2, 6);
        diag.received(1, 4);
        assert_eq!(diag.describe(), ", waiting for rank 2 to take a message (step tag 5)");
        diag.sent(2, 5);
        assert_eq!((diag.receiving(), diag.sending(), diag.describe()), (None, None, String::new()));
        diag.waiting_for(usize::MAX, u32::MAX);
        assert_eq!(diag.receiving(), Some((u64::from(u32::MAX - 1), u64::from(u32::MAX))), "packed, never NONE");
    }
}
