//! Triggered post on a CUDA stream engine. Without a GPU these tests print
//! that they skipped (and fail under `REQUIRE_GPU=1`), except the first,
//! which checks that the engine is refused cleanly where no driver is.
//!
//! The ordering test runs on pinned host memory mapped into the device (the
//! host-driven TLs read and write it, the stream's work reaches it through
//! its device pointers) and on device memory (the p2p TL stages it through
//! pinned host copies on its own streams).

use std::ffi::c_void;
use std::time::{Duration, Instant};

use ferrocoll::{
    BufferInfo, CollArgs, CollBuffer, CollFlags, CollType, Config, CudaStreamEe, DataType, Ee, Event, EventType,
    MemType, ReduceOp, Request, Status, Team,
};
use ferrocoll_cuda::sys::driver::{self as sys, CUdeviceptr, CUresult, CUstream, cudaError_enum as E};
use ferrocoll_tests::gpu::{gpu_status, skip_unless_gpu};
use ferrocoll_tests::world::{self, TEST_TIMEOUT};

const COMPUTE: Event = Event::new(EventType::ComputeComplete);
const POISON: u32 = 0xdead_beef;

fn ok(r: CUresult, what: &str) {
    assert_eq!(r, E::CUDA_SUCCESS, "{what}");
}

/// `n` u32 that the stream reaches at `dev` and the collective at `coll`:
/// pinned host memory mapped into the device, or device memory. Freed on drop.
struct Buf {
    dev: CUdeviceptr,
    coll: *mut u32,
    mem_type: MemType,
    n: usize,
}

impl Buf {
    /// Pinned host memory; the stream engine's context must be current.
    fn pinned(n: usize) -> Buf {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the caller made a context current.
        ok(unsafe { sys::cuMemHostAlloc(&mut p, n * 4, sys::CU_MEMHOSTALLOC_DEVICEMAP) }, "cuMemHostAlloc");
        let mut dev = 0;
        // SAFETY: p is a DEVICEMAP allocation of the current context.
        ok(unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, p, 0) }, "cuMemHostGetDevicePointer");
        Buf { dev, coll: p.cast(), mem_type: MemType::Host, n }
    }

    /// Device memory; the stream engine's context must be current.
    fn device(n: usize) -> Buf {
        let mut dev = 0;
        // SAFETY: valid out-pointer; the caller made a context current.
        ok(unsafe { sys::cuMemAlloc_v2(&mut dev, n * 4) }, "cuMemAlloc");
        Buf { dev, coll: dev as *mut u32, mem_type: MemType::Cuda, n }
    }

    fn new(mem_type: MemType, n: usize) -> Buf {
        if mem_type == MemType::Cuda { Buf::device(n) } else { Buf::pinned(n) }
    }

    /// Host writes (pinned only); the stream must not be using the memory.
    fn fill(&self, v: u32) {
        assert_eq!(self.mem_type, MemType::Host);
        // SAFETY: n elements of pinned memory, ours; no stream work on them is pending (callers synchronise first).
        (0..self.n).for_each(|i| unsafe { self.coll.add(i).write_volatile(v) });
    }

    /// Host reads (pinned only), as for `fill`.
    fn read(&self) -> Vec<u32> {
        assert_eq!(self.mem_type, MemType::Host);
        // SAFETY: as for fill.
        (0..self.n).map(|i| unsafe { self.coll.add(i).read_volatile() }).collect()
    }

    /// Enqueue a fill with `v` on `stream`.
    fn memset(&self, v: u32, stream: CUstream) {
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
unsafe fn allreduce(team: &Team, src: &Buf, dst: &Buf, timeout: Duration) -> Request<'static> {
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
    args.flags = CollFlags::PERSISTENT | CollFlags::TIMEOUT;
    args.timeout = timeout.as_secs_f64();
    // SAFETY: forwarded to our caller.
    unsafe { team.collective_init(&args) }.expect("allreduce init")
}

fn engine() -> (CudaStreamEe, CUstream) {
    let ee = CudaStreamEe::new_stream(0).expect("a CUDA stream engine on device 0");
    // SAFETY: the engine's context is live while the engine is.
    ok(unsafe { sys::cuCtxSetCurrent(ee.context().cast()) }, "cuCtxSetCurrent");
    let stream = ee.stream().cast();
    (ee, stream)
}

fn sync(stream: CUstream) {
    // SAFETY: the engine's stream, live.
    ok(unsafe { sys::cuStreamSynchronize(stream) }, "cuStreamSynchronize");
}

#[test]
fn a_cuda_engine_is_refused_cleanly_where_it_cannot_run() {
    match gpu_status() {
        Err(why) => {
            for e in [
                CudaStreamEe::new_stream(0).expect_err("no GPU"),
                // SAFETY: never reaches the driver: the probe refuses first.
                unsafe { CudaStreamEe::from_raw(std::ptr::null_mut()) }.expect_err("no GPU"),
                ferrocoll::ee::cuda::available().expect_err("no GPU"),
            ] {
                assert_eq!(e.status(), Status::NotSupported, "{e}");
                assert!(e.context().contains("libcuda.so.1") || e.context().contains("cuInit"), "{e} ({why})");
            }
        }
        Ok(count) => {
            let e = CudaStreamEe::new_stream(count + 1000).expect_err("no such device");
            assert_eq!(e.status(), Status::InvalidParam);
            assert!(e.context().contains(&format!("CUDA device {}", count + 1000)), "{e}");
            // SAFETY: refused before any use of the handle.
            let e = unsafe { CudaStreamEe::from_raw(std::ptr::null_mut()) }.expect_err("the legacy default stream");
            assert_eq!(e.status(), Status::InvalidParam);
            assert!(e.context().contains("default stream"), "{e}");
            let (ee, _) = engine();
            let e = ee.set_event(COMPUTE).expect_err("set_event on a stream engine");
            assert_eq!(e.status(), Status::NotSupported);
            let e = ee.trigger(&Event::new(EventType::CollectivePost), 1).err().expect("only ComputeComplete");
            assert!(e.context().contains("CollectivePost") && e.context().contains("CUDA stream EE"), "{e}");
        }
    }
}

/// memset poisons the output and writes the input on the stream →
/// triggered allreduce → copy of the output on the same stream → one stream
/// synchronisation → check; a large memset first keeps the stream busy at
/// the time of the post. On pinned host memory and on device memory.
#[test]
fn a_triggered_allreduce_is_ordered_with_its_stream() {
    if skip_unless_gpu("a_triggered_allreduce_is_ordered_with_its_stream") {
        return;
    }
    const N: usize = 4096;
    const ROUNDS: u32 = 200;
    const BUSY: usize = 256 << 20;
    for mem_type in [MemType::Host, MemType::Cuda] {
        for size in [1, 2, 3] {
            world::run(size, &Config::new(), move |team, _| {
                let (ee, stream) = engine();
                let (src, dst, out) = (Buf::new(mem_type, N), Buf::new(mem_type, N), Buf::pinned(N));
                let busy = Buf::device(BUSY / 4);
                // SAFETY: the buffers outlive the request (dropped before them, below).
                let mut req = unsafe { allreduce(team, &src, &dst, TEST_TIMEOUT) };
                let value = |rank: usize, round: u32| (rank as u32 + 1) * 1000 + round;
                for round in 0..ROUNDS {
                    let what = format!("{mem_type} memory, rank {} of {size}, round {round}", team.rank());
                    out.fill(POISON);
                    busy.memset(round, stream);
                    dst.memset(POISON, stream);
                    src.memset(value(team.rank(), round), stream);
                    req.triggered_post(&ee, &COMPUTE).unwrap_or_else(|e| panic!("{what}: {e}"));
                    // SAFETY: live buffers; out is pinned, so the copy is asynchronous.
                    ok(unsafe { sys::cuMemcpyDtoHAsync_v2(out.coll.cast(), dst.dev, N * 4, stream) }, "copy");
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
            });
        }
    }
}

/// Poll the stream until it drains, up to `limit`; true if it did.
fn drains_within(stream: CUstream, limit: Duration) -> bool {
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

/// A collective that never completes (its peer never posts) blocks the
/// stream; a timeout, or dropping the request, releases it.
#[test]
fn a_failed_or_dropped_triggered_post_releases_its_stream() {
    if skip_unless_gpu("a_failed_or_dropped_triggered_post_releases_its_stream") {
        return;
    }
    world::run(2, &world::pin(CollType::Allreduce, "knomial"), |team, ctx| {
        if team.rank() == 1 {
            return;
        }
        let (ee, stream) = engine();
        let (src, dst, out) = (Buf::pinned(64), Buf::pinned(64), Buf::pinned(64));
        for drop_it in [false, true] {
            let timeout = if drop_it { TEST_TIMEOUT } else { Duration::from_millis(300) };
            // SAFETY: the buffers outlive the request.
            let mut req = unsafe { allreduce(team, &src, &dst, timeout) };
            req.triggered_post(&ee, &COMPUTE).expect("triggered_post");
            // SAFETY: live pinned buffers, the engine's stream.
            ok(unsafe { sys::cuMemcpyDtoHAsync_v2(out.coll.cast(), dst.dev, 64 * 4, stream) }, "copy");
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(100) {
                ctx.progress().expect("progress");
            }
            assert!(!drains_within(stream, Duration::from_millis(50)), "the stream ran past an unfinished collective");
            let id = req.id();
            if drop_it {
                drop(req);
            } else {
                let e = req.wait().expect_err("its peer never posts");
                assert_eq!(e.status(), Status::TimedOut, "{e}");
            }
            assert!(drains_within(stream, Duration::from_secs(10)), "the stream stayed blocked (dropped: {drop_it})");
            let events: Vec<_> = std::iter::from_fn(|| ee.get_event()).collect();
            assert_eq!(events.last(), Some(&Event::with_request(EventType::CollectiveComplete, id)), "{events:?}");
        }
    });
}

/// How long a triggered post keeps a stream waiting, on a team of one (the
/// collective itself is a copy of 4 bytes). Printed, never asserted.
#[test]
fn the_time_a_triggered_post_adds_to_a_stream() {
    if skip_unless_gpu("the_time_a_triggered_post_adds_to_a_stream") {
        return;
    }
    world::run(1, &Config::new(), |team, _| {
        let (ee, stream) = engine();
        let (src, dst) = (Buf::pinned(1), Buf::pinned(1));
        let (mut e0, mut e1) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: valid out-pointers; the engine's context is current.
        unsafe {
            ok(sys::cuEventCreate(&mut e0, 0), "cuEventCreate");
            ok(sys::cuEventCreate(&mut e1, 0), "cuEventCreate");
        }
        // SAFETY: the buffers outlive the request.
        let mut req = unsafe { allreduce(team, &src, &dst, TEST_TIMEOUT) };
        let gap = |post: &mut dyn FnMut()| -> f64 {
            // SAFETY: live events of the current context, the engine's stream.
            unsafe { ok(sys::cuEventRecord(e0, stream), "record") };
            post();
            let mut ms = 0.0f32;
            // SAFETY: as above.
            unsafe {
                ok(sys::cuEventRecord(e1, stream), "record");
                ok(sys::cuEventSynchronize(e1), "cuEventSynchronize");
                ok(sys::cuEventElapsedTime_v2(&mut ms, e0, e1), "cuEventElapsedTime");
            }
            f64::from(ms) * 1000.0
        };
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        const ITERS: usize = 2000;
        let base = median((0..ITERS).map(|_| gap(&mut || {})).collect());
        let mut call = Vec::with_capacity(ITERS);
        let with = median(
            (0..ITERS)
                .map(|_| {
                    gap(&mut || {
                        let t = Instant::now();
                        req.triggered_post(&ee, &COMPUTE).expect("triggered_post");
                        call.push(t.elapsed().as_secs_f64() * 1e6);
                        req.wait().expect("wait");
                        while ee.get_event().is_some() {}
                    })
                })
                .collect(),
        );
        let plain = median(
            (0..ITERS)
                .map(|_| {
                    let t = Instant::now();
                    req.post().expect("post");
                    req.wait().expect("wait");
                    t.elapsed().as_secs_f64() * 1e6
                })
                .collect(),
        );
        println!(
            "triggered post on a CUDA stream (device {}, {} stream waits, team of 1, 4-byte allreduce, median of {ITERS}): \
             adds {:.2} us to the stream (gap {with:.2} us vs {base:.2} us between two back-to-back events); \
             triggered_post call {:.2} us on the host; plain post+wait {plain:.2} us",
            ee.device(),
            if ee.wide_waits() { "64-bit" } else { "32-bit" },
            with - base,
            median(call),
        );
        drop(req);
        // SAFETY: events created above, no longer in use (synchronised).
        unsafe {
            sys::cuEventDestroy_v2(e0);
            sys::cuEventDestroy_v2(e1);
        }
    });
}
