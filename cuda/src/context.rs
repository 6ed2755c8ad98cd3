//! Contexts and which one is current on the calling thread.
//!
//! Driver calls act on the calling thread's current context, and progress
//! may run on any thread, so every call path first makes the right context
//! current. Two ways, each kept where it is used today:
//! - [`Context::bind`] (the memory component): nothing to do when the
//!   context is already current; set it when the thread has none (and leave
//!   it, so the next call is free); push it over a different context of the
//!   user's and pop it again when the returned [`Bound`] drops, so the user
//!   gets their context back.
//! - [`Context::make_current`] (the stream engine): `cuCtxSetCurrent`, left
//!   in place; the engine's stream decides the context, whatever the thread
//!   had.

use std::ffi::c_void;
use std::marker::PhantomData;

use ferrocoll_core::Result;

use crate::device::DeviceId;
use crate::error::check;
use crate::probe::loaded;
use crate::sys::driver as sys;

/// A CUDA context handle (`CUcontext`): a retained primary context, or the
/// context of a stream the user handed over. Copying it copies the handle;
/// whoever obtained it keeps the context alive while copies are used
/// ([`PrimaryContext`](crate::PrimaryContext) retains one, a user's stream
/// comes with the user's promise). A destroyed context is reported by the
/// driver (`CUDA_ERROR_CONTEXT_IS_DESTROYED`), not dereferenced by us.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context(sys::CUcontext);

// SAFETY: a context handle is a process-wide driver identifier that the
// (thread-safe) driver API accepts from any thread; this type never
// dereferences it.
unsafe impl Send for Context {}
// SAFETY: as for Send: sharing a handle shares only its value.
unsafe impl Sync for Context {}

impl Context {
    /// Wrap a handle the driver gave out (crate-internal: only retained or
    /// stream-owned contexts are wrapped).
    pub(crate) fn from_handle(raw: sys::CUcontext) -> Context {
        Context(raw)
    }

    /// The handle, as the driver API's `CUcontext`.
    pub fn as_raw(self) -> *mut c_void {
        self.0.cast()
    }

    /// The calling thread's current context, if it has one.
    pub fn current() -> Result<Option<Context>> {
        loaded()?;
        let mut cur: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: the driver passed the probe (above); the call writes one handle (null if none).
        check("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut cur) })?;
        Ok((!cur.is_null()).then_some(Context(cur)))
    }

    /// The driver's identifier of this context (`cuCtxGetId`): unique in
    /// the process and never reused, unlike the handle, which a context
    /// made after this one was destroyed may get again.
    pub fn id(self) -> Result<u64> {
        loaded()?;
        let mut id: std::ffi::c_ulonglong = 0;
        // SAFETY: the holder keeps the context alive (see the type's docs);
        // the call writes one integer.
        check("cuCtxGetId", unsafe { sys::cuCtxGetId(self.0, &mut id) })?;
        Ok(id)
    }

    /// Make this context current on the calling thread (`cuCtxSetCurrent`),
    /// replacing whatever was current; it stays current afterwards.
    pub fn make_current(self) -> Result<()> {
        // SAFETY: the holder keeps the context alive (see the type's docs);
        // setting it current touches only this thread's driver state.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.0) })
    }

    /// Make this context current for as long as the returned [`Bound`]
    /// lives (see the module docs for the three cases).
    pub fn bind(self) -> Result<Bound> {
        let unbound = Bound { pushed: false, _thread: PhantomData };
        match Context::current()? {
            Some(cur) if cur == self => Ok(unbound),
            None => {
                self.make_current()?;
                Ok(unbound)
            }
            Some(_) => {
                // SAFETY: the context is alive (type invariant); the matching
                // pop happens in Bound's drop, on this thread (Bound is not Send).
                check("cuCtxPushCurrent", unsafe { sys::cuCtxPushCurrent_v2(self.0) })?;
                Ok(Bound { pushed: true, _thread: PhantomData })
            }
        }
    }
}

/// The device of the calling thread's current context (`cuCtxGetDevice`).
pub fn current_device() -> Result<DeviceId> {
    loaded()?;
    let mut dev: sys::CUdevice = 0;
    // SAFETY: the driver passed the probe; the call writes one device handle
    // (or fails when no context is current).
    check("cuCtxGetDevice", unsafe { sys::cuCtxGetDevice(&mut dev) })?;
    Ok(DeviceId::from_handle(dev))
}

/// Proof that [`Context::bind`] made a context current on this thread;
/// pops it again on drop if it was pushed over the user's context.
#[must_use = "the context is only bound while the guard lives"]
pub struct Bound {
    pushed: bool,
    /// Not Send: the binding belongs to the thread that made it.
    _thread: PhantomData<*const ()>,
}

impl Drop for Bound {
    fn drop(&mut self) {
        if self.pushed {
            let mut popped: sys::CUcontext = std::ptr::null_mut();
            // SAFETY: this thread pushed a context in `bind` (Bound is not
            // Send) and nothing popped it since; the call writes one handle.
            if let Err(e) = check("cuCtxPopCurrent", unsafe { sys::cuCtxPopCurrent_v2(&mut popped) }) {
                ferrocoll_core::log_warn!("{e}");
            }
        }
    }
}
