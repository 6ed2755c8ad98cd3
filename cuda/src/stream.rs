//! Streams: the calling thread's per-thread default stream, a user's
//! stream borrowed by handle, or a stream created (and destroyed) here;
//! synchronisation, and the stream memory operations that make a stream
//! wait for a value in memory (`cuStreamWaitValue32/64`) or write one when
//! it reaches them (`cuStreamWriteValue32/64`).

use std::ffi::c_void;

use ferrocoll_core::Result;

use crate::context::Context;
use crate::error::{check, driver_error};
use crate::probe::loaded;
use crate::sys::driver as sys;

/// A stream handle (`CUstream`), borrowed or owned.
///
/// Owned streams ([`Stream::create`]) are destroyed on drop, after making
/// their context current. Borrowed ones ([`Stream::per_thread`],
/// [`Stream::from_raw`]) are left alone.
#[derive(Debug)]
pub struct Stream {
    raw: sys::CUstream,
    /// The context of a stream created here, which its destruction needs current.
    owner: Option<Context>,
}

// SAFETY: a stream handle is a process-wide driver identifier that the
// (thread-safe) driver API accepts from any thread; this type never
// dereferences it, and destroys it at most once (in Drop, by the owner).
unsafe impl Send for Stream {}
// SAFETY: as for Send: shared access only passes the handle to the driver,
// which serialises work on a stream itself.
unsafe impl Sync for Stream {}

/// The comparison of a stream wait: the stream proceeds once it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitCond {
    /// `CU_STREAM_WAIT_VALUE_GEQ`: `(int32)(*addr - value) >= 0` for 32-bit
    /// waits (cyclic), `*addr >= value` for 64-bit ones.
    Geq,
}

/// A stream's capture state (`CUstreamCaptureStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capture {
    /// Not capturing: work runs.
    None,
    /// Capturing: work is recorded into a graph.
    Active,
    /// A capture that an unsupported operation broke; it must be ended.
    Invalidated,
}

impl WaitCond {
    fn flags(self) -> u32 {
        match self {
            WaitCond::Geq => sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
        }
    }
}

impl Stream {
    /// The calling thread's default stream of the current context
    /// (`CU_STREAM_PER_THREAD`), which threads do not share.
    pub fn per_thread() -> Result<Stream> {
        loaded()?;
        Ok(Stream { raw: std::ptr::without_provenance_mut(0x2), owner: None })
    }

    /// Borrow the user's stream `raw` (a `CUstream`).
    ///
    /// # Safety
    /// `raw` must be a valid stream handle (or one of the driver's default
    /// stream handles), and the stream must stay valid while the returned
    /// value is used.
    pub unsafe fn from_raw(raw: *mut c_void) -> Result<Stream> {
        loaded()?;
        Ok(Stream { raw: raw.cast(), owner: None })
    }

    /// A new non-blocking stream in `ctx` (made current first), destroyed
    /// on drop. Non-blocking: it does not wait for the legacy default stream.
    pub fn create(ctx: Context) -> Result<Stream> {
        ctx.make_current()?;
        let mut raw: sys::CUstream = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: ctx is current (above) and alive (Context invariant); the
        // call writes one handle, destroyed once in Drop.
        check("cuStreamCreate", unsafe { sys::cuStreamCreate(&mut raw, flags) })?;
        Ok(Stream { raw, owner: Some(ctx) })
    }

    /// The handle, as the driver API's `CUstream`.
    pub fn as_raw(&self) -> *mut c_void {
        self.raw.cast()
    }

    /// The stream's context (`cuStreamGetCtx`).
    pub fn context(&self) -> Result<Context> {
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: the stream is valid (type invariant: ours, or the
        // borrower's promise); the call writes one handle.
        check("cuStreamGetCtx", unsafe { sys::cuStreamGetCtx(self.raw, &mut ctx) })?;
        Ok(Context::from_handle(ctx))
    }

    /// Wait until everything enqueued on the stream has run.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the stream is valid (type invariant).
        check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(self.raw) })
    }

    /// Whether everything enqueued on the stream has run (`cuStreamQuery`):
    /// `Ok(false)` for `CUDA_ERROR_NOT_READY`; an error for a failed device
    /// (sticky errors are reported here as by every call). Asked in the
    /// relaxed capture mode, as [`Event::query`](crate::Event::query) is.
    pub fn query(&self) -> Result<bool> {
        // SAFETY: the stream is valid (type invariant); the call only reads its state.
        match crate::event::relaxed_capture(|| unsafe { sys::cuStreamQuery(self.raw) })? {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            r => Err(driver_error("cuStreamQuery", r)),
        }
    }

    /// Enqueue "wait until the 32-bit value at device address `addr`
    /// satisfies `cond` against `value`". The stream's context must be current.
    ///
    /// # Safety
    /// `addr` must be a device-visible address of 4 bytes (for example the
    /// device mapping of pinned host memory) that stays allocated until the
    /// stream has passed the wait.
    pub unsafe fn wait_value32(&self, addr: u64, value: u32, cond: WaitCond) -> Result<()> {
        // SAFETY: the stream is valid (type invariant); the caller keeps addr
        // allocated until the stream passes the wait.
        check("cuStreamWaitValue32", unsafe { sys::cuStreamWaitValue32_v2(self.raw, addr, value, cond.flags()) })
    }

    /// As [`wait_value32`](Stream::wait_value32) on a 64-bit value (the
    /// device must report `CanUse64BitStreamMemOps`).
    ///
    /// # Safety
    /// As for `wait_value32`, with 8 bytes at `addr`.
    pub unsafe fn wait_value64(&self, addr: u64, value: u64, cond: WaitCond) -> Result<()> {
        // SAFETY: as in wait_value32.
        check("cuStreamWaitValue64", unsafe { sys::cuStreamWaitValue64_v2(self.raw, addr, value, cond.flags()) })
    }

    /// Enqueue "write the 32-bit `value` at device address `addr`" once the
    /// work enqueued before it has run. Default flags: the driver puts a
    /// memory barrier before the write, so whoever sees the value also sees
    /// that earlier work's writes. The stream's context must be current.
    ///
    /// # Safety
    /// `addr` must be a device-visible address of 4 bytes (for example the
    /// device mapping of pinned host memory) that stays allocated until the
    /// stream has passed the write, and that nothing else reads or writes
    /// except atomically.
    pub unsafe fn write_value32(&self, addr: u64, value: u32) -> Result<()> {
        let flags = sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32;
        // SAFETY: the stream is valid (type invariant); the caller keeps addr
        // allocated until the stream passes the write.
        check("cuStreamWriteValue32", unsafe { sys::cuStreamWriteValue32_v2(self.raw, addr, value, flags) })
    }

    /// As [`write_value32`](Stream::write_value32) with a 64-bit value (the
    /// device must report `CanUse64BitStreamMemOps`).
    ///
    /// # Safety
    /// As for `write_value32`, with 8 bytes at `addr`.
    pub unsafe fn write_value64(&self, addr: u64, value: u64) -> Result<()> {
        let flags = sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32;
        // SAFETY: as in write_value32.
        check("cuStreamWriteValue64", unsafe { sys::cuStreamWriteValue64_v2(self.raw, addr, value, flags) })
    }

    /// Whether the stream is being captured into a CUDA graph
    /// (`cuStreamIsCapturing`). Work enqueued on a capturing stream is
    /// recorded into the graph, not run: a collective must then either be
    /// captured whole (stream-native) or refused at once.
    pub fn capture_status(&self) -> Result<Capture> {
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: the stream is valid (type invariant); the call writes one status.
        check("cuStreamIsCapturing", unsafe { sys::cuStreamIsCapturing(self.raw, &mut status) })?;
        Ok(match status {
            sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE => Capture::None,
            sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE => Capture::Active,
            _ => Capture::Invalidated,
        })
    }

    /// The handle for a driver call.
    pub(crate) fn handle(&self) -> sys::CUstream {
        self.raw
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let Some(ctx) = self.owner else { return };
        if ctx.make_current().is_ok() {
            // SAFETY: the stream was created in `create` and its only owner is being dropped.
            if let Err(e) = check("cuStreamDestroy", unsafe { sys::cuStreamDestroy_v2(self.raw) }) {
                ferrocoll_core::log_warn!("{e}");
            }
        }
    }
}
