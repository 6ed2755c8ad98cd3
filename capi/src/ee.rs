//! Execution engines and events: `ucc_ee_create` (CPU thread, CUDA
//! stream), `ucc_collective_triggered_post`, `ucc_ee_get_event` /
//! `_ack_event` / `_set_event` / `_wait`.
//!
//! Events follow UCC's callers, where ferrocoll's differ:
//! - `UCC_EVENT_COLLECTIVE_POST` is queued by `ucc_collective_triggered_post`
//!   itself, so `ucc_ee_get_event` returns it at once (PyTorch requires it
//!   right after the post). ferrocoll's own post event, which comes when
//!   the trigger fires, is consumed here.
//! - `UCC_EVENT_COLLECTIVE_COMPLETE` (which UCC never produces) comes
//!   through, with the request's handle (NULL once it was finalized).
//! - A triggered post waits for any event of its `ev_type` set with
//!   `ucc_ee_set_event` (first come, first served), on a CPU engine; on a
//!   CUDA stream engine for the work queued on the stream before it, and
//!   later stream work waits until the collective's data has landed.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use ferrocoll::core::engine::Backoff;
use ferrocoll::ee::cuda::StreamOptions;
use ferrocoll::{CpuEe, CudaStreamEe, Ee, Error, Event, EventType, Result};

use crate::abi::*;
use crate::context::ContextHandle;
use crate::guard::{ffi, non_null};
use crate::handle::{Handle, borrow, publish, retire};
use crate::lib_api::put;
use crate::request::{ReqHandle, borrow_req};
use crate::team::TeamHandle;

/// Events the engine keeps for the caller before it reports an overflow.
const CAPACITY: usize = 4096;

/// One event handed to the caller, until it is acknowledged.
struct Given {
    /// What the caller reads (its address is the `ucc_ev_t *` it got).
    ev: Box<Ev>,
    /// The ferrocoll event it stands for, to acknowledge there too.
    origin: Option<Event>,
}

#[derive(Default)]
struct Events {
    /// Post events queued by triggered posts, not yet taken.
    posts: VecDeque<Ev>,
    /// An overflow was noted and not yet reported.
    overflowed: bool,
    /// Events taken and not acknowledged, by address.
    given: HashMap<usize, Given>,
    /// Requests triggered on this engine, by ferrocoll id (to name them in events).
    requests: HashMap<u64, Weak<ReqHandle>>,
    /// Size of `requests` after its last sweep of finalized requests.
    swept: usize,
}

// SAFETY: the raw pointers in the events are values handed to the caller
// (request handles, NULL contexts) and never dereferenced here; the boxes
// are owned by this struct.
unsafe impl Send for Events {}

/// What a `ucc_ee_h` points to.
#[repr(C)]
pub struct EeHandle {
    magic: AtomicU64,
    ee: Mutex<Option<Arc<dyn Ee>>>,
    /// The team's context, progressed by `ucc_ee_wait`.
    ctx: Arc<ContextHandle>,
    events: Mutex<Events>,
}

// SAFETY: `magic` is the AtomicU64 at offset 0.
unsafe impl Handle for EeHandle {
    const WHAT: &'static str = "ucc_ee_h";
    const LIVE: u64 = 0xfe77_0c0c_0000_0007;
    const MAGIC_OFFSET: usize = 0;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

fn ev(ev_type: u32, req: *mut std::ffi::c_void) -> Ev {
    Ev { ev_type, ev_context: std::ptr::null_mut(), ev_context_size: 0, req }
}

/// `ucc_event_type_t` → ferrocoll's.
fn event_type(v: u32, field: &str) -> Result<EventType> {
    match v {
        1 => Ok(EventType::CollectivePost),
        2 => Ok(EventType::CollectiveComplete),
        4 => Ok(EventType::ComputeComplete),
        8 => Ok(EventType::Overflow),
        _ => Err(Error::invalid_param(format!("{field} {v} is not a UCC event type"))),
    }
}

impl EeHandle {
    fn events(&self) -> MutexGuard<'_, Events> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ee(&self) -> Result<Arc<dyn Ee>> {
        self.ee
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| Error::invalid_param("the execution engine was destroyed"))
    }

    /// The next event for the caller, if any (not yet handed out).
    fn next(&self, ee: &dyn Ee) -> Result<Option<(Ev, Option<Event>)>> {
        let mut evs = self.events();
        if let Some(e) = evs.posts.pop_front() {
            return Ok(Some((e, None)));
        }
        if std::mem::take(&mut evs.overflowed) {
            return Ok(Some((ev(EventType::Overflow as u32, std::ptr::null_mut()), None)));
        }
        while let Some(e) = ee.get_event() {
            if e.ev_type == EventType::CollectivePost {
                // Reported at the triggered post already.
                ee.ack_event(&e)?;
                continue;
            }
            let req = evs.requests.get(&e.request).and_then(Weak::upgrade);
            let req_ptr = match &req {
                Some(r) if r.magic().load(Ordering::Acquire) == ReqHandle::LIVE => Arc::as_ptr(r).cast_mut().cast(),
                _ => std::ptr::null_mut(),
            };
            if e.ev_type == EventType::CollectiveComplete {
                evs.requests.remove(&e.request);
            }
            return Ok(Some((ev(e.ev_type as u32, req_ptr), Some(e))));
        }
        Ok(None)
    }

    /// Hand `e` out: its box stays here until acknowledged.
    fn give(&self, e: Ev, origin: Option<Event>) -> *mut Ev {
        let mut b = Box::new(e);
        let p: *mut Ev = &mut *b;
        self.events().given.insert(p as usize, Given { ev: b, origin });
        p
    }

    /// Note a triggered post of `req` (event queued, request named by id).
    fn posted(&self, req: &Arc<ReqHandle>) {
        let mut evs = self.events();
        if evs.posts.len() >= CAPACITY {
            evs.overflowed = true;
        } else {
            let p = Arc::as_ptr(req).cast_mut().cast();
            evs.posts.push_back(ev(EventType::CollectivePost as u32, p));
        }
        evs.requests.insert(req.id.load(Ordering::Relaxed), Arc::downgrade(req));
        // Forget finalized requests now and then (callers that never read
        // the complete events would otherwise grow the map for ever).
        if evs.requests.len() > 2 * evs.swept.max(64) {
            evs.requests
                .retain(|_, w| w.upgrade().is_some_and(|r| r.magic().load(Ordering::Acquire) == ReqHandle::LIVE));
            evs.swept = evs.requests.len();
        }
    }
}

/// `ucc_ee_create`: a CPU-thread engine, or a CUDA-stream engine over
/// `params->ee_context` (a `cudaStream_t`).
///
/// # Safety
/// `team` is a handle; `params` a `ucc_ee_params_t` (for a CUDA stream, a
/// valid stream that outlives the engine and its posts); `ee` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_create(
    team: *const TeamHandle,
    params: *const EeParams,
    ee: *mut *mut EeHandle,
) -> UccStatus {
    ffi("ucc_ee_create", || {
        // SAFETY: see handle::borrow.
        let t = unsafe { borrow(team, "team") }?;
        non_null(params, "params")?;
        non_null(ee, "ee")?;
        // SAFETY: the caller's struct (it has no mask: every field is set).
        let p = unsafe { params.read_unaligned() };
        let engine: Arc<dyn Ee> = match p.ee_type {
            EE_CPU_THREAD => Arc::new(CpuEe::new()),
            EE_CUDA_STREAM => {
                non_null(p.ee_context, "params.ee_context (the CUDA stream)")?;
                // The team's library configuration (environment, file, modify calls).
                let options = StreamOptions::from_config(t.ctx.get()?.config())?;
                // SAFETY: the caller promises a valid stream that outlives the
                // engine and the requests triggered on it (UCC's contract).
                Arc::new(unsafe { CudaStreamEe::from_raw_with(p.ee_context, options) }?)
            }
            EE_ROCM_STREAM => {
                return Err(Error::not_supported("params.ee_type ROCm stream: ferrocoll has no ROCm support"));
            }
            t => return Err(Error::invalid_param(format!("params.ee_type {t} is not a UCC execution engine type"))),
        };
        let h = EeHandle {
            magic: AtomicU64::new(0),
            ee: Mutex::new(Some(engine)),
            ctx: t.ctx.clone(),
            events: Mutex::new(Events::default()),
        };
        // SAFETY: checked non-null.
        unsafe { put(ee, publish(h)) };
        Ok(UCC_OK)
    })
}

/// `ucc_ee_destroy`.
///
/// # Safety
/// `ee` is a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_destroy(ee: *mut EeHandle) -> UccStatus {
    ffi("ucc_ee_destroy", || {
        // SAFETY: see handle::retire.
        let h = unsafe { retire(ee, "ee") }?;
        let engine = h.ee.lock().unwrap_or_else(|p| p.into_inner()).take();
        let events = std::mem::take(&mut *h.events());
        drop((engine, events));
        Ok(UCC_OK)
    })
}

/// `ucc_collective_triggered_post`: post `ee_event->req` on the engine.
///
/// # Safety
/// `ee` is a handle; `ee_event` a `ucc_ev_t` whose `req` is a request handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_collective_triggered_post(ee: *const EeHandle, ee_event: *const Ev) -> UccStatus {
    ffi("ucc_collective_triggered_post", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(ee, "ee") }?;
        non_null(ee_event, "ee_event")?;
        // SAFETY: the caller's event.
        let e = unsafe { ee_event.read_unaligned() };
        let ty = event_type(e.ev_type, "ee_event->ev_type")?;
        // SAFETY: see handle::borrow.
        let req = unsafe { borrow_req(e.req.cast_const().cast(), "ee_event->req") }?;
        let engine = h.ee()?;
        req.triggered_post(engine.as_ref(), &Event::new(ty))?;
        h.posted(&req);
        Ok(UCC_OK)
    })
}

/// `ucc_ee_get_event`: the next event, or `UCC_ERR_NOT_FOUND`.
///
/// # Safety
/// `ee` is a handle; `ev` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_get_event(ee: *const EeHandle, ev: *mut *mut Ev) -> UccStatus {
    // Not through `ffi`'s error log: "no event" is the common answer.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<UccStatus> {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(ee, "ee") }?;
        non_null(ev, "ev")?;
        let engine = h.ee()?;
        match h.next(engine.as_ref())? {
            Some((e, origin)) => {
                // SAFETY: checked non-null.
                unsafe { put(ev, h.give(e, origin)) };
                Ok(UCC_OK)
            }
            None => Ok(UCC_ERR_NOT_FOUND),
        }
    }));
    match r {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => ffi("ucc_ee_get_event", || Err(e)),
        Err(_) => ffi("ucc_ee_get_event", || Err(Error::internal("panic while taking an event"))),
    }
}

/// `ucc_ee_ack_event`: release an event from `ucc_ee_get_event`.
///
/// # Safety
/// `ee` is a handle; `ev` an event it handed out.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_ack_event(ee: *const EeHandle, ev: *mut Ev) -> UccStatus {
    ffi("ucc_ee_ack_event", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(ee, "ee") }?;
        non_null(ev, "ev")?;
        let given = h.events().given.remove(&(ev as usize)).ok_or_else(|| {
            Error::invalid_param(format!("ev = {ev:p} is not an event this engine handed out (or it was acknowledged)"))
        })?;
        if let Some(origin) = given.origin {
            h.ee()?.ack_event(&origin)?;
        }
        drop(given.ev);
        Ok(UCC_OK)
    })
}

/// `ucc_ee_set_event`: e.g. `UCC_EVENT_COMPUTE_COMPLETE`, which starts a
/// collective triggered on it (CPU engines; a CUDA engine's trigger is its stream).
///
/// # Safety
/// `ee` is a handle; `ev` a `ucc_ev_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_set_event(ee: *const EeHandle, ev: *const Ev) -> UccStatus {
    ffi("ucc_ee_set_event", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(ee, "ee") }?;
        non_null(ev, "ev")?;
        // SAFETY: the caller's event.
        let e = unsafe { ev.read_unaligned() };
        let ty = event_type(e.ev_type, "ev->ev_type")?;
        h.ee()?.set_event(Event::new(ty))?;
        Ok(UCC_OK)
    })
}

/// `ucc_ee_wait`: progress the engine's context until an event arrives,
/// and copy it to `*ev` (acknowledged here: the caller holds a copy).
///
/// # Safety
/// `ee` is a handle; `ev` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_wait(ee: *const EeHandle, ev: *mut Ev) -> UccStatus {
    ffi("ucc_ee_wait", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(ee, "ee") }?;
        non_null(ev, "ev")?;
        let engine = h.ee()?;
        // Spin a while, then yield: a yield at every look was a system call
        // per poll for an event that a thread on another core sets within
        // microseconds. Where ranks outnumber cores, the progress below
        // yields the core as well (`Context::progress`).
        let mut backoff = Backoff::new();
        loop {
            if let Some((e, origin)) = h.next(engine.as_ref())? {
                if let Some(o) = origin {
                    engine.ack_event(&o)?;
                }
                // SAFETY: checked non-null.
                unsafe { put(ev, e) };
                return Ok(UCC_OK);
            }
            h.ctx.get()?.progress()?;
            backoff.snooze();
        }
    })
}
