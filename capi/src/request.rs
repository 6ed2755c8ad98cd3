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
//! Sides staged through scratch ([`crate::staging`]) are gathered at each
//! post and scattered back in the completion callback, before the status
//! word turns to `UCC_OK`; a triggered post does both in its trigger.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ferrocoll::core::args::CompletionCallback;
use ferrocoll::{CollBuffer, Ee, Error, Event, Request, Result, Status};

use crate::abi::*;
use crate::coll_args::{self, UserCb};
use crate::guard::{ffi, non_null, status_code};
use crate::handle::{Handle, borrow, publish_arc, retire};
use crate::lib_api::put;
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
    state: Mutex<ReqState>,
    /// ferrocoll's request id (carried by the events of triggered posts).
    pub(crate) id: AtomicU64,
    /// The caller's callback.
    user_cb: Option<UserCb>,
    /// The collective ended while this thread was posting it: the caller's
    /// callback is owed once the post lets go of the request.
    deferred: AtomicBool,
    /// Sides running on scratch (scattered device blocks).
    stages: Arc<StageSet>,
    /// The current post is a triggered one (its trigger stages, not the callback).
    triggered: AtomicBool,
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
    fn lock(&self) -> MutexGuard<'_, ReqState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The completion callback ferrocoll calls (once per post).
    fn completion(h: &Arc<ReqHandle>) -> CompletionCallback {
        let h = h.clone();
        Arc::new(move |s: Status| {
            let mut code = final_code(s);
            if s == Status::Ok && !h.stages.is_empty() {
                // The results reach the caller's blocks before the status says so
                // (a triggered post's trigger copied them already, or failed to).
                // Acquire: pairs with the store before the post.
                if h.triggered.load(Ordering::Acquire) {
                    let failed = h.stages.take_failed();
                    if failed != UCC_OK {
                        code = failed;
                    }
                } else if let Err(e) = h.stages.scatter() {
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
                if triggered { Ok(()) } else { self.stages.gather() }.and_then(|()| f(req))
            };
            if let Err(e) = &r {
                self.status.store(status_code(e.status()), Ordering::Release);
            }
            r
        };
        if self.deferred.swap(false, Ordering::AcqRel) {
            if let Some(cb) = self.user_cb {
                // SAFETY: as in `completion`; the request's lock is released.
                unsafe { (cb.f)(cb.data, self.status.load(Ordering::Acquire)) };
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
        if self.stages.is_empty() {
            return self.post_with("ucc_collective_triggered_post", true, |r| r.triggered_post(engine, ev));
        }
        let staging = StagingEe { inner: engine, stages: self.stages.clone() };
        self.post_with("ucc_collective_triggered_post", true, |r| r.triggered_post(&staging, ev))
    }
}

/// Make a request for `args` on `team`.
///
/// # Safety
/// `args` is a `ucc_coll_args_t` set as UCC requires; its buffers stay
/// valid while the request lives.
unsafe fn init(args: *const CollArgs, team: &TeamHandle) -> Result<Arc<ReqHandle>> {
    let mcs = team.ctx.lib.mcs().clone();
    let resolve = move |p: *const u8| mcs.resolve(p);
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
            state: Mutex::new(ReqState { req: None, _keep: tr.keep }),
            id: AtomicU64::new(0),
            user_cb: tr.user_cb,
            deferred: AtomicBool::new(false),
            stages: Arc::new(StageSet::new(staged)),
            triggered: AtomicBool::new(false),
        });
        // SAFETY: the buffers and arrays stay valid while the request lives
        // (the caller's promise; the arrays made here live in its state).
        let mut req = unsafe { t.collective_init(&a) }?;
        // Not in the arguments: a callback there would be part of the call,
        // and a loop of the same collective could not reuse its plan.
        req.set_completion(ReqHandle::completion(&h));
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

/// `ucc_collective_init_and_post` (init, then post).
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
        h.post("ucc_collective_init_and_post")?;
        // SAFETY: checked non-null.
        unsafe { put(request, publish_arc(h)) };
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
            // SAFETY: see handle::retire (under the lock, so a racing post cannot start it meanwhile).
            unsafe { retire(request, "request") }?;
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
