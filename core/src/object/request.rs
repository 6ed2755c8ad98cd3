//! [`Request`]: one collective (`ucc_collective_init` → `post` → `test` →
//! `finalize`), including persistent re-posting and blocking `wait`.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::team::{ActiveTeam, AlgName, Team, TeamInner};
use crate::args::{CollArgs, CollInit, Signature};
use crate::backend::{CollTask, PostInfo};
use crate::engine::{BoardWatch, Call, Posted, TaskDesc, TaskDiag, TaskSlot};
use crate::error::{Error, Result, Status};
use crate::log::Level;

mod triggered;

/// Sequence numbers of active-set collectives: they do not consume the
/// team's sequence (ranks outside the set do not post them), so they are
/// matched by the user's tag in a separate number space.
const ACTIVE_SET_SEQ: u64 = 1 << 63;

/// Fruitless polls of its own task between two progress calls of the whole
/// context while a request waits (see [`Request::wait`]).
const PROGRESS_EVERY: u32 = 2;

/// The id of the next request of this process (0 is never an id: events use it for "none").
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A collective request. `'a` is the lifetime of the buffers it uses.
///
/// Dropping a request that is in progress cancels it on this rank (its
/// buffers are released before the drop returns); the other ranks' requests
/// then wait for it until their timeout.
pub struct Request<'a> {
    team: Arc<TeamInner>,
    init: Arc<CollInit>,
    /// `None` for zero-size collectives, which complete at post.
    task: Option<Arc<dyn CollTask>>,
    /// Process-wide unique id, carried by the events of its triggered posts.
    id: u64,
    selected: Arc<str>,
    /// "team 0x… (rank r of n)", made once for the messages of every post.
    team_desc: Arc<str>,
    slot: Option<Arc<TaskSlot>>,
    /// What its task waits for, shared by its posts: a post starts once the
    /// one before has finished, and a finished slot's record never reads it.
    diag: Arc<TaskDiag>,
    /// What each post shows on the board, if there is one (all but the sequence number).
    shown: Option<Posted>,
    finalized: bool,
    _buffers: PhantomData<&'a mut [u8]>,
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
        // SAFETY: forwarded to our caller.
        let init = unsafe { CollInit::validate(args, team.rank, team.size, &resolve, team.ctx.settings.coll_timeout)? };
        let init = Arc::new(init);
        if init.is_zero_size() {
            trace(team, &init, "no-op (zero size)", String::new);
            return Ok(Request::new(team.clone(), init, None, &AlgName::new("none/zero-size".into()), active));
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
                    return Ok(Request::new(team.clone(), init, Some(task), name, active));
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
        selected: &AlgName,
        active: &ActiveTeam,
    ) -> Self {
        let team_desc = team.desc.clone();
        // Relaxed: ids only need to be unique.
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let shown = active.board.as_ref().map(|_| Posted { seq: 0, sig: Signature::of(&init), via: selected.via });
        Request {
            team,
            init,
            task,
            id,
            selected: selected.name.clone(),
            team_desc,
            slot: None,
            diag: Arc::default(),
            shown,
            finalized: false,
            _buffers: PhantomData,
        }
    }

    /// Show post `seq` on the team's call board, if it has one (active-set
    /// collectives, outside the team's sequence, are not shown).
    fn show(&self, seq: u64) -> Option<BoardWatch> {
        let board = self.team.ready()?.board.as_ref();
        let (board, shown) = board.zip(self.shown).filter(|_| self.init.active_set.is_none())?;
        Some(BoardWatch::show(board, self.team.rank, Posted { seq, ..shown }))
    }

    /// Start the collective (`ucc_collective_post`). A persistent request
    /// may be posted again once it has completed successfully.
    pub fn post(&mut self) -> Result<()> {
        self.check_postable()?;
        self.team.check_usable()?;
        let desc = self.next_desc();
        let seq = desc.seq;
        let watch = self.show(seq);
        let slot = match &self.task {
            None => {
                if let Some(cb) = &self.init.cb {
                    cb(Status::Ok);
                }
                TaskSlot::finished(Ok(()), desc)
            }
            Some(task) => {
                let diag = self.diag.clone();
                diag.clear();
                let post = PostInfo { seq, diag: diag.clone(), engine_copies: false, stream: None };
                let fut = task.start(&post).map_err(|e| e.prefixed(&desc))?;
                let slot = TaskSlot::new(fut, desc, diag, self.init.timeout, self.init.cb.clone(), watch);
                self.team.recorder.record(&slot);
                // One poll now sends the first messages without waiting for progress.
                if !slot.poll(&self.team.ctx.settings.watchdog) {
                    self.team.ctx.queue.push(slot.clone());
                }
                slot
            }
        };
        self.slot = Some(slot);
        Ok(())
    }

    /// Take the next sequence number of the team (or the active-set one) and describe the task.
    fn next_desc(&self) -> TaskDesc {
        let seq = match &self.init.active_set {
            Some(_) => ACTIVE_SET_SEQ | u64::from(self.init.tag.unwrap_or(0)),
            None => self.team.next_seq(),
        };
        let i = &self.init;
        let call = Call {
            count: i.count,
            dtype: (!i.coll.is_synchronisation()).then_some(i.dtype),
            op: i.coll.is_reduction().then_some(i.op),
            root: i.coll.is_rooted().then_some(i.root),
            bytes: i.msgsize,
        };
        TaskDesc { coll: i.coll.name(), seq, team: self.team_desc.clone(), via: self.selected.clone(), call }
    }

    /// Refuse a post of a finalized request, of one in progress, of a
    /// non-persistent one that already ran, and of one that failed.
    fn check_postable(&self) -> Result<()> {
        if self.finalized {
            return Err(Error::invalid_param(format!("{}: the request was finalized", self.init.coll)));
        }
        if let Some(slot) = &self.slot {
            match slot.status() {
                Ok(Status::InProgress) => {
                    return Err(Error::invalid_param(format!(
                        "{} is still in progress; it cannot be posted again",
                        slot.desc()
                    )));
                }
                Ok(_) if !self.init.persistent => {
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
        if self.finalized {
            return Err(Error::invalid_param(format!("{}: the request was finalized", self.init.coll)));
        }
        match &self.slot {
            None => Ok(Status::OperationInitialized),
            Some(slot) => slot.status(),
        }
    }

    /// Progress the team's context until the request completes; returns its result.
    ///
    /// Its own task is polled first, then the whole context (every TL's
    /// progress, every queued task) on every [`PROGRESS_EVERY`]-th fruitless
    /// poll: a small collective whose peers are already there completes
    /// without the rest of the context's work in between, and the rest still
    /// moves while it waits. The slot's poll is the one the queue makes, so
    /// timeouts, the watchdog and the call board act as they do there.
    pub fn wait(&mut self) -> Result<()> {
        let Some(slot) = self.slot.as_ref() else {
            return Err(Error::invalid_param(format!("{}: wait on a request that was never posted", self.init.coll)));
        };
        if self.finalized {
            return Err(Error::invalid_param(format!("{}: the request was finalized", self.init.coll)));
        }
        // A task that finished at post (a team of one, peers already there):
        // one look, no poll.
        if slot.status()? != Status::InProgress {
            return Ok(());
        }
        let ctx = &self.team.ctx;
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
            if polls.is_multiple_of(PROGRESS_EVERY) {
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

    /// Release the request (`ucc_collective_finalize`). A request in progress
    /// cannot be finalized (`InvalidParam`): wait for it, or drop it to cancel it.
    pub fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Err(Error::invalid_param(format!("{}: the request was already finalized", self.init.coll)));
        }
        if self.test()? == Status::InProgress {
            return Err(Error::invalid_param(format!(
                "{}: cannot finalize a request in progress (wait for it, or drop it to cancel it)",
                self.init.coll
            )));
        }
        self.finalized = true;
        self.slot = None;
        self.task = None;
        Ok(())
    }

    /// `"tl/algorithm"` chosen for this request.
    pub fn selected(&self) -> &str {
        &self.selected
    }

    /// The validated arguments.
    pub fn args(&self) -> &CollInit {
        &self.init
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if let Some(slot) = &self.slot {
            // Drops the task's future now, so nothing touches the buffers after we return.
            slot.cancel(|| Error::invalid_param(format!("{} was cancelled: its request was dropped", slot.desc())));
        }
    }
}
