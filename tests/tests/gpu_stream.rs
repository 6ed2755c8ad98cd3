//! Triggered post on a CUDA stream engine. Without a GPU these tests run on
//! the fake CUDA driver (`ferrocoll_tests::gpu::skip_unless_gpu`), with a
//! lighter load; where it cannot be built they print that they skipped
//! (failing under `REQUIRE_FAKE_CUDA=1`; under `REQUIRE_GPU=1` a missing GPU
//! fails). The first test runs in this process: where no driver is, it
//! checks that the engine is refused cleanly.
//!
//! The ordering test runs on pinned host memory mapped into the device (the
//! host-driven TLs read and write it, the stream's work reaches it through
//! its device pointers) and on device memory (the p2p TL stages it through
//! pinned host copies on its own streams).
//!
//! The ordering, release and timing tests run with each input dependency
//! of the engine (`UCC_EE_CUDA_STREAM_INPUT`: `event`, `write`) and each
//! way of holding the stream (`UCC_EE_CUDA_STREAM_WAIT`: `memop`, `kernel`),
//! chosen through `CudaStreamEe::new_stream_with`.

mod gpu_support;

use std::time::{Duration, Instant};

use ferrocoll::ee::cuda::{StreamInput, StreamOptions, StreamWait};
use ferrocoll::{CollType, Config, Context, CudaStreamEe, Ee, Event, EventType, MemType, Status, Team};
use ferrocoll_cuda::sys::driver as sys;
use ferrocoll_tests::gpu::{gpu_status, on_fake_driver, skip_unless_gpu, skip_unless_nvrtc};
use ferrocoll_tests::world::{self, TEST_TIMEOUT};
use gpu_support::stream::{Buf, COMPUTE, allreduce, drains_within, engine, engine_with, ok, ordered_rounds_on};

/// Every input dependency with every way of holding the stream.
const OPTIONS: [StreamOptions; 4] = [
    StreamOptions { input: StreamInput::Event, wait: StreamWait::Memop },
    StreamOptions { input: StreamInput::Write, wait: StreamWait::Memop },
    StreamOptions { input: StreamInput::Event, wait: StreamWait::Kernel },
    StreamOptions { input: StreamInput::Write, wait: StreamWait::Kernel },
];

/// [`OPTIONS`], without the kernel wait where NVRTC cannot compile its
/// kernel (said; a failure under `REQUIRE_NVRTC=1` or `REQUIRE_GPU=1`).
fn options(test: &str) -> Vec<StreamOptions> {
    let kernel = !skip_unless_nvrtc(&format!("{test} with UCC_EE_CUDA_STREAM_WAIT=kernel"));
    OPTIONS.into_iter().filter(|o| kernel || o.wait == StreamWait::Memop).collect()
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
    // The fake driver memsets on the CPU: fewer rounds and a smaller busy
    // buffer there (its streams run behind the host all the same).
    let (rounds, busy_bytes): (u32, usize) = if on_fake_driver() { (40, 4 << 20) } else { (200, 256 << 20) };
    for options in options("a_triggered_allreduce_is_ordered_with_its_stream") {
        for mem_type in [MemType::Host, MemType::Cuda] {
            for size in [1, 2, 3] {
                world::run(size, &Config::new(), move |team, _| {
                    ordered_rounds_on(team, Some(options), mem_type, rounds, busy_bytes)
                });
            }
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
    for options in options("a_failed_or_dropped_triggered_post_releases_its_stream") {
        world::run(2, &world::pin(CollType::Allreduce, "knomial"), move |team, ctx| {
            failed_or_dropped(team, ctx, options)
        });
    }
}

/// Rank 0's part of `a_failed_or_dropped_triggered_post_releases_its_stream`.
fn failed_or_dropped(team: &Team, ctx: &Context, options: StreamOptions) {
    if team.rank() == 1 {
        return;
    }
    let (ee, stream) = engine_with(options);
    let (src, dst, out, stage) = (Buf::pinned(64), Buf::pinned(64), Buf::pinned(64), Buf::device(64));
    for drop_it in [false, true] {
        let timeout = if drop_it { TEST_TIMEOUT } else { Duration::from_millis(300) };
        // SAFETY: the buffers outlive the request.
        let mut req = unsafe { allreduce(team, &src, &dst, timeout) };
        req.triggered_post(&ee, &COMPUTE).expect("triggered_post");
        out.copy_from_on(&dst, &stage, 64, stream);
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(100) {
            ctx.progress().expect("progress");
        }
        assert!(
            !drains_within(stream, Duration::from_millis(50)),
            "the stream ran past an unfinished collective ({options:?})"
        );
        let id = req.id();
        if drop_it {
            drop(req);
        } else {
            let e = req.wait().expect_err("its peer never posts");
            assert_eq!(e.status(), Status::TimedOut, "{e}");
        }
        assert!(
            drains_within(stream, Duration::from_secs(10)),
            "the stream stayed blocked (dropped: {drop_it}, {options:?})"
        );
        let events: Vec<_> = std::iter::from_fn(|| ee.get_event()).collect();
        assert_eq!(events.last(), Some(&Event::with_request(EventType::CollectiveComplete, id)), "{events:?}");
    }
}

/// How long a triggered post keeps a stream waiting, on a team of one (the
/// collective itself is a copy of 4 bytes), with each engine option
/// (`UCC_EE_CUDA_STREAM_INPUT` × `UCC_EE_CUDA_STREAM_WAIT`), so that one run compares them. Printed,
/// never asserted.
#[test]
fn the_time_a_triggered_post_adds_to_a_stream() {
    if skip_unless_gpu("the_time_a_triggered_post_adds_to_a_stream") {
        return;
    }
    world::run(1, &Config::new(), |team, _| {
        for options in options("the_time_a_triggered_post_adds_to_a_stream") {
            time_a_triggered_post(team, options);
        }
    });
}

/// One engine option's part of `the_time_a_triggered_post_adds_to_a_stream`.
fn time_a_triggered_post(team: &Team, options: StreamOptions) {
    let (ee, stream) = engine_with(options);
    let StreamOptions { input, wait } = options;
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
    let iters: usize = if on_fake_driver() { 200 } else { 2000 };
    let base = median((0..iters).map(|_| gap(&mut || {})).collect());
    let mut call = Vec::with_capacity(iters);
    let with = median(
        (0..iters)
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
    // The same with the stream busy when the post is enqueued (a memset
    // ahead of it, as a trainer's stream is busy with compute): the host's
    // enqueueing is hidden, and the difference is what the stream itself
    // spends on the post (input, wait, the host noticing and releasing it).
    let busy = Buf::device(if on_fake_driver() { 1 << 10 } else { 16 << 20 });
    // With a request: triggered-posted before the second event, then
    // waited for (the host progresses the collective before it waits
    // for the stream, which waits for the collective).
    let busy_gap = |mut req: Option<&mut ferrocoll::Request>| -> f64 {
        // SAFETY: live events of the current context, the engine's stream.
        unsafe { ok(sys::cuEventRecord(e0, stream), "record") };
        busy.memset(7, stream);
        if let Some(r) = req.as_mut() {
            r.triggered_post(&ee, &COMPUTE).expect("triggered_post");
        }
        // SAFETY: as above.
        unsafe { ok(sys::cuEventRecord(e1, stream), "record") };
        if let Some(r) = req {
            r.wait().expect("wait");
            while ee.get_event().is_some() {}
        }
        let mut ms = 0.0f32;
        // SAFETY: as above.
        unsafe {
            ok(sys::cuEventSynchronize(e1), "cuEventSynchronize");
            ok(sys::cuEventElapsedTime_v2(&mut ms, e0, e1), "cuEventElapsedTime");
        }
        f64::from(ms) * 1000.0
    };
    let busy_base = median((0..iters).map(|_| busy_gap(None)).collect());
    let busy_with = median((0..iters).map(|_| busy_gap(Some(&mut req))).collect());
    let plain = median(
        (0..iters)
            .map(|_| {
                let t = Instant::now();
                req.post().expect("post");
                req.wait().expect("wait");
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect(),
    );
    println!(
        "triggered post on a CUDA stream, input {input}, wait {wait} (device {}, {} stream memory ops, team of 1, 4-byte \
         allreduce, median of {iters}): adds {:.2} us to the stream (gap {with:.2} us vs {base:.2} us between two \
         back-to-back events); triggered_post call {:.2} us on the host; plain post+wait {plain:.2} us; on a busy \
         stream (a {} memset ahead) it adds {:.2} us (gap {busy_with:.2} us vs {busy_base:.2} us)",
        ee.device(),
        if ee.wide_waits() { "64-bit" } else { "32-bit" },
        with - base,
        median(call),
        if on_fake_driver() { "1 KiB" } else { "16 MiB" },
        busy_with - busy_base,
    );
    drop(req);
    // SAFETY: events created above, no longer in use (synchronised).
    unsafe {
        sys::cuEventDestroy_v2(e0);
        sys::cuEventDestroy_v2(e1);
    }
}
