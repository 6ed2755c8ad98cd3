//! Memory a stream engine's copies still use after the collective that
//! handed them over is gone: kept, with an event recorded on the stream
//! behind the last copy, until the stream has passed that event.
//!
//! A triggered collective that hands its staging copies to the engine
//! (`Ee::trigger_with_copies`) ends on the host before the stream runs its
//! copies back to the user's buffers; its request may be finalised and its
//! host copies freed at once. The engine therefore keeps what owns them
//! until the stream is past them: looked at whenever a post is armed or
//! ends, and all dropped once the engine synchronised its stream.

use std::any::Any;
use std::sync::{Arc, Mutex, MutexGuard};

use ferrocoll_cuda::{Event, EventPool};

type Keep = Arc<dyn Any + Send + Sync>;

/// Owners of memory the stream may still copy from or to, each with the
/// event behind its last copy (none: kept until the engine is dropped,
/// for copies enqueued by a post whose arming failed half-way).
#[derive(Default)]
pub(crate) struct Retiring(Mutex<Vec<(Option<Event>, Keep)>>);

impl Retiring {
    fn lock(&self) -> MutexGuard<'_, Vec<(Option<Event>, Keep)>> {
        // Poisoned only if a thread panicked holding it; the list stays whole.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keep `keep` until the stream has passed `event` (`None`: until the
    /// engine synchronised its stream at its drop).
    pub(crate) fn push(&self, event: Option<Event>, keep: Keep) {
        self.lock().push((event, keep));
    }

    /// Let go of what the stream is past (the context must be current).
    /// An event whose query fails is kept: its memory may still be in use.
    pub(crate) fn reap(&self, events: &EventPool) {
        let mut list = self.lock();
        let mut i = 0;
        while i < list.len() {
            if let (Some(event), _) = &list[i]
                && let Ok(true) = event.query()
            {
                if let (Some(event), _keep) = list.swap_remove(i) {
                    events.put(event);
                }
            } else {
                i += 1;
            }
        }
    }

    /// Let go of everything: only once the stream was synchronised (or can
    /// no longer run anything).
    pub(crate) fn drain(&self, events: &EventPool) {
        for (event, _keep) in self.lock().drain(..) {
            if let Some(event) = event {
                events.put(event);
            }
        }
    }
}
