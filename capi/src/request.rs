//! Collective requests: `ucc_collective_init`, `_post`, `_init_and_post`,
//! `_finalize`, and the status word that the inline `ucc_collective_test`
//! reads.
//!
//! The request handle begins with its status (`ucc_coll_req_t`). ferrocoll
//! reports a collective's end through the request's completion callback,
//! which here is always installed: it stores the final status (a release
//! store, so a thread that reads `UCC_OK` sees the results), then calls the
//! caller's callback, if any. That callback may finalize its own request;
//! when the collective ends inside `ucc_collective_post` itself (its first
//! poll, or a zero-size collective), the caller's callback runs after the
//! post has let go of the request, so it never re-enters it.
//!
//! A finalized handle whose call may come again is kept by its team
//! ([`crate::spares`]) and handed out, alive, by the next init of the same
//! call, its request renewed: such a loop translates nothing again.
//!
//! Sides staged through scratch ([`crate::staging`]) are gathered at each
//! post and scattered back in the completion callback, before the status
//! word turns to `UCC_OK`; a triggered post does both in its trigger.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use ferrocoll::core::args::CompletionCallback;
use ferrocoll::core::engine::{SlotGuard, SlotLock};
use ferrocoll::{CollBuffer, Ee, Error, Event, Request, Result, Status};

use crate::abi::*;
use crate::call_key::{CallKey, call_key};
use crate::coll_args::{self, UserCb};
use crate::context::InUse;
use crate::guard::{ffi, non_null, status_code};
use crate::handle::{Handle, borrow, publish_arc, quarantine, retire_quietly, take_back};
use crate::lib_api::put;
use crate::spares::Spares;
use crate::staging::{StageSet, Staged, StagingEe};
use crate::team::TeamHandle;

/// The request's own part, behind its lock.
pub(crate) struct ReqState {
    /// Taken by finalize.
    pub(crate) req: Option<Request<'static>>,
    /// Displacement arrays the arguments point into.
    _keep: Vec<Box<[u64]>>,
}

/// What a `ucc_coll_req_h` points to.
#[repr(C)]
pub struct ReqHandle {
    /// `ucc_coll_req_t::status`.
    status: AtomicI32,
    _pad: u32,
    magic: AtomicU64,
    /// Taken by every post and finalize: a lock of one atomic operation
    /// (`SlotLock`), as the collective's own slot.
    state: SlotLock<ReqState>,
    /// ferrocoll's request id (carried by the events of triggered posts).
    pub(crate) id: AtomicU64,
    /// The caller's callback.
    user_cb: Option<UserCb>,
    /// The collective ended while this thread was posting it: the caller's
    /// callback is owed once the post lets go of the request.
    deferred: AtomicBool,
    /// Sides running on scratch (scattered device blocks), if any (most
    /// requests have none: nothing allocated for them).
    stages: Option<Arc<StageSet>>,
    /// The current post is a triggered one (its trigger stages, not the callback).
    triggered: AtomicBool,
    /// The call's key and its team's kept handles, when finalize may keep
    /// this handle for a later init of the same call (`spares.rs`).
    spare_of: Option<(CallKey, Arc<Spares>)>,
    /// Its context handle's address, marked in use around the caller's
    /// callback (`context::InUse`).
    ctx: usize,
}

// SAFETY: `magic` is the AtomicU64 at offset 8 (repr(C): i32, u32, then it).
unsafe impl Handle for ReqHandle {
    const WHAT: &'static str = "ucc_coll_req_h";
    const LIVE: u64 = 0xfe77_0c0c_0000_0006;
    const MAGIC_OFFSET: usize = 8;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

const _: () = {
    assert!(std::mem::offset_of!(ReqHandle, status) == 0);
    assert!(std::mem::offset_of!(ReqHandle, magic) == 8);
};

thread_local! {
    /// The request this thread is posting (its callback must wait until the post lets go).
    static POSTING: Cell<*const ReqHandle> = const { Cell::new(std::ptr::null()) };
    /// Deferred callbacks owed while one runs on this thread (see [`run_deferred`]).
    static OWED: RefCell<Option<VecDeque<(UserCb, UccStatus, usize)>>> = const { RefCell::new(None) };
}

/// Call a deferred callback: at once, unless this thread is inside one
/// already, and then after it, from the outermost. A callback that posts
/// its request again (a persistent request, re-posted from its own
/// callback), where each post ends at once (a team of one), would
/// otherwise nest one call deeper per collective until the stack overflows.
/// `ctx`: the request's context handle, marked in use meanwhile (`InUse`).
fn run_deferred(cb: UserCb, code: UccStatus, ctx: usize) {
    let outermost = OWED.with(|o| match &mut *o.borrow_mut() {
        Some(owed) => {
            owed.push_back((cb, code, ctx));
            false
        }
        none => {
            *none = Some(VecDeque::new());
            true
        }
    });
    if !outermost {
        return;
    }
    let mut next = Some((cb, code, ctx));
    while let Some((cb, code, ctx)) = next {
        let _in_use = InUse::mark(ctx);
        // SAFETY: the caller's callback with its own data (UCC's contract);
        // it cannot unwind (extern "C"), so the queue is always reset below.
        unsafe { (cb.f)(cb.data, code) };
        next = OWED.with(|o| o.borrow_mut().as_mut().and_then(VecDeque::pop_front));
    }
    OWED.with(|o| *o.borrow_mut() = None);
}

/// Marks this thread as posting a request, until dropped (also on unwinding).
struct Posting(*const ReqHandle);

impl Posting {
    fn enter(h: &Arc<ReqHandle>) -> Posting {
        Posting(POSTING.with(|p| p.replace(Arc::as_ptr(h))))
    }
}

impl Drop for Posting {
    fn drop(&mut self) {
        POSTING.with(|p| p.set(self.0));
    }
}

/// The C status of a completion.
fn final_code(s: Status) -> UccStatus {
    status_code(s)
}

impl ReqHandle {
    /// The key of its call, if finalize may keep it for a later init of
    /// the same call (`spares.rs`).
    pub(crate) fn call_key(&self) -> Option<&CallKey> {
        self.spare_of.as_ref().map(|(key, _)| key)
    }

    /// Let go of a finalized handle that was kept (`spares.rs`): its
    /// request is released (it holds the completion callback, which holds
    /// the handle), its memory quarantined.
    pub(crate) fn give_up(h: Arc<ReqHandle>) {
        let req = h.lock().req.take();
        drop(req);
        quarantine(h);
    }

    fn lock(&self) -> SlotGuard<'_, ReqState> {
        self.state.lock()
    }

    /// The completion callback ferrocoll calls (once per post).
    fn completion(h: &Arc<ReqHandle>) -> CompletionCallback {
        let h = h.clone();
        Arc::new(move |s: Status| {
            let mut code = final_code(s);
            if let Some(stages) = h.stages.as_ref().filter(|_| s == Status::Ok) {
                // The results reach the caller's blocks before the status says so
                // (a triggered post's trigger copied them already, or failed to).
                // Acquire: pairs with the store before the post.
                if h.triggered.load(Ordering::Acquire) {
                    let failed = stages.take_failed();
                    if failed != UCC_OK {
                        code = failed;
                    }
                } else if let Err(e) = stages.scatter() {
                    crate::guard::log_error("collective completion (copying staged blocks back)", &e);
                    code = status_code(e.status());
                }
            }
            // Release: whoever reads the final status sees the collective's results.
            h.status.store(code, Ordering::Release);
            let Some(cb) = h.user_cb else { return };
            if POSTING.with(|p| p.get() == Arc::as_ptr(&h)) {
                h.deferred.store(true, Ordering::Release);
            } else {
                let _in_use = InUse::mark(h.ctx);
                // SAFETY: the caller's callback with its own data (UCC's contract).
                unsafe { (cb.f)(cb.data, code) };
            }
        })
    }

    /// Post (or trigger-post) through `f`, with the status word and the
    /// deferred callback handled; `what` names the call in errors.
    fn post_with(
        self: &Arc<Self>,
        what: &str,
        triggered: bool,
        f: impl FnOnce(&mut Request<'static>) -> Result<()>,
    ) -> Result<()> {
        let result = {
            let mut st = self.lock();
            let req = st.req.as_mut().ok_or_else(|| Error::invalid_param("the request was finalized"))?;
            if matches!(req.test(), Ok(Status::InProgress)) {
                return Err(Error::invalid_param(format!("{what}: the request is still in progress")));
            }
            self.status.store(UCC_INPROGRESS, Ordering::Release);
            // Release: the completion callback of this post reads it.
            self.triggered.store(triggered, Ordering::Release);
            let r = {
                let _posting = Posting::enter(self);
                // A plain post gathers now; a triggered one when its trigger fires.
                match &self.stages {
                    Some(stages) if !triggered => stages.gather(),
                    _ => Ok(()),
                }
                .and_then(|()| f(req))
            };
            if let Err(e) = &r {
                self.status.store(status_code(e.status()), Ordering::Release);
            }
            r
        };
        // Only this thread sets it, during this post (see `completion`): a
        // plain look first spares the locked swap on every post.
        if self.deferred.load(Ordering::Acquire) && self.deferred.swap(false, Ordering::AcqRel) {
            if let Some(cb) = self.user_cb {
                // The request's lock is released.
                run_deferred(cb, self.status.load(Ordering::Acquire), self.ctx);
            }
        }
        result
    }

    /// Post plainly (`ucc_collective_post`).
    fn post(self: &Arc<Self>, what: &str) -> Result<()> {
        self.post_with(what, false, |r| r.post())
    }

    /// Post on `engine`, triggered by `ev` (`ucc_collective_triggered_post`);
    /// staged sides are copied in step with the engine ([`StagingEe`]).
    pub(crate) fn triggered_post(self: &Arc<Self>, engine: &dyn Ee, ev: &Event) -> Result<()> {
        let Some(stages) = &self.stages else {
            return self.post_with("ucc_collective_triggered_post", true, |r| r.triggered_post(engine, ev));
        };
        let staging = StagingEe { inner: engine, stages: stages.clone() };
        self.post_with("ucc_collective_triggered_post", true, |r| r.triggered_post(&staging, ev))
    }
}

/// Make a request for `args` on `team`.
///
/// # Safety
/// `args` is a `ucc_coll_args_t` set as UCC requires; its buffers stay
/// valid while the request lives.
unsafe fn init(args: *const CollArgs, team: &TeamHandle) -> Result<Arc<ReqHandle>> {
    let mcs = team.ctx.lib.mcs();
    // SAFETY: forwarded from the caller.
    let key = team.rank().and_then(|rank| unsafe { call_key(args, rank, &|p| mcs.resolve(p)) });
    if let Some(h) = key.as_ref().and_then(|k| team.spares.take(k)) {
        // Finalized after a post that succeeded, and renewed: a new request.
        h.status.store(UCC_OPERATION_INITIALIZED, Ordering::Release);
        return Ok(h);
    }
    let resolve = |p: *const u8| mcs.resolve(p);
    team.with_team(|t| {
        // SAFETY: forwarded from the caller.
        let tr = unsafe { coll_args::translate(args, t.rank(), t.size(), &resolve) }?;
        let staged =
            tr.stage.into_iter().map(|plan| Staged::new(plan, team.ctx.lib.mcs())).collect::<Result<Vec<_>>>()?;
        let mut a = tr.args;
        for st in &staged {
            let side = if st.is_src() { &mut a.src } else { &mut a.dst };
            if let CollBuffer::InfoV(info) = side {
                info.buffer = st.addr();
                info.mem_type = st.mem_type();
            }
        }
        let h = Arc::new(ReqHandle {
            status: AtomicI32::new(UCC_OPERATION_INITIALIZED),
            _pad: 0,
            magic: AtomicU64::new(0),
            state: SlotLock::new(ReqState { req: None, _keep: tr.keep }),
            id: AtomicU64::new(0),
            user_cb: tr.user_cb,
            deferred: AtomicBool::new(false),
            spare_of: key.filter(|_| staged.is_empty()).map(|k| (k, team.spares.clone())),
            stages: (!staged.is_empty()).then(|| Arc::new(StageSet::new(staged))),
            triggered: AtomicBool::new(false),
            ctx: Arc::as_ptr(&team.ctx) as usize,
        });
        // SAFETY: the buffers and arrays stay valid while the request lives
        // (the caller's promise; the arrays made here live in its state).
        let mut req = unsafe { t.collective_init(&a) }?;
        // Not in the arguments: a callback there would be part of the call,
        // and a loop of the same collective could not reuse its plan.
        req.set_completion(ReqHandle::completion(&h));
        // As UCC posts whatever it is given: a finished request posts again.
        req.allow_repost();
        h.id.store(req.id(), Ordering::Relaxed);
        h.lock().req = Some(req);
        Ok(h)
    })
}

/// `ucc_collective_init`.
///
/// # Safety
/// `coll_args` is a `ucc_coll_args_t` set as UCC requires (its buffers and
/// arrays valid while the request lives); `request` is writable; `team` a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_collective_init(
    coll_args: *const CollArgs,
    request: *mut *mut ReqHandle,
    team: *const TeamHandle,
) -> UccStatus {
    ffi("ucc_collective_init", || {
        // SAFETY: see handle::borrow.
        let t = unsafe { borrow(team, "team") }?;
        non_null(coll_args, "coll_args")?;
        non_null(request, "request")?;
        // SAFETY: forwarded from the caller.
        let h = unsafe { init(coll_args, &t) }?;
        // SAFETY: checked non-null.
        unsafe { put(request, publish_arc(h)) };
        Ok(UCC_OK)
    })
}

/// `ucc_collective_post`.
///
/// # Safety
/// `request` is a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_collective_post(request: *const ReqHandle) -> UccStatus {
    ffi("ucc_collective_post", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(request, "request") }?;
        h.post("ucc_collective_post")?;
        Ok(UCC_OK)
    })
}

/// `ucc_collective_init_and_post` (init, then post). `*request` is set
/// before the post, so that a callback run by it (a collective that ends
/// at once) finds its request there; it is set to NULL if the post fails.
///
/// # Safety
/// As [`ucc_collective_init`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_collective_init_and_post(
    coll_args: *const CollArgs,
    request: *mut *mut ReqHandle,
    team: *const TeamHandle,
) -> UccStatus {
    ffi("ucc_collective_init_and_post", || {
        // SAFETY: see handle::borrow.
        let t = unsafe { borrow(team, "team") }?;
        non_null(coll_args, "coll_args")?;
        non_null(request, "request")?;
        // SAFETY: forwarded from the caller.
        let h = unsafe { init(coll_args, &t) }?;
        let p = publish_arc(h.clone());
        // SAFETY: checked non-null.
        unsafe { put(request, p) };
        if let Err(e) = h.post("ucc_collective_init_and_post") {
            // A failed post ran no callback: the handle is still only ours to take back.
            // SAFETY: published just above.
            let _ = unsafe { retire_quietly(p, "request") };
            // Its request holds the completion callback, which holds the handle.
            let req = h.lock().req.take();
            drop(req);
            // SAFETY: checked non-null.
            unsafe { put(request, std::ptr::null_mut()) };
            return Err(e);
        }
        Ok(UCC_OK)
    })
}

/// `ucc_collective_finalize`: refused while the collective is in progress.
///
/// # Safety
/// `request` is a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_collective_finalize(request: *mut ReqHandle) -> UccStatus {
    ffi("ucc_collective_finalize", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(request, "request") }?;
        let req = {
            let mut st = h.lock();
            if st.req.as_ref().is_some_and(|r| matches!(r.test(), Ok(Status::InProgress))) {
                return Err(Error::invalid_param(
                    "the request is in progress: wait until ucc_collective_test is no longer UCC_INPROGRESS",
                ));
            }
            // SAFETY: see handle::take_back (under the lock, so a racing post cannot start it meanwhile).
            let c_ref = unsafe { take_back(request, "request") }?;
            if let Some((_, spares)) = &h.spare_of {
                if st.req.as_mut().is_some_and(Request::renew) {
                    drop(st);
                    spares.keep(c_ref);
                    return Ok(UCC_OK);
                }
            }
            quarantine(c_ref);
            st.req.take()
        };
        // Dropped without the lock: the request's drop releases its task.
        drop(req);
        Ok(UCC_OK)
    })
}

/// Borrow a request handle for another module (triggered post).
///
/// # Safety
/// See handle::borrow.
pub(crate) unsafe fn borrow_req(p: *const ReqHandle, what: &str) -> Result<Arc<ReqHandle>> {
    // SAFETY: forwarded.
    unsafe { borrow(p, what) }
}

#[cfg(test)]
mod tests {
    use std::ffi::c_void;
    use std::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering};

    use super::*;
    use crate::testing::Single;

    static FINALIZE_IN_CB: AtomicI32 = AtomicI32::new(i32::MIN);

    /// Finalize the request whose handle `data` points to (as Open MPI's and
    /// the C tests' callbacks do).
    unsafe extern "C" fn finalize_own(data: *mut c_void, _status: UccStatus) {
        // SAFETY: the test passes the address of its request variable.
        let req = unsafe { *data.cast::<*mut ReqHandle>() };
        // SAFETY: the callback's own request, or NULL if it was not set yet.
        FINALIZE_IN_CB.store(unsafe { ucc_collective_finalize(req) }, Ordering::Release);
    }

    /// A collective that ends inside `ucc_collective_init_and_post` (zero
    /// size) runs its callback there: `*request` already holds the handle,
    /// so a callback that finalizes its request finalizes it.
    #[test]
    fn init_and_post_sets_the_request_before_its_callback_runs() {
        let s = Single::new(std::ptr::null());
        let team = s.team();
        let mut req: *mut ReqHandle = std::ptr::null_mut();
        // SAFETY: all-zero arguments are a mask of 0; an allreduce of nothing needs no buffer.
        let mut a: CollArgs = unsafe { std::mem::zeroed() };
        a.mask = ARGS_FIELD_CB;
        a.coll_type = ferrocoll::CollType::Allreduce as u32;
        a.op = ferrocoll::ReduceOp::Sum as u32;
        a.cb = CollCallback { cb: Some(finalize_own), data: (&raw mut req).cast() };
        // SAFETY: the arguments above; `req` outlives the call and its callback.
        assert_eq!(unsafe { ucc_collective_init_and_post(&a, &mut req, team) }, UCC_OK);
        assert!(!req.is_null());
        assert_eq!(FINALIZE_IN_CB.load(Ordering::Acquire), UCC_OK, "the callback finalized its request");
        // SAFETY: finalized, so quarantined: the handle reads dead.
        assert_eq!(unsafe { ucc_collective_finalize(req) }, UCC_ERR_INVALID_PARAM);
    }

    /// What `repost` works on.
    struct Reposts {
        req: AtomicUsize,
        left: AtomicU32,
        calls: AtomicU32,
        failed: AtomicI32,
    }

    /// Post the request again until `left` runs out (a pipeline driven by completions).
    unsafe extern "C" fn repost(data: *mut c_void, status: UccStatus) {
        // SAFETY: the test's `Reposts`, which outlives the request.
        let r = unsafe { &*data.cast::<Reposts>() };
        r.calls.fetch_add(1, Ordering::Relaxed);
        if status != UCC_OK {
            r.failed.store(status, Ordering::Relaxed);
        } else if r.left.load(Ordering::Relaxed) > 0 {
            r.left.fetch_sub(1, Ordering::Relaxed);
            // SAFETY: the test's live request.
            let st = unsafe { ucc_collective_post(r.req.load(Ordering::Relaxed) as *const ReqHandle) };
            if st != UCC_OK {
                r.failed.store(st, Ordering::Relaxed);
            }
        }
    }

    /// A persistent request re-posted from its own callback, each post
    /// ending at once (a team of one): the callbacks follow one another
    /// rather than nest, so 20000 of them fit in a 256 KiB stack.
    #[test]
    fn reposting_from_the_callback_does_not_nest() {
        const POSTS: u32 = 20_000;
        let s = Single::new(std::ptr::null());
        let team = s.team() as usize;
        let r = Box::leak(Box::new(Reposts {
            req: AtomicUsize::new(0),
            left: AtomicU32::new(POSTS - 1),
            calls: AtomicU32::new(0),
            failed: AtomicI32::new(UCC_OK),
        }));
        let data = std::ptr::from_mut(r) as usize;
        let run = std::thread::Builder::new().stack_size(256 << 10).spawn(move || {
            let bufs: &'static mut [i32; 8] = Box::leak(Box::new([1; 8]));
            let (src, dst) = bufs.split_at_mut(4);
            let int32 = (ferrocoll::DataType::Int32 as u64) << 3;
            // SAFETY: all-zero arguments are a mask of 0; the fields an allreduce reads are set below.
            let mut a: CollArgs = unsafe { std::mem::zeroed() };
            a.mask = ARGS_FIELD_CB | ARGS_FIELD_FLAGS;
            a.flags = ferrocoll::CollFlags::PERSISTENT.0;
            a.coll_type = ferrocoll::CollType::Allreduce as u32;
            a.op = ferrocoll::ReduceOp::Sum as u32;
            a.src.info = BufferInfo { buffer: src.as_mut_ptr().cast(), count: 4, datatype: int32, mem_type: 0 };
            a.dst.info = BufferInfo { buffer: dst.as_mut_ptr().cast(), count: 4, datatype: int32, mem_type: 0 };
            a.cb = CollCallback { cb: Some(repost), data: data as *mut c_void };
            let mut req = std::ptr::null_mut();
            // SAFETY: the arguments above over leaked buffers; the test's live team.
            assert_eq!(unsafe { ucc_collective_init(&a, &mut req, team as *const TeamHandle) }, UCC_OK);
            // SAFETY: the test's `Reposts`, leaked.
            unsafe { &*(data as *const Reposts) }.req.store(req as usize, Ordering::Relaxed);
            // SAFETY: the live request made above.
            assert_eq!(unsafe { ucc_collective_post(req) }, UCC_OK);
            req as usize
        });
        let req = run.expect("spawn a thread").join().expect("the posting thread returned") as *mut ReqHandle;
        assert_eq!(r.failed.load(Ordering::Relaxed), UCC_OK);
        assert_eq!(r.calls.load(Ordering::Relaxed), POSTS, "one callback per post");
        // SAFETY: the live request; every post has completed.
        assert_eq!(unsafe { ucc_collective_finalize(req) }, UCC_OK);
    }
}
