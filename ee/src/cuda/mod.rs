//! The CUDA-stream execution engine (`UCC_EE_CUDA_STREAM`), through the
//! CUDA driver API as `ferrocoll-cuda` wraps it (loaded at run time,
//! probed first; its streams, event pool and host-mapped memory). This
//! module keeps the engine's own logic: the trigger's ordering and the
//! flag's sequence numbers.
//!
//! A triggered post on [`CudaStreamEe`], for host-driven TLs (every TL of
//! ferrocoll today):
//! - **input dependency**, chosen by `UCC_EE_CUDA_STREAM_INPUT` when the
//!   engine is created ([`StreamInput`]; `CudaStreamEe::new_stream` and
//!   `from_raw` read the environment, `ucc_ee_create` the library's
//!   configuration, the `*_with` constructors take it):
//!   - `event` (the default): `triggered_post` records a CUDA event on the
//!     stream; the collective's task polls it (`cuEventQuery`, inside two
//!     `cuThreadExchangeStreamCaptureMode` calls) on each progress and
//!     starts once it completed, i.e. once the work enqueued before the
//!     post has run;
//!   - `write`: `triggered_post` enqueues `cuStreamWriteValue64(started,
//!     n)` (default flags: after the work before it, with a memory barrier)
//!     on a second word of the flag's allocation, one cache line away from
//!     the flag, and the task reads it with an acquire load (`started ≥ n`),
//!     no driver call per poll. A failed stream never writes: every 1024
//!     polls that find it unwritten, one `cuStreamQuery` reports a failed
//!     stream, and the collective fails. On an H200 a busy stream waited
//!     4.3–4.6 µs for a triggered post with `write` against 13.3 with
//!     `event`, for ~4 µs more of the host's time per post (BENCHMARKS.md,
//!     "GPU: third session"); not the default yet, since `write` refuses
//!     the engine on a device without stream writes where `event` runs.
//!     The timing test of `gpu_stream.rs` measures both;
//! - **output dependency**: right after the event, it enqueues on the same
//!   stream `cuStreamWaitValue64(flag ≥ n, GEQ)` on a 64-bit counter in
//!   pinned host memory mapped into the device (one per engine, n = the
//!   post's sequence number, never reset). When the collective ends — or
//!   fails, times out, or its request is dropped — the task raises the
//!   counter with a release store; it is raised to n only once posts
//!   1..=n have all ended. Work enqueued after the post waits for that.
//!   `UCC_EE_CUDA_STREAM_WAIT=kernel` ([`StreamWait`], read with the input
//!   knob) holds the stream with a one-thread kernel spinning on the same
//!   flag (`fc_flag_wait` of `ferrocoll-kernels`, compiled with NVRTC and
//!   loaded by the first such engine of a context) instead of the stream
//!   memory wait; on an H200 it was no faster than `memop`. The timing test
//!   of `gpu_stream.rs` measures every input × wait.
//!
//! Devices without 64-bit stream memory operations
//! (`CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS` = 0) wait with
//! `cuStreamWaitValue32` on the counter's low half, which compares
//! cyclically and is therefore exact while fewer than 2³¹ posts are
//! outstanding; the `write` input likewise writes the low half of
//! `started` (`cuStreamWriteValue32`) and compares it cyclically. If the
//! stream refuses even that (probed at creation with a wait that is
//! already met, and with `write` a write of the value already there),
//! creation is `NotSupported` naming the attribute or the knob; there is
//! no wait-kernel fallback.
//!
//! Stream-native collectives (TL/NCCL) skip both dependencies: the engine
//! hands them its stream (`native_post`) and they enqueue there at post.
//! A host-driven post on a stream being captured into a CUDA graph is
//! refused at once (`cuStreamIsCapturing`), so the capture is not corrupted.
//!
//! Staging copies: a one-shot collective whose TL stages device buffers
//! through pinned host memory hands those copies to the engine
//! (`trigger_with_copies`), which enqueues them on the stream itself —
//! device → host before the input (event or write), host → device after
//! the wait —
//! so that the collective never needs work on another stream while the
//! stream waits for it (the driver documents that work ordered only
//! through stream memory waits may be serialised by the hardware into a
//! deadlock). The host copies are kept until the stream is past them
//! (`retire.rs`). Persistent requests make their copies themselves.
//!
//! Limits: a host-driven collective's buffers are touched by the host (pinned host
//! memory, or device memory through the TL's staging), not by kernels on
//! the stream; our own kernels are not wired to the engine yet. The engine makes its stream's context current on
//! whichever thread calls it. When the engine and the last request
//! triggered on it are gone, the stream is synchronised before the flag is
//! freed: use one engine per stream. Default streams are refused (the
//! memory component stages device buffers on the per-thread default
//! stream, which waits for the legacy one); likewise, work on the legacy
//! default stream while a post blocks a blocking stream would wait for it. No driver (no `libcuda.so.1`) is
//! `NotSupported` at creation, never a panic.

mod flag;
mod input;
mod options;
mod retire;
mod stream;
mod trigger;
mod wait;

pub use input::{INPUT, StreamInput};
pub use options::StreamOptions;
pub use wait::{StreamWait, WAIT};

/// The configuration variables of the CUDA stream engine (for `ferrocoll-info -c`).
pub const CONFIG_FIELDS: &[ferrocoll_core::config::ConfigField] = &[INPUT, WAIT];
pub use stream::CudaStreamEe;

/// Whether a CUDA stream engine can be created here: `Ok`, or `NotSupported`
/// saying why (no `libcuda.so.1`, an entry point missing, `cuInit` failed,
/// no device): `ferrocoll-cuda`'s driver probe.
pub fn available() -> ferrocoll_core::Result<()> {
    ferrocoll_cuda::driver().map(|_| ())
}

#[cfg(test)]
mod tests {
    use ferrocoll_core::Status;

    #[test]
    fn available_never_panics() {
        // Here (no driver) it names the library; on a GPU machine it succeeds.
        if let Err(e) = super::available() {
            assert_eq!(e.status(), Status::NotSupported);
            assert!(e.context().contains("libcuda.so.1") || e.context().contains("cuInit"), "{e}");
        }
    }
}
