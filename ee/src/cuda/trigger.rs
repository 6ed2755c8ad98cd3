//! The stream engine's side of one triggered post, for host-driven TLs:
//! the input dependency is an event recorded on the stream (`event`) or
//! the stream's write of the post's number to the flag's `started` word
//! (`write`); the task starts once it completed. A wait on the engine's
//! flag is the output dependency (raised when the collective ends, fails
//! or is dropped).

use std::sync::Arc;
use std::task::Poll;

use ferrocoll_core::backend::EngineCopies;
use ferrocoll_core::{EeTrigger, Error, Event, MemRef, Result};
use ferrocoll_cuda::{Capture, Stream, memory};

use super::input::StreamInput;
use super::stream::Shared;

/// Pending polls of a `write` input between two checks of the stream's
/// health (`cuStreamQuery`): a failed device never writes, and without the
/// check the task would wait for the write until its timeout.
const HEALTH_EVERY: u32 = 1024;

pub(crate) struct StreamTrigger {
    shared: Arc<Shared>,
    /// The input-dependency event (`event` input), until it completed.
    event: Option<ferrocoll_cuda::Event>,
    /// Polls of the `write` input that found the stream not there yet.
    pending_polls: u32,
    /// No poll yet. The first comes at post, right after the event was
    /// recorded, when it has practically never completed: that poll skips
    /// the query (with the capture-mode exchange around it, three driver
    /// calls) and says not ready.
    unpolled: bool,
    /// This post's sequence number: the flag value that releases the stream.
    seq: u64,
    completed: bool,
}

impl StreamTrigger {
    /// Enqueue the input dependency (record the event, or the write of the
    /// post's number), then the wait for the output dependency, all on the
    /// engine's stream; with `copies`, the copies `before` ahead of the
    /// input and `after` behind the wait, and an event behind them that
    /// tells when their memory may go.
    ///
    /// Refused at once (`NotSupported`, nothing enqueued) while the stream
    /// is being captured into a CUDA graph: the event query and the flag
    /// are host work that a replayed graph would not redo, so the capture
    /// would hold a wait for a flag value no one raises again.
    ///
    /// Never waits on the stream, also on errors: the stream may be held by
    /// an earlier post that only this thread's progress can end. Memory of
    /// copies enqueued by a post that then failed is kept until the engine
    /// is dropped.
    pub(crate) fn arm(shared: &Arc<Shared>, copies: Option<&EngineCopies>) -> Result<StreamTrigger> {
        // Held across the calls, so that waits reach the stream in sequence order.
        let mut order = shared.flag.lock();
        shared.ctx.make_current()?;
        refuse_capture(shared)?;
        shared.retiring.reap(&shared.events);
        let stream = &shared.engine.stream;
        let keep_on_error = |e: Error| {
            if let Some(c) = copies {
                shared.retiring.push(None, c.keep.clone());
            }
            e
        };
        if let Some(c) = copies {
            enqueue_copies(&c.before, stream)
                .map_err(|e| keep_on_error(e.prefixed("the staging copies before the collective")))?;
        }
        let event = match shared.input {
            StreamInput::Event => {
                let event = shared.events.take().map_err(keep_on_error)?;
                if let Err(e) = event.record(stream) {
                    shared.events.put(event);
                    return Err(keep_on_error(e));
                }
                Some(event)
            }
            StreamInput::Write => None,
        };
        let seq = order.issue();
        let undo = |event: Option<ferrocoll_cuda::Event>, e: Error| {
            // Nothing waits for this number: let later ones pass it.
            shared.flag.release(seq);
            if let Some(event) = event {
                shared.events.put(event);
            }
            keep_on_error(e)
        };
        // `started` only grows: the writes reach the stream in sequence order
        // (under `order`), and a number that was never written is passed by
        // the next post's.
        if shared.input == StreamInput::Write {
            if let Err(e) = shared.enqueue_started(seq) {
                drop(order);
                return Err(undo(None, e.prefixed("the triggered post's input write")));
            }
        }
        if let Err(e) = shared.enqueue_wait(seq) {
            drop(order);
            return Err(undo(event, e));
        }
        if let Some(c) = copies {
            if let Err(e) = enqueue_copies(&c.after, stream) {
                drop(order);
                return Err(undo(event, e.prefixed("the staging copies after the collective")));
            }
            // An event that cannot be had or recorded keeps the memory to the end.
            let behind = shared.events.take().ok().and_then(|ev| match ev.record(stream) {
                Ok(()) => Some(ev),
                Err(_) => {
                    shared.events.put(ev);
                    None
                }
            });
            shared.retiring.push(behind, c.keep.clone());
        }
        Ok(StreamTrigger { shared: shared.clone(), event, pending_polls: 0, unpolled: true, seq, completed: false })
    }
}

/// `NotSupported` naming the engine if its stream is being captured.
fn refuse_capture(shared: &Shared) -> Result<()> {
    match shared.engine.stream.capture_status()? {
        Capture::None => Ok(()),
        state => Err(Error::not_supported(format!(
            "{} is being captured into a CUDA graph ({state:?}): the collective selected for it is driven from \
             the host (an event or a write, a wait on a host-mapped flag, progress on the CPU), which a replay of \
             the graph would not redo, so it is refused instead of corrupting the capture; capture a stream-native \
             collective (TL/NCCL on CUDA memory, once its communicator exists) or post this one outside the capture",
            shared.describe()
        ))),
    }
}

/// The engine's side of a stream-native post (TL/NCCL): ready at once,
/// nothing to release (the collective is in the stream's order itself);
/// it only reports the engine's events.
pub(crate) struct NativeTrigger {
    pub(crate) shared: Arc<Shared>,
}

impl EeTrigger for NativeTrigger {
    fn poll_ready(&mut self) -> Poll<Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn waiting_for(&self) -> Arc<str> {
        self.shared.waiting_for.clone()
    }

    fn emit(&self, ev: Event) {
        self.shared.outbound.post(ev);
    }

    fn complete(&mut self, _succeeded: bool) {}
}

/// Enqueue copies `(dst, src)` on `stream` (its context current).
fn enqueue_copies(copies: &[(MemRef, MemRef)], stream: &Stream) -> Result<()> {
    for (dst, src) in copies {
        if dst.len() != src.len() || dst.overlaps(src) {
            return Err(Error::internal(format!(
                "an engine copy of {} bytes into {} bytes (or overlapping)",
                src.len(),
                dst.len()
            )));
        }
        // SAFETY: EngineCopies' contract: both ranges are live, equal in
        // length and disjoint (checked above), of memory the driver
        // addresses (device, managed or pinned host); `keep` owns the host
        // side and is held by the engine until the stream is past these
        // copies (Retiring), and the user's side is the request's buffer,
        // which stream order protects like any work on the user's stream.
        unsafe { memory::copy_async(dst.addr() as u64, src.addr() as u64, dst.len(), stream) }?;
    }
    Ok(())
}

impl StreamTrigger {
    /// The `write` input: whether the stream wrote this post's number (or a
    /// later one) to `started`. No driver call, but every `HEALTH_EVERY`
    /// pending polls one `cuStreamQuery`, which reports a failed device.
    fn poll_started(&mut self) -> Poll<Result<()>> {
        if self.shared.flag.started(self.seq, self.shared.wide) {
            return Poll::Ready(Ok(()));
        }
        self.pending_polls = self.pending_polls.wrapping_add(1);
        if self.pending_polls.is_multiple_of(HEALTH_EVERY) {
            let health = self.shared.ctx.make_current().and_then(|()| self.shared.engine.stream.query());
            if let Err(e) = health {
                return Poll::Ready(Err(e.prefixed("the triggered post's stream, waiting for its input write")));
            }
        }
        Poll::Pending
    }
}

impl EeTrigger for StreamTrigger {
    fn poll_ready(&mut self) -> Poll<Result<()>> {
        if self.shared.input == StreamInput::Write {
            return self.poll_started();
        }
        let Some(event) = &self.event else { return Poll::Ready(Ok(())) };
        if std::mem::replace(&mut self.unpolled, false) {
            return Poll::Pending;
        }
        if let Err(e) = self.shared.ctx.make_current() {
            return Poll::Ready(Err(e));
        }
        match event.query() {
            Ok(true) => {
                if let Some(event) = self.event.take() {
                    self.shared.events.put(event);
                }
                Poll::Ready(Ok(()))
            }
            Ok(false) => Poll::Pending,
            Err(e) => Poll::Ready(Err(e.prefixed("the triggered post's input event"))),
        }
    }

    fn waiting_for(&self) -> Arc<str> {
        self.shared.waiting_for.clone()
    }

    fn emit(&self, ev: Event) {
        self.shared.outbound.post(ev);
    }

    fn complete(&mut self, _succeeded: bool) {
        if std::mem::replace(&mut self.completed, true) {
            return;
        }
        if let Some(event) = self.event.take() {
            self.shared.events.put(event);
        }
        // Whatever the outcome: the stream must not stay blocked.
        self.shared.flag.release(self.seq);
        if self.shared.ctx.make_current().is_ok() {
            self.shared.retiring.reap(&self.shared.events);
        }
    }
}

impl Drop for StreamTrigger {
    fn drop(&mut self) {
        // Core calls `complete`; this covers a trigger dropped without it.
        self.complete(false);
    }
}
