//! Events without timing, from a pool per context: recorded on a stream,
//! then polled until the work enqueued before them has run. Creating an
//! event per use would cost more than the record and the queries together.
//!
//! Events only come from an [`EventPool`] and are only destroyed by it,
//! when it drops, among those given back: an event that is never given back
//! is leaked rather than destroyed, so an [`Event`] value is never a
//! dangling handle.

use std::sync::{Mutex, MutexGuard};

use ferrocoll_core::Result;

use crate::context::Context;
use crate::error::{check, driver_error};
use crate::stream::Stream;
use crate::sys::driver as sys;

/// An event (`CUevent`) taken from an [`EventPool`]; give it back with
/// [`EventPool::put`].
#[derive(Debug)]
pub struct Event(sys::CUevent);

// SAFETY: an event handle is a process-wide driver identifier that the
// (thread-safe) driver API accepts from any thread; the handle is never
// dereferenced here and is destroyed only by its pool, once.
unsafe impl Send for Event {}
// SAFETY: as for Send: record and query only pass the handle to the driver.
unsafe impl Sync for Event {}

impl Event {
    /// Capture the work enqueued on `stream` so far (`cuEventRecord`).
    /// The event's context must be current.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        // SAFETY: the event is live (only its pool destroys it, and only
        // once it was given back, see the module docs); the stream is valid
        // (Stream's invariant).
        check("cuEventRecord", unsafe { sys::cuEventRecord(self.0, stream.handle()) })
    }

    /// Whether the captured work has run (`cuEventQuery`): `Ok(false)` for
    /// `CUDA_ERROR_NOT_READY`, which is the answer, not an error.
    ///
    /// Asked in the relaxed stream-capture mode (see [`relaxed_capture`]):
    /// ferrocoll's progress queries its own events, recorded outside any
    /// capture, and must not break a user's global-mode capture running on
    /// this or another thread (CUDA counts an event query as "potentially
    /// unsafe" there, fails it, and invalidates the capture).
    pub fn query(&self) -> Result<bool> {
        // SAFETY: the event is live (as in `record`).
        match relaxed_capture(|| unsafe { sys::cuEventQuery(self.0) })? {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            r => Err(driver_error("cuEventQuery", r)),
        }
    }
}

/// Run `f` with this thread's stream-capture interaction mode set to
/// relaxed (`cuThreadExchangeStreamCaptureMode`), and the previous mode
/// restored after, whatever `f` returned: what CUDA's guidance (and
/// PyTorch's NCCL watchdog) does around queries of events recorded outside
/// a capture.
pub fn relaxed_capture<R>(f: impl FnOnce() -> R) -> Result<R> {
    crate::probe::loaded()?;
    let mut mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    // SAFETY: the driver passed the probe; the call swaps one thread-local value through a pointer we own.
    check("cuThreadExchangeStreamCaptureMode", unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut mode) })?;
    let out = f();
    // SAFETY: as above; puts back the mode the thread had.
    check("cuThreadExchangeStreamCaptureMode", unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut mode) })?;
    Ok(out)
}

/// A pool of events of one context.
pub struct EventPool {
    ctx: Context,
    free: Mutex<Vec<Event>>,
}

impl EventPool {
    /// An empty pool for context `ctx` (which must outlive the pool).
    pub fn new(ctx: Context) -> EventPool {
        EventPool { ctx, free: Mutex::default() }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Event>> {
        // Poisoned only if a thread panicked holding it; a Vec of handles stays whole.
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An event from the pool, or a new one (`cuEventCreate` with
    /// `CU_EVENT_DISABLE_TIMING`). The pool's context must be current.
    pub fn take(&self) -> Result<Event> {
        if let Some(ev) = self.lock().pop() {
            return Ok(ev);
        }
        let mut ev: sys::CUevent = std::ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as std::ffi::c_uint;
        // SAFETY: the pool's context is alive (new's contract) and current
        // (take's contract; the driver refuses otherwise); ev is a valid out-pointer.
        check("cuEventCreate", unsafe { sys::cuEventCreate(&mut ev, flags) })?;
        Ok(Event(ev))
    }

    /// Give an event back (recorded or not: recording it again replaces its capture).
    pub fn put(&self, ev: Event) {
        self.lock().push(ev);
    }
}

impl Drop for EventPool {
    fn drop(&mut self) {
        let free = std::mem::take(&mut *self.lock());
        if free.is_empty() || self.ctx.make_current().is_err() {
            return;
        }
        for ev in free {
            // SAFETY: ev came from cuEventCreate in this context (current,
            // above) and was given back, so no one uses it any more.
            if let Err(e) = check("cuEventDestroy", unsafe { sys::cuEventDestroy_v2(ev.0) }) {
                ferrocoll_core::log_warn!("{e}");
            }
        }
    }
}
