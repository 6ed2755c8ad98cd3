//! [`CudaStreamEe`]: an execution engine over one CUDA stream, the user's
//! (`from_raw`) or its own (`new_stream`).

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ferrocoll_core::backend::EngineCopies;
use ferrocoll_core::{Ee, EeTrigger, EeType, Error, Event, EventType, Result, Status};
use ferrocoll_cuda::{Attribute, Context, DeviceId, EventPool, PrimaryContext, Stream, WaitCond, current_device};

use super::flag::Flag;
use super::input::StreamInput;
use super::options::StreamOptions;
use super::retire::Retiring;
use super::trigger::{NativeTrigger, StreamTrigger};
use super::wait::{StreamWait, WaitKernel};
use crate::queue::Outbound;

/// Numbers engines for messages.
static NEXT_NUMBER: AtomicU64 = AtomicU64::new(1);

/// The engine's stream and, for a stream the engine created, the primary
/// context it retained for it. Fields drop in order: the stream (destroyed
/// if it is ours) before the context is released.
pub(crate) struct EngineStream {
    pub(crate) stream: Stream,
    _primary: Option<PrimaryContext>,
}

/// What the engine and its triggers share. Fields drop in order: the flag
/// and events before the stream and context they belong to.
pub(crate) struct Shared {
    pub(crate) number: u64,
    pub(crate) ctx: Context,
    pub(crate) device: DeviceId,
    /// Whether the device takes 64-bit stream waits and writes (else 32-bit
    /// ones on the low halves of the flag and of the `started` word).
    pub(crate) wide: bool,
    /// The input dependency of host-driven triggered posts.
    pub(crate) input: StreamInput,
    /// The kernel that holds the stream (`UCC_EE_CUDA_STREAM_WAIT=kernel`),
    /// loaded in the engine's context; `None`: a stream memory wait.
    wait_kernel: Option<WaitKernel>,
    pub(crate) flag: Flag,
    pub(crate) events: EventPool,
    /// Owners of host copies the stream's staging copies still use.
    pub(crate) retiring: Retiring,
    pub(crate) outbound: Outbound,
    /// What its triggers wait for, made once for timeout messages.
    pub(crate) waiting_for: Arc<str>,
    pub(crate) engine: EngineStream,
}

impl Shared {
    pub(crate) fn describe(&self) -> String {
        format!("CUDA stream EE #{} (stream {:p}, device {})", self.number, self.engine.stream.as_raw(), self.device)
    }

    /// Enqueue "wait until flag ≥ value" on the stream. The context must be current.
    pub(crate) fn enqueue_wait(&self, value: u64) -> Result<()> {
        if let Some(k) = &self.wait_kernel {
            return k.enqueue(&self.engine.stream, self.flag.device_ptr(true), value);
        }
        let (stream, addr) = (&self.engine.stream, self.flag.device_ptr(self.wide));
        if self.wide {
            // SAFETY: addr is the device mapping of the live flag, which is
            // freed only after the stream was synchronised (Shared's drop).
            unsafe { stream.wait_value64(addr, value, WaitCond::Geq) }
        } else {
            // Truncation intended: GEQ compares cyclically ((int32)(flag - value) >= 0).
            // SAFETY: as above, on the flag's low 32 bits.
            unsafe { stream.wait_value32(addr, value as u32, WaitCond::Geq) }
        }
    }
}

impl Shared {
    /// Enqueue "write `value` to the flag's `started` word" on the stream
    /// (the `write` input). The context must be current.
    pub(crate) fn enqueue_started(&self, value: u64) -> Result<()> {
        let (stream, addr) = (&self.engine.stream, self.flag.started_device_ptr(self.wide));
        if self.wide {
            // SAFETY: addr is the device mapping of the flag's live `started`
            // word, freed only after the stream was synchronised (Shared's
            // drop); the host reads it only atomically (Flag::started).
            unsafe { stream.write_value64(addr, value) }
        } else {
            // Truncation intended: the host compares the low half cyclically.
            // SAFETY: as above, on the word's low 32 bits.
            unsafe { stream.write_value32(addr, value as u32) }
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Every trigger is gone (they hold this), so every post ended; raise
        // the flag over all of them anyway, then let the stream pass its
        // waits before the flag is freed.
        self.flag.release_all();
        if self.ctx.make_current().is_ok() {
            if let Err(e) = self.engine.stream.synchronize() {
                ferrocoll_core::log_warn!("{} at teardown: {e}", self.describe());
            }
        }
        // The stream ran everything (or failed, and runs nothing more).
        self.retiring.drain(&self.events);
    }
}

/// An execution engine over a CUDA stream (`ucc_ee_create` with `UCC_EE_CUDA_STREAM`).
///
/// A triggered post on it starts once the work enqueued on the stream before
/// the post has completed, and work enqueued after the post waits until the
/// collective has ended (see the crate docs). Every driver call first makes
/// the stream's context current on the calling thread.
pub struct CudaStreamEe {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for CudaStreamEe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shared.describe())
    }
}

impl CudaStreamEe {
    /// An engine over the user's stream `stream` (a `CUstream`, as
    /// `cudaStream_t` or `torch.cuda.Stream.cuda_stream` give it). `NotSupported`
    /// when no CUDA driver is loadable (naming `libcuda.so.1`) or the device
    /// cannot run stream memory operations.
    ///
    /// Its input and output dependencies are `UCC_EE_CUDA_STREAM_INPUT` and
    /// `UCC_EE_CUDA_STREAM_WAIT` as the environment has them now
    /// (`InvalidParam` naming a bad value); see
    /// [`from_raw_with`](CudaStreamEe::from_raw_with) to choose them.
    ///
    /// Enqueues one wait that is already satisfied on the stream (it checks
    /// that the stream takes stream-memory-op waits).
    ///
    /// The default streams are refused (`InvalidParam`): the legacy one (null,
    /// `CU_STREAM_LEGACY`) synchronises with every blocking stream, and the
    /// per-thread one (`CU_STREAM_PER_THREAD`) is where the memory component
    /// stages device buffers, so a collective blocked behind its own wait
    /// there could never finish.
    ///
    /// # Safety
    /// `stream` must be a valid stream handle; the stream and its context
    /// must stay valid until this engine and every request triggered on it
    /// have been dropped. Dropping the last of them
    /// synchronises the stream (the engine's flag must outlive the stream's
    /// waits on it).
    pub unsafe fn from_raw(stream: *mut c_void) -> Result<CudaStreamEe> {
        // SAFETY: this function's contract, passed on.
        unsafe { Self::from_raw_with(stream, StreamOptions::from_env()?) }
    }

    /// As [`from_raw`](CudaStreamEe::from_raw), with `options` (what
    /// `ucc_ee_create` passes, from its library's configuration; a
    /// [`StreamInput`] or a [`StreamWait`] alone leaves the other at its default).
    ///
    /// # Safety
    /// As for [`from_raw`](CudaStreamEe::from_raw).
    pub unsafe fn from_raw_with(stream: *mut c_void, options: impl Into<StreamOptions>) -> Result<CudaStreamEe> {
        ferrocoll_cuda::driver()?;
        if matches!(stream as usize, 0..=2) {
            return Err(Error::invalid_param(format!(
                "stream {stream:p} is a default stream (legacy or per-thread), which the collective's own device \
                 copies may wait on; pass a created stream"
            )));
        }
        // SAFETY: the caller promises a valid stream that outlives the engine
        // and every request triggered on it (this function's contract).
        let stream = unsafe { Stream::from_raw(stream) }?;
        let ctx = stream.context().map_err(|e| e.prefixed(format_args!("stream {:p}", stream.as_raw())))?;
        Self::with_parts(EngineStream { stream, _primary: None }, ctx, options.into())
    }

    /// An engine over a new non-blocking stream of device `device` (its
    /// primary context), which the engine destroys when dropped; for tools
    /// and benchmarks. Reach the stream with [`CudaStreamEe::stream`]. Its
    /// options are `UCC_EE_CUDA_STREAM_INPUT` and `UCC_EE_CUDA_STREAM_WAIT`
    /// as the environment has them now.
    pub fn new_stream(device: usize) -> Result<CudaStreamEe> {
        Self::new_stream_with(device, StreamOptions::from_env()?)
    }

    /// As [`new_stream`](CudaStreamEe::new_stream), with `options` (or a
    /// [`StreamInput`] or [`StreamWait`] alone, the other at its default).
    pub fn new_stream_with(device: usize, options: impl Into<StreamOptions>) -> Result<CudaStreamEe> {
        let count = ferrocoll_cuda::driver()?.count();
        if device >= count {
            return Err(Error::invalid_param(format!(
                "CUDA device {device} does not exist: the driver sees {count} device(s)"
            )));
        }
        let primary = PrimaryContext::retain(DeviceId::get(device)?)?;
        let ctx = primary.context();
        // On error `primary` is dropped, which releases the context.
        let stream = Stream::create(ctx)?;
        Self::with_parts(EngineStream { stream, _primary: Some(primary) }, ctx, options.into())
    }

    fn with_parts(engine: EngineStream, ctx: Context, options: StreamOptions) -> Result<CudaStreamEe> {
        let StreamOptions { input, wait } = options;
        ctx.make_current()?;
        let device = current_device()?;
        let wait_kernel = match wait {
            StreamWait::Memop => None,
            StreamWait::Kernel => Some(WaitKernel::in_context(ctx, device).map_err(|e| {
                e.prefixed(format!("UCC_EE_CUDA_STREAM_WAIT=kernel on device {device} (memop needs no kernel)"))
            })?),
        };
        let wide = device.attribute(Attribute::CanUse64BitStreamMemOps)?;
        // Relaxed: numbers only need to be unique.
        let number = NEXT_NUMBER.fetch_add(1, Ordering::Relaxed);
        let how = match input {
            StreamInput::Event => "cuEventQuery",
            StreamInput::Write => "the stream's write of the post's number to host memory",
        };
        let waiting_for = format!(
            "the work enqueued on CUDA stream EE #{number} (stream {:p}, device {device}) before triggered_post \
             to complete ({how})",
            engine.stream.as_raw()
        )
        .into();
        let shared = Shared {
            number,
            ctx,
            device,
            wide: wide != 0,
            input,
            wait_kernel,
            flag: Flag::new(ctx)?,
            events: EventPool::new(ctx),
            retiring: Retiring::default(),
            outbound: Outbound::default(),
            waiting_for,
            engine,
        };
        // A wait that is already met (flag ≥ 0) checks that the stream takes them.
        shared.enqueue_wait(0).map_err(|e| match e.status() {
            Status::NotSupported => Error::not_supported(format!(
                "device {device} cannot wait on memory in a stream (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS \
                 is {wide}, and the 32-bit wait was refused: {e}); triggered post on a CUDA stream needs it"
            )),
            _ => e,
        })?;
        if input == StreamInput::Write {
            // Likewise a write of the value the word already holds (0).
            shared.enqueue_started(0).map_err(|e| match e.status() {
                Status::NotSupported => Error::not_supported(format!(
                    "device {device} cannot write memory from a stream ({e}); UCC_EE_CUDA_STREAM_INPUT=write needs \
                     it, event does not"
                )),
                _ => e,
            })?;
        }
        Ok(CudaStreamEe { shared: Arc::new(shared) })
    }

    /// The stream (a `CUstream`), for enqueueing work around triggered posts.
    pub fn stream(&self) -> *mut c_void {
        self.shared.engine.stream.as_raw()
    }

    /// The stream's context (a `CUcontext`).
    pub fn context(&self) -> *mut c_void {
        self.shared.ctx.as_raw()
    }

    /// The stream's device (a `CUdevice`, which is its ordinal).
    pub fn device(&self) -> i32 {
        self.shared.device.raw()
    }

    /// Whether stream waits are 64-bit (else 32-bit, compared cyclically).
    pub fn wide_waits(&self) -> bool {
        self.shared.wide
    }

    /// The input dependency of this engine's host-driven triggered posts.
    pub fn input(&self) -> StreamInput {
        self.shared.input
    }

    /// How this engine's host-driven triggered posts hold the stream.
    pub fn wait_kind(&self) -> StreamWait {
        if self.shared.wait_kernel.is_some() { StreamWait::Kernel } else { StreamWait::Memop }
    }

    /// `ev` can trigger a collective here: only `ComputeComplete` (the work
    /// enqueued on the stream before the post).
    fn check_trigger(&self, ev: &Event) -> Result<()> {
        if ev.ev_type != EventType::ComputeComplete {
            return Err(Error::invalid_param(format!(
                "{ev} cannot trigger a collective on {}: its trigger is the completion of the work enqueued on \
                 the stream before triggered_post, given as ComputeComplete",
                self.shared.describe()
            )));
        }
        Ok(())
    }

    /// The next event for the user, if any (`ucc_ee_get_event`).
    pub fn get_event(&self) -> Option<Event> {
        self.shared.outbound.get()
    }

    /// Acknowledge an event from `get_event` or `wait` (`ucc_ee_ack_event`).
    pub fn ack_event(&self, ev: &Event) -> Result<()> {
        self.shared.outbound.ack(ev, &|| self.shared.describe())
    }

    /// Block until an event arrives and return it (`ucc_ee_wait`); `TimedOut` after `timeout`.
    pub fn wait(&self, timeout: Duration) -> Result<Event> {
        self.shared.outbound.wait(timeout, &|| self.shared.describe())
    }
}

impl Ee for CudaStreamEe {
    fn ee_type(&self) -> EeType {
        EeType::CudaStream
    }

    fn describe(&self) -> String {
        self.shared.describe()
    }

    fn trigger(&self, ev: &Event, _request: u64) -> Result<Box<dyn EeTrigger>> {
        self.check_trigger(ev)?;
        StreamTrigger::arm(&self.shared, None).map(|t| Box::new(t) as Box<dyn EeTrigger>)
    }

    fn trigger_with_copies(
        &self,
        ev: &Event,
        _request: u64,
        copies: &EngineCopies,
    ) -> Result<Option<Box<dyn EeTrigger>>> {
        self.check_trigger(ev)?;
        StreamTrigger::arm(&self.shared, Some(copies)).map(|t| Some(Box::new(t) as Box<dyn EeTrigger>))
    }

    fn native_post(&self, ev: &Event, _request: u64) -> Option<Result<(usize, Box<dyn EeTrigger>)>> {
        let trigger = Box::new(NativeTrigger { shared: self.shared.clone() }) as Box<dyn EeTrigger>;
        Some(self.check_trigger(ev).map(|()| (self.shared.engine.stream.as_raw() as usize, trigger)))
    }

    fn capturing(&self) -> Result<bool> {
        self.shared.ctx.make_current()?;
        Ok(self.shared.engine.stream.capture_status()? != ferrocoll_cuda::Capture::None)
    }

    fn set_event(&self, ev: Event) -> Result<()> {
        Err(Error::not_supported(format!(
            "set_event({ev}) on {}: a CUDA stream engine is triggered by its stream, not by events",
            self.shared.describe()
        )))
    }

    fn get_event(&self) -> Option<Event> {
        CudaStreamEe::get_event(self)
    }

    fn ack_event(&self, ev: &Event) -> Result<()> {
        CudaStreamEe::ack_event(self, ev)
    }

    fn wait(&self, timeout: Duration) -> Result<Event> {
        CudaStreamEe::wait(self, timeout)
    }
}
