//! Triggered posts on a CUDA stream engine, as the stream tests drive them
//! (`gpu_stream.rs` on a GPU or the fake driver, `gpu_fake_driver.rs` on
//! the fake with other driver settings): buffers the stream and the
//! collective share, a persistent allreduce over them, the engine, and the
//! ordering check itself.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use ferrocoll::ee::cuda::StreamOptions;
use ferrocoll::{
    BufferInfo, CollArgs, CollBuffer, CollFlags, CollType, CudaStreamEe, DataType, Event, EventType, MemType, ReduceOp,
    Request, Team,
};
use ferrocoll_cuda::sys::driver::{self as sys, CUdeviceptr, CUresult, CUstream, cudaError_enum as E};
use ferrocoll_tests::world::TEST_TIMEOUT;

/// The event a triggered post on a stream engine waits for.
pub const COMPUTE: Event = Event::new(EventType::ComputeComplete);
/// What outputs are filled with before each round.
pub const POISON: u32 = 0xdead_beef;

/// Panic unless the driver call `what` returned success.
pub fn ok(r: CUresult, what: &str) {
    assert_eq!(r, E::CUDA_SUCCESS, "{what}");
}

/// `n` u32 that the stream reaches at `dev` and the collective at `coll`:
/// pinned host memory mapped into the device, or device memory. Freed on drop.
pub struct Buf {
    /// The address stream work uses.
    pub dev: CUdeviceptr,
    /// The address the collective is given.
    pub coll: *mut u32,
    /// The memory type the collective is told.
    pub mem_type: MemType,
    /// Number of u32.
    pub n: usize,
}

impl Buf {
    /// Pinned host memory; the stream engine's context must be current.
    pub fn pinned(n: usize) -> Buf {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the caller made a context current.
        ok(unsafe { sys::cuMemHostAlloc(&mut p, n * 4, sys::CU_MEMHOSTALLOC_DEVICEMAP) }, "cuMemHostAlloc");
        let mut dev = 0;
        // SAFETY: p is a DEVICEMAP allocation of the current context.
        ok(unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, p, 0) }, "cuMemHostGetDevicePointer");
        Buf { dev, coll: p.cast(), mem_type: MemType::Host, n }
    }

    /// Device memory; the stream engine's context must be current.
    pub fn device(n: usize) -> Buf {
        let mut dev = 0;
        // SAFETY: valid out-pointer; the caller made a context current.
        ok(unsafe { sys::cuMemAlloc_v2(&mut dev, n * 4) }, "cuMemAlloc");
        Buf { dev, coll: dev as *mut u32, mem_type: MemType::Cuda, n }
    }

    /// Enqueue on `stream` a copy of the first `n` elements of `from` into the pinned
    /// buffer `self`, asynchronous whatever `from` is: a copy out of pinned host
    /// memory goes through `stage` (device memory of at least `n` elements),
    /// since CUDA runs a host-to-host "async" copy synchronously on the calling
    /// thread, which would block the very thread that progresses the
    /// collective the stream waits for.
    pub fn copy_from_on(&self, from: &Buf, stage: &Buf, n: usize, stream: CUstream) {
        assert!(self.mem_type == MemType::Host && stage.mem_type == MemType::Cuda && stage.n >= n);
        let bytes = n * 4;
        let device_src = if from.mem_type == MemType::Cuda {
            from.dev
        } else {
            // SAFETY: live pinned memory and device memory of `bytes`; the engine's stream.
            ok(unsafe { sys::cuMemcpyHtoDAsync_v2(stage.dev, from.coll.cast(), bytes, stream) }, "copy to the stage");
            stage.dev
        };
        // SAFETY: live device memory and pinned memory of `bytes`: asynchronous; the engine's stream.
        ok(unsafe { sys::cuMemcpyDtoHAsync_v2(self.coll.cast(), device_src, bytes, stream) }, "copy");
    }

    /// Device memory for `Cuda`, else pinned host memory.
    pub fn new(mem_type: MemType, n: usize) -> Buf {
        if mem_type == MemType::Cuda { Buf::device(n) } else { Buf::pinned(n) }
    }

    /// Host writes (pinned only); the stream must not be using the memory.
    pub fn fill(&self, v: u32) {
        assert_eq!(self.mem_type, MemType::Host);
        // SAFETY: n elements of pinned memory, ours; no stream work on them is pending (callers synchronise first).
        (0..self.n).for_each(|i| unsafe { self.coll.add(i).write_volatile(v) });
    }

    /// Host reads (pinned only), as for `fill`.
    pub fn read(&self) -> Vec<u32> {
        assert_eq!(self.mem_type, MemType::Host);
        // SAFETY: as for fill.
        (0..self.n).map(|i| unsafe { self.coll.add(i).read_volatile() }).collect()
    }

    /// Enqueue a fill with `v` on `stream`.
    pub fn memset(&self, v: u32, stream: CUstream) {
        // SAFETY: the device address of n live elements; the engine's stream.
        ok(unsafe { sys::cuMemsetD32Async(self.dev, v, self.n, stream) }, "cuMemsetD32Async");
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: allocated above in a context that is still current; every
        // stream using it was synchronised.
        unsafe {
            if self.mem_type == MemType::Cuda {
                sys::cuMemFree_v2(self.dev);
            } else {
                sys::cuMemFreeHost(self.coll.cast());
            }
        }
    }
}

/// A persistent allreduce (sum of u32).
///
/// # Safety
/// The buffers must outlive the request.
pub unsafe fn allreduce(team: &Team, src: &Buf, dst: &Buf, timeout: Duration) -> Request<'static> {
    // SAFETY: forwarded to our caller.
    unsafe { allreduce_with(team, src, dst, timeout, CollFlags::PERSISTENT) }
}

/// A one-shot allreduce (sum of u32).
///
/// # Safety
/// The buffers must outlive the request.
pub unsafe fn allreduce_once(team: &Team, src: &Buf, dst: &Buf, timeout: Duration) -> Request<'static> {
    // SAFETY: forwarded to our caller.
    unsafe { allreduce_with(team, src, dst, timeout, CollFlags::default()) }
}

/// An allreduce (sum of u32) with `flags` (and a timeout).
///
/// # Safety
/// The buffers must outlive the request.
unsafe fn allreduce_with(team: &Team, src: &Buf, dst: &Buf, timeout: Duration, flags: CollFlags) -> Request<'static> {
    let info = |b: &Buf| {
        CollBuffer::Info(BufferInfo {
            buffer: b.coll.cast(),
            count: b.n as u64,
            datatype: DataType::Uint32,
            mem_type: b.mem_type,
        })
    };
    let mut args = CollArgs::new(CollType::Allreduce);
    args.src = info(src);
    args.dst = info(dst);
    args.op = ReduceOp::Sum;
    args.flags = flags | CollFlags::TIMEOUT;
    args.timeout = timeout.as_secs_f64();
    // SAFETY: forwarded to our caller.
    unsafe { team.collective_init(&args) }.expect("allreduce init")
}

/// A stream engine over a new stream of device 0, whose context is made
/// current on this thread; and the stream. Its input dependency is
/// `UCC_EE_CUDA_STREAM_INPUT` of the environment.
pub fn engine() -> (CudaStreamEe, CUstream) {
    made(CudaStreamEe::new_stream(0))
}

/// As [`engine`], with `options` (or an input or a wait alone).
pub fn engine_with(options: impl Into<StreamOptions>) -> (CudaStreamEe, CUstream) {
    let options = options.into();
    let (ee, stream) = made(CudaStreamEe::new_stream_with(0, options));
    assert_eq!((ee.input(), ee.wait_kind()), (options.input, options.wait));
    (ee, stream)
}

fn made(ee: ferrocoll::Result<CudaStreamEe>) -> (CudaStreamEe, CUstream) {
    let ee = ee.expect("a CUDA stream engine on device 0");
    // SAFETY: the engine's context is live while the engine is.
    ok(unsafe { sys::cuCtxSetCurrent(ee.context().cast()) }, "cuCtxSetCurrent");
    let stream = ee.stream().cast();
    (ee, stream)
}

/// Wait until the stream has run everything enqueued on it.
pub fn sync(stream: CUstream) {
    // SAFETY: the engine's stream, live.
    ok(unsafe { sys::cuStreamSynchronize(stream) }, "cuStreamSynchronize");
}

/// Poll the stream until it drains, up to `limit`; true if it did.
pub fn drains_within(stream: CUstream, limit: Duration) -> bool {
    let start = Instant::now();
    loop {
        // SAFETY: the engine's stream, live.
        match unsafe { sys::cuStreamQuery(stream) } {
            E::CUDA_SUCCESS => return true,
            E::CUDA_ERROR_NOT_READY if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(1)),
            E::CUDA_ERROR_NOT_READY => return false,
            r => panic!("cuStreamQuery: {r:?}"),
        }
    }
}

/// One rank's part of the ordering check, `rounds` times: memsets poison
/// the output and write the input on the engine's stream (after a memset of
/// `busy_bytes` that keeps the stream busy at the time of the post) →
/// triggered allreduce → copy of the output on the same stream → one stream
/// synchronisation → the copy must hold this round's sum, and the engine
/// must have reported the post and the completion. `mem_type` is where the
/// collective's buffers are: pinned host memory (`Host`) or device memory
/// (`Cuda`, staged by the p2p TL).
pub fn ordered_rounds(team: &Team, mem_type: MemType, rounds: u32, busy_bytes: usize) {
    ordered_rounds_of(team, mem_type, rounds, busy_bytes, Requests::Alternating);
}

/// [`ordered_rounds`] on an engine with `options` (`None`: the
/// environment's `UCC_EE_CUDA_STREAM_INPUT` and `UCC_EE_CUDA_STREAM_WAIT`).
pub fn ordered_rounds_on(
    team: &Team,
    options: Option<StreamOptions>,
    mem_type: MemType,
    rounds: u32,
    busy_bytes: usize,
) {
    ordered_rounds_with(team, options, mem_type, rounds, busy_bytes, Requests::Alternating);
}

/// Which requests [`ordered_rounds_of`] triggers: persistent and one-shot
/// ones differ (a one-shot collective on device memory hands its staging
/// copies to the stream engine, a persistent one makes them itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requests {
    /// One one-shot request per round.
    OneShot,
    /// A persistent request in even rounds, a one-shot one in odd rounds.
    Alternating,
}

/// [`ordered_rounds`] with a choice of requests.
pub fn ordered_rounds_of(team: &Team, mem_type: MemType, rounds: u32, busy_bytes: usize, requests: Requests) {
    ordered_rounds_with(team, None, mem_type, rounds, busy_bytes, requests);
}

/// [`ordered_rounds_of`] on an engine with `options` (`None`: the environment's).
pub fn ordered_rounds_with(
    team: &Team,
    options: Option<StreamOptions>,
    mem_type: MemType,
    rounds: u32,
    busy_bytes: usize,
    requests: Requests,
) {
    const N: usize = 4096;
    let size = team.size();
    let (ee, stream) = options.map_or_else(engine, engine_with);
    let (src, dst, out) = (Buf::new(mem_type, N), Buf::new(mem_type, N), Buf::pinned(N));
    let busy = Buf::device(busy_bytes / 4);
    let stage = Buf::device(N);
    // SAFETY: the buffers outlive the requests (dropped before them, below).
    let mut persistent = unsafe { allreduce(team, &src, &dst, TEST_TIMEOUT) };
    let value = |rank: usize, round: u32| (rank as u32 + 1) * 1000 + round;
    for round in 0..rounds {
        let mut once;
        let req = if requests == Requests::OneShot || round % 2 == 1 {
            // SAFETY: as for `persistent`.
            once = unsafe { allreduce_once(team, &src, &dst, TEST_TIMEOUT) };
            &mut once
        } else {
            &mut persistent
        };
        let what = format!(
            "{mem_type} memory, rank {} of {size}, round {round} ({requests:?}, input {}, wait {})",
            team.rank(),
            ee.input(),
            ee.wait_kind()
        );
        out.fill(POISON);
        busy.memset(round, stream);
        dst.memset(POISON, stream);
        src.memset(value(team.rank(), round), stream);
        req.triggered_post(&ee, &COMPUTE).unwrap_or_else(|e| panic!("{what}: {e}"));
        out.copy_from_on(&dst, &stage, N, stream);
        req.wait().unwrap_or_else(|e| panic!("{what}: {e}"));
        sync(stream);
        let want: u32 = (0..size).map(|r| value(r, round)).sum();
        let got = out.read();
        let bad = got.iter().position(|&v| v != want);
        assert!(bad.is_none(), "{what}: the stream's copy saw {:#x} at {bad:?}, want {want:#x}", got[0]);
        for ty in [EventType::CollectivePost, EventType::CollectiveComplete] {
            let ev = ee.get_event().unwrap_or_else(|| panic!("{what}: no {ty}"));
            assert_eq!(ev, Event::with_request(ty, req.id()), "{what}");
            ee.ack_event(&ev).expect("ack");
        }
    }
}
