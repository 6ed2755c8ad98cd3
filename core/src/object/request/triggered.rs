//! [`Request::triggered_post`]: a collective posted on an execution engine
//! (`ucc_collective_triggered_post`), which starts when the engine's trigger fires.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{NEXT_ID, Request};
use crate::backend::{Armed, Ee, EeTrigger, PostInfo, StartFn, triggered_task};
use crate::engine::{TaskDiag, TaskSlot};
use crate::error::Result;
use crate::types::{EeType, Event};

impl Request<'_> {
    /// Post the collective on execution engine `ee`, to start when `ev`
    /// triggers it (`ucc_collective_triggered_post`).
    ///
    /// What triggers it depends on the engine: on a CPU engine, an event of
    /// type `ev.ev_type` that the user sets with `set_event` (with tag
    /// `ev.request`, unless that is 0); on a CUDA stream engine, the
    /// completion of the work enqueued on the stream before this call —
    /// and work enqueued after it waits for the collective.
    ///
    /// The engine then reports `CollectivePost` when the collective starts and
    /// `CollectiveComplete` when it ends, successfully or not (including a
    /// timeout or a cancellation; then without `CollectivePost` if it never
    /// started); both carry [`Request::id`]. The request's timeout covers
    /// the wait for the trigger. Like [`Request::post`], a persistent
    /// request may be triggered again once it has completed.
    ///
    /// The collective takes its place in the team's order at this call, as a
    /// plain post does: ranks must post (or trigger-post) a team's
    /// collectives in the same order.
    pub fn triggered_post(&mut self, ee: &dyn Ee, ev: &Event) -> Result<()> {
        self.check_postable(false)?;
        self.team.check_usable()?;
        // Arm first: an event the engine refuses must not consume a sequence number.
        let (trigger, engine_copies, stream) = self.arm(ee, ev).map_err(|e| {
            e.prefixed(format_args!(
                "triggered_post of {} on {} (team {})",
                self.plan.init.coll,
                ee.describe(),
                self.team.desc
            ))
        })?;
        let armed = Armed::new(trigger, self.id());
        self.plan.live.triggered = true;
        let desc = self.desc(self.next_seq());
        let watch = self.show(desc.seq);
        let diag = Arc::new(TaskDiag::default());
        let seq = desc.seq;
        self.team.posted_via.note(seq, self.plan.via_tag);
        let post = PostInfo { seq, diag: &diag, engine_copies, stream };
        let start: StartFn = match &self.plan.task {
            None => {
                self.posted_without_task(seq);
                Box::new(|| Ok(None))
            }
            // Teams of one do their work when the task is made (there is no
            // peer to keep in order with), so theirs is made once triggered.
            Some(task) if self.team.size == 1 => {
                let (task, diag) = (task.clone(), diag.clone());
                Box::new(move || task.start(&PostInfo { seq, diag: &diag, engine_copies, stream }).map(Some))
            }
            // Made now, so that it takes its place among the team's
            // collectives (sequence number, shm ticket); it is not polled
            // before the trigger fires. An error drops `armed`, which releases the engine.
            Some(task) => {
                let fut = task.start(&post).map_err(|e| e.prefixed(&desc))?;
                Box::new(move || Ok(Some(fut)))
            }
        };
        let fut = triggered_task(armed, diag.clone(), start);
        let slot = TaskSlot::new(fut, desc, diag, self.plan.init.timeout, self.callback(), watch);
        self.team.recorder.record(slot.seq(), &slot);
        // One poll now starts it at once if the trigger already fired.
        if !slot.poll(&self.team.ctx.settings.watchdog) {
            self.team.ctx.queue.push(slot.clone());
        }
        self.plan.live.slot = Some(slot);
        Ok(())
    }

    /// The engine's trigger for one triggered post, whether the engine
    /// runs the task's copies (a CUDA stream engine puts staging copies on
    /// its stream), and the engine's stream for a stream-native task.
    ///
    /// A stream-native task (TL/NCCL with its communicator made) on an
    /// engine with a stream enqueues on that stream at this call: no event,
    /// no flag wait, so a stream being captured captures it. Only one-shot
    /// requests hand their copies over: a persistent request's next post
    /// could reuse the memory while the engine still copies out of it.
    fn arm(&self, ee: &dyn Ee, ev: &Event) -> Result<(Box<dyn EeTrigger>, bool, Option<usize>)> {
        if ee.ee_type() == EeType::CudaStream {
            if let Some(task) = &self.plan.task {
                task.prepare_stream_post(ee)?;
            }
        }
        let native =
            self.plan.task.as_ref().filter(|t| t.native_on_stream()).and_then(|_| ee.native_post(ev, self.id()));
        if let Some(native) = native {
            let (stream, trigger) = native?;
            return Ok((trigger, false, Some(stream)));
        }
        if !self.plan.init.persistent {
            if let Some(copies) = self.plan.task.as_ref().and_then(|t| t.engine_copies()) {
                if let Some(trigger) = ee.trigger_with_copies(ev, self.id(), &copies)? {
                    return Ok((trigger, true, None));
                }
            }
        }
        Ok((ee.trigger(ev, self.id())?, false, None))
    }

    /// The request's process-wide unique id (never 0), carried by the
    /// `CollectivePost` and `CollectiveComplete` events of its triggered posts.
    pub fn id(&self) -> u64 {
        // Taken at the first ask: most requests are never asked (only the
        // events of triggered posts carry it), and a post should not pay
        // for a shared counter's cache line. Relaxed: ids only need to be unique.
        let id = self.plan.live.id.load(Ordering::Relaxed);
        if id != 0 {
            return id;
        }
        let new = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        match self.plan.live.id.compare_exchange(0, new, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => new,
            Err(set) => set,
        }
    }
}
