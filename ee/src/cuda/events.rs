//! A pool of CUDA events (without timing) for the input dependencies of
//! triggered posts: creating an event per post would cost more than the
//! post's own driver calls.

use std::sync::{Mutex, MutexGuard};

use cudarc::driver::sys::{self, CUevent_flags_enum, CUevent_st};

use super::driver::{Raw, check, make_current};
use ferrocoll_core::Result;

pub(crate) type Event = Raw<CUevent_st>;

pub(crate) struct EventPool {
    ctx: Raw<sys::CUctx_st>,
    free: Mutex<Vec<Event>>,
}

impl EventPool {
    /// An empty pool for context `ctx`.
    pub(crate) fn new(ctx: Raw<sys::CUctx_st>) -> EventPool {
        EventPool { ctx, free: Mutex::default() }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Event>> {
        // Poisoned only if a thread panicked holding it; a Vec of handles stays whole.
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An event from the pool, or a new one. The context must be current.
    pub(crate) fn take(&self) -> Result<Event> {
        if let Some(ev) = self.lock().pop() {
            return Ok(ev);
        }
        let mut ev = std::ptr::null_mut();
        let flags = CUevent_flags_enum::CU_EVENT_DISABLE_TIMING as std::ffi::c_uint;
        // SAFETY: ev is a valid out-pointer; the caller made the pool's context current.
        check(unsafe { sys::cuEventCreate(&mut ev, flags) }, "cuEventCreate")?;
        Ok(Raw(ev))
    }

    /// Give an event back (recorded or not: recording it again replaces its capture).
    pub(crate) fn put(&self, ev: Event) {
        self.lock().push(ev);
    }
}

impl Drop for EventPool {
    fn drop(&mut self) {
        let free = std::mem::take(&mut *self.lock());
        if free.is_empty() || make_current(self.ctx).is_err() {
            return;
        }
        for ev in free {
            // SAFETY: ev came from cuEventCreate in this context and is in no trigger any more.
            if let Err(e) = check(unsafe { sys::cuEventDestroy_v2(ev.0) }, "cuEventDestroy") {
                ferrocoll_core::log_warn!("{e}");
            }
        }
    }
}
