//! The execution-engine traits (UCC's EE) and what core does with them:
//! the task of a triggered post, which waits for its engine's trigger,
//! runs the collective and releases what the engine holds for it.
//!
//! Core knows no engine. An engine says when a triggered collective may
//! start ([`EeTrigger::poll_ready`]: the input dependency), is told when it
//! ended ([`EeTrigger::complete`]: the output dependency), and queues the
//! events that core produces for the user ([`EeTrigger::emit`]).

use std::any::Any;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crate::buffer::MemRef;
use crate::engine::{TaskDiag, TaskFuture};
use crate::error::Result;
use crate::types::{EeType, Event, EventType};

/// An execution engine (`ucc_ee_h`): where collectives are ordered with the
/// user's other work, and where their events are reported.
pub trait Ee: Send + Sync {
    /// Its kind.
    fn ee_type(&self) -> EeType;

    /// What it is, for messages: "CPU EE #3", "CUDA stream EE (stream 0x…, device 0)".
    fn describe(&self) -> String;

    /// Arm the trigger of one triggered post (`ucc_collective_triggered_post`)
    /// of the request with id `request`, on the user's event `ev`. An event
    /// the engine cannot trigger on is an `InvalidParam` naming it.
    fn trigger(&self, ev: &Event, request: u64) -> Result<Box<dyn EeTrigger>>;

    /// Arm a trigger as [`Ee::trigger`] does, and also run `copies` in the
    /// engine's own order: `copies.before` ahead of the input dependency,
    /// `copies.after` behind the output dependency. For a stream engine
    /// this puts a collective's staging copies on the user's stream, so that
    /// nothing the collective needs waits on another stream behind the
    /// stream's wait for the collective. `Ok(None)` (the default): the
    /// engine does not run copies, and the task makes them itself.
    fn trigger_with_copies(
        &self,
        _ev: &Event,
        _request: u64,
        _copies: &EngineCopies,
    ) -> Result<Option<Box<dyn EeTrigger>>> {
        Ok(None)
    }

    /// The user signals an event (`ucc_ee_set_event`), e.g. `ComputeComplete`.
    fn set_event(&self, ev: Event) -> Result<()>;

    /// The next event for the user, if any (`ucc_ee_get_event`).
    fn get_event(&self) -> Option<Event>;

    /// Acknowledge an event from `get_event` or `wait` (`ucc_ee_ack_event`).
    fn ack_event(&self, ev: &Event) -> Result<()>;

    /// Block until an event arrives and return it (`ucc_ee_wait`);
    /// `TimedOut` after `timeout`.
    fn wait(&self, timeout: Duration) -> Result<Event>;

    /// For a stream-native collective ([`CollTask::native_on_stream`](crate::backend::CollTask::native_on_stream)):
    /// the engine's stream (a `CUstream` as an address) and a trigger that
    /// is ready at once, releases nothing and only reports the engine's
    /// events; an event it cannot trigger on is an error, as for
    /// [`Ee::trigger`]. `None` for engines without a stream (the CPU
    /// engine): the collective then takes the host-driven path.
    fn native_post(&self, _ev: &Event, _request: u64) -> Option<Result<(usize, Box<dyn EeTrigger>)>> {
        None
    }

    /// Whether the engine's stream is being captured into a CUDA graph now;
    /// `false` (the default) for engines without a stream.
    fn capturing(&self) -> Result<bool> {
        Ok(false)
    }
}

/// The engine's side of one triggered post.
///
/// Core calls [`poll_ready`](EeTrigger::poll_ready) until it is ready, then
/// runs the collective, and calls [`complete`](EeTrigger::complete) exactly
/// once: when the collective ends, fails, times out or is cancelled, or when
/// the post is abandoned before it was queued. An engine that blocks work on
/// the collective must release it there, whatever the outcome: a stream must
/// never stay blocked for ever.
pub trait EeTrigger: Send {
    /// `Ready(Ok)` once the collective may start (the input dependency is
    /// met), `Ready(Err)` if it never will (e.g. a CUDA error on the stream).
    /// Called on every progress of the collective until it is ready: keep it cheap.
    fn poll_ready(&mut self) -> Poll<Result<()>>;

    /// What it waits for, for timeout and watchdog messages: "a ComputeComplete
    /// event set on CPU EE #3". Asked once per post (an engine may keep it made).
    fn waiting_for(&self) -> Arc<str>;

    /// Queue an event for the user on the engine (`CollectivePost`, `CollectiveComplete`).
    fn emit(&self, ev: Event);

    /// The collective ended (`succeeded`: without error) or will never run:
    /// release whatever waits on it (the output dependency).
    fn complete(&mut self, succeeded: bool);
}

/// Copies a collective makes around each execution (a TL's staging of
/// device buffers through host memory), for an engine that can run them
/// in its own order ([`Ee::trigger_with_copies`]). Each copy is `(dst, src)`,
/// equal lengths, not overlapping.
pub struct EngineCopies {
    /// Before the collective starts (its inputs into the memory it runs on).
    pub before: Vec<(MemRef, MemRef)>,
    /// After it ended (its outputs back).
    pub after: Vec<(MemRef, MemRef)>,
    /// Owns the memory of every copy: the engine holds it until it has run
    /// `after` (which may be after the collective and its request are gone).
    pub keep: Arc<dyn Any + Send + Sync>,
}

impl std::fmt::Debug for EngineCopies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineCopies").field("before", &self.before).field("after", &self.after).finish()
    }
}

/// How a triggered task gets its collective once the trigger fired: the
/// future made at post (or none, for a zero-size collective), or a call
/// that makes it then.
pub(crate) type StartFn = Box<dyn FnOnce() -> Result<Option<TaskFuture>> + Send>;

/// A trigger that core still owes a `complete` call (and, once posted, a
/// `CollectiveComplete` event): both happen in `Drop` if not before, so
/// that errors, timeouts and cancellation (which drop the task) release the
/// engine too.
pub(crate) struct Armed {
    trigger: Box<dyn EeTrigger>,
    request: u64,
    /// Whether the post reached the progress queue (then the end is reported as an event).
    posted: bool,
    done: bool,
}

impl Armed {
    /// Take charge of a freshly armed trigger.
    pub(crate) fn new(trigger: Box<dyn EeTrigger>, request: u64) -> Armed {
        Armed { trigger, request, posted: false, done: false }
    }

    fn finish(&mut self, succeeded: bool) {
        if !self.done {
            self.done = true;
            self.trigger.complete(succeeded);
            if self.posted {
                self.trigger.emit(Event::with_request(EventType::CollectiveComplete, self.request));
            }
        }
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        self.finish(false);
    }
}

/// The task of a triggered post: wait for the trigger (recording what it
/// waits for in `diag`, for the timeout message), produce `CollectivePost`,
/// run the collective, release the engine and produce `CollectiveComplete`.
pub(crate) fn triggered_task(mut armed: Armed, diag: Arc<TaskDiag>, start: StartFn) -> TaskFuture {
    armed.posted = true;
    let what = armed.trigger.waiting_for();
    Box::pin(async move {
        diag.waiting_for_trigger(Some(what));
        // An error or a drop from here on reaches `Armed::drop`, which releases the engine.
        std::future::poll_fn(|_| armed.trigger.poll_ready()).await?;
        diag.waiting_for_trigger(None);
        armed.trigger.emit(Event::with_request(EventType::CollectivePost, armed.request));
        let result = match start()? {
            Some(fut) => fut.await,
            None => Ok(()),
        };
        armed.finish(result.is_ok());
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A trigger that fires when `go` is set and records what core did with it.
    struct Probe {
        go: Arc<AtomicBool>,
        log: Arc<Mutex<Vec<String>>>,
    }

    impl EeTrigger for Probe {
        fn poll_ready(&mut self) -> Poll<Result<()>> {
            if self.go.load(Ordering::Acquire) { Poll::Ready(Ok(())) } else { Poll::Pending }
        }
        fn waiting_for(&self) -> Arc<str> {
            "the probe".into()
        }
        fn emit(&self, ev: Event) {
            self.log.lock().unwrap().push(ev.to_string());
        }
        fn complete(&mut self, succeeded: bool) {
            self.log.lock().unwrap().push(format!("complete {succeeded}"));
        }
    }

    fn probe() -> (Arc<AtomicBool>, Arc<Mutex<Vec<String>>>, Armed) {
        let (go, log) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
        let armed = Armed::new(Box::new(Probe { go: go.clone(), log: log.clone() }), 5);
        (go, log, armed)
    }

    fn poll(fut: &mut TaskFuture) -> Poll<Result<()>> {
        fut.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    }

    #[test]
    fn waits_for_the_trigger_then_reports_post_and_complete() {
        let (go, log, armed) = probe();
        let diag = Arc::new(TaskDiag::default());
        let ran = Arc::new(AtomicBool::new(false));
        let r2 = ran.clone();
        let mut fut = triggered_task(
            armed,
            diag.clone(),
            Box::new(move || {
                r2.store(true, Ordering::SeqCst);
                Ok(None)
            }),
        );
        for _ in 0..10 {
            assert!(poll(&mut fut).is_pending());
        }
        assert!(!ran.load(Ordering::SeqCst) && log.lock().unwrap().is_empty());
        assert!(diag.describe().contains("the probe"), "{}", diag.describe());
        go.store(true, Ordering::Release);
        assert!(matches!(poll(&mut fut), Poll::Ready(Ok(()))));
        assert!(ran.load(Ordering::SeqCst));
        assert_eq!(
            *log.lock().unwrap(),
            ["CollectivePost (request 5)", "complete true", "CollectiveComplete (request 5)"]
        );
        assert_eq!(diag.describe(), "");
    }

    #[test]
    fn dropping_a_waiting_task_releases_the_engine() {
        let (_go, log, armed) = probe();
        let mut fut = triggered_task(armed, Arc::default(), Box::new(|| Ok(None)));
        assert!(poll(&mut fut).is_pending());
        drop(fut);
        assert_eq!(*log.lock().unwrap(), ["complete false", "CollectiveComplete (request 5)"]);
    }

    #[test]
    fn a_failed_start_is_reported_complete() {
        let (go, log, armed) = probe();
        go.store(true, Ordering::Release);
        let mut fut = triggered_task(armed, Arc::default(), Box::new(|| Err(crate::Error::io("peer 3 is gone"))));
        assert!(matches!(poll(&mut fut), Poll::Ready(Err(_))));
        drop(fut);
        assert_eq!(
            *log.lock().unwrap(),
            ["CollectivePost (request 5)", "complete false", "CollectiveComplete (request 5)"]
        );
    }

    #[test]
    fn an_abandoned_post_releases_without_events() {
        let (_go, log, armed) = probe();
        drop(armed);
        assert_eq!(*log.lock().unwrap(), ["complete false"]);
    }
}
