//! Tasks: one posted collective's slot in the progress queue (its future,
//! state, timeout and description); what it waits for is in `diag.rs`.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::board::{BoardWatch, FIRST_LOOK, LOOK_EVERY};
use super::diag::TaskDiag;
use super::future::TaskFuture;
use super::recorder::request_dump_because;
use super::slot_lock::{SlotGuard, SlotLock};
use crate::args::CompletionCallback;
use crate::error::{Error, Result, Status};
use crate::json::json_str;

/// What a task is, for messages: "allreduce seq 17 on team 0x… (rank 2 of 4)
/// via p2p/knomial". Kept as parts and formatted only when a message needs it.
#[derive(Clone, Debug)]
pub struct TaskDesc {
    /// Collective name.
    pub coll: &'static str,
    /// Sequence number in the team.
    pub seq: u64,
    /// "team 0x… (rank r of n)".
    pub team: Arc<str>,
    /// "tl/algorithm".
    pub via: Arc<str>,
    /// The arguments, for the flight record.
    pub call: Call,
}

/// A collective's arguments in brief (plain values: copied at every post).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Call {
    /// Elements of the full vector (see `CollInit::count`).
    pub count: usize,
    /// Element type, when there is data.
    pub dtype: Option<crate::types::DataType>,
    /// Reduction, for reduction collectives.
    pub op: Option<crate::types::ReduceOp>,
    /// Root, for rooted collectives.
    pub root: Option<usize>,
    /// UCC's message size.
    pub bytes: u64,
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut sep = "";
        if let Some(op) = self.op {
            write!(f, "{op}")?;
            sep = " ";
        }
        if let Some(dt) = self.dtype {
            write!(f, "{sep}count {} {dt} ({} bytes)", self.count, self.bytes)?;
            sep = " ";
        }
        if let Some(r) = self.root {
            write!(f, "{sep}root {r}")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for TaskDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} seq {} on {} via {}", self.coll, self.seq, self.team, self.via)
    }
}

/// Settings the queue applies to every task it polls.
#[derive(Clone, Copy, Debug)]
pub struct WatchdogConfig {
    /// Warn once about a task in progress for longer than this.
    pub warn_after: Option<Duration>,
}

/// Fruitless polls between two looks at the clock (timeouts, watchdog): reading
/// the clock on every poll would cost more than the poll itself.
const CLOCK_EVERY: u32 = 64;

enum SlotState {
    Running {
        fut: TaskFuture,
        started: Option<Instant>,
        deadline: Option<Instant>,
        warned: bool,
        idle: u32,
        /// When (since `started`) to look at the call board next.
        next_look: Duration,
    },
    Done(Option<Error>),
}

/// One post of a request, as its slot holds it (a persistent request's
/// next post re-arms the same slot with the next one).
struct SlotInner {
    state: SlotState,
    desc: TaskDesc,
    diag: Arc<TaskDiag>,
    timeout: Option<Duration>,
    on_complete: Option<CompletionCallback>,
    /// Its post on the team's call board, looked at while it waits.
    watch: Option<BoardWatch>,
    /// Whether the slot is in the progress queue (pushed and not yet
    /// dropped by it): a re-armed slot that the queue still holds is not
    /// pushed twice, and one that it dropped is pushed again.
    queued: bool,
    /// Whether a future that finishes successfully is kept in `spent`
    /// (its task [recycles futures](crate::backend::CollTask::recycles_futures)).
    keep_spent: bool,
    /// The last post's future, finished successfully, for the next post's
    /// [`restart`](crate::backend::CollTask::restart).
    spent: Option<TaskFuture>,
}

/// What a poll of a slot found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polled {
    /// The task finished (successfully or not).
    Finished,
    /// It runs.
    Pending {
        /// After [`TaskSlot::poll_at_post`] (or a re-arm's poll): the slot
        /// was marked queued, and the caller must push it.
        push: bool,
    },
}

/// Who polls a slot: its request, the progress queue (which drops it once
/// finished), or a post (which pushes it on the queue if it still runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Poller {
    Owner,
    Queue,
    Post,
}

/// [`TaskSlot::outcome`]: the task runs.
const RUNNING: u8 = 0;
/// [`TaskSlot::outcome`]: the task finished successfully.
const SUCCEEDED: u8 = 1;
/// [`TaskSlot::outcome`]: the task failed (the error is in the state).
const FAILED: u8 = 2;

/// One posted collective in the progress queue.
///
/// A request keeps its slot for its lifetime: a persistent request's next
/// post [re-arms](TaskSlot::rearm_and_poll) it rather than allocating another. The
/// flight recorder and the queue may still hold it then; the recorder tells
/// the posts apart by sequence number, and the queue by `queued`.
pub struct TaskSlot {
    inner: SlotLock<SlotInner>,
    /// `RUNNING`, `SUCCEEDED` or `FAILED`, written under the lock with the
    /// state: `status` and `wait` read it without the lock.
    outcome: AtomicU8,
    /// The flight recorder that holds it (its address; 0: none), so that
    /// recording its next post needs no lock (see `recorder.rs`).
    recorded_by: AtomicUsize,
    /// Its task [progresses itself](crate::backend::CollTask::progresses_itself):
    /// nothing of it moves through the context's transports.
    self_driven: bool,
}

/// What one post puts in a slot.
pub struct SlotPost {
    /// The task's future.
    pub fut: TaskFuture,
    /// What it is, for messages.
    pub desc: TaskDesc,
    /// Where it records what it waits for.
    pub diag: Arc<TaskDiag>,
    /// Its timeout.
    pub timeout: Option<Duration>,
    /// Called once with its final status.
    pub on_complete: Option<CompletionCallback>,
    /// Its post on the team's call board, if the team has one.
    pub watch: Option<BoardWatch>,
    /// Keep the future once it finished successfully, for the next post
    /// to run in (see `CollTask::recycles_futures`).
    pub keep_spent: bool,
    /// Its task progresses itself (see `CollTask::progresses_itself`).
    pub self_driven: bool,
}

fn running(fut: TaskFuture, timeout: Option<Duration>) -> SlotState {
    // The clock is read only when someone needs it (a timeout, else at the
    // first look of the watchdog).
    let started = if timeout.is_some() { Some(Instant::now()) } else { None };
    // A timeout too long for the clock means no deadline.
    let deadline = timeout.zip(started).and_then(|(t, s)| s.checked_add(t));
    SlotState::Running { fut, started, deadline, warned: false, idle: 0, next_look: FIRST_LOOK }
}

impl TaskSlot {
    /// A running task; `on_complete` is called once with its final status;
    /// `watch` is its post on the team's call board, if the team has one.
    pub fn new(
        fut: TaskFuture,
        desc: TaskDesc,
        diag: Arc<TaskDiag>,
        timeout: Option<Duration>,
        on_complete: Option<CompletionCallback>,
        watch: Option<BoardWatch>,
    ) -> Arc<TaskSlot> {
        TaskSlot::of(SlotPost { fut, desc, diag, timeout, on_complete, watch, keep_spent: false, self_driven: false })
    }

    /// A running task, from one post.
    pub fn of(post: SlotPost) -> Arc<TaskSlot> {
        let SlotPost { fut, desc, diag, timeout, on_complete, watch, keep_spent, self_driven } = post;
        Arc::new(TaskSlot {
            inner: SlotLock::new(SlotInner {
                state: running(fut, timeout),
                desc,
                diag,
                timeout,
                on_complete,
                watch,
                queued: false,
                keep_spent,
                spent: None,
            }),
            outcome: AtomicU8::new(RUNNING),
            recorded_by: AtomicUsize::new(0),
            self_driven,
        })
    }

    /// A task that finished before it was queued (its first poll completed it).
    pub fn finished(result: Result<()>, desc: TaskDesc) -> Arc<TaskSlot> {
        let outcome = if result.is_ok() { SUCCEEDED } else { FAILED };
        Arc::new(TaskSlot {
            inner: SlotLock::new(SlotInner {
                state: SlotState::Done(result.err()),
                desc,
                diag: Arc::new(TaskDiag::default()),
                timeout: None,
                on_complete: None,
                watch: None,
                queued: false,
                keep_spent: false,
                spent: None,
            }),
            outcome: AtomicU8::new(outcome),
            recorded_by: AtomicUsize::new(0),
            self_driven: false,
        })
    }

    /// Put post `seq` of the same request in this finished slot — the
    /// future that `start` makes (given the last post's, if the slot kept
    /// it), its sequence number on the slot's description and call board
    /// entry; the rest (the call, the diag, the timeout, the callback) is
    /// the request's and stays — and poll it once, under the same lock: no
    /// allocation, no reference count, one lock a post.
    /// `Some(Ok)` with what that poll found (as [`TaskSlot::poll_at_post`]),
    /// `Some(Err)` if `start` failed (the slot stays finished). `None`
    /// (`start` not called, nothing changed) while the slot's task runs,
    /// and when the slot's diag is not `diag` (a triggered post's slot has
    /// one of its own).
    pub fn rearm_and_poll(
        &self,
        start: impl FnOnce(Option<TaskFuture>) -> Result<TaskFuture>,
        seq: u64,
        diag: &Arc<TaskDiag>,
        on_complete: Option<CompletionCallback>,
        watchdog: &WatchdogConfig,
    ) -> Option<Result<Polled>> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        if matches!(inner.state, SlotState::Running { .. }) || !Arc::ptr_eq(&inner.diag, diag) {
            return None;
        }
        let fut = match start(inner.spent.take()) {
            Ok(fut) => fut,
            Err(e) => return Some(Err(e)),
        };
        inner.state = running(fut, inner.timeout);
        inner.on_complete = on_complete;
        inner.desc.seq = seq;
        if let Some(w) = &mut inner.watch {
            w.reshow(seq);
        }
        // Relaxed: written under the lock; see `status`.
        self.outcome.store(RUNNING, Ordering::Relaxed);
        Some(Ok(self.poll_locked(guard, watchdog, Poller::Post)))
    }

    /// Drop the finished future it kept for the next post (see
    /// `SlotInner::spent`): its request is gone, and no other will post it
    /// (what that future holds — a TL's team — must not outlive the team
    /// through a slot that the progress queue or the flight recorder still
    /// holds).
    pub fn forget_spent(&self) {
        let spent = self.inner.lock().spent.take();
        // Dropped outside the lock.
        drop(spent);
    }

    /// Whether its task progresses itself (see [`SlotPost::self_driven`]).
    pub fn self_driven(&self) -> bool {
        self.self_driven
    }

    /// The flight recorder that holds it (see `recorder.rs`).
    pub(super) fn recorded_by(&self) -> usize {
        // Relaxed: set once by the recorder's lock holder; a stale 0 only
        // sends the recording through the lock.
        self.recorded_by.load(Ordering::Relaxed)
    }

    /// Held by the flight recorder `id` from now on.
    pub(super) fn set_recorded_by(&self, id: usize) {
        self.recorded_by.store(id, Ordering::Relaxed);
    }

    /// The queue let go of the slot (context destruction).
    pub(super) fn leave_queue(&self) {
        self.inner.lock().queued = false;
    }

    /// Mark the slot queued if it runs and is not in the queue yet; true
    /// when the caller must push it (see `SlotInner::queued`).
    pub fn enqueue(&self) -> bool {
        let mut inner = self.inner.lock();
        let push = matches!(inner.state, SlotState::Running { .. }) && !inner.queued;
        inner.queued |= push;
        push
    }

    /// Ask for the flight records of every team of the process (at the next
    /// progress: the dump reads every recorded slot, this one included, so
    /// never under its lock).
    fn dump(reason: &str, desc: &TaskDesc) {
        request_dump_because(format!("{reason} of {desc}"));
    }

    /// Post `seq` of this slot as a JSON object of the flight record. A
    /// slot re-armed since holds a later post of the same persistent
    /// request: post `seq` then finished successfully (a request that
    /// failed is never posted again), with the same call.
    pub(crate) fn write_json(&self, seq: u64, out: &mut String) {
        let inner = self.inner.lock();
        let (state, error, age) = match &inner.state {
            _ if inner.desc.seq != seq => ("ok", None, None),
            SlotState::Running { started, .. } => ("in_progress", None, started.map(|s| s.elapsed().as_secs_f64())),
            SlotState::Done(None) => ("ok", None, None),
            SlotState::Done(Some(e)) => ("error", Some(e.to_string()), None),
        };
        let d = &inner.desc;
        let _ = write!(
            out,
            "{{\"seq\":{seq},\"coll\":{},\"call\":{},\"via\":{},\"state\":\"{state}\"",
            json_str(d.coll),
            json_str(&format!("{} {}", d.coll, d.call)),
            json_str(&d.via)
        );
        if let Some(e) = error {
            let _ = write!(out, ",\"error\":{}", json_str(&e));
        }
        if state == "in_progress" {
            if let Some((p, tag)) = inner.diag.receiving() {
                let _ = write!(out, ",\"waiting_for\":{p},\"tag\":{tag}");
            }
            if let Some((p, tag)) = inner.diag.sending() {
                let _ = write!(out, ",\"sending_to\":{p},\"send_tag\":{tag}");
            }
            if let Some(a) = age {
                let _ = write!(out, ",\"in_progress_s\":{a:.3}");
            }
        }
        out.push('}');
    }

    /// Description of its current (or last) post, for messages.
    pub fn desc(&self) -> TaskDesc {
        self.inner.lock().desc.clone()
    }

    /// The sequence number of its current (or last) post.
    pub fn seq(&self) -> u64 {
        self.inner.lock().desc.seq
    }

    /// Poll once; true when the task is finished (successfully or not).
    pub fn poll(&self, watchdog: &WatchdogConfig) -> bool {
        self.poll_as(watchdog, Poller::Owner) == Polled::Finished
    }

    /// The first poll of a post: as `poll`, and a task still running is
    /// marked queued under the same lock, saying whether the caller must
    /// push it (with [`ProgressQueue::push_polled`]): a post takes the
    /// slot's lock once.
    ///
    /// [`ProgressQueue::push_polled`]: crate::engine::ProgressQueue::push_polled
    pub fn poll_at_post(&self, watchdog: &WatchdogConfig) -> Polled {
        self.poll_as(watchdog, Poller::Post)
    }

    /// Poll once for the progress queue: as `poll`, and a finished slot
    /// leaves the queue (decided under the lock, see `SlotInner::queued`).
    pub(super) fn poll_in_queue(&self, watchdog: &WatchdogConfig) -> bool {
        self.poll_as(watchdog, Poller::Queue) == Polled::Finished
    }

    fn poll_as(&self, watchdog: &WatchdogConfig, by: Poller) -> Polled {
        // A finished task: one load, no lock (unless the queue must drop it).
        if by != Poller::Queue && self.outcome.load(Ordering::Acquire) != RUNNING {
            return Polled::Finished;
        }
        self.poll_locked(self.inner.lock(), watchdog, by)
    }

    /// [`TaskSlot::poll_as`] with the slot's lock already taken (`guard`).
    fn poll_locked(&self, mut guard: SlotGuard<'_, SlotInner>, watchdog: &WatchdogConfig, by: Poller) -> Polled {
        let by_queue = by == Poller::Queue;
        let inner = &mut *guard;
        let SlotState::Running { fut, started, deadline, warned, idle, next_look } = &mut inner.state else {
            if by_queue {
                inner.queued = false;
            }
            return Polled::Finished;
        };
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut warned_now = false;
        let outcome = match fut.as_mut().poll(&mut cx) {
            // A failure may be the echo of a divergence another rank saw
            // first (it failed and left the team): the board names the cause.
            Poll::Ready(r) => Some(r.map_err(|e| divergence(&inner.watch).unwrap_or(e).prefixed(&inner.desc))),
            Poll::Pending => {
                *idle = idle.wrapping_add(1);
                let clock_needed = deadline.is_some() || watchdog.warn_after.is_some() || inner.watch.is_some();
                if clock_needed && idle.is_multiple_of(CLOCK_EVERY) {
                    let now = Instant::now();
                    let age = now.duration_since(*started.get_or_insert(now));
                    if deadline.is_some_and(|d| now >= d) {
                        let secs = inner.timeout.map_or(0.0, |t| t.as_secs_f64());
                        Some(Err(Error::timed_out(format!(
                            "{} timed out after {secs:.3} s{}",
                            inner.desc,
                            inner.diag.describe()
                        ))))
                    } else if let Some(e) = look_at_board(&inner.watch, age, next_look) {
                        Some(Err(e.prefixed(&inner.desc)))
                    } else {
                        if let Some(w) = watchdog.warn_after {
                            if !*warned && age > w {
                                *warned = true;
                                warned_now = true;
                                crate::log_warn!(
                                    "watchdog: {} in progress for {:.1} s{}",
                                    inner.desc,
                                    age.as_secs_f64(),
                                    inner.diag.describe()
                                );
                            }
                        }
                        None
                    }
                } else {
                    None
                }
            }
        };
        match outcome {
            Some(r) => {
                let status = r.as_ref().map_or_else(|e| e.status(), |()| Status::Ok);
                // A caller told by a callback (the C interface's, whose status
                // word carries a code only) would never see why: it is said
                // below, once the lock is released (as the callback is called).
                let untold = match (&r, &inner.on_complete) {
                    (Err(e), Some(_)) if crate::log::enabled(crate::log::Level::Error) => Some(e.to_string()),
                    _ => None,
                };
                // Replacing the state drops the future here, under the lock
                // (or keeps it for the next post, see `SlotInner::spent`).
                let ran = std::mem::replace(&mut inner.state, SlotState::Done(r.err()));
                if let SlotState::Running { fut, .. } = ran {
                    if inner.keep_spent && status == Status::Ok {
                        inner.spent = Some(fut);
                    }
                }
                if by_queue {
                    inner.queued = false;
                }
                // Release: a reader that sees the outcome sees the task's
                // results (written before its future returned Ready).
                self.outcome.store(if status == Status::Ok { SUCCEEDED } else { FAILED }, Ordering::Release);
                // Taken, not cloned: it is called once a post, and the next post
                // re-arms the slot with its own (no reference counted, and what
                // the callback holds, a C request's handle, is let go at once).
                let (cb, desc) = (inner.on_complete.take(), (status == Status::TimedOut).then(|| inner.desc.clone()));
                drop(guard);
                if let Some(e) = untold {
                    crate::log::write(crate::log::Level::Error, format_args!("collective failed: {e}"));
                }
                if let Some(cb) = cb {
                    cb(status);
                }
                if let Some(desc) = desc {
                    TaskSlot::dump("timeout", &desc);
                }
                Polled::Finished
            }
            None => {
                let push = by == Poller::Post && !inner.queued;
                inner.queued |= push;
                let desc = warned_now.then(|| inner.desc.clone());
                drop(guard);
                if let Some(desc) = desc {
                    TaskSlot::dump("watchdog", &desc);
                }
                Polled::Pending { push }
            }
        }
    }

    /// The status: `InProgress`, `Ok`, or the error (a copy; it stays stored).
    pub fn status(&self) -> Result<Status> {
        // Acquire: pairs with the Release of the poll that finished the task.
        match self.outcome.load(Ordering::Acquire) {
            RUNNING => Ok(Status::InProgress),
            SUCCEEDED => Ok(Status::Ok),
            _ => match &self.inner.lock().state {
                SlotState::Done(Some(e)) => Err(e.duplicate()),
                // Re-armed meanwhile (only its request's owner does that).
                SlotState::Running { .. } => Ok(Status::InProgress),
                SlotState::Done(None) => Ok(Status::Ok),
            },
        }
    }

    /// Stop the task if it is running, dropping its future (which retracts
    /// whatever it had posted to transports) before returning. `reason`
    /// gets the task's description.
    pub fn cancel(&self, reason: impl FnOnce(&TaskDesc) -> Error) {
        let mut inner = self.inner.lock();
        if matches!(&inner.state, SlotState::Running { .. }) {
            let e = reason(&inner.desc);
            let status = e.status();
            inner.state = SlotState::Done(Some(e));
            // Release: see poll.
            self.outcome.store(FAILED, Ordering::Release);
            let cb = inner.on_complete.take();
            drop(inner);
            if let Some(cb) = cb {
                cb(status);
            }
        }
    }
}

/// Once the task is `age` old and past `next_look`: whether the call
/// board shows that the ranks' calls differ (see `board.rs`).
fn look_at_board(watch: &Option<BoardWatch>, age: Duration, next_look: &mut Duration) -> Option<Error> {
    watch.as_ref()?;
    if age < *next_look {
        return None;
    }
    *next_look = age.saturating_add(LOOK_EVERY);
    divergence(watch)
}

/// Whether the call board shows that the ranks' calls differ, now.
fn divergence(watch: &Option<BoardWatch>) -> Option<Error> {
    watch.as_ref()?.look().err()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::join::yield_now;
    use crate::engine::{Holds, ProgressQueue};

    fn no_watchdog() -> WatchdogConfig {
        WatchdogConfig { warn_after: None }
    }

    fn desc(coll: &'static str) -> TaskDesc {
        TaskDesc {
            coll,
            seq: 1,
            team: "team 0x1 (rank 0 of 2)".into(),
            via: "p2p/knomial".into(),
            call: Call::default(),
        }
    }

    #[test]
    fn queue_runs_tasks_to_completion() {
        let q = ProgressQueue::default();
        let slot = TaskSlot::new(
            Box::pin(async {
                yield_now().await;
                Ok(())
            }),
            desc("t"),
            Arc::default(),
            None,
            None,
            None,
        );
        q.push(slot.clone());
        assert_eq!(slot.status().unwrap(), Status::InProgress);
        assert_eq!(q.progress(&no_watchdog()), 0);
        assert_eq!(q.progress(&no_watchdog()), 1);
        assert_eq!(slot.status().unwrap(), Status::Ok);
        assert!(q.is_empty());
    }

    #[test]
    fn deadline_gives_timed_out_with_diag() {
        let diag = Arc::new(TaskDiag::default());
        diag.waiting_for(3, 7);
        let slot =
            TaskSlot::new(Box::pin(std::future::pending()), desc("bcast"), diag, Some(Duration::ZERO), None, None);
        let polls = (0..2 * CLOCK_EVERY).take_while(|_| !slot.poll(&no_watchdog())).count();
        assert!(polls < 2 * CLOCK_EVERY as usize, "the deadline was never noticed");
        let e = slot.status().unwrap_err();
        assert_eq!(e.status(), Status::TimedOut);
        assert!(e.context().contains("rank 3") && e.context().contains("bcast seq 1 on team"), "{e}");
    }

    #[test]
    fn cancel_drops_the_future() {
        struct Flag(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Flag(dropped.clone());
        let slot = TaskSlot::new(
            Box::pin(async move {
                let _f = flag;
                std::future::pending::<()>().await;
                Ok(())
            }),
            desc("x"),
            Arc::default(),
            None,
            None,
            None,
        );
        assert!(!slot.poll(&no_watchdog()));
        slot.cancel(|_| Error::invalid_param("cancelled"));
        assert!(dropped.load(Ordering::SeqCst));
        assert_eq!(slot.status().unwrap_err().status(), Status::InvalidParam);
    }

    /// A slot calls its completion callback once and lets go of it then:
    /// what the callback holds (a C request's handle) is not kept alive by
    /// a finished slot, which a parked plan or the flight recorder may hold.
    #[test]
    fn a_finished_slot_lets_go_of_its_callback() {
        for cancelled in [false, true] {
            let held = Arc::new(std::sync::atomic::AtomicU32::new(0));
            let calls = held.clone();
            let cb: CompletionCallback = Arc::new(move |_| {
                calls.fetch_add(1, Ordering::SeqCst);
            });
            let fut: TaskFuture =
                if cancelled { Box::pin(std::future::pending()) } else { Box::pin(std::future::ready(Ok(()))) };
            let slot = TaskSlot::new(fut, desc("t"), Arc::default(), None, Some(cb), None);
            if cancelled {
                assert!(!slot.poll(&no_watchdog()));
                slot.cancel(|_| Error::invalid_param("cancelled"));
            } else {
                assert!(slot.poll(&no_watchdog()));
            }
            assert_eq!(held.load(Ordering::SeqCst), 1, "called once (cancelled: {cancelled})");
            assert_eq!(Arc::strong_count(&held), 1, "the callback was dropped (cancelled: {cancelled})");
            slot.cancel(|_| Error::invalid_param("again"));
            assert_eq!(held.load(Ordering::SeqCst), 1, "never called twice (cancelled: {cancelled})");
        }
    }

    /// The queue says when every task in it progresses itself (what lets a
    /// context's progress skip the transports), and stops saying so once a
    /// task that needs them is queued, until that one has finished.
    #[test]
    fn the_queue_knows_when_its_tasks_progress_themselves() {
        let slot = |self_driven: bool, done: Arc<std::sync::atomic::AtomicBool>| {
            let fut: TaskFuture = Box::pin(std::future::poll_fn(move |_| {
                if done.load(Ordering::SeqCst) { std::task::Poll::Ready(Ok(())) } else { std::task::Poll::Pending }
            }));
            TaskSlot::of(SlotPost {
                fut,
                desc: desc("t"),
                diag: Arc::default(),
                timeout: None,
                on_complete: None,
                watch: None,
                keep_spent: false,
                self_driven,
            })
        };
        let q = ProgressQueue::default();
        assert_eq!(q.holds(), Holds::Nothing);
        let shm_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let p2p_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        q.push(slot(true, shm_done.clone()));
        assert_eq!(q.holds(), Holds::SelfDriven);
        q.push(slot(false, p2p_done.clone()));
        assert_eq!(q.holds(), Holds::Transported, "a transported task is queued");
        assert_eq!(q.progress(&no_watchdog()), 0);
        assert_eq!(q.holds(), Holds::Transported, "still queued");
        p2p_done.store(true, Ordering::SeqCst);
        assert_eq!(q.progress(&no_watchdog()), 1);
        assert_eq!(q.holds(), Holds::SelfDriven, "the transported task finished");
        shm_done.store(true, Ordering::SeqCst);
        assert_eq!(q.progress(&no_watchdog()), 1);
        assert_eq!(q.holds(), Holds::Nothing, "empty again");
    }
}
