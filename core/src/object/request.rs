//! [`Request`]: one collective (`ucc_collective_init` → `post` → `test` →
//! `finalize`), including persistent re-posting and blocking `wait`.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::plan_cache::{Plan, RawCall, RawKey, call_hint};
use super::spare_team;
use super::team::{ActiveTeam, AlgName, Team, TeamInner};
use crate::args::{CollArgs, CollInit, CompletionCallback, Signature};
use crate::backend::{ACTIVE_SET_SEQ, CollTask, NO_TL, PostInfo};
use crate::engine::{BoardWatch, Call, Polled, Posted, SlotPost, TaskDesc, TaskDiag, TaskFuture, TaskSlot};
use crate::error::{Error, Result, Status};
use crate::log::Level;

mod triggered;

/// Fruitless polls of its own task between two progress calls of the whole
/// context while a request waits (see [`Request::wait`]), for a task whose
/// messages move only when the context progresses.
const PROGRESS_EVERY: u32 = 2;

/// The same for a task that [progresses itself](CollTask::progresses_itself),
/// while its rank spins: the context's work (every TL's transports, the
/// queue) took longer than a shm flag takes to cross between cores, so doing
/// it between two looks at the flag delayed the look that finds it.
const PROGRESS_EVERY_SELF_DRIVEN: u32 = 64;

/// The id of the next request of this process (0 is never an id: events use it for "none").
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A collective request. `'a` is the lifetime of the buffers it uses.
///
/// Dropping a request that is in progress cancels it on this rank (its
/// buffers are released before the drop returns); the other ranks' requests
/// then wait for it until their timeout.
pub struct Request<'a> {
    /// Its team; left to the thread's spare when the request is dropped
    /// (`spare_team.rs`). Only `Drop` takes it out.
    team: ManuallyDrop<Arc<TeamInner>>,
    /// What the request runs: made at init, or taken back from the team's
    /// plan cache, and parked there again when the request is dropped
    /// (one box, so that taking and parking it moves a pointer and counts
    /// no references). Always present: only `Drop` takes it out. The
    /// request's own state lies in it too ([`Plan::live`]): a request is
    /// two pointers, which a call returns and a caller moves in registers.
    plan: ManuallyDrop<Box<Plan>>,
    _buffers: PhantomData<&'a mut [u8]>,
}

/// What a request holds from its init to its drop, besides its team and
/// what it runs: kept in its plan's box ([`Plan::live`]), not in the
/// `Request`, which was 64 bytes and went through the stack at every
/// return and move (on a 2-core AMD EPYC VM, family 26, loads of 16 bytes
/// that read stores of 1 and 8 bytes did not forward and waited: 13 % of
/// a team of one's bcast in the caller's moves alone; BENCHMARKS.md,
/// fortieth round). A plan taken from the cache starts with a fresh one.
#[derive(Default)]
pub(crate) struct Live {
    /// Process-wide unique id, carried by the events of its triggered
    /// posts; 0 until [`Request::id`] is first asked.
    id: AtomicU64,
    slot: Option<Arc<TaskSlot>>,
    /// A finished slot from the team's plan cache, for the first post to
    /// re-arm (see `plan_cache.rs`); `slot` stays `None` until that post.
    spare: Option<Arc<TaskSlot>>,
    /// Whether it was ever posted on an execution engine (such requests are not parked).
    triggered: bool,
    /// Set by [`Request::set_completion`].
    on_complete: Option<CompletionCallback>,
    /// Set by [`Request::allow_repost`].
    repost_allowed: bool,
    finalized: bool,
}

impl Team {
    /// Initialise a collective from raw arguments (`ucc_collective_init`).
    ///
    /// # Safety
    /// The buffers and count arrays that `args` points to must stay valid, and
    /// must not be accessed by anything else, for as long as the request
    /// exists (see [`CollInit::validate`]). The safe [`Coll`](crate::Coll)
    /// builder guarantees this with borrows.
    pub unsafe fn collective_init(&self, args: &CollArgs) -> Result<Request<'static>> {
        // SAFETY: forwarded to our caller.
        unsafe { self.init_request(args) }
    }

    /// Initialise and post (`ucc_collective_init_and_post`, which UCC leaves unimplemented).
    ///
    /// # Safety
    /// As [`Team::collective_init`].
    pub unsafe fn collective_init_and_post(&self, args: &CollArgs) -> Result<Request<'static>> {
        // SAFETY: forwarded to our caller.
        let mut req = unsafe { self.init_request(args)? };
        req.post()?;
        Ok(req)
    }

    /// # Safety
    /// As [`Team::collective_init`], for lifetime `'a`.
    pub(crate) unsafe fn init_request<'a>(&self, args: &CollArgs) -> Result<Request<'a>> {
        let team = &self.inner;
        let active = team.active()?;
        let mcs = &team.ctx.lib.mcs;
        let resolve = |addr: *const u8| mcs.resolve(addr);
        let raw = RawCall::of(args, &resolve);
        // SAFETY: `raw` is of our caller's arguments, under our contract.
        if let Some(p) = raw.as_ref().and_then(|raw| unsafe { team.plans.take_raw(raw) }) {
            trace(team, &p.init, &p.selected, || "the plan of the last request with these arguments".to_string());
            return Ok(Request::from_parked(spare_team::take(team), p));
        }
        let timeout = team.ctx.settings.coll_timeout;
        // SAFETY: forwarded to our caller.
        let (init, arrays) =
            unsafe { CollInit::validate_noting_arrays(args, team.rank, team.size, &resolve, timeout, raw.is_some())? };
        let raw = raw.zip(arrays).map(|(call, arrays)| RawKey::new(call, arrays));
        if let Some(p) = team.plans.take(&init) {
            trace(team, &init, &p.selected, || "the plan of the last request with this call".to_string());
            let mut req = Request::from_parked(spare_team::take(team), p);
            req.plan.raw = raw;
            return Ok(req);
        }
        let init = Arc::new(init);
        if init.is_zero_size() {
            trace(team, &init, "no-op (zero size)", String::new);
            let name = AlgName::new("none/zero-size".into());
            return Ok(Request::new(spare_team::take(team), init, None, (&name, NO_TL), active, raw));
        }
        let choices = active.selection.choices(active, init.coll, init.mem_type, init.msgsize);
        let mut skipped = Vec::new();
        for choice in choices.iter() {
            let (c, name) = (&choice.cand, &choice.name);
            let Some(t) = active.tls.get(c.tl) else { continue };
            match t.team.coll_init(c.alg, &init) {
                Ok(task) => {
                    trace(team, &init, &name.name, || {
                        let fallbacks = if skipped.is_empty() {
                            String::new()
                        } else {
                            format!("; skipped {}", skipped.join(", "))
                        };
                        format!("score {} in range {}{fallbacks}", c.score, c.range)
                    });
                    return Ok(Request::new(spare_team::take(team), init, Some(task), (name, t.via_tag), active, raw));
                }
                Err(e) if matches!(e.status(), Status::NotSupported | Status::NotImplemented) => {
                    skipped.push(format!("{} ({})", name.name, e.context()));
                }
                Err(e) => return Err(e.prefixed(format!("{} via {}", init.coll, name.name))),
            }
        }
        let tried = if skipped.is_empty() { "no candidate in the score map".to_string() } else { skipped.join("; ") };
        Err(Error::not_supported(format!("no algorithm supports {init:?} on {}: {tried}", team.describe())))
    }
}

/// Log the selection when `UCC_COLL_TRACE` asks for it (`why` is only built then).
fn trace(team: &TeamInner, init: &CollInit, selected: &str, why: impl FnOnce() -> String) {
    let Some(level) = team.ctx.settings.coll_trace else { return };
    let why = why();
    // UCC's convention: info traces come from rank 0 only, debug from every rank.
    if level >= Level::Debug || team.rank == 0 {
        crate::log::write(
            Level::Info,
            format_args!(
                "coll_init: {init:?} on {}: {selected}{}{why}",
                team.describe(),
                if why.is_empty() { "" } else { ", " }
            ),
        );
    }
}

impl<'a> Request<'a> {
    fn new(
        team: Arc<TeamInner>,
        init: Arc<CollInit>,
        task: Option<Arc<dyn CollTask>>,
        (selected, via_tag): (&AlgName, u8),
        active: &ActiveTeam,
        raw: Option<RawKey>,
    ) -> Self {
        let shown = active.board.as_ref().map(|_| Posted { seq: 0, sig: Signature::of(&init), via: selected.via });
        let plan = Plan {
            call_hint: call_hint(&init),
            init,
            task,
            selected: selected.name.clone(),
            via_tag,
            shown,
            diag: Arc::default(),
            raw,
            parked: None,
            held: None,
            live: Live::default(),
        };
        Request::with_plan(team, Box::new(plan), None)
    }

    /// A request that runs `plan`; `spare` is a finished slot of an earlier
    /// request with the same plan (see `plan_cache.rs`).
    fn with_plan(team: Arc<TeamInner>, mut plan: Box<Plan>, spare: Option<Arc<TaskSlot>>) -> Self {
        plan.live = Live { spare, ..Live::default() };
        Request { team: ManuallyDrop::new(team), plan: ManuallyDrop::new(plan), _buffers: PhantomData }
    }

    /// A request made of a finished one's parked plan (see `plan_cache.rs`).
    fn from_parked(team: Arc<TeamInner>, mut plan: Box<Plan>) -> Self {
        let spare = plan.parked.take();
        Request::with_plan(team, plan, spare)
    }

    /// Park `plan` (this request's, taken out by `Drop`) on its team for the
    /// next request with the same call, if its last post (`slot`, or the
    /// spare slot of a request never posted) succeeded and it was never
    /// posted on an engine (`triggered`; see `plan_cache.rs`).
    /// A slot that is not parked forgets the future it kept for a next
    /// post (the progress queue or the flight recorder may hold it on; see
    /// `TaskSlot::forget_spent`); a parked plan does when it is dropped.
    fn park(&self, mut plan: Box<Plan>, slot: Option<Arc<TaskSlot>>, triggered: bool) {
        let Some(slot) = slot else {
            return self.team.plans.release(plan);
        };
        if triggered || plan.task.is_none() || !matches!(slot.status(), Ok(Status::Ok)) {
            slot.forget_spent();
            return self.team.plans.release(plan);
        }
        // Its completion callback, which may hold its request's handle, is
        // gone already: a slot lets go of it when it calls it.
        plan.parked = Some(slot);
        self.team.plans.park(plan);
    }

    /// Show post `seq` on the team's call board, if it has one (active-set
    /// collectives, outside the team's sequence, are not shown).
    fn show(&self, seq: u64) -> Option<BoardWatch> {
        let board = self.team.ready()?.board.as_ref();
        let (board, shown) = board.zip(self.plan.shown).filter(|_| self.plan.init.active_set.is_none())?;
        Some(BoardWatch::show(board, self.team.rank, Posted { seq, ..shown }))
    }

    /// Start the collective (`ucc_collective_post`). A persistent request
    /// may be posted again once it has completed successfully.
    pub fn post(&mut self) -> Result<()> {
        self.check_postable(true)?;
        self.team.check_usable()?;
        let seq = self.next_seq();
        self.team.posted_via.note(seq, self.plan.via_tag);
        // Taken out before the task is borrowed (`live` lies in the plan).
        let live = &mut self.plan.live;
        let from_spare = live.slot.is_none();
        let finished_slot = live.slot.take().or_else(|| live.spare.take());
        let Some(task) = &self.plan.task else {
            // Nothing to do, but shown: a rank that waits for this one in a
            // call that differs learns from the board what it posted, or,
            // on a team without one, from the TLs that keep what it posted.
            let _shown = self.show(seq);
            self.posted_without_task(seq);
            if let Some(cb) = self.callback() {
                cb(Status::Ok);
            }
            self.plan.live.slot = Some(TaskSlot::finished(Ok(()), self.desc(seq)));
            return Ok(());
        };
        self.plan.diag.clear();
        let post = PostInfo { seq, diag: &self.plan.diag, engine_copies: false, stream: None };
        let watchdog = &self.team.ctx.settings.watchdog;
        // A persistent request's next post takes the slot of the one before
        // (finished: `check_postable` said so), which keeps the request's
        // description, diag and call board entry — and, for a task that
        // recycles them, the finished future, which the task re-initialises
        // for this post: no allocation, and no reference counted for them.
        // One poll now sends the first messages without waiting for
        // progress (under the lock that re-arms the slot, where it is
        // re-armed).
        let fresh = |this: &Self| -> Result<(Arc<TaskSlot>, Polled)> {
            let fut = task.start(&post).map_err(|e| e.prefixed(this.desc(seq)))?;
            let slot = this.new_slot(fut, seq, this.plan.diag.clone(), task.recycles_futures());
            let polled = slot.poll_at_post(watchdog);
            Ok((slot, polled))
        };
        let (slot, polled) = match finished_slot {
            Some(slot) => {
                let start = |spent| task.restart(&post, spent);
                match slot.rearm_and_poll(start, seq, &self.plan.diag, self.callback(), watchdog) {
                    Some(Ok(polled)) => (slot, polled),
                    Some(Err(e)) => {
                        // Still finished: the next post may take it.
                        let e = e.prefixed(self.desc(seq));
                        if from_spare {
                            self.plan.live.spare = Some(slot)
                        } else {
                            self.plan.live.slot = Some(slot)
                        }
                        return Err(e);
                    }
                    // A triggered post gave it a diag of its own.
                    None => fresh(self)?,
                }
            }
            None => fresh(self)?,
        };
        self.team.recorder.record(seq, &slot);
        // Marked queued by that poll (under the lock it took anyway).
        if polled == (Polled::Pending { push: true }) {
            self.team.ctx.queue.push_polled(slot.clone());
        }
        self.plan.live.slot = Some(slot);
        Ok(())
    }

    /// Tell the team's TLs that post `seq` of this request ran no task.
    fn posted_without_task(&self, seq: u64) {
        let Some(active) = self.team.ready() else { return };
        let sig = Signature::of(&self.plan.init);
        active.tls.iter().for_each(|t| t.team.posted_without_task(seq, sig));
    }

    /// A slot for post `seq` (the request's first, or one after a triggered post).
    fn new_slot(&self, fut: TaskFuture, seq: u64, diag: Arc<TaskDiag>, keep_spent: bool) -> Arc<TaskSlot> {
        TaskSlot::of(SlotPost {
            keep_spent,
            self_driven: self.plan.task.as_ref().is_some_and(|t| t.progresses_itself()),
            fut,
            desc: self.desc(seq),
            diag,
            timeout: self.plan.init.timeout,
            on_complete: self.callback(),
            watch: self.show(seq),
        })
    }

    /// What each post calls with its final status: the one set by
    /// [`Request::set_completion`], else the arguments' callback.
    fn callback(&self) -> Option<CompletionCallback> {
        self.plan.live.on_complete.clone().or_else(|| self.plan.init.cb.clone())
    }

    /// Call `cb` once per post with its final status, as `CollArgs::cb`
    /// would, for the posts after this call. Unlike the arguments' callback
    /// it is not part of the call: a request whose completion is reported
    /// this way shares the plan of an earlier one with the same call (see
    /// `plan_cache.rs`). The C interface reports every request this way.
    pub fn set_completion(&mut self, cb: CompletionCallback) {
        self.plan.live.on_complete = Some(cb);
    }

    /// Take the next sequence number of the team (or the active-set one).
    fn next_seq(&self) -> u64 {
        match &self.plan.init.active_set {
            Some(_) => ACTIVE_SET_SEQ | u64::from(self.plan.init.tag.unwrap_or(0)),
            None => self.team.next_seq(),
        }
    }

    /// Describe post `seq` of this request.
    fn desc(&self, seq: u64) -> TaskDesc {
        let i = &self.plan.init;
        let call = Call {
            count: i.count,
            dtype: (!i.coll.is_synchronisation()).then_some(i.dtype),
            op: i.coll.is_reduction().then_some(i.op),
            root: i.coll.is_rooted().then_some(i.root),
            bytes: i.msgsize,
        };
        TaskDesc { coll: i.coll.name(), seq, team: self.team.desc.clone(), via: self.plan.selected.clone(), call }
    }

    /// Make this finished request a new one for the same call, as dropping
    /// it and initialising its arguments again would (its plan taken back
    /// from the team's plan cache): its next post re-arms its slot. For a
    /// caller that keeps a finished request for a later call equal to its
    /// own (the C interface, whose `ucc_collective_init` may hand out a
    /// finalized handle again). Only what the plan cache would park: its
    /// last post succeeded, never on an engine, its plan reusable (host
    /// memory, no active set, no callback in the arguments, a task that may
    /// run again). Returns whether it did; if not, nothing changed.
    pub fn renew(&mut self) -> bool {
        let finished = self.plan.live.slot.as_ref().is_some_and(|s| matches!(s.status(), Ok(Status::Ok)));
        if self.plan.live.finalized || self.plan.live.triggered || !finished || !self.plan.reusable() {
            return false;
        }
        self.plan.live.spare = self.plan.live.slot.take();
        // The cache entry its plan came from, if any, is not held for as
        // long as the caller keeps the request.
        self.team.plans.unhold(&mut self.plan);
        true
    }

    /// Let this request be posted again once a post of it succeeded, as a
    /// persistent one may, though its arguments do not say persistent: what
    /// UCC's `ucc_collective_post` does with any request it is given (UCC's
    /// perftest posts its barrier, made without the flag, again and again).
    /// For the C interface; plain posts only (a triggered post of a
    /// non-persistent request may hand its copies to the engine for one
    /// post). The Rust API keeps refusing such a post.
    pub fn allow_repost(&mut self) {
        self.plan.live.repost_allowed = true;
    }

    /// Whether a post (`plain`: not triggered) of this request, not
    /// persistent, may follow one that succeeded ([`Request::allow_repost`]).
    fn reposts(&self, plain: bool) -> bool {
        plain && self.plan.live.repost_allowed && !self.plan.live.triggered
    }

    /// Refuse a post of a finalized request, of one in progress, of a
    /// non-persistent one that already ran (unless a plain post of one
    /// whose repost is allowed, never posted on an engine), and of one
    /// that failed.
    fn check_postable(&self, plain: bool) -> Result<()> {
        if self.plan.live.finalized {
            return Err(Error::invalid_param(format!("{}: the request was finalized", self.plan.init.coll)));
        }
        if let Some(slot) = &self.plan.live.slot {
            match slot.status() {
                Ok(Status::InProgress) => {
                    return Err(Error::invalid_param(format!(
                        "{} is still in progress; it cannot be posted again",
                        slot.desc()
                    )));
                }
                Ok(_) if !self.plan.init.persistent && !self.reposts(plain) => {
                    return Err(Error::invalid_param(format!(
                        "{} already ran and is not persistent (set the persistent flag to post it again)",
                        slot.desc()
                    )));
                }
                Err(e) => {
                    return Err(Error::invalid_param(format!("the request failed and cannot be posted again: {e}")));
                }
                Ok(_) => {}
            }
        }
        Ok(())
    }

    /// The status (`ucc_collective_test`): `Ok(OperationInitialized)` before
    /// the first post, `Ok(InProgress)`, `Ok(Ok)`, or the error. Like UCC's, it
    /// does not progress anything: call [`Context::progress`](crate::Context::progress)
    /// (or use [`Request::wait`]).
    pub fn test(&self) -> Result<Status> {
        if self.plan.live.finalized {
            return Err(Error::invalid_param(format!("{}: the request was finalized", self.plan.init.coll)));
        }
        match &self.plan.live.slot {
            None => Ok(Status::OperationInitialized),
            Some(slot) => slot.status(),
        }
    }

    /// Progress the team's context until the request completes; returns its result.
    ///
    /// Its own task is polled first, then the whole context (every TL's
    /// progress, every queued task) on every second (`PROGRESS_EVERY`) fruitless
    /// poll — or, for a task that [progresses itself](CollTask::progresses_itself),
    /// on every 64th (`PROGRESS_EVERY_SELF_DRIVEN`), and a user's progress
    /// (`ContextInner::progress`) whenever the rank is about to yield its
    /// core: a small collective whose peers are already there completes
    /// without the rest of the context's work in between, and the rest
    /// still moves while it waits. An oversubscribed rank yields on almost
    /// every poll; between yields it polls the queue, and runs the
    /// transports only when a queued task moves through them (or every 16th
    /// time): running them every time (~300 instructions with nothing to
    /// move) kept the core from the rank being waited for. 4 ranks on 2
    /// cores, interleaved medians: allreduce 0.89, bcast 0.86, scatter 0.79,
    /// alltoall 0.92 of the time (BENCHMARKS.md, twenty-third round). The
    /// slot's poll is the one the queue makes, so timeouts, the watchdog and
    /// the call board act as they do there.
    pub fn wait(&mut self) -> Result<()> {
        let Some(slot) = self.plan.live.slot.as_ref() else {
            return Err(Error::invalid_param(format!(
                "{}: wait on a request that was never posted",
                self.plan.init.coll
            )));
        };
        if self.plan.live.finalized {
            return Err(Error::invalid_param(format!("{}: the request was finalized", self.plan.init.coll)));
        }
        // A task that finished at post (a team of one, peers already there):
        // one look, no poll.
        if slot.status()? != Status::InProgress {
            return Ok(());
        }
        let ctx = &self.team.ctx;
        let self_driven = self.plan.task.as_ref().is_some_and(|t| t.progresses_itself());
        let every = if self_driven { PROGRESS_EVERY_SELF_DRIVEN } else { PROGRESS_EVERY };
        let mut backoff = ctx.backoff();
        let mut polls = 0u32;
        loop {
            if slot.poll(&ctx.settings.watchdog) {
                // A timeout asked for the flight records, which a progress
                // dumps: this wait ends without one, so it dumps them itself.
                crate::engine::recorder::dump_if_requested();
                return slot.status().map(|_| ());
            }
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(every) {
                ctx.progress_all()?;
            } else if self_driven && backoff.yields_next() {
                ctx.progress()?;
            }
            backoff.snooze();
        }
    }

    /// Post and wait.
    pub fn run(&mut self) -> Result<()> {
        self.post()?;
        self.wait()
    }

    /// Finish with the request (`ucc_collective_finalize`): later posts,
    /// tests and waits are refused. What it holds is released (or parked
    /// for a later request with the same call, see `plan_cache.rs`) when it
    /// is dropped, as the C interface's finalize does at once. A request in
    /// progress cannot be finalized (`InvalidParam`): wait for it, or drop
    /// it to cancel it.
    pub fn finalize(&mut self) -> Result<()> {
        if self.plan.live.finalized {
            return Err(Error::invalid_param(format!("{}: the request was already finalized", self.plan.init.coll)));
        }
        if self.test()? == Status::InProgress {
            return Err(Error::invalid_param(format!(
                "{}: cannot finalize a request in progress (wait for it, or drop it to cancel it)",
                self.plan.init.coll
            )));
        }
        self.plan.live.finalized = true;
        Ok(())
    }

    /// `"tl/algorithm"` chosen for this request.
    pub fn selected(&self) -> &str {
        &self.plan.selected
    }

    /// The validated arguments.
    pub fn args(&self) -> &CollInit {
        &self.plan.init
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once, and nothing reads `self.plan` after this line.
        let mut plan = unsafe { ManuallyDrop::take(&mut self.plan) };
        // Out of the plan, which is parked or released without them (the
        // callback may hold this request's handle); field by field, not
        // `Live` whole, whose wide loads would wait on the post's narrow
        // stores. The rest is reset when a request takes the plan.
        let live = &mut plan.live;
        let (slot, spare, triggered) = (live.slot.take(), live.spare.take(), live.triggered);
        live.on_complete = None;
        match slot {
            Some(slot) if slot.status().is_ok_and(|s| s == Status::InProgress) => {
                // Drops the task's future now, so nothing touches the buffers after we return.
                slot.cancel(|desc| Error::invalid_param(format!("{desc} was cancelled: its request was dropped")));
                self.team.plans.release(plan);
            }
            slot => self.park(plan, slot.or(spare), triggered),
        }
        // SAFETY: `drop` runs once, and nothing reads `self.team` after this line.
        spare_team::keep(unsafe { ManuallyDrop::take(&mut self.team) });
    }
}

#[cfg(test)]
mod tests {
    use super::Request;
    use crate::error::Result;

    /// A request is its team and its plan's box, and a result of one is no
    /// wider: returned and moved in two registers (see [`super::Live`]).
    #[test]
    fn a_request_is_two_pointers() {
        assert_eq!(size_of::<Request<'static>>(), 2 * size_of::<usize>());
        assert_eq!(size_of::<Result<Request<'static>>>(), 2 * size_of::<usize>());
    }
}
